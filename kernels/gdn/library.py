"""The GDN phases as PyTorch custom ops: ``torch.ops.stampgen.gdn_{prefill,decode,verify}``.

Importing this module registers them. Each op calls the public function of ``kernels.gdn`` with the same
arguments (so it validates and dispatches exactly as a direct call), and declares what it writes:

    torch.ops.stampgen.gdn_prefill(q, k, v, g, beta, state_pool, state_indices, cu_seqlens, scale=None, *, backend)
    torch.ops.stampgen.gdn_decode(q, k, v, g, beta, state_pool, state_indices, scale=None, *, backend)
    torch.ops.stampgen.gdn_verify(q, k, v, g, beta, state_pool, state_indices, intermediate_states,
                                  scale=None, *, backend)

prefill and decode mutate ``state_pool``; verify mutates ``intermediate_states`` only. Why ops and not
plain calls: ``torch.compile(fullgraph=True)`` cannot trace into Triton/CuTe launches or the host-side
argument checks, but it can keep an opaque op with a fake (meta) implementation in its graph — the fake
returns an empty ``[T, HV, V]`` output of v's dtype — and the mutation annotations let it functionalise
the in-place state updates. Tensor arguments are positional because custom ops do not take keyword-only
tensors; ``backend`` is a keyword-only ``str`` (``"torch"``, ``"triton"`` or ``"flashinfer"``).

CUDA graphs: the decode and verify backends never sync with the host, and the value checks of
``kernels._validation`` are skipped while a stream is being captured, so the ops can be captured (warm
them up first: the first call compiles the kernel).
"""

from __future__ import annotations

import torch

from stampgen.kernels import gdn

__all__ = ["gdn_decode", "gdn_prefill", "gdn_verify"]

_NAMESPACE = "stampgen"


def _output_like(v: torch.Tensor) -> torch.Tensor:
    """The output every phase returns: [T, HV, V] with v's dtype, on v's device."""
    return torch.empty_like(v, memory_format=torch.contiguous_format)


@torch.library.custom_op(f"{_NAMESPACE}::gdn_prefill", mutates_args=("state_pool",))
def gdn_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_pool: torch.Tensor,
    state_indices: torch.Tensor,
    cu_seqlens: torch.Tensor,
    scale: float | None = None,
    *,
    backend: str,
) -> torch.Tensor:
    """``kernels.gdn.prefill`` as an op; updates ``state_pool`` in place."""
    return gdn.prefill(
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        cu_seqlens=cu_seqlens,
        scale=scale,
        backend=backend,
    )


@gdn_prefill.register_fake
def _(q, k, v, g, beta, state_pool, state_indices, cu_seqlens, scale=None, *, backend):
    return _output_like(v)


@torch.library.custom_op(f"{_NAMESPACE}::gdn_decode", mutates_args=("state_pool",))
def gdn_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_pool: torch.Tensor,
    state_indices: torch.Tensor,
    scale: float | None = None,
    *,
    backend: str,
) -> torch.Tensor:
    """``kernels.gdn.decode`` as an op; updates ``state_pool`` in place."""
    return gdn.decode(
        q, k, v, g, beta, state_pool=state_pool, state_indices=state_indices, scale=scale, backend=backend
    )


@gdn_decode.register_fake
def _(q, k, v, g, beta, state_pool, state_indices, scale=None, *, backend):
    return _output_like(v)


@torch.library.custom_op(f"{_NAMESPACE}::gdn_verify", mutates_args=("intermediate_states",))
def gdn_verify(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state_pool: torch.Tensor,
    state_indices: torch.Tensor,
    intermediate_states: torch.Tensor,
    scale: float | None = None,
    *,
    backend: str,
) -> torch.Tensor:
    """``kernels.gdn.verify`` as an op; writes ``intermediate_states``, never the pool."""
    return gdn.verify(
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        intermediate_states=intermediate_states,
        scale=scale,
        backend=backend,
    )


@gdn_verify.register_fake
def _(q, k, v, g, beta, state_pool, state_indices, intermediate_states, scale=None, *, backend):
    return _output_like(v)
