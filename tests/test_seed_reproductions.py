"""The seed's two failures, reproduced on real (tiny) models, and the stamped runtime that does not have them.

SGLang #33312: a DeepSeek-V4 DSpark draft class without its target's `shared_experts_fusion_disable_reason`
got another fusion decision, read the target's checkpoint in the wrong layout, and the accept length fell
from 5.60 to 2.05. Here the DSpark draft is self-speculating (the target's weights, through its own entry
class), so with the hook it accepts every token (D + 1); without it the generated parity check names the
class and the accept length collapses.

SGLang #34376: with the kernel choice in one process-wide table, rebuilt by every runner as it is built,
the runner built last decides the kernels of every runner. A variant of backend selection in that shape is
kept here, in the tests only (`ProcessWideTable`, `TableGDNBackend`); the stamped runtime keeps each
runner's own choice in either build order, and leaves the process configuration as the operator gave it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch

from stampgen.generated.linear_attn import (
    RULE_POSITIONS,
    LaunchFacts,
    check_draft_hooks,
    gdn_flashinfer_prefill,
    resolve_linear_attn_backends,
)
from stampgen.kernels import gdn
from stampgen.kernels.runtime import (
    MambaConfig,
    ModelRunner,
    ProcessConfig,
    ServerConfig,
    launch,
    runner_facts_for,
)
from stampgen.kernels.runtime.layers import ForwardMode, tiny_deepseek_v4_config, tiny_qwen3_next_config
from stampgen.kernels.runtime.loader import FUSION_HOOK, load_model, make_checkpoint
from stampgen.kernels.runtime.models import ARCHS
from stampgen.kernels.runtime.speculative import (
    ModelWorker,
    build_worker,
    generate_greedy,
    generate_speculative,
)
from tests.machines import CPU

DSPARK = "DeepseekV4ForCausalLMDSpark"
DRAFT_TOKENS = 4
PROMPTS = [
    [5, 17, 3, 99, 42],
    [7, 7, 1, 64, 23, 88, 2, 11, 9],
    [31, 4, 120, 8, 77, 15, 2, 60, 3, 44, 1, 9, 30],
]
NEW_TOKENS = 24


pytestmark = pytest.mark.usefixtures("one_cpu_thread")  # tests/conftest.py


# --------------------------------------------------------------------------------------------- SGLang #33312


def dspark_pair():
    """The DeepSeek-V4 target and its DSpark draft, both loaded from the target's checkpoint."""
    hf_config = tiny_deepseek_v4_config()
    config = ProcessConfig(
        mamba=MambaConfig(linear_attn_backend="torch", linear_attn_verify_backend="torch"),
        server=ServerConfig(speculative_algorithm="dspark", speculative_topk=1),
    )
    launch(config, LaunchFacts(sm=0, cuda=0, kimi_k3=False))
    common = dict(
        process_config=config,
        runner_facts=CPU,
        hf_config=hf_config,
        checkpoint=make_checkpoint(ARCHS["DeepseekV4ForCausalLM"], hf_config, seed=0),
        slots=len(PROMPTS) + 1,
    )
    target = build_worker("target", ARCHS["DeepseekV4ForCausalLM"], **common)
    return target, build_worker("draft", ARCHS[DSPARK], target=target, **common)


def speculate(target, draft):
    result = generate_speculative(
        target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=DRAFT_TOKENS
    )
    assert result.outputs == generate_greedy(target, PROMPTS, max_new_tokens=NEW_TOKENS)  # greedy stays exact
    return result


def test_33312_without_the_hook_the_parity_check_names_the_dspark_draft(monkeypatch):
    monkeypatch.delattr(ARCHS[DSPARK], FUSION_HOOK)
    report = check_draft_hooks(ARCHS)
    assert len(report.offenders) == 1, report.offenders
    assert DSPARK in str(report.offenders[0]) and FUSION_HOOK in str(report.offenders[0])


REPO = Path(__file__).resolve().parents[1]
GENERATED_PARITY_TEST = "generated/test_linear_attn.py::test_draft_hooks_parity_holds_over_the_registry"
# A pytest plugin that takes the hook off the DSpark draft class for every test of the session.
WITHOUT_DSPARK_HOOK = f"""
import pytest


@pytest.fixture(autouse=True)
def without_dspark_hook(monkeypatch):
    from stampgen.kernels.runtime.models import ARCHS

    monkeypatch.delattr(ARCHS["{DSPARK}"], "{FUSION_HOOK}")
"""


