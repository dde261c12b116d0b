"""Every rank of a process group holds the same stamp: the generated ensure_linear_attn_backends_agree.

In-process tests give it an `all_gather` of their own; the end-to-end test starts three processes in a
gloo process group on the CPU (`init_process_group("gloo", init_method="file://...")`), each building the
same runner through `attn_backend_wrapper`, which gathers over `torch.distributed` by default.
"""

from __future__ import annotations

import inspect
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stampgen.generated import linear_attn as la
from stampgen.kernels.runtime import (
    ARCHS,
    ModelRunner,
    ProcessConfig,
    ServerConfig,
    StampMismatchError,
    attn_backend_wrapper,
    launch,
    runner_facts_for,
)
from tests.machines import SM90

REPO = Path(__file__).resolve().parents[1]
GDN_TARGET = "Qwen3NextForCausalLM"
STAMP_LINE = la.RULE_POSITIONS["stamp LinearAttnBackends"]


def stamped(stamp: la.LinearAttnBackends) -> SimpleNamespace:
    return SimpleNamespace(linear_attn_backends=stamp)


def gather_from(*others: la.LinearAttnBackends, rank: int = 0) -> Any:
    """An all_gather for rank `rank` of a group whose other ranks hold `others` (in rank order)."""
    seen: list[Any] = []

    def all_gather(local: Any) -> list[Any]:
        seen.append(local)
        entries = [
            {"decode": s.decode.value, "prefill": s.prefill.value, "verify": s.verify.value} for s in others
        ]
        entries.insert(rank, local)
        return entries

    all_gather.seen = seen  # type: ignore[attr-defined]
    return all_gather


TRITON = la.LinearAttnBackends("triton", "triton", "triton")
FLASHINFER_PREFILL = la.LinearAttnBackends("triton", "flashinfer", "triton")


