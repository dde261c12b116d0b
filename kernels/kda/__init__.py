"""Kimi Delta Attention (KDA, Kimi-Linear) kernels: one public API (docs/design.md), several backends.

    o = kda.prefill(q, k, v, g, beta, state_pool=..., state_indices=..., cu_seqlens=..., backend="triton")
    o = kda.decode(q, k, v, g, beta, state_pool=..., state_indices=..., backend="triton")
    o = kda.verify(q, k, v, g, beta, state_pool=..., state_indices=..., intermediate_states=..., backend="triton")

GDN's contract (``kernels.gdn``) with one difference: the decay is per key channel,
``g: [T, HV, K]`` fp32 log-space (the decay step is ``S ← diag(exp(g_t)) S``). Plain and safe-gate
("lower-bound") KDA take the same ``g``: the gate activation happens before the op. Everything else is
GDN's: packed ``q, k: [T, H, K]`` (L2-normalised), ``v: [T, HV, V]``, ``beta: [T, HV]`` fp32 after
the sigmoid, ``scale`` default ``K ** -0.5``, the K-last fp32 pool ``[slots, HV, V, K]`` with
``state_indices`` (−1 = padding: zero state, nothing written, zero output), ``cu_seqlens`` for prefill,
``intermediate_states: [N, D, HV, V, K]`` for verify (the pool never written).

Backends: ``torch`` (``naive``, the reference), ``triton`` (``chunk`` for prefill, the shared
token-serial kernel of ``kernels.chunked.recurrent`` for decode and verify) and ``flashinfer``
(``flashinfer.recurrent_kda``, imported lazily; on SM90 it is token-serial in every phase).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from stampgen.kernels._validation import GATE_DIMS_KDA, KernelUnavailableError
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

# (phase, backend) -> "module:function" inside kernels.kda; each takes the public function's arguments
# minus ``backend``, with ``scale`` a float and the inputs validated.
# read-only: a caller cannot re-route a phase to another kernel behind the rules' back
KERNELS: Mapping[tuple[str, str], str] = MappingProxyType(
    {
        ("prefill", "torch"): "naive:prefill",
        ("decode", "torch"): "naive:decode",
        ("verify", "torch"): "naive:verify",
        ("prefill", "triton"): "chunk:prefill",
        ("decode", "triton"): "fused_recurrent:decode",
        ("verify", "triton"): "fused_recurrent:verify",
        ("prefill", "flashinfer"): "flashinfer:prefill",
        ("decode", "flashinfer"): "flashinfer:decode",
        ("verify", "flashinfer"): "flashinfer:verify",
    }
)
BACKENDS = ("torch", "triton", "flashinfer")

_LOADER = KernelLoader(
    "kda",
    __name__,
    KERNELS,
    {
        "triton": TRITON_HINT,
        "flashinfer": "install flashinfer-python (pip install 'flashinfer-python>=0.7.2') and run on an "
        "SM90+ CUDA GPU (its KDA fast paths are SM100+; on SM90 it runs token-serial)",
    },
    gate_dims=GATE_DIMS_KDA,
)


def available_backends() -> tuple[str, ...]:
    """The backends that can run in this environment (packages importable, a suitable device present)."""
    return _LOADER.available_backends()


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale=None, backend):
    """Run the packed sequences of ``cu_seqlens`` from their pool states; update the pool; return o."""
    return _LOADER.run(
        "prefill", q, k, v, g, beta, scale=scale, backend=backend,
        state_pool=state_pool, state_indices=state_indices, cu_seqlens=cu_seqlens,
    )  # fmt: skip


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale=None, backend):
    """One token per sequence: update each sequence's pool state in place; return o."""
    return _LOADER.run(
        "decode", q, k, v, g, beta, scale=scale, backend=backend,
        state_pool=state_pool, state_indices=state_indices,
    )  # fmt: skip


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale=None, backend):
    """D draft tokens per sequence: write the state after each into intermediate_states; return o.

    The pool is read, never written.
    """
    return _LOADER.run(
        "verify", q, k, v, g, beta, scale=scale, backend=backend,
        state_pool=state_pool, state_indices=state_indices, intermediate_states=intermediate_states,
    )  # fmt: skip