def run_generated_parity_test(tmp_path: Path, *plugin: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "without_dspark_hook.py").write_text(WITHOUT_DSPARK_HOOK, encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin, GENERATED_PARITY_TEST]
    return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)


def test_33312_without_the_hook_the_generated_parity_test_fails_naming_the_class_and_the_rule(tmp_path):
    failed = run_generated_parity_test(tmp_path, "-p", "without_dspark_hook")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    rule = f"parity draft_hooks ({RULE_POSITIONS['parity draft_hooks']}) fails for 1 of"
    assert rule in failed.stdout, failed.stdout
    assert f"draft {DSPARK} lacks {FUSION_HOOK}, which its target DeepseekV4ForCausalLM has" in failed.stdout
    restored = run_generated_parity_test(tmp_path)  # the same test, the class as shipped
    assert restored.returncode == 0 and "1 passed" in restored.stdout, restored.stdout + restored.stderr


def test_33312_without_the_hook_the_draft_loads_the_wrong_layout_and_its_accept_length_collapses(monkeypatch):
    monkeypatch.delattr(ARCHS[DSPARK], FUSION_HOOK)
    target, draft = dspark_pair()
    assert target.loaded.shared_experts_fusion.layout.value == "unfused"
    assert draft.loaded.shared_experts_fusion.layout.value == "fused"  # the loader's default
    assert draft.loaded.report.missing and draft.loaded.report.unused  # the shared expert is lost
    result = speculate(target, draft)
    # recorded figure: 1.43 with these prompts (seed 0) against D + 1 = 5
    assert result.mean_accept_length < 2.0, result.mean_accept_length


def test_33312_with_the_hook_the_parity_check_passes_and_the_draft_accepts_every_token():
    assert not check_draft_hooks(ARCHS).offenders
    target, draft = dspark_pair()
    assert draft.loaded.shared_experts_fusion == target.loaded.shared_experts_fusion
    assert draft.loaded.report.clean
    assert speculate(target, draft).mean_accept_length == DRAFT_TOKENS + 1


# --------------------------------------------------------------------------------------------- SGLang #34376

# A Hopper machine on which a GDN runner with 128-wide heads meets every FlashInfer-prefill condition. The
# target (128-wide heads) gets the FlashInfer prefill auto-default; the standalone draft, a smaller
# Qwen3-Next with 64-wide heads, does not. The kernels are recorded, then run on the torch reference.
SM90 = dict(platform="cuda", sm=9, sm_minor=0, cuda=13, pool_dtype="float32", flashinfer_gdn_prefill=True)
MODELS = {
    "target": tiny_qwen3_next_config(),
    "draft": tiny_qwen3_next_config(
        linear_key_head_dim=64, linear_value_head_dim=64, num_nextn_predict_layers=0
    ),
}


class ProcessWideTable:
    """The shape before SGLang #34376: one table of backends for the process, rebuilt from the config and
    the auto-default of whichever runner is being built. Kept here only, to show what it does."""

    backends: dict[str, str] = {}  # process-wide: a class attribute, shared by every runner

    @classmethod
    def initialize(cls, runner: Any) -> None:
        config = runner.process_config
        prefill_default = gdn_flashinfer_prefill(config.mamba, config.server, runner.runner_facts)
        resolved = resolve_linear_attn_backends(config.mamba, prefill_default=prefill_default)
        cls.backends.clear()
        cls.backends.update(
            {phase: getattr(resolved, phase).value for phase in ("prefill", "decode", "verify")}
        )


class TableGDNBackend:
    """A GDN consumer that reads the process-wide table at every call (no stamp, no runner)."""

    def prefill(self, *args, **kwargs):
        return gdn.prefill(*args, backend=ProcessWideTable.backends["prefill"], **kwargs)

    def decode(self, *args, **kwargs):
        return gdn.decode(*args, backend=ProcessWideTable.backends["decode"], **kwargs)

    def verify(self, *args, **kwargs):
        return gdn.verify(*args, backend=ProcessWideTable.backends["verify"], **kwargs)