def test_the_signature_is_the_contract() -> None:
    parameters = inspect.signature(la.ensure_linear_attn_backends_agree).parameters
    assert list(parameters) == ["runner", "all_gather"]
    assert parameters["all_gather"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["all_gather"].default is None
    assert issubclass(la.StampMismatchError, RuntimeError)
    assert "ensure_linear_attn_backends_agree" in la.__all__ and "StampMismatchError" in la.__all__


def test_equal_stamps_pass_and_the_gather_sees_plain_data() -> None:
    runner = stamped(FLASHINFER_PREFILL)
    gather = gather_from(FLASHINFER_PREFILL, FLASHINFER_PREFILL)
    assert la.ensure_linear_attn_backends_agree(runner, all_gather=gather) is runner.linear_attn_backends
    assert gather.seen == [{"decode": "triton", "prefill": "flashinfer", "verify": "triton"}]
    assert all(type(value) is str for value in gather.seen[0].values())


def test_one_rank_with_another_stamp_is_named_with_the_fields_that_differ() -> None:
    with pytest.raises(StampMismatchError) as raised:
        la.ensure_linear_attn_backends_agree(
            stamped(FLASHINFER_PREFILL),
            all_gather=gather_from(FLASHINFER_PREFILL, TRITON, FLASHINFER_PREFILL),
        )
    error = raised.value
    assert (error.ranks, error.fields, error.stamp) == ((2,), ("prefill",), "LinearAttnBackends")
    message = str(error)
    assert "rank 2 has prefill=triton where rank 0 has prefill=flashinfer" in message
    assert STAMP_LINE in message


def test_the_odd_rank_out_is_named_even_when_it_is_rank_zero() -> None:
    with pytest.raises(StampMismatchError) as raised:
        la.ensure_linear_attn_backends_agree(
            stamped(TRITON), all_gather=gather_from(FLASHINFER_PREFILL, FLASHINFER_PREFILL)
        )
    assert raised.value.ranks == (
        0,
    ) and "rank 0 has prefill=triton where rank 1 has prefill=flashinfer" in str(raised.value)


def test_every_field_that_differs_is_named() -> None:
    other = la.LinearAttnBackends("flashinfer", "flashinfer", "flashinfer")
    with pytest.raises(StampMismatchError) as raised:
        la.ensure_linear_attn_backends_agree(stamped(TRITON), all_gather=gather_from(other))
    assert raised.value.ranks == (1,) and raised.value.fields == ("decode", "prefill", "verify")


def test_a_mismatch_survives_pickling() -> None:
    with pytest.raises(StampMismatchError) as raised:
        la.ensure_linear_attn_backends_agree(
            stamped(TRITON), all_gather=gather_from(FLASHINFER_PREFILL, TRITON)
        )
    copy = pickle.loads(pickle.dumps(raised.value))
    assert (copy.ranks, copy.fields, str(copy)) == (
        raised.value.ranks,
        raised.value.fields,
        str(raised.value),
    )


def test_without_a_process_group_or_an_all_gather_the_stamp_is_returned_unchecked() -> None:
    import torch.distributed

    assert not torch.distributed.is_initialized()
    runner = stamped(TRITON)
    assert la.ensure_linear_attn_backends_agree(runner) is runner.linear_attn_backends


def test_an_unstamped_runner_fails_closed_before_gathering() -> None:
    gather = gather_from(TRITON)
    with pytest.raises(la.UnstampedRunnerError):
        la.ensure_linear_attn_backends_agree(SimpleNamespace(), all_gather=gather)
    assert gather.seen == []


def test_the_module_imports_and_checks_without_torch() -> None:
    code = textwrap.dedent(
        """
        import sys
        sys.modules["torch"] = None  # `import torch` now raises ImportError
        from types import SimpleNamespace
        from stampgen.generated import linear_attn as la
        stamp = la.LinearAttnBackends("triton", "triton", "triton")
        assert la.ensure_linear_attn_backends_agree(SimpleNamespace(linear_attn_backends=stamp)) is stamp
        print("ok")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_attn_backend_wrapper_checks_the_ranks_after_stamping_and_before_building_the_consumer() -> None:
    config = ProcessConfig(server=ServerConfig(chunked_prefill_size=8192))
    launch(config, la.LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    cls = ARCHS[GDN_TARGET]
    runner = ModelRunner(
        "target", model_cls=cls, runner_facts=runner_facts_for(cls, **SM90), process_config=config
    )
    with pytest.raises(StampMismatchError, match="rank 1 has prefill=triton"):
        attn_backend_wrapper(runner, all_gather=gather_from(TRITON))
    assert runner.linear_attn_backends == FLASHINFER_PREFILL  # stamped, then refused


# --------------------------------------------------------------------------------------------- gloo, three processes

WORKER = """
import datetime, json, sys
import torch.distributed as dist
from stampgen.generated.linear_attn import LaunchFacts
from stampgen.kernels.runtime import (ARCHS, MambaConfig, ModelRunner, ProcessConfig, ServerConfig,
                                      StampMismatchError, attn_backend_wrapper, launch, runner_facts_for)

rank, world, store, odd = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=60))
facts = dict(platform="cuda", sm=9, sm_minor=0, cuda=13, pool_dtype="float32", head_k_dim=128,
             head_v_dim=128, flashinfer_gdn_prefill=True)
cls = ARCHS["Qwen3NextForCausalLM"]
results = {}
for scenario, differs in (("equal", False), ("one_differs", rank == odd)):
    mamba = MambaConfig(linear_attn_prefill_backend="torch") if differs else MambaConfig()
    config = ProcessConfig(mamba=mamba, server=ServerConfig(chunked_prefill_size=8192))
    launch(config, LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    runner = ModelRunner("target", model_cls=cls, runner_facts=runner_facts_for(cls, **facts), process_config=config)
    try:
        attn_backend_wrapper(runner)
        results[scenario] = {"ok": True}
    except StampMismatchError as exc:
        results[scenario] = {"ok": False, "ranks": list(exc.ranks), "fields": list(exc.fields), "message": str(exc)}
dist.destroy_process_group()
print(json.dumps(results))
"""


def test_three_gloo_ranks_raise_on_every_rank_naming_the_rank_with_another_config(tmp_path: Path) -> None:
    world, odd = 3, 1
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(rank), str(world), str(store), str(odd)],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
            outputs.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for rank, result in enumerate(outputs):
        assert result["equal"] == {"ok": True}, (rank, result)
        mismatch = result["one_differs"]
        assert not mismatch["ok"], (rank, mismatch)
        assert (mismatch["ranks"], mismatch["fields"]) == ([odd], ["prefill"]), (rank, mismatch)
        assert f"rank {odd} has prefill=torch where rank 0 has prefill=flashinfer" in mismatch["message"]
