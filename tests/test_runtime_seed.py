"""The seed's behaviours (docs/design.md "The problem", docs/background.md), end to end through the runtime.

Every test goes through what an engine runs: a ProcessConfig, `launch` (the generated launch-level
normalisation), ModelRunners, and `attn_backend_wrapper` (the generated stamp, gates, guard and
validations). The machines are described by facts; nothing here needs a GPU.
"""

from __future__ import annotations

import threading

import msgspec
import pytest

from stampgen.codegen.load import load
from stampgen.generated.linear_attn import (
    LaunchFacts,
    LinearAttnBackends,
    RuleViolationError,
    gdn_flashinfer_prefill,
    resolve_linear_attn_backends,
)
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import (
    AscendGDNAttnBackend,
    GDNAttnBackend,
    KDAAttnBackend,
    LightningAttentionBackend,
    ModelFamilyError,
)
from stampgen.kernels.runtime import (
    ARCHS,
    LaunchError,
    MambaConfig,
    ModelRunner,
    ProcessConfig,
    RunnerFactsError,
    ServerConfig,
    StampConflictError,
    attn_backend_wrapper,
    launch,
    runner_facts_for,
)
from tests.machines import SM90

RULES = "rules/linear_attn.rules"

SM100 = dict(SM90, sm=10, pool_dtype="bfloat16")
NPU = dict(SM90, platform="npu", sm=0, cuda=0)
CHUNKED = ServerConfig(chunked_prefill_size=8192)  # a server chunking prefill at 8k

GDN_TARGET = "Qwen3NextForCausalLM"
NON_GDN_DRAFT = "Qwen3NextForCausalLMMTP"  # its MTP layer is full attention


def launched(mamba=None, server=CHUNKED, *, sm=9, cuda=13, kimi_k3=False) -> ProcessConfig:
    config = ProcessConfig(mamba=mamba or MambaConfig(), server=server)
    launch(config, LaunchFacts(sm=sm, cuda=cuda, kimi_k3=kimi_k3))
    return config


def on(device) -> dict:
    """The launch facts of a process on `device` (a runner's facts must agree with them)."""
    return dict(sm=device["sm"], cuda=device["cuda"])


def make_runner(name, arch, config, *, is_draft=False, device=SM90) -> ModelRunner:
    cls = ARCHS[arch]
    return ModelRunner(
        name,
        model_cls=cls,
        runner_facts=runner_facts_for(cls, **device),
        process_config=config,
        is_draft=is_draft,
    )


def stamped(name, arch, config, **kwargs) -> ModelRunner:
    runner = make_runner(name, arch, config, **kwargs)
    attn_backend_wrapper(runner)
    return runner


def phases(stamp: LinearAttnBackends) -> tuple[str, str, str]:
    """(decode, prefill, verify) as plain names."""
    return tuple(
        getattr(getattr(stamp, p), "value", getattr(stamp, p)) for p in ("decode", "prefill", "verify")
    )


# --------------------------------------------------------------------------------------------- precedence


def test_without_flags_every_phase_uses_the_base_backend():
    config = launched(MambaConfig(linear_attn_backend="torch"))
    runner = stamped("target", "Qwen3ForCausalLM", config)
    assert phases(runner.linear_attn_backends) == ("torch", "torch", "triton")


def test_an_explicit_prefill_flag_beats_the_auto_default():
    config = launched(MambaConfig(linear_attn_prefill_backend="torch"))
    runner = stamped("target", GDN_TARGET, config)
    assert phases(runner.linear_attn_backends) == ("triton", "torch", "triton")


def test_the_resolver_puts_the_flag_before_the_auto_default_before_the_base():
    base_only = MambaConfig(linear_attn_backend="torch")
    flagged = MambaConfig(linear_attn_backend="torch", linear_attn_prefill_backend="triton")
    assert phases(resolve_linear_attn_backends(base_only))[1] == "torch"
    assert phases(resolve_linear_attn_backends(base_only, prefill_default="flashinfer"))[1] == "flashinfer"
    assert phases(resolve_linear_attn_backends(flagged, prefill_default="flashinfer"))[1] == "triton"