@pytest.fixture
def recorded_prefill_kernels(monkeypatch):
    """The backend= every GDN prefill call passes, in order; the call itself runs the torch reference."""
    calls: list[str] = []
    original = gdn.prefill

    def recording(*args, backend, **kwargs):
        calls.append(backend)
        return original(*args, backend="torch", **kwargs)

    monkeypatch.setattr(gdn, "prefill", recording)
    monkeypatch.setattr(ProcessWideTable, "backends", {})
    return calls


def sm90_process() -> ProcessConfig:
    config = ProcessConfig(mamba=MambaConfig(), server=ServerConfig(chunked_prefill_size=8192))
    launch(config, LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    return config


def runner_facts(role: str) -> dict[str, Any]:
    hf = MODELS[role]
    return dict(SM90, head_k_dim=hf.linear_key_head_dim, head_v_dim=hf.linear_value_head_dim)


def build(role: str, config: ProcessConfig, *, stamped: bool) -> ModelWorker:
    cls = ARCHS["Qwen3NextForCausalLM"]  # the draft is a standalone Qwen3-Next: GDN layers of its own
    hf_config = MODELS[role]
    checkpoint = make_checkpoint(cls, hf_config, seed=1 if role == "target" else 2)
    if stamped:
        return build_worker(
            role,
            cls,
            process_config=config,
            runner_facts=runner_facts(role),
            hf_config=hf_config,
            checkpoint=checkpoint,
        )
    runner = ModelRunner(
        role,
        model_cls=cls,
        runner_facts=runner_facts_for(cls, **runner_facts(role)),
        process_config=config,
        is_draft=role == "draft",
    )
    loaded = load_model(runner, hf_config=hf_config, checkpoint=checkpoint)
    ProcessWideTable.initialize(runner)
    return ModelWorker(loaded, TableGDNBackend(), slots=2, max_len=32, device="cpu", dtype=torch.float32)


def prefill_kernel_of(worker: ModelWorker, calls: list[str]) -> set[str]:
    """The prefill kernels ``worker``'s GDN layers run on a prompt."""
    calls.clear()
    worker.forward(ForwardMode.PREFILL, [1], [PROMPTS[0]])
    return set(calls)


@pytest.mark.parametrize("order", [("target", "draft"), ("draft", "target")], ids="-then-".join)
def test_34376_a_process_wide_table_gives_every_runner_the_kernels_of_the_runner_built_last(
    recorded_prefill_kernels, order
):
    config = sm90_process()
    workers = {role: build(role, config, stamped=False) for role in order}
    last = order[-1]
    chosen = {"target": "flashinfer", "draft": "triton"}  # what each runner's own rules give it
    for role, worker in workers.items():
        assert prefill_kernel_of(worker, recorded_prefill_kernels) == {chosen[last]}, role
    first = order[0]
    assert chosen[first] != chosen[last]  # the runner built first lost its choice
    if order == ("target", "draft"):
        # the target chose FlashInfer prefill, and runs the draft's Triton (SGLang #34376)
        assert prefill_kernel_of(workers["target"], recorded_prefill_kernels) == {"triton"}


@pytest.mark.parametrize("order", [("target", "draft"), ("draft", "target")], ids="-then-".join)
def test_34376_stamped_runners_keep_their_own_kernels_in_either_build_order(recorded_prefill_kernels, order):
    config = sm90_process()
    before = msgspec.to_builtins((config.mamba, config.server))
    workers = {role: build(role, config, stamped=True) for role in order}
    assert prefill_kernel_of(workers["target"], recorded_prefill_kernels) == {"flashinfer"}
    assert prefill_kernel_of(workers["draft"], recorded_prefill_kernels) == {"triton"}
    stamps = {role: w.loaded.runner.linear_attn_backends.prefill.value for role, w in workers.items()}
    assert stamps == {"target": "flashinfer", "draft": "triton"}
    # the process configuration is as the operator gave it: no auto-default was written back
    assert msgspec.to_builtins((config.mamba, config.server)) == before
    assert config.mamba.linear_attn_prefill_backend is None
