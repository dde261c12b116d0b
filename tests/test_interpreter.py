"""The seed's behaviour, run through the interpreter on the shipped rules (docs/design.md "The problem",
docs/background.md "What the rules must express"): per-runner precedence, auto-default gates, launch normalisation, validations and fallbacks.

The interpreter is the executable specification the generated code is held against, so these tests pin the
rules' meaning; the pipeline order is the engine's: launch → gates (slots) → stamp → validate.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from stampgen.codegen import interpreter as interp
from stampgen.codegen.load import load
from stampgen.codegen.model import EnumT

REPO = Path(__file__).resolve().parent.parent
LOADED = load(str(REPO / "rules" / "linear_attn.rules"))
assert LOADED.ok, LOADED.diagnostics
MODEL = LOADED.model
STAMP = MODEL.stamps["LinearAttnBackends"]

DECODE = "mamba.linear_attn_decode_backend"
PREFILL = "mamba.linear_attn_prefill_backend"
VERIFY = "mamba.linear_attn_verify_backend"
BASE = "mamba.linear_attn_backend"
BACKENDS = MODEL.enums["LinearAttnKernelBackend"].members

# A GDN runner on Hopper for which FlashInfer prefill is the right default; tests change one thing at a time.
GDN_HOPPER = {
    "runner.family": "gdn",
    "runner.platform": "cuda",
    "runner.sm": 9,
    "runner.sm_minor": 0,
    "runner.cuda": 12,
    "runner.pool_dtype": "float32",
    "runner.head_k_dim": 128,
    "runner.head_v_dim": 128,
    "runner.flashinfer_gdn_prefill": True,
    "server.chunked_prefill_size": 8192,
}
GDN_BLACKWELL = {**GDN_HOPPER, "runner.sm": 10, "runner.cuda": 13, "runner.pool_dtype": "bfloat16"}
KDA_BLACKWELL = {**GDN_BLACKWELL, "runner.family": "kda_safe_gate"}
LAUNCH_FACTS = {"launch.sm": 9, "launch.cuda": 12, "launch.kimi_k3": False}


def env_of(given: dict[str, Any]) -> dict[str, Any]:
    """Config leaves (given, else their defaults) plus the facts given."""
    return interp.config_env(MODEL, given)


def stamp_of(given: dict[str, Any], prefill_default: str | None = None) -> dict[str, Any]:
    """The stamp's field values for these config leaves and this slot value (no launch, no gates)."""
    fields = interp.resolve_stamp(MODEL, STAMP, {**env_of(given), "prefill_default": prefill_default})
    return {name: outcome.value for name, outcome in fields.items()}


def tiers_of(given: dict[str, Any], prefill_default: str | None = None) -> dict[str, str]:
    fields = interp.resolve_stamp(MODEL, STAMP, {**env_of(given), "prefill_default": prefill_default})
    return {name: outcome.tier for name, outcome in fields.items()}


def gate(name: str, given: dict[str, Any]) -> interp.GateOutcome:
    return interp.run_gate(MODEL, name, env_of(given))


def launch(given: dict[str, Any]) -> tuple[dict[str, Any], list[interp.LaunchOutcome], list[str]]:
    env, log, violations = interp.run_launch(MODEL, env_of({**LAUNCH_FACTS, **given}))
    return env, log, [v.message for v in violations]


def validate(
    consumer: str, stamp: dict[str, Any], given: dict[str, Any]
) -> tuple[dict[str, Any], list, list]:
    values, log, violations = interp.run_validate(MODEL, consumer, STAMP, stamp, env_of(given))
    return values, [o for o in log if o.status == "applied"], [v.message for v in violations]


# --------------------------------------------------------------------------------------------- decode


def test_decode_takes_the_decode_flag_over_the_base_backend():
    assert stamp_of({DECODE: "flashinfer", BASE: "cutedsl"})["decode"] == "flashinfer"
    assert tiers_of({DECODE: "flashinfer", BASE: "cutedsl"})["decode"] == "flag"


def test_decode_without_its_flag_uses_the_base_backend():
    assert stamp_of({BASE: "cutedsl"})["decode"] == "cutedsl"
    assert tiers_of({BASE: "cutedsl"})["decode"] == "base"


def test_with_nothing_given_every_phase_runs_triton():
    assert stamp_of({}) == {"decode": "triton", "prefill": "triton", "verify": "triton"}


def test_decode_ignores_the_auto_default():
    assert stamp_of({}, prefill_default="flashinfer")["decode"] == "triton"


# --------------------------------------------------------------------------------------------- prefill


