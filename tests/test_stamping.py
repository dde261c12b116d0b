"""A runner is stamped once, atomically: the generated stamp_linear_attn_backends and ModelRunner's own check.

The race tests release their threads together with a barrier, many trials over, and run each racing
thread under a stress scheduler (`preempted_after_every_builtin`): the thread gives up the interpreter
after every builtin call returns, so a check-then-set that is not one atomic step interleaves with the
other threads' in nearly every trial instead of about one in 2,000.
"""

from __future__ import annotations

import contextlib
import importlib
import pickle
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest

from stampgen.generated import linear_attn as la
from stampgen.generated import loader as loader_rules
from stampgen.kernels.runtime import (
    ARCHS,
    MambaConfig,
    ModelRunner,
    ProcessConfig,
    ServerConfig,
    StampConflictError,
    attn_backend_wrapper,
    launch,
    runner_facts_for,
)
from tests.machines import SM90

E = la.LinearAttnKernelBackend
GDN_TARGET, NON_GDN_DRAFT = "Qwen3NextForCausalLM", "Qwen3NextForCausalLMMTP"
REPO = Path(__file__).resolve().parents[1]
STAMP_LINE = la.RULE_POSITIONS["stamp LinearAttnBackends"]
# Stamps that differ in their prefill (one per racing thread).
CONTENDERS = tuple(
    la.LinearAttnBackends(E.TRITON, member, E.TRITON)
    for member in (E.TRITON, E.FLASHINFER, E.TORCH, E.CUTEDSL)
)


def launched(mamba: MambaConfig | None = None) -> ProcessConfig:
    config = ProcessConfig(mamba=mamba or MambaConfig(), server=ServerConfig(chunked_prefill_size=8192))
    launch(config, la.LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    return config


def make_runner(name: str, arch: str, config: ProcessConfig) -> ModelRunner:
    cls = ARCHS[arch]
    return ModelRunner(name, model_cls=cls, runner_facts=runner_facts_for(cls, **SM90), process_config=config)


def config_namespaces(**mamba: Any) -> dict[str, Any]:
    """The keyword arguments of the generated stamp function, as plain namespaces."""
    leaves = {f"linear_attn_{p}backend": None for p in ("", "decode_", "prefill_", "verify_")}
    leaves["linear_attn_backend"] = "triton"
    return {
        "mamba": SimpleNamespace(**{**leaves, **mamba}),
        "server": SimpleNamespace(**msgspec.structs.asdict(ServerConfig(chunked_prefill_size=8192))),
        "runner_facts": runner_facts_for(ARCHS[GDN_TARGET], **SM90),
    }


@contextlib.contextmanager
def preempted_after_every_builtin() -> Iterator[None]:
    """This thread yields the interpreter each time a builtin call returns, for as long as the block runs."""

    def yield_after_builtins(frame: Any, event: str, arg: Any) -> None:
        if event == "c_return":
            time.sleep(0)

    sys.setprofile(yield_after_builtins)
    try:
        yield
    finally:
        sys.setprofile(None)


def race(
    trials: int, attempts: list[Callable[[Any], Any]], fresh_runner: Callable[[], Any]
) -> list[list[Any]]:
    """Run every attempt on one fresh runner per trial, the threads released together by a barrier; each
    trial's outcomes, by attempt: what it returned, or the StampConflictError it raised."""
    start, done = threading.Barrier(len(attempts) + 1), threading.Barrier(len(attempts) + 1)
    runner: list[Any] = [None]
    outcomes: list[list[Any]] = [[None] * len(attempts) for _ in range(trials)]

    def contend(i: int) -> None:
        for trial in range(trials):
            start.wait()
            try:
                with preempted_after_every_builtin():
                    outcomes[trial][i] = attempts[i](runner[0])
            except StampConflictError as exc:
                outcomes[trial][i] = exc
            done.wait()

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(len(attempts))]
    for thread in threads:
        thread.start()
    try:
        for _ in range(trials):
            runner[0] = fresh_runner()
            start.wait(timeout=30)
            done.wait(timeout=30)
    finally:
        for thread in threads:
            thread.join(timeout=30)
    return outcomes


def winners(outcomes: list[list[Any]]) -> list[int]:
    return [sum(not isinstance(o, BaseException) for o in trial) for trial in outcomes]


# --------------------------------------------------------------------------------------------- the generated stamp function


def test_the_generated_stamp_function_refuses_a_second_different_stamp_naming_attribute_fields_and_line() -> (
    None
):
    runner = SimpleNamespace()  # a plain engine object: no check of its own
    first = la.stamp_linear_attn_backends(runner, **config_namespaces())
    with pytest.raises(StampConflictError) as raised:
        la.stamp_linear_attn_backends(runner, **config_namespaces(linear_attn_prefill_backend="torch"))
    error = raised.value
    assert runner.linear_attn_backends is first  # not replaced
    assert isinstance(error, RuntimeError) and error.fields == ("prefill",)
    message = str(error)
    assert ".linear_attn_backends is already stamped" in message
    assert "holds prefill=flashinfer" in message and "refusing prefill=torch" in message
    assert STAMP_LINE in message


