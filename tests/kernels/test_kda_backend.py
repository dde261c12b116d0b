"""The rules against the KDA kernel registry, through ``KDAAttnBackend`` (docs/design.md, "The kernel op API").

* every kernel in ``kernels.kda.KERNELS`` is reachable: some configuration makes the stamp and the KDA
  validation select it, and ``KDAAttnBackend`` binds it;
* every value the rules allow for KDA in a phase either has a kernel (and is bound as is) or makes
  ``KDAAttnBackend`` fail closed with ``KernelUnavailableError`` at construction, naming ``phase=value``;
* end to end: a stamped Kimi-Linear runner's consumer runs the Triton kernels (the CPU interpreter when
  there is no GPU) and matches the torch reference.

The search (tests/rules_search.py, as for GDN in tests/test_rules_vs_kernels.py) runs the runtime path over a
slice of the config domain, for plain and safe-gate KDA on a few machines.
"""

from __future__ import annotations

import itertools
from functools import cache

import pytest
from gdn_inputs import clone_inputs, rel_rmse
from test_kda_kernels import kda_inputs

from stampgen.generated.linear_attn import validate_kda_attn_backend
from stampgen.kernels import kda
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import PHASES, KDAAttnBackend
from stampgen.kernels.runtime import ModelRunner, attn_backend_wrapper
from tests.machines import CPU, SM90
from tests.rules_search import VALUES, built, flag_slice, launched_runner

ARCHES = ("KimiLinearForCausalLM", "KimiK3ForCausalLM")  # plain KDA, safe-gate KDA
_NO_GDN_FI = dict(flashinfer_gdn_prefill=False)  # GDN's FlashInfer-prefill fact, off on these KDA machines
MACHINES = {
    "sm90": (SM90 | _NO_GDN_FI, None),
    "sm100": (SM90 | dict(sm=10, pool_dtype="bfloat16") | _NO_GDN_FI, "bfloat16"),
    "cpu": (CPU, None),
}


def kda_runner(arch: str, machine: str, **flags) -> ModelRunner | None:
    """A launched KDA runner of ``arch`` on ``machine`` with these mamba flags; None if launch refuses."""
    return launched_runner(arch, MACHINES[machine], **flags)


@cache
def outcome(arch: str, machine: str, flags: tuple[tuple[str, str | None], ...]):
    """(validated stamp as names, consumer or the KernelUnavailableError it raised); None if refused."""
    runner = kda_runner(arch, machine, **dict(flags))
    return None if runner is None else built(runner, validate_kda_attn_backend)


@cache
def allowed_configs(phase: str, value: str):
    """Every (arch, machine, flags, outcome) of the slice whose validated stamp has ``value`` in ``phase``."""
    found = []
    for arch, machine in itertools.product(ARCHES, MACHINES):
        for flags in flag_slice(value):
            result = outcome(arch, machine, flags)
            if result is not None and result[0][phase] == value:
                found.append((arch, machine, dict(flags), result))
    return tuple(found)


# Kernels the rules cannot select today, and why; strict xfail, so a rules change that makes them
# reachable shows here. (The reference verify kernel: `require LinearAttnBackends.verify in {triton,
# nv_cutedsl, flashinfer}` in validate KDAAttnBackend leaves out torch.)
UNREACHABLE = {
    ("verify", "torch"): "rules/linear_attn.rules: KDA verify must be triton, nv_cutedsl or flashinfer"
}


@pytest.mark.parametrize(
    ("phase", "backend"),
    [
        pytest.param(*key, marks=pytest.mark.xfail(strict=True, reason=UNREACHABLE[key]))
        if key in UNREACHABLE
        else key
        for key in sorted(kda.KERNELS)
    ],
)
def test_every_kda_kernel_is_reachable_from_the_rules(phase, backend):
    bound = [
        where
        for *where, (_, consumer) in allowed_configs(phase, backend)
        if isinstance(consumer, KDAAttnBackend) and consumer.kernel_backends[phase] == backend
    ]
    assert bound, f"no configuration makes the rules select the KDA {phase} kernel {backend!r}"


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("value", VALUES)
def test_every_backend_the_rules_allow_for_kda_has_a_kernel_or_fails_closed(phase, value):
    has_kernel = (phase, value) in kda.KERNELS
    for arch, machine, flags, (stamp, consumer) in allowed_configs(phase, value):
        where = f"{arch} on {machine} {flags}"
        if isinstance(consumer, KernelUnavailableError):
            missing = [p for p in PHASES if (p, stamp[p]) not in kda.KERNELS]
            assert missing, f"{where}: refused a stamp whose every phase has a kernel: {consumer}"
            for p in missing:
                assert f"{p}={stamp[p]}" in str(consumer), f"{where}: {consumer}"
        else:
            assert isinstance(consumer, KDAAttnBackend), f"{where}: built {consumer!r}"
            assert has_kernel, f"{where}: built a KDA backend for {phase}={value}, which has no kernel"
            assert dict(consumer.kernel_backends) == stamp, f"{where}: bound {consumer.kernel_backends}"


def test_a_value_without_a_kda_kernel_is_refused_at_construction():
    runner = kda_runner("KimiLinearForCausalLM", "sm100", linear_attn_prefill_backend="flashkda")
    with pytest.raises(
        KernelUnavailableError, match=r"prefill=flashkda has no KDA prefill kernel in kernels\.kda \(it has: "
    ):
        attn_backend_wrapper(runner)


def test_a_stamped_kda_runner_runs_triton_like_the_torch_reference():
    runner = kda_runner("KimiLinearForCausalLM", "cpu")
    backend = attn_backend_wrapper(runner)
    assert isinstance(backend, KDAAttnBackend)
    assert dict(backend.kernel_backends) == dict.fromkeys(PHASES, "triton")

    decode_in = kda_inputs("decode", N=3, H=2, HV=2, K=16, V=16, pad=1, seed=30)
    ref = clone_inputs(decode_in)
    o = backend.decode(**decode_in)
    o_ref = kda.decode(**ref, backend="torch")
    assert rel_rmse(o, o_ref) <= 1e-5 and rel_rmse(decode_in["state_pool"], ref["state_pool"]) <= 1e-5

    prefill_in = kda_inputs("prefill", N=2, H=2, HV=2, K=16, V=16, seqlens=[20, 3], seed=31)
    ref = clone_inputs(prefill_in)
    assert rel_rmse(backend.prefill(**prefill_in), kda.prefill(**ref, backend="torch")) <= 1e-5

    verify_in = kda_inputs("verify", N=2, D=2, H=2, HV=2, K=16, V=16, seed=32)
    ref = clone_inputs(verify_in)
    assert rel_rmse(backend.verify(**verify_in), kda.verify(**ref, backend="torch")) <= 1e-5