def test_prefill_takes_its_flag_over_the_auto_default():
    assert stamp_of({PREFILL: "cutedsl"}, prefill_default="flashinfer")["prefill"] == "cutedsl"


def test_prefill_takes_the_auto_default_over_the_base_backend():
    assert stamp_of({BASE: "cutedsl"}, prefill_default="flashinfer")["prefill"] == "flashinfer"
    assert tiers_of({BASE: "cutedsl"}, prefill_default="flashinfer")["prefill"] == "auto"


def test_prefill_without_flag_or_auto_default_uses_the_base_backend():
    assert stamp_of({BASE: "flashkda"})["prefill"] == "flashkda"
    assert tiers_of({BASE: "flashkda"})["prefill"] == "base"


# --------------------------------------------------------------------------------------------- verify


def test_verify_takes_its_flag_even_when_decode_is_flashinfer():
    assert stamp_of({VERIFY: "triton", DECODE: "flashinfer"})["verify"] == "triton"


def test_verify_follows_a_flashinfer_decode():
    assert stamp_of({DECODE: "flashinfer"})["verify"] == "flashinfer"
    assert tiers_of({DECODE: "flashinfer"})["verify"] == "follow"


def test_verify_follows_a_flashinfer_decode_inherited_from_the_base_backend():
    assert stamp_of({BASE: "flashinfer"})["verify"] == "flashinfer"


@pytest.mark.parametrize("decode", [b for b in BACKENDS if b != "flashinfer"])
def test_verify_is_triton_for_every_other_decode(decode):
    assert stamp_of({DECODE: decode})["verify"] == "triton"
    assert tiers_of({DECODE: decode})["verify"] == "const"


def _seed_resolver(cfg: dict[str, Any], prefill_default: str | None) -> dict[str, Any]:
    """SGLang's hand-written precedence (docs/design.md), independent of the rules."""
    base = cfg[BASE]
    decode = cfg[DECODE] or base
    prefill = cfg[PREFILL] or prefill_default or base
    verify = cfg[VERIFY] or ("flashinfer" if decode == "flashinfer" else "triton")
    return {"decode": decode, "prefill": prefill, "verify": verify}


def test_the_stamp_equals_the_seeds_precedence_over_a_domain_of_inputs():
    values = ["triton", "flashinfer", "cutedsl", "custom"]
    for base, decode, prefill, verify, slot in itertools.product(values, *[[None, *values]] * 4):
        cfg = {BASE: base, DECODE: decode, PREFILL: prefill, VERIFY: verify}
        assert stamp_of(cfg, slot) == _seed_resolver(cfg, slot), (cfg, slot)


# --------------------------------------------------------------------------------------------- GDN gate


def test_the_gdn_gate_yields_flashinfer_on_hopper_with_an_fp32_pool_and_8k_chunks():
    outcome = gate("gdn_flashinfer_prefill", GDN_HOPPER)
    assert (outcome.status, outcome.value) == ("yields", "flashinfer")


def test_the_gdn_gate_yields_on_hopper_up_to_32k_chunks():
    assert (
        gate("gdn_flashinfer_prefill", {**GDN_HOPPER, "server.chunked_prefill_size": 32768}).status
        == "yields"
    )


def test_the_gdn_gate_yields_on_blackwell_with_cuda_13_a_bf16_pool_and_8k_chunks():
    assert gate("gdn_flashinfer_prefill", GDN_BLACKWELL).status == "yields"