def test_stamping_the_same_stamp_again_is_harmless_and_returns_the_one_the_runner_holds() -> None:
    runner = SimpleNamespace()
    first = la.stamp_linear_attn_backends(runner, **config_namespaces())
    again = la.stamp_linear_attn_backends(runner, **config_namespaces())
    assert again is first and runner.linear_attn_backends is first


def test_the_generated_stamp_function_refuses_a_runner_holding_something_else() -> None:
    runner = SimpleNamespace(linear_attn_backends={"decode": "triton"})
    with pytest.raises(StampConflictError, match="it holds a dict, not a LinearAttnBackends"):
        la.stamp_linear_attn_backends(runner, **config_namespaces())
    assert runner.linear_attn_backends == {"decode": "triton"}


def unlocked_check_then_set(runner: Any, stamp: la.LinearAttnBackends) -> la.LinearAttnBackends:
    """Stamping as it was before the lock: read, compare, set, as three steps another thread can split."""
    current = getattr(runner, "linear_attn_backends", None)
    if current is None:
        runner.linear_attn_backends = stamp
        return stamp
    if current != stamp:
        raise StampConflictError("linear_attn_backends", current, stamp, STAMP_LINE)
    return current


def test_the_unlocked_check_then_set_loses_stamps_under_the_race_harness() -> None:
    """The harness below sees the race the lock removes: without it, two threads both find the runner
    unstamped and both "win", the later silently replacing the earlier."""
    attempts = [lambda runner, s=s: unlocked_check_then_set(runner, s) for s in CONTENDERS]
    outcomes = race(150, attempts, SimpleNamespace)
    raced = [trial for trial, count in enumerate(winners(outcomes)) if count > 1]
    assert raced, "the harness never interleaved the unlocked check-then-set: it could not see the race"


def test_threads_racing_the_generated_stamp_function_on_one_runner_leave_one_winner() -> None:
    configs = [config_namespaces(linear_attn_prefill_backend=stamp.prefill.value) for stamp in CONTENDERS]
    attempts = [lambda runner, c=c: la.stamp_linear_attn_backends(runner, **c) for c in configs]
    with pytest.MonkeyPatch.context() as patch:  # the racing threads' log lines are not the point here
        patch.setattr(la.logger, "disabled", True)
        outcomes = race(150, attempts, SimpleNamespace)
    assert winners(outcomes) == [1] * len(outcomes)
    for trial in outcomes:
        (won,) = [o for o in trial if not isinstance(o, BaseException)]
        assert all(o.current == won for o in trial if isinstance(o, BaseException))


# --------------------------------------------------------------------------------------------- ModelRunner


def test_the_runtime_stamp_conflict_error_is_the_generated_one() -> None:
    assert StampConflictError is la.StampConflictError


def test_two_threads_setting_different_stamps_on_one_model_runner_leave_one_winner() -> None:
    config = launched()

    def setter(stamp: la.LinearAttnBackends) -> Callable[[ModelRunner], la.LinearAttnBackends]:
        def attempt(runner: ModelRunner) -> la.LinearAttnBackends:
            runner.linear_attn_backends = stamp
            return stamp

        return attempt

    outcomes = race(
        300, [setter(s) for s in CONTENDERS[:2]], lambda: make_runner("target", GDN_TARGET, config)
    )
    both = [trial for trial, count in enumerate(winners(outcomes)) if count != 1]
    assert not both, f"{len(both)} of {len(outcomes)} trials did not end with exactly one stamp: {both[:10]}"


def test_a_model_runner_conflict_names_the_runner_the_attribute_both_fields_and_the_rules_line() -> None:
    runner = make_runner("target", GDN_TARGET, launched())
    runner.linear_attn_backends = CONTENDERS[1]
    runner.linear_attn_backends = CONTENDERS[1]  # the same stamp again: harmless
    with pytest.raises(StampConflictError) as raised:
        runner.linear_attn_backends = CONTENDERS[2]
    message = str(raised.value)
    assert message.startswith("ModelRunner 'target'.linear_attn_backends is already stamped")
    assert "prefill=flashinfer" in message and "prefill=torch" in message and STAMP_LINE in message
    assert runner.linear_attn_backends is CONTENDERS[1]


def test_a_stamp_conflict_survives_pickling() -> None:
    error = la.StampConflictError("linear_attn_backends", CONTENDERS[0], CONTENDERS[1], STAMP_LINE, "runner")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.fields, str(copy), copy.current, copy.refused) == (
        error.fields,
        str(error),
        CONTENDERS[0],
        CONTENDERS[1],
    )