def test_an_eligible_gdn_runner_gets_the_flashinfer_prefill_auto_default_over_the_base():
    runner = stamped("target", GDN_TARGET, launched())
    assert phases(runner.linear_attn_backends) == ("triton", "flashinfer", "triton")


def test_a_gdn_runner_that_misses_one_flashinfer_condition_keeps_the_base_prefill():
    # 128k chunks are past the 32k FlashInfer allows on SM90
    config = launched(server=ServerConfig(chunked_prefill_size=65536))
    runner = stamped("target", GDN_TARGET, config)
    assert phases(runner.linear_attn_backends) == ("triton", "triton", "triton")


def test_verify_follows_a_flashinfer_decode():
    config = launched(MambaConfig(linear_attn_decode_backend="flashinfer"))
    runner = stamped("target", "Qwen3ForCausalLM", config)
    assert phases(runner.linear_attn_backends) == ("flashinfer", "triton", "flashinfer")


def test_verify_is_triton_when_decode_is_not_flashinfer_even_with_a_flashinfer_prefill():
    config = launched(MambaConfig(linear_attn_decode_backend="torch"))
    runner = stamped("target", GDN_TARGET, config)
    assert phases(runner.linear_attn_backends) == ("torch", "flashinfer", "triton")


def test_an_explicit_verify_flag_wins_over_following_decode():
    config = launched(
        MambaConfig(linear_attn_decode_backend="flashinfer", linear_attn_verify_backend="torch")
    )
    runner = stamped("target", "Qwen3ForCausalLM", config)
    assert phases(runner.linear_attn_backends) == ("flashinfer", "triton", "torch")


def test_an_unknown_backend_name_becomes_custom_instead_of_an_error():
    config = launched(MambaConfig(linear_attn_backend="my_plugin_kernels"))
    runner = stamped("target", "Qwen3ForCausalLM", config)
    assert phases(runner.linear_attn_backends) == ("custom", "custom", "triton")


# --------------------------------------------------------------------------------------------- target and draft


def test_a_gdn_target_gets_flashinfer_prefill_while_its_non_gdn_draft_keeps_the_base():
    config = launched()
    target = stamped("target", GDN_TARGET, config)
    draft = stamped("draft", NON_GDN_DRAFT, config, is_draft=True)
    assert phases(target.linear_attn_backends) == ("triton", "flashinfer", "triton")
    assert phases(draft.linear_attn_backends) == ("triton", "triton", "triton")


def test_building_the_draft_after_the_target_leaves_the_target_stamp_unchanged():
    config = launched()
    target = stamped("target", GDN_TARGET, config)
    before = target.linear_attn_backends
    stamped("draft", NON_GDN_DRAFT, config, is_draft=True)
    assert target.linear_attn_backends is before
    assert phases(target.linear_attn_backends) == ("triton", "flashinfer", "triton")


def test_building_the_target_after_the_draft_leaves_the_draft_stamp_unchanged():
    config = launched()
    draft = stamped("draft", NON_GDN_DRAFT, config, is_draft=True)
    before = draft.linear_attn_backends
    target = stamped("target", GDN_TARGET, config)
    assert draft.linear_attn_backends is before
    assert phases(draft.linear_attn_backends) == ("triton", "triton", "triton")
    assert phases(target.linear_attn_backends) == ("triton", "flashinfer", "triton")


def test_the_auto_default_never_enters_process_config():
    config = launched()
    mamba_before = config.mamba
    target = stamped("target", GDN_TARGET, config)
    stamped("draft", NON_GDN_DRAFT, config, is_draft=True)
    assert config.mamba.linear_attn_prefill_backend is None
    assert config.mamba is mamba_before
    # the gate still sees the operator's intent (no prefill flag), so it still yields for a GDN runner
    assert gdn_flashinfer_prefill(config.mamba, config.server, target.runner_facts) == "flashinfer"


def test_a_later_gdn_runner_still_gets_its_own_auto_default():
    config = launched()
    stamped("target", GDN_TARGET, config)
    stamped("draft", NON_GDN_DRAFT, config, is_draft=True)
    second = stamped("second target", "Qwen3_5ForCausalLM", config)
    assert phases(second.linear_attn_backends) == ("triton", "flashinfer", "triton")