GDN_DECLINES = [
    ("a kda model", GDN_HOPPER, {"runner.family": "kda"}, "runner.family"),
    ("off cuda", GDN_HOPPER, {"runner.platform": "npu"}, "runner.platform"),
    ("explicit prefill flag", GDN_HOPPER, {PREFILL: "triton"}, PREFILL),
    ("explicit flashinfer prefill flag", GDN_HOPPER, {PREFILL: "flashinfer"}, PREFILL),
    ("base not triton", GDN_HOPPER, {BASE: "cutedsl"}, BASE),
    ("deterministic", GDN_HOPPER, {"server.deterministic": True}, "server.deterministic"),
    ("page-major kv", GDN_HOPPER, {"server.page_major_kv_layout": True}, "server.page_major_kv_layout"),
    ("dynamic chunking", GDN_HOPPER, {"server.dynamic_chunking": True}, "server.dynamic_chunking"),
    ("ampere", GDN_HOPPER, {"runner.sm": 8}, "runner.sm"),
    ("sm120", GDN_HOPPER, {"runner.sm": 12}, "runner.sm"),
    ("hopper bf16 pool", GDN_HOPPER, {"runner.pool_dtype": "bfloat16"}, "runner.pool_dtype"),
    ("no chunk size", GDN_HOPPER, {"server.chunked_prefill_size": None}, "server.chunked_prefill_size"),
    ("chunking off", GDN_HOPPER, {"server.chunked_prefill_size": -1}, "server.chunked_prefill_size"),
    ("hopper 64k chunks", GDN_HOPPER, {"server.chunked_prefill_size": 65536}, "server.chunked_prefill_size"),
    ("head_k 64", GDN_HOPPER, {"runner.head_k_dim": 64}, "runner.head_k_dim"),
    ("head_v 256", GDN_HOPPER, {"runner.head_v_dim": 256}, "runner.head_v_dim"),
    (
        "no flashinfer import",
        GDN_HOPPER,
        {"runner.flashinfer_gdn_prefill": False},
        "runner.flashinfer_gdn_prefill",
    ),
    ("blackwell cuda 12", GDN_BLACKWELL, {"runner.cuda": 12}, "runner.cuda"),
    ("blackwell fp32 pool", GDN_BLACKWELL, {"runner.pool_dtype": "float32"}, "runner.pool_dtype"),
    (
        "blackwell 32k chunks",
        GDN_BLACKWELL,
        {"server.chunked_prefill_size": 32768},
        "server.chunked_prefill_size",
    ),
]


@pytest.mark.parametrize(
    ("runner", "change", "culprit"), [c[1:] for c in GDN_DECLINES], ids=[c[0] for c in GDN_DECLINES]
)
def test_the_gdn_gate_declines_when_one_condition_fails_and_says_which(runner, change, culprit):
    outcome = gate("gdn_flashinfer_prefill", {**runner, **change})
    assert outcome.status == "declines"
    assert outcome.value is None
    assert culprit in outcome.reason


def test_the_gdn_gate_declines_on_the_set_prefill_leaf_before_reading_any_device_fact():
    # explicit > auto: with the leaf set, no runner fact is needed to decide
    outcome = gate(
        "gdn_flashinfer_prefill", {"runner.family": "gdn", "runner.platform": "cuda", PREFILL: "triton"}
    )
    assert outcome.status == "declines"


def test_a_gate_that_cannot_be_decided_says_what_it_needs_instead_of_guessing():
    outcome = gate("gdn_flashinfer_prefill", {k: v for k, v in GDN_HOPPER.items() if k != "runner.sm"})
    assert outcome.status == "undecided"
    assert "runner.sm" in outcome.reason


# --------------------------------------------------------------------------------------------- KDA gate


def test_the_kda_gate_yields_flashinfer_for_safe_gate_kda_on_sm100():
    outcome = gate("kda_flashinfer_prefill", KDA_BLACKWELL)
    assert (outcome.status, outcome.value) == ("yields", "flashinfer")


KDA_DECLINES = [
    ("plain kda", {"runner.family": "kda"}, "runner.family"),
    ("hopper", {"runner.sm": 9}, "runner.sm"),
    ("off cuda", {"runner.platform": "xpu"}, "runner.platform"),
    ("explicit prefill", {PREFILL: "triton"}, PREFILL),
    ("helion base", {BASE: "helion"}, BASE),
    ("deterministic", {"server.deterministic": True}, "server.deterministic"),
    ("two-batch overlap", {"server.two_batch_overlap": True}, "server.two_batch_overlap"),
    ("full prefill cuda graph", {"server.prefill_cuda_graph": "full"}, "server.prefill_cuda_graph"),
]


@pytest.mark.parametrize(
    ("change", "culprit"), [c[1:] for c in KDA_DECLINES], ids=[c[0] for c in KDA_DECLINES]
)
def test_the_kda_gate_declines_when_one_condition_fails(change, culprit):
    outcome = gate("kda_flashinfer_prefill", {**KDA_BLACKWELL, **change})
    assert outcome.status == "declines" and culprit in outcome.reason


def test_the_kda_gate_does_not_need_the_gdn_head_geometry():
    assert gate("kda_flashinfer_prefill", {**KDA_BLACKWELL, "runner.head_k_dim": 64}).status == "yields"


# --------------------------------------------------------------------------------------------- slots


def slots_of(given: dict[str, Any]) -> tuple[Any, list[str]]:
    values, outcomes = interp.slot_values(MODEL, STAMP, env_of(given), {})
    return values["prefill_default"], [o.gate for o in outcomes["prefill_default"]]


def test_a_gdn_runner_gets_its_prefill_default_from_the_gdn_gate_only():
    value, asked = slots_of(GDN_HOPPER)
    assert value == "flashinfer" and asked == ["gdn_flashinfer_prefill"]