def test_64_threads_building_runners_at_once_get_the_stamps_of_a_serial_build() -> None:
    flags = [
        MambaConfig(),
        MambaConfig(linear_attn_decode_backend="flashinfer"),
        MambaConfig(linear_attn_prefill_backend="torch"),
        MambaConfig(linear_attn_backend="torch"),
    ]
    configs = [launched(mamba) for mamba in flags]
    plan = [(i, configs[i % len(configs)], GDN_TARGET if i % 3 else NON_GDN_DRAFT) for i in range(64)]

    def build(i: int, config: ProcessConfig, arch: str) -> la.LinearAttnBackends:
        runner = make_runner(f"runner-{i}", arch, config)
        attn_backend_wrapper(runner)
        return runner.linear_attn_backends

    serial = {i: build(i, config, arch) for i, config, arch in plan}
    concurrent: dict[int, la.LinearAttnBackends] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(plan))

    def work(i: int, config: ProcessConfig, arch: str) -> None:
        try:
            barrier.wait(timeout=30)
            concurrent[i] = build(i, config, arch)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=entry) for entry in plan]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert concurrent == serial
    assert len(set(serial.values())) >= 4  # the plan builds runners that really differ
    assert all(config.mamba == mamba for config, mamba in zip(configs, flags))  # no config was written


# --------------------------------------------------------------------------------------------- incomplete stamps


def test_the_guard_refuses_a_stamp_with_an_unset_phase() -> None:
    incomplete = la.LinearAttnBackends(decode=None, prefill="triton", verify="triton")  # type: ignore[arg-type]
    with pytest.raises(la.UnstampedRunnerError) as raised:
        la.require_linear_attn_backends(SimpleNamespace(linear_attn_backends=incomplete))
    message = str(raised.value)
    assert "decode has no value of the field's type" in message and STAMP_LINE in message


def test_the_guard_refuses_a_stamp_whose_every_phase_is_unset() -> None:
    incomplete = la.LinearAttnBackends(None, None, None)  # type: ignore[arg-type]
    with pytest.raises(la.UnstampedRunnerError, match="decode, prefill, verify have no value"):
        la.require_linear_attn_backends(SimpleNamespace(linear_attn_backends=incomplete))


def test_a_model_runner_refuses_a_stamp_with_an_unset_phase() -> None:
    runner = make_runner("target", GDN_TARGET, launched())
    with pytest.raises(ValueError, match="verify is unset"):
        runner.linear_attn_backends = la.LinearAttnBackends("triton", "triton", None)  # type: ignore[arg-type]
    assert not hasattr(runner, "linear_attn_backends")


# --------------------------------------------------------------------------------------------- every guard fails closed


def guards_of_the_rules() -> list[tuple[str, str, str]]:
    """(consumer, its module, the stamp it reads) for every `guard` line of rules/*.rules."""
    found = []
    for path in sorted((REPO / "rules").glob("*.rules")):
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r'guard (.+?) from "([\w.]+)" reads (\w+)', line)
            if match:
                found += [(name.strip(), match[2], match[3]) for name in match[1].split(",")]
    return found


# The runner each consumer serves (its model family and platform), built unstamped.
SERVED_BY = {
    "GDNAttnBackend": (GDN_TARGET, SM90),
    "KDAAttnBackend": ("KimiLinearForCausalLM", SM90),
    "AscendGDNAttnBackend": (GDN_TARGET, dict(SM90, platform="npu", sm=0, cuda=0)),
}


def test_the_rules_guard_the_consumers_these_tests_build() -> None:
    guards = guards_of_the_rules()
    assert {consumer for consumer, _, stamp in guards if stamp == "LinearAttnBackends"} == set(SERVED_BY)
    assert ("ExpertsLayout", "stampgen.kernels.runtime.layers", "SharedExpertsFusionDecision") in guards


@pytest.mark.parametrize(("consumer", "module", "stamp"), guards_of_the_rules(), ids=lambda v: str(v))
def test_every_guarded_consumer_built_on_an_unstamped_runner_raises_from_its_constructor(
    consumer: str, module: str, stamp: str
) -> None:
    cls = getattr(importlib.import_module(module), consumer)
    if stamp == "LinearAttnBackends":
        arch, facts = SERVED_BY[consumer]
        model_cls = ARCHS[arch]
        runner: Any = ModelRunner(
            "target",
            model_cls=model_cls,
            runner_facts=runner_facts_for(model_cls, **facts),
            process_config=launched(),
        )
        rules, attribute, stamper = la, "linear_attn_backends", "stamp_linear_attn_backends"
    else:
        from stampgen.kernels.runtime.loader import LoaderStamps

        runner = LoaderStamps(
            SimpleNamespace(name="target")
        )  # where the loader keeps a runner's fusion stamp
        rules, attribute, stamper = (
            loader_rules,
            "shared_experts_fusion",
            "stamp_shared_experts_fusion_decision",
        )
    with pytest.raises(rules.UnstampedRunnerError) as raised:
        cls(runner)
    message = str(raised.value)
    assert f"`{attribute}`" in message and stamper in message, message
    assert rules.RULE_POSITIONS[f"stamp {stamp}"] in message, message  # the .rules line of the stamp