def test_every_runner_shares_the_one_process_config_by_reference():
    config = launched()
    target = stamped("target", GDN_TARGET, config)
    draft = stamped("draft", NON_GDN_DRAFT, config, is_draft=True)
    assert target.process_config is config
    assert draft.process_config is config


def test_runners_resolved_concurrently_in_threads_get_independent_stamps():
    config = launched()
    threads_count = 16
    barrier = threading.Barrier(threads_count)
    results: dict[int, tuple] = {}
    errors: list[BaseException] = []

    def build_pair(i: int) -> None:
        try:
            target = make_runner(f"target-{i}", GDN_TARGET, config)
            draft = make_runner(f"draft-{i}", NON_GDN_DRAFT, config, is_draft=True)
            barrier.wait()
            # half the threads build the draft first
            for runner in (draft, target) if i % 2 else (target, draft):
                attn_backend_wrapper(runner)
            results[i] = (phases(target.linear_attn_backends), phases(draft.linear_attn_backends))
        except BaseException as exc:  # reported below, with the thread's index
            errors.append(exc)

    threads = [threading.Thread(target=build_pair, args=(i,)) for i in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    expected = (("triton", "flashinfer", "triton"), ("triton", "triton", "triton"))
    assert results == dict.fromkeys(range(threads_count), expected)
    assert config.mamba.linear_attn_prefill_backend is None


# --------------------------------------------------------------------------------------------- fail closed


@pytest.mark.parametrize("consumer", [GDNAttnBackend, KDAAttnBackend, AscendGDNAttnBackend])
def test_an_unstamped_runner_raises_rather_than_guessing(consumer):
    runner = make_runner("target", GDN_TARGET, launched())
    with pytest.raises(AttributeError) as raised:
        consumer(runner)
    message = str(raised.value)
    assert "linear_attn_backends" in message
    assert f"{RULES}:" in message
    assert "stamp_linear_attn_backends" in message


def test_stamps_are_frozen():
    runner = stamped("target", GDN_TARGET, launched())
    with pytest.raises(AttributeError):
        runner.linear_attn_backends.prefill = "triton"


def test_a_runner_refuses_a_second_different_stamp():
    runner = stamped("target", GDN_TARGET, launched())
    other = msgspec.structs.replace(runner.linear_attn_backends, prefill=runner.linear_attn_backends.decode)
    with pytest.raises(StampConflictError):
        runner.linear_attn_backends = other
    assert phases(runner.linear_attn_backends) == ("triton", "flashinfer", "triton")


def test_stamping_a_runner_again_is_idempotent():
    runner = stamped("target", GDN_TARGET, launched())
    before = runner.linear_attn_backends
    attn_backend_wrapper(runner)
    assert runner.linear_attn_backends == before


def test_a_runner_is_not_stamped_before_launch():
    config = ProcessConfig(server=CHUNKED)
    runner = make_runner("target", GDN_TARGET, config)
    with pytest.raises(RuntimeError, match="launch"):
        attn_backend_wrapper(runner)
    assert not hasattr(runner, "linear_attn_backends")


# --------------------------------------------------------------------------------------------- consumers


@pytest.mark.parametrize(
    ("arch", "device", "consumer"),
    [
        (GDN_TARGET, SM90, GDNAttnBackend),
        (GDN_TARGET, NPU, AscendGDNAttnBackend),
        ("KimiLinearForCausalLM", SM90, KDAAttnBackend),
        ("KimiK3ForCausalLM", SM100, KDAAttnBackend),
        ("BailingMoeV2_5ForCausalLM", SM90, LightningAttentionBackend),
        ("NemotronHForCausalLM", SM90, type(None)),
        (NON_GDN_DRAFT, SM90, type(None)),
    ],
)
def test_each_family_gets_its_consumer_and_every_runner_is_stamped(arch, device, consumer):
    server = msgspec.structs.replace(CHUNKED, attention_backend="ascend") if device is NPU else CHUNKED
    runner = make_runner("target", arch, launched(server=server, **on(device)), device=device)
    assert type(attn_backend_wrapper(runner)) is consumer
    assert isinstance(runner.linear_attn_backends, LinearAttnBackends)


def test_a_gdn_consumer_applies_its_validation_fallback_and_logs_it(caplog):
    config = launched(MambaConfig(linear_attn_prefill_backend="cutedsl"))
    runner = make_runner("target", GDN_TARGET, config)
    with caplog.at_level("INFO"):
        backend = attn_backend_wrapper(runner)
    assert phases(runner.linear_attn_backends)[1] == "cutedsl"  # the stamp keeps the decision
    assert backend.kernel_backends["prefill"] == "triton"  # the consumer applies the logged fallback
    assert "cutedsl GDN prefill needs SM100" in caplog.text


def test_a_gdn_consumer_refuses_flashinfer_prefill_in_deterministic_mode():
    server = msgspec.structs.replace(CHUNKED, deterministic=True)
    config = launched(MambaConfig(linear_attn_prefill_backend="flashinfer"), server=server)
    with pytest.raises(RuleViolationError, match=f"not deterministic.*{RULES}:|{RULES}:.*not deterministic"):
        attn_backend_wrapper(make_runner("target", GDN_TARGET, config))


def test_a_gdn_consumer_refuses_a_stamp_value_without_a_kernel_rather_than_substituting():
    config = launched(MambaConfig(linear_attn_decode_backend="cutedsl"), sm=10)
    runner = make_runner("target", GDN_TARGET, config, device=SM100)
    with pytest.raises(
        KernelUnavailableError, match=r"decode=cutedsl has no GDN decode kernel in kernels\.gdn \(it has: "
    ):
        attn_backend_wrapper(runner)


def test_a_kda_consumer_refuses_flashinfer_verify_for_draft_trees():
    server = msgspec.structs.replace(CHUNKED, speculative_algorithm="eagle", speculative_topk=2)
    config = launched(MambaConfig(linear_attn_verify_backend="flashinfer"), server=server)
    with pytest.raises(RuleViolationError, match="topk=1"):
        attn_backend_wrapper(make_runner("target", "KimiLinearForCausalLM", config))


@pytest.mark.parametrize(
    ("arch", "device", "reason"),
    [
        (GDN_TARGET, NPU, "NPU GDN kernels"),
    ],
)
@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_a_consumer_whose_kernels_are_not_built_refuses_every_phase(arch, device, reason, phase):
    server = msgspec.structs.replace(CHUNKED, attention_backend="ascend") if device is NPU else CHUNKED
    runner = make_runner("target", arch, launched(server=server, **on(device)), device=device)
    backend = attn_backend_wrapper(runner)
    extra = {"prefill": {"cu_seqlens": None}, "decode": {}, "verify": {"intermediate_states": None}}[phase]
    with pytest.raises(KernelUnavailableError, match=reason):
        getattr(backend, phase)(None, None, None, None, None, state_pool=None, state_indices=None, **extra)


def test_lightning_attention_refuses_draft_trees_without_reading_a_stamp():
    server = msgspec.structs.replace(CHUNKED, speculative_algorithm="eagle", speculative_topk=2)
    runner = make_runner("target", "BailingMoeV2_5ForCausalLM", launched(server=server))
    with pytest.raises(RuleViolationError, match="topk 1"):
        LightningAttentionBackend(runner)  # unstamped: it does not read the stamp


# --------------------------------------------------------------------------------------------- launch


def test_launch_defaults_decode_to_flashinfer_on_sm100_with_an_explicit_bf16_state():
    config = launched(MambaConfig(ssm_dtype="bfloat16"), sm=10)
    assert config.mamba.linear_attn_decode_backend == "flashinfer"
    runner = stamped("target", "Qwen3ForCausalLM", config, device=SM100)
    assert phases(runner.linear_attn_backends) == ("flashinfer", "triton", "flashinfer")


def test_launch_keeps_a_triton_decode_on_sm100_without_an_explicit_bf16_state():
    config = launched(sm=10)
    assert config.mamba.linear_attn_decode_backend is None


def test_an_inherited_flashkda_decode_becomes_triton_at_launch():
    config = launched(MambaConfig(linear_attn_backend="flashkda"))
    assert config.mamba.linear_attn_decode_backend == "triton"
    runner = make_runner("target", "KimiLinearForCausalLM", config)
    # the stamp keeps the operator's flashkda prefill (launch moved only decode); the KDA consumer then
    # refuses it, as no flashkda prefill kernel is built here, rather than substituting one
    with pytest.raises(KernelUnavailableError, match="prefill=flashkda"):
        attn_backend_wrapper(runner)
    assert phases(runner.linear_attn_backends) == ("triton", "flashkda", "triton")


def test_an_explicit_flashkda_decode_is_refused_at_launch_naming_the_rules_line():
    config = ProcessConfig(mamba=MambaConfig(linear_attn_decode_backend="flashkda"))
    with pytest.raises(RuleViolationError) as raised:
        launch(config, LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    assert "prefill-only" in str(raised.value)
    assert raised.value.source.startswith(f"{RULES}:")
    assert not config.launched


def test_launch_runs_once_per_process():
    config = launched()
    with pytest.raises(LaunchError):
        launch(config, LaunchFacts(sm=9, cuda=13, kimi_k3=False))


def test_process_config_cannot_be_written_outside_launch():
    config = launched()
    with pytest.raises(AttributeError):
        config.mamba = MambaConfig(linear_attn_prefill_backend="flashinfer")
    with pytest.raises(AttributeError):
        config.mamba.linear_attn_prefill_backend = "flashinfer"


def test_the_config_records_have_exactly_the_leaves_and_defaults_of_the_rules():
    model = load(RULES).model
    for namespace, record in (("mamba", MambaConfig()), ("server", ServerConfig())):
        leaves = {leaf.name: leaf.default for leaf in model.leaves_of(namespace)}
        assert msgspec.structs.asdict(record) == leaves, namespace


def test_the_ascend_gdn_consumer_refuses_a_runner_that_is_not_on_an_npu():
    runner = stamped("target", GDN_TARGET, launched())
    with pytest.raises(KernelUnavailableError, match="NPU"):
        AscendGDNAttnBackend(runner)


def test_a_runner_refuses_facts_of_another_model_family():
    facts = runner_facts_for(ARCHS["KimiLinearForCausalLM"], **SM90)
    with pytest.raises(ValueError, match="gdn"):
        ModelRunner("target", model_cls=ARCHS[GDN_TARGET], runner_facts=facts, process_config=launched())


# --------------------------------------------------------------------------------------------- no way around the rules


def test_there_is_no_public_way_to_apply_launch_resolutions_without_the_launch_rules():
    config = ProcessConfig(mamba=MambaConfig(linear_attn_decode_backend="flashkda"))
    public = [name for name in dir(config) if not name.startswith("_")]
    assert public == ["launch_facts", "launched", "mamba", "server"]
    assert not hasattr(config, "apply_launch_resolutions")


def test_a_kda_runner_never_gets_the_flashkda_decode_that_launch_forbids():
    # before: config.apply_launch_resolutions({}, launch_facts=...) marked it launched, skipping every rule
    config = ProcessConfig(mamba=MambaConfig(linear_attn_decode_backend="flashkda"))
    with pytest.raises(RuleViolationError, match="prefill-only"):
        config._launch(LaunchFacts(sm=9, cuda=13, kimi_k3=False))  # even the private path runs the rules
    runner = make_runner("target", "KimiLinearForCausalLM", config)
    with pytest.raises(RuntimeError, match="not launched"):
        attn_backend_wrapper(runner)


def test_launch_needs_launch_facts():
    with pytest.raises(LaunchError, match="LaunchFacts"):
        launch(ProcessConfig(), {"sm": 9, "cuda": 13, "kimi_k3": False})


@pytest.mark.parametrize(
    ("consumer", "arch"),
    [
        (GDNAttnBackend, "KimiLinearForCausalLM"),
        (AscendGDNAttnBackend, "KimiK3ForCausalLM"),
        (KDAAttnBackend, GDN_TARGET),
        (KDAAttnBackend, "BailingMoeV2_5ForCausalLM"),
        (LightningAttentionBackend, GDN_TARGET),
        (GDNAttnBackend, NON_GDN_DRAFT),
    ],
)
def test_a_consumer_refuses_a_runner_of_another_model_family(consumer, arch):
    runner = stamped("target", arch, launched())
    with pytest.raises(ModelFamilyError) as raised:
        consumer(runner)
    family = runner.runner_facts.family.value
    assert consumer.__name__ in str(raised.value) and f"model family is {family}" in str(raised.value)


def test_the_runtime_registry_cannot_be_poisoned_through_the_runtime():
    with pytest.raises(TypeError):
        ARCHS["Qwen3NextForCausalLM"] = ARCHS["KimiLinearForCausalLM"]
    with pytest.raises(TypeError):
        del ARCHS["Qwen3NextForCausalLM"]
    from stampgen.kernels.runtime import models

    # the module the parity check reads is the same read-only mapping, not a dict behind a view
    assert models.ARCHS is ARCHS
    with pytest.raises(TypeError):
        models.ARCHS["EvilForCausalLMMTP"] = ARCHS["LlamaForCausalLM"]  # type: ignore[index]
    from stampgen.kernels.runtime.config import NAMESPACES

    with pytest.raises(TypeError):
        NAMESPACES["mamba"] = ServerConfig


@pytest.mark.parametrize("op", ["gdn", "kda", "lightning"])
def test_a_kernel_registry_cannot_be_poisoned(op):
    import importlib

    kernels = importlib.import_module(f"stampgen.kernels.{op}").KERNELS
    with pytest.raises(TypeError):
        kernels[("decode", "cutedsl")] = "naive:decode"  # type: ignore[index]
    assert ("decode", "cutedsl") not in kernels
    if op == "gdn":  # and the consumer still refuses a stamp value without a kernel
        config = launched(MambaConfig(linear_attn_decode_backend="cutedsl"), sm=10)
        runner = make_runner("target", GDN_TARGET, config, device=SM100)
        with pytest.raises(KernelUnavailableError, match="decode=cutedsl"):
            attn_backend_wrapper(runner)


# --------------------------------------------------------------------------------------------- launch facts vs runner facts


@pytest.mark.parametrize(
    ("device", "launch_facts", "named"),
    [
        (
            dict(SM100, cuda=12),
            dict(sm=9, cuda=13),
            "runner.sm = 10, but the process was launched with launch.sm = 9",
        ),
        (
            dict(SM90, cuda=12),
            dict(sm=9, cuda=13),
            "runner.cuda = 12, but the process was launched with launch.cuda = 13",
        ),
        (SM90, dict(sm=0, cuda=0), "runner.sm = 9, but the process was launched with launch.sm = 0"),
    ],
)
def test_a_runner_whose_facts_contradict_the_launch_facts_is_refused_naming_both(device, launch_facts, named):
    config = launched(**launch_facts)
    runner = make_runner("target", GDN_TARGET, config, device=device)
    with pytest.raises(RunnerFactsError) as raised:
        attn_backend_wrapper(runner)
    assert named in str(raised.value)
    assert not hasattr(runner, "linear_attn_backends")


def test_a_blackwell_runner_in_a_process_launched_for_hopper_never_gets_the_flashinfer_prefill_launch_forbids():
    # launch(sm=9, cuda=13) checked nothing about SM100 + CUDA 12; this runner would take FlashInfer prefill
    config = launched(MambaConfig(linear_attn_prefill_backend="flashinfer"), sm=9, cuda=13)
    runner = make_runner("target", GDN_TARGET, config, device=dict(SM100, cuda=12))
    with pytest.raises(RunnerFactsError, match="launch.sm = 9"):
        attn_backend_wrapper(runner)


def test_a_runner_whose_pool_is_not_the_operators_ssm_dtype_is_refused_naming_both():
    config = launched(MambaConfig(ssm_dtype="float32"), sm=10)
    runner = make_runner("target", GDN_TARGET, config, device=SM100)  # a bf16 pool
    with pytest.raises(RunnerFactsError, match="pool is bfloat16 .* --mamba-ssm-dtype is float32"):
        attn_backend_wrapper(runner)


def test_without_an_operators_ssm_dtype_or_a_pool_the_dtype_is_not_checked():
    stamped("target", GDN_TARGET, launched(sm=10), device=SM100)  # no --mamba-ssm-dtype
    config = launched(MambaConfig(ssm_dtype="bfloat16"))
    stamped("draft", NON_GDN_DRAFT, config, is_draft=True)  # family other: no pool, SM90's fp32 fact unread