def test_a_kda_runner_gets_its_prefill_default_from_the_kda_gate_after_the_gdn_gate_declines():
    value, asked = slots_of(KDA_BLACKWELL)
    assert value == "flashinfer" and asked == ["gdn_flashinfer_prefill", "kda_flashinfer_prefill"]


def test_an_explicit_prefill_flag_beats_the_auto_default_end_to_end():
    given = {**GDN_HOPPER, PREFILL: "cutedsl"}
    value, _ = slots_of(given)
    assert value is None
    assert stamp_of(given, value)["prefill"] == "cutedsl"


def test_the_auto_default_is_never_written_to_process_config():
    env = env_of(GDN_HOPPER)
    before = dict(env)
    value, _ = slots_of(GDN_HOPPER)
    interp.resolve_stamp(MODEL, STAMP, {**env, "prefill_default": value})
    assert env == before and env[PREFILL] is None


# --------------------------------------------------------------------------------------------- launch


def test_launch_defaults_decode_to_flashinfer_on_sm100_with_an_explicit_bf16_state():
    env, log, violations = launch({"launch.sm": 10, "launch.cuda": 13, "mamba.ssm_dtype": "bfloat16"})
    assert env[DECODE] == "flashinfer" and violations == []
    assert any(o.kind == "set" and o.status == "applied" and "SM100" in o.reason for o in log)


@pytest.mark.parametrize(
    "change",
    [
        {"launch.sm": 9},
        {"mamba.ssm_dtype": None},
        {"mamba.ssm_dtype": "float32"},
        {BASE: "helion"},
        {DECODE: "triton"},
    ],
    ids=["hopper", "dtype-not-given", "fp32-state", "helion-base", "explicit-decode"],
)
def test_launch_leaves_decode_alone_unless_every_sm100_condition_holds(change):
    given = {"launch.sm": 10, "launch.cuda": 13, "mamba.ssm_dtype": "bfloat16", **change}
    env, _, _ = launch(given)
    assert env[DECODE] == given.get(DECODE)


def test_launch_turns_an_inherited_flashkda_decode_into_triton():
    env, log, violations = launch({BASE: "flashkda"})
    assert env[DECODE] == "triton" and violations == []
    assert stamp_of(env) == {"decode": "triton", "prefill": "flashkda", "verify": "triton"}


def test_launch_refuses_an_explicit_flashkda_decode():
    _, _, violations = launch({DECODE: "flashkda"})
    assert violations == [
        "FlashKDA is prefill-only; set --linear-attn-decode-backend to triton or flashinfer"
    ]


def test_launch_pins_kimi_k3_speculative_verify_to_nv_cutedsl():
    env, _, _ = launch({"launch.kimi_k3": True, "server.speculative_algorithm": "eagle"})
    assert env[VERIFY] == "nv_cutedsl"
    env, _, _ = launch({"launch.kimi_k3": True})
    assert env[VERIFY] is None


def test_launch_refuses_flashinfer_decode_on_sm100_without_a_bf16_state():
    _, _, violations = launch({"launch.sm": 10, "launch.cuda": 13, DECODE: "flashinfer"})
    assert "FlashInfer linear-attention decode on SM100+ needs --mamba-ssm-dtype bfloat16" in violations


def test_launch_refuses_flashinfer_prefill_on_sm100_before_cuda_13_even_when_inherited():
    _, _, explicit = launch({"launch.sm": 10, "launch.cuda": 12, PREFILL: "flashinfer"})
    _, _, inherited = launch(
        {"launch.sm": 10, "launch.cuda": 12, BASE: "flashinfer", "mamba.ssm_dtype": "bfloat16"}
    )
    assert any("needs CUDA 13" in m for m in explicit)
    assert any("inherited from --linear-attn-backend" in m for m in inherited)


def test_launch_locals_do_not_leak_into_process_config():
    env, _, _ = launch({DECODE: "flashinfer"})
    assert "decode" not in env and "verify" not in env


def test_replayssm_and_replayssm_spec_are_mutually_exclusive():
    given = {"mamba.enable_linear_replayssm": True, "mamba.enable_linear_replayssm_spec": True}
    _, _, violations = launch(given)
    assert any("mutually exclusive" in m for m in violations)


# --------------------------------------------------------------------------------------------- validate


def test_deterministic_inference_with_flashinfer_gdn_prefill_is_a_violation():
    stamp = {"decode": "triton", "prefill": "flashinfer", "verify": "triton"}
    _, _, violations = validate("GDNAttnBackend", stamp, {**GDN_HOPPER, "server.deterministic": True})
    assert violations == [
        "FlashInfer GDN prefill is not deterministic; use --linear-attn-prefill-backend triton"
    ]


