"""The rules against the GDN kernel registry (docs/design.md, "The kernel op API"): nothing the rules allow is silently substituted.

* every kernel in `kernels.gdn.KERNELS` is reachable: some configuration makes the stamp and the GDN
  validation select it, and `GDNAttnBackend` then binds it;
* every value the rules allow for GDN in a phase either has a kernel (and is bound as is) or makes
  `GDNAttnBackend` fail closed with `KernelUnavailableError` at construction;
* one end-to-end call: a stamped runner's `GDNAttnBackend.decode` runs the Triton kernel (under the Triton
  CPU interpreter, set by the root conftest) and matches the torch reference.

The search (tests/rules_search.py) runs the whole runtime path over a slice of the config domain, on a few
machines.
"""

from __future__ import annotations

from functools import cache

import pytest
import torch

from stampgen.generated.linear_attn import validate_gdn_attn_backend
from stampgen.kernels import gdn
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import PHASES, GDNAttnBackend
from stampgen.kernels.runtime import ModelRunner, attn_backend_wrapper
from tests.machines import CPU, SM90
from tests.rules_search import PHASE_FLAG, VALUES, built, flag_slice, launched_runner

GDN_ARCH = "Qwen3NextForCausalLM"
_FI = dict(flashinfer_gdn_prefill=True)  # flashinfer.gdn_prefill importable on every machine of the search
# name -> (runner facts, --mamba-ssm-dtype): Hopper, Blackwell (bf16 state, as FlashInfer needs), XPU, CPU
MACHINES = {
    "sm90": (SM90, None),
    "sm100": (SM90 | dict(sm=10, pool_dtype="bfloat16"), "bfloat16"),
    "xpu": (CPU | dict(platform="xpu") | _FI, None),
    "cpu": (CPU | _FI, None),
}


def gdn_runner(machine: str, **flags) -> ModelRunner | None:
    """A launched GDN runner on `machine` with these mamba flags; None when launch refuses them."""
    return launched_runner(GDN_ARCH, MACHINES[machine], **flags)


@cache
def outcome(machine: str, flags: tuple[tuple[str, str | None], ...]):
    """(validated stamp as names, consumer or the KernelUnavailableError it raised) of a fresh GDN runner
    on `machine` with these flags; None if launch or validation refuses."""
    runner = gdn_runner(machine, **dict(flags))
    return None if runner is None else built(runner, validate_gdn_attn_backend)


@cache
def allowed_configs(phase: str, value: str) -> tuple[tuple[str, dict, tuple], ...]:
    """Every (machine, flags, outcome) in the search slice whose validated stamp has `value` in `phase`."""
    found = []
    for machine in MACHINES:
        for flags in flag_slice(value):
            result = outcome(machine, flags)
            if result is not None and result[0][phase] == value:
                found.append((machine, dict(flags), result))
    return tuple(found)


@pytest.mark.parametrize(("phase", "backend"), sorted(gdn.KERNELS))
def test_every_gdn_kernel_is_reachable_from_the_rules(phase, backend):
    bound = [
        (machine, flags)
        for machine, flags, (_, consumer) in allowed_configs(phase, backend)
        if isinstance(consumer, GDNAttnBackend) and consumer.kernel_backends[phase] == backend
    ]
    assert bound, f"no configuration makes the rules select the GDN {phase} kernel {backend!r}"


@pytest.mark.parametrize("phase", PHASES)
@pytest.mark.parametrize("value", VALUES)
def test_every_backend_the_rules_allow_for_gdn_has_a_kernel_or_fails_closed(phase, value):
    configs = allowed_configs(phase, value)
    has_kernel = (phase, value) in gdn.KERNELS
    for machine, flags, (stamp, consumer) in configs:
        where = f"{machine} {flags}"
        if isinstance(consumer, KernelUnavailableError):
            missing = [p for p in PHASES if (p, stamp[p]) not in gdn.KERNELS]
            assert missing, f"{where}: refused a stamp whose every phase has a kernel: {consumer}"
            for p in missing:
                assert f"{p}={stamp[p]}" in str(consumer), f"{where}: {consumer}"
        else:
            assert has_kernel, f"{where}: built a GDN backend for {phase}={value}, which has no kernel"
            assert dict(consumer.kernel_backends) == stamp, f"{where}: bound {consumer.kernel_backends}"
    if not configs:
        # the rules never let it run: naming it for the phase is refused (at launch or by validation),
        # or replaced by an explicit fallback that the rules state and the generated code logs
        for machine in MACHINES:
            result = outcome(machine, ((PHASE_FLAG[phase], value),))
            assert result is None or result[0][phase] != value, machine


def test_a_stamped_gdn_runner_decodes_with_triton_like_the_torch_reference():
    runner = gdn_runner("cpu", linear_attn_decode_backend="triton")
    backend = attn_backend_wrapper(runner)
    assert isinstance(backend, GDNAttnBackend) and backend.kernel_backends["decode"] == "triton"

    gen = torch.Generator().manual_seed(0)
    N, H, HV, K, V = 3, 2, 4, 16, 16
    q = torch.nn.functional.normalize(torch.randn(N, H, K, generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(N, H, K, generator=gen), dim=-1)
    v = torch.randn(N, HV, V, generator=gen)
    g = torch.nn.functional.logsigmoid(torch.randn(N, HV, generator=gen))
    beta = torch.sigmoid(torch.randn(N, HV, generator=gen))
    pool = torch.randn(2 * N + 1, HV, V, K, generator=gen)
    indices = torch.tensor([4, -1, 1], dtype=torch.int32)

    pool_triton, pool_torch = pool.clone(), pool.clone()
    o_triton = backend.decode(q, k, v, g, beta, state_pool=pool_triton, state_indices=indices)
    o_torch = gdn.decode(q, k, v, g, beta, state_pool=pool_torch, state_indices=indices, backend="torch")
    torch.testing.assert_close(o_triton, o_torch, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(pool_triton, pool_torch, rtol=1e-5, atol=1e-5)
    assert not torch.equal(pool_triton[4], pool[4])  # the sequence's slot was updated
