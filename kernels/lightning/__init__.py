"""Lightning attention (MiniMax-Text-01 / M1) kernels: one public API (docs/design.md), two backends.

    o = lightning.prefill(q, k, v, g, state_pool=..., state_indices=..., cu_seqlens=..., backend="triton")
    o = lightning.decode(q, k, v, g, state_pool=..., state_indices=..., backend="triton")
    o = lightning.verify(q, k, v, g, state_pool=..., state_indices=..., intermediate_states=..., backend="triton")

Plain decayed linear attention: ``S ← exp(g_h) S + k_t v_tᵀ``, ``o_t = Sᵀ (scale · q_t)`` — no delta rule,
no q/k normalisation. GDN's contract (``kernels.gdn``) with these differences:

* ``g: [HV]`` fp32, one constant log-decay per head (``g_h = −s_h``, the MiniMax slope; not fla's
  ``chunk_lightning_attn`` helper, which builds another decay);
* ``beta`` is ignored: pass None (a ``[T, HV]`` fp32 tensor is validated, then ignored), so the call
  has the shape of the other ops and the consumers dispatch uniformly;
* ``scale`` defaults to 1.0.

Pool, padding (−1), ``cu_seqlens``, verify's ``intermediate_states`` and the output are GDN's. Backends:
``torch`` (``naive``) and ``triton`` (``chunk`` for prefill, ``kernels.chunked.recurrent`` for decode and
verify). FlashInfer has no lightning attention, so there is no ``flashinfer`` backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from stampgen.kernels._validation import GATE_DIMS_LIGHTNING, KernelUnavailableError
from stampgen.kernels.chunked.common import TRITON_HINT, KernelLoader

__all__ = [
    "BACKENDS",
    "KERNELS",
    "PHASES",
    "KernelUnavailableError",
    "available_backends",
    "decode",
    "prefill",
    "verify",
]

PHASES = ("prefill", "decode", "verify")
DEFAULT_SCALE = 1.0

# read-only: a caller cannot re-route a phase to another kernel behind the rules' back
KERNELS: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        ("prefill", "torch"): "naive:prefill",
        ("decode", "torch"): "naive:decode",
        ("verify", "torch"): "naive:verify",
        ("prefill", "triton"): "chunk:prefill",
        ("decode", "triton"): "fused_recurrent:decode",
        ("verify", "triton"): "fused_recurrent:verify",
    }
)
BACKENDS = ("torch", "triton")

_LOADER = KernelLoader(
    "lightning",
    __name__,
    KERNELS,
    {"triton": TRITON_HINT},
    gate_dims=GATE_DIMS_LIGHTNING,
    beta_required=False,
    default_scale=lambda K: DEFAULT_SCALE,
)


def available_backends() -> tuple[str, ...]:
    """The backends that can run in this environment (packages importable, a suitable device present)."""
    return _LOADER.available_backends()


def prefill(q, k, v, g, beta=None, *, state_pool, state_indices, cu_seqlens, scale=None, backend):
    """Run the packed sequences of ``cu_seqlens`` from their pool states; update the pool; return o."""
    return _LOADER.run(
        "prefill", q, k, v, g, beta, scale=scale, backend=backend,
        state_pool=state_pool, state_indices=state_indices, cu_seqlens=cu_seqlens,
    )  # fmt: skip


def decode(q, k, v, g, beta=None, *, state_pool, state_indices, scale=None, backend):
    """One token per sequence: update each sequence's pool state in place; return o."""
    return _LOADER.run(
        "decode", q, k, v, g, beta, scale=scale, backend=backend,
        state_pool=state_pool, state_indices=state_indices,
    )  # fmt: skip


def verify(q, k, v, g, beta=None, *, state_pool, state_indices, intermediate_states, scale=None, backend):
    """D draft tokens per sequence: write the state after each into intermediate_states; return o.

    The pool is read, never written.
    """
    return _LOADER.run(
        "verify", q, k, v, g, beta, scale=scale, backend=backend,
        state_pool=state_pool, state_indices=state_indices, intermediate_states=intermediate_states,
    )  # fmt: skip