def test_cutedsl_gdn_prefill_on_sm90_falls_back_to_triton_and_logs_it():
    stamp = {"decode": "triton", "prefill": "cutedsl", "verify": "triton"}
    values, applied, violations = validate("GDNAttnBackend", stamp, GDN_HOPPER)
    assert values["prefill"] == "triton" and violations == []
    assert [o.reason for o in applied] == ["cutedsl GDN prefill needs SM100; using triton"]


def test_cutedsl_gdn_prefill_on_sm100_is_kept():
    stamp = {"decode": "triton", "prefill": "cutedsl", "verify": "triton"}
    values, applied, _ = validate("GDNAttnBackend", stamp, GDN_BLACKWELL)
    assert values["prefill"] == "cutedsl" and applied == []


def test_kda_flashinfer_verify_with_a_tree_draft_is_a_violation():
    stamp = {"decode": "flashinfer", "prefill": "triton", "verify": "flashinfer"}
    _, _, violations = validate("KDAAttnBackend", stamp, {**KDA_BLACKWELL, "server.speculative_topk": 2})
    assert violations == [
        "KDA FlashInfer speculative decoding supports topk=1 only (EAGLE tree drafts need triton)"
    ]
    _, _, violations = validate("KDAAttnBackend", stamp, {**KDA_BLACKWELL, "server.speculative_topk": 1})
    assert violations == []


def test_gdn_flashinfer_verify_with_a_tree_draft_falls_back_to_triton():
    stamp = {"decode": "flashinfer", "prefill": "triton", "verify": "flashinfer"}
    values, applied, violations = validate(
        "GDNAttnBackend", stamp, {**GDN_HOPPER, "server.speculative_topk": 4}
    )
    assert values["verify"] == "triton" and violations == []
    assert "tree drafts verify with triton" in applied[0].reason


def test_helion_in_any_gdn_phase_is_a_violation():
    stamp = {"decode": "triton", "prefill": "triton", "verify": "helion"}
    _, _, violations = validate("GDNAttnBackend", stamp, GDN_HOPPER)
    assert "helion has kernels for KDA only, not GDN" in violations


def test_ptx_kda_prefill_needs_sm103_exactly():
    stamp = {"decode": "triton", "prefill": "ptx_kda", "verify": "triton"}
    on_sm100, _, _ = validate("KDAAttnBackend", stamp, {**KDA_BLACKWELL, "runner.family": "kda"})
    on_sm103, _, _ = validate(
        "KDAAttnBackend", stamp, {**KDA_BLACKWELL, "runner.family": "kda", "runner.sm_minor": 3}
    )
    assert (on_sm100["prefill"], on_sm103["prefill"]) == ("triton", "ptx_kda")


def test_a_check_with_an_input_not_given_is_not_reported_as_a_violation():
    stamp = {"decode": "triton", "prefill": "flashinfer", "verify": "triton"}
    _, _, violations = validate("GDNAttnBackend", stamp, {"server.deterministic": True})
    assert len(violations) == 1  # deterministic + flashinfer needs no fact; the fact-based checks are unknown


# --------------------------------------------------------------------------------------------- open enum


def test_the_open_enum_maps_an_unknown_backend_name_to_custom():
    backend = MODEL.enums["LinearAttnKernelBackend"]
    assert backend.open_member == "custom"
    assert interp.coerce(backend, "my_plugin_kernel") == "custom"
    assert stamp_of({BASE: "my_plugin_kernel"})["decode"] == "custom"


def test_a_closed_enum_refuses_an_unknown_name():
    with pytest.raises(ValueError, match="not a member of ModelFamily"):
        interp.coerce(MODEL.enums["ModelFamily"], "rwkv7")


def test_coerce_accepts_enum_members_by_value():
    class Member:
        value = "flashinfer"

    assert interp.coerce(MODEL.enums["LinearAttnKernelBackend"], Member()) == "flashinfer"


def test_custom_kda_verify_kernels_are_refused():
    stamp = {"decode": "triton", "prefill": "triton", "verify": "custom"}
    _, _, violations = validate("KDAAttnBackend", stamp, KDA_BLACKWELL)
    assert "custom KDA verify kernels are not implemented" in violations


def test_every_enum_has_members_and_every_open_enum_lists_its_fallback():
    for enum in MODEL.enums.values():
        assert isinstance(enum, EnumT) and enum.members
        assert enum.open_member is None or enum.open_member in enum.members
