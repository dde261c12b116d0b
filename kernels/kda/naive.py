"""The torch reference for KDA: the token-by-token recurrence, fp32 state and accumulation, any device.

Math (``docs/kernels.md``, "Kimi Delta Attention"), per token t and v-head h, K-major state S ∈ R^{K×V}:

    S ← diag(exp(g_t)) · S            # decay, one factor per key channel (g_t ∈ R^K)
    u = β_t · (v_t − Sᵀ k_t)          # delta-rule correction
    S ← S + k_t uᵀ                    # rank-1 update
    o_t = Sᵀ (scale · q_t)

The pool stores M = Sᵀ (``[HV, V, K]`` per slot), so the decay scales M's columns. The phases' pool
semantics are ``kernels.chunked.reference``'s.
"""

from __future__ import annotations

import torch

from stampgen.kernels.chunked import reference


def kda_step(state, q, k, v, g, beta, scale):
    """One token for a batch of K-last states: state [..., V, K]; q, k, g [..., K]; v [..., V]; beta [...]."""
    state = state * torch.exp(g)[..., None, :]
    k_read = torch.einsum("...vk,...k->...v", state, k)  # Sᵀk
    u = beta[..., None] * (v - k_read)
    state = state + u[..., :, None] * k[..., None, :]  # S += k uᵀ
    return state, torch.einsum("...vk,...k->...v", state, scale * q)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale):
    return reference.prefill(
        kda_step,
        q,
        k,
        v,
        lambda begin, end: g[begin:end],
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        cu_seqlens=cu_seqlens,
        scale=scale,
    )


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale):
    return reference.decode(
        kda_step, q, k, v, g, beta, state_pool=state_pool, state_indices=state_indices, scale=scale
    )


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale):
    return reference.verify(
        kda_step,
        q,
        k,
        v,
        g,
        beta,
        state_pool=state_pool,
        state_indices=state_indices,
        intermediate_states=intermediate_states,
        scale=scale,
    )
