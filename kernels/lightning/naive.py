"""The torch reference for lightning attention: the token-by-token recurrence, fp32, any device.

Math (``docs/kernels.md``, "Lightning attention"), per token t and head h, K-major state S ∈ R^{K×V}:

    S ← exp(g_h) · S + k_t v_tᵀ       # one constant log-decay per head (g_h = −s_h ≤ 0), no delta rule
    o_t = Sᵀ (scale · q_t)            # scale 1.0 by default; q and k are not normalised

The pool stores M = Sᵀ (``[HV, V, K]`` per slot). ``beta`` is ignored. The phases' pool semantics are
``kernels.chunked.reference``'s.
"""

from __future__ import annotations

import torch

from stampgen.kernels.chunked import reference


def lightning_step(state, q, k, v, g, beta, scale):
    """One token for a batch of K-last states: state [..., V, K]; q, k [..., K]; v [..., V]; g [...]."""
    state = state * torch.exp(g)[..., None, None] + v[..., :, None] * k[..., None, :]
    return state, torch.einsum("...vk,...k->...v", state, scale * q)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale):
    return reference.prefill(
        lightning_step,
        q,
        k,
        v,
        lambda begin, end: g.expand(end - begin, g.shape[0]),
        None,
        state_pool=state_pool,
        state_indices=state_indices,
        cu_seqlens=cu_seqlens,
        scale=scale,
    )


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale):
    g = g.expand(q.shape[0], g.shape[0])
    return reference.decode(
        lightning_step, q, k, v, g, None, state_pool=state_pool, state_indices=state_indices, scale=scale
    )


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale):
    return reference.verify(
        lightning_step,
        q,
        k,
        v,
        g.expand(q.shape[0], g.shape[0]),
        None,
        state_pool=state_pool,
        state_indices=state_indices,
        intermediate_states=intermediate_states,
        scale=scale,
    )
