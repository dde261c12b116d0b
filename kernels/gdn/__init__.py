"""Gated DeltaNet (GDN, Qwen3-Next) kernels: one public API (docs/design.md), several backends.

    o = gdn.prefill(q, k, v, g, beta, state_pool=..., state_indices=..., cu_seqlens=..., backend="triton")
    o = gdn.decode(q, k, v, g, beta, state_pool=..., state_indices=..., backend="triton")
    o = gdn.verify(q, k, v, g, beta, state_pool=..., state_indices=..., intermediate_states=..., backend="triton")

Conventions (the contract; the math is in ``docs/kernels.md``):

* packed tokens ``q, k: [T, H, K]``, ``v: [T, HV, V]`` in bf16, fp16 or fp32 (all three alike); HV is a
  multiple of H and v-head ``h`` uses qk-head ``h // (HV // H)``; q and k are already L2-normalised;
* ``g: [T, HV]`` fp32 log-space decay (α = exp(g)); ``beta: [T, HV]`` fp32, post-sigmoid;
* ``scale`` defaults to ``K ** -0.5``;
* ``state_pool: [slots, HV, V, K]`` fp32, K last (the transpose of the K-major state S of the math),
  updated in place by prefill and decode; ``state_indices: int32 [N]``, one slot per sequence, ``-1`` =
  padding: zero initial state, nothing written, output rows zero;
* prefill: ``cu_seqlens: [N + 1]`` int32/int64 sequence offsets into the packed tokens (zero-length
  sequences allowed; they leave their slot unchanged);
* decode: one token per sequence (``T == N``);
* verify: ``D`` draft tokens per sequence laid out ``[N*D, ...]`` (sequence-major); never writes the pool;
  writes the state after each draft token into ``intermediate_states: [N, D, HV, V, K]`` fp32. Rows of
  padding sequences in ``intermediate_states`` are left untouched (not zeroed).

The output ``o: [T, HV, V]`` has v's dtype. Arguments are validated once here
(``kernels._validation``; bad input raises ``ValueError`` naming the argument), then the call goes to
the backend listed in ``KERNELS``, imported on first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from stampgen.kernels._validation import GATE_DIMS_GDN, KernelUnavailableError
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

BACKENDS = ("torch", "triton", "flashinfer")
PHASES = ("prefill", "decode", "verify")

# (phase, backend) -> "module:function" inside kernels.gdn. Each function takes the public
# function's arguments minus ``backend``, with ``scale`` already a float and the inputs validated.
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

_LOADER = KernelLoader(
    "gdn",
    __name__,
    KERNELS,
    {
        "triton": TRITON_HINT,
        "flashinfer": "install flashinfer-python (pip install 'flashinfer-python>=0.7.2') and run on an "
        "SM90+ CUDA GPU (H100/H200 or newer)",
    },
    gate_dims=GATE_DIMS_GDN,
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
