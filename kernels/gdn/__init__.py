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

import importlib
import importlib.util
import os
from collections.abc import Mapping
from types import MappingProxyType

import torch

from stampgen.kernels._validation import GATE_DIMS_GDN, KernelUnavailableError, validate_linear_attn_args

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

_INSTALL_HINTS = {
    "triton": "install triton (pip install 'triton>=3.3') and run on a CUDA GPU, "
    "or set TRITON_INTERPRET=1 for the CPU interpreter",
    "flashinfer": "install flashinfer-python (pip install 'flashinfer-python>=0.7.2') and run on an "
    "SM90+ CUDA GPU (H100/H200 or newer)",
}


def available_backends() -> tuple[str, ...]:
    """The backends that can run in this environment (packages importable, a suitable device present)."""
    found = ["torch"]
    has_cuda = torch.cuda.is_available()
    if importlib.util.find_spec("triton") is not None and (has_cuda or _triton_interpreted()):
        found.append("triton")
    if (
        importlib.util.find_spec("flashinfer") is not None
        and has_cuda
        and torch.cuda.get_device_capability() >= (9, 0)
    ):
        found.append("flashinfer")
    return tuple(found)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale=None, backend):
    """Run the packed sequences of ``cu_seqlens`` from their pool states; update the pool; return o."""
    validate_linear_attn_args(
        "prefill",
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        cu_seqlens=cu_seqlens,
        gate_dims=GATE_DIMS_GDN,
    )
    kernel = _kernel("prefill", backend, q.device)
    return kernel(
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        cu_seqlens=cu_seqlens,
        scale=_resolve_scale(scale, q),
    )


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale=None, backend):
    """One token per sequence: update each sequence's pool state in place; return o."""
    validate_linear_attn_args(
        "decode",
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        gate_dims=GATE_DIMS_GDN,
    )
    kernel = _kernel("decode", backend, q.device)
    return kernel(
        q, k, v, g, beta, state_pool=state_pool, state_indices=state_indices, scale=_resolve_scale(scale, q)
    )


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale=None, backend):
    """D draft tokens per sequence: write the state after each into intermediate_states; return o.

    The pool is read, never written.
    """
    validate_linear_attn_args(
        "verify",
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        intermediate_states=intermediate_states,
        gate_dims=GATE_DIMS_GDN,
    )
    kernel = _kernel("verify", backend, q.device)
    return kernel(
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        intermediate_states=intermediate_states,
        scale=_resolve_scale(scale, q),
    )


def _resolve_scale(scale, q: torch.Tensor) -> float:
    return q.shape[-1] ** -0.5 if scale is None else float(scale)


def _triton_interpreted() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _kernel(phase: str, backend: str, device: torch.device):
    """The backend function for (phase, backend), imported on first use."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "triton" and device.type != "cuda" and not _triton_interpreted():
        raise KernelUnavailableError(
            f"backend 'triton' needs CUDA tensors (got {device.type}); {_INSTALL_HINTS['triton']}"
        )
    if backend == "flashinfer" and device.type != "cuda":
        raise KernelUnavailableError(
            f"backend 'flashinfer' needs CUDA tensors (got {device.type}); {_INSTALL_HINTS['flashinfer']}"
        )
    module_name, function_name = KERNELS[(phase, backend)].split(":")
    try:
        module = importlib.import_module(f"{__name__}.{module_name}")
    except ModuleNotFoundError as err:
        hint = _INSTALL_HINTS.get(backend, "")
        raise KernelUnavailableError(
            f"gdn {phase} backend {backend!r} cannot be imported here (missing module {err.name!r}); {hint}"
        ) from err
    return getattr(module, function_name)
