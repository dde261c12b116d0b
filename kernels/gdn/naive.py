"""The torch reference for GDN: the token-by-token recurrence, fp32 state and accumulation, any device.

Math (``docs/kernels.md``, "Gated DeltaNet"), per token t and v-head h, with the K-major state S ∈ R^{K×V}:

    S ← exp(g_t) · S                  # decay
    u = β_t · (v_t − Sᵀ k_t)          # delta-rule correction
    S ← S + k_t uᵀ                    # rank-1 update
    o_t = Sᵀ (scale · q_t)

The pool stores M = Sᵀ, i.e. ``[HV, V, K]`` per slot, so in code Sᵀk is ``M @ k`` and k uᵀ is added as
``u kᵀ``. Written for clarity, not speed: prefill loops over sequences and tokens; decode and verify are
batched over sequences. Inputs are validated by ``kernels.gdn`` before they get here.
"""

from __future__ import annotations

import torch


def _expand_qk_heads(x: torch.Tensor, HV: int) -> torch.Tensor:
    """[T, H, K] -> [T, HV, K] fp32: v-head h reads qk-head h // (HV // H)."""
    return x.float().repeat_interleave(HV // x.shape[1], dim=1)


def _gdn_step(state, q, k, v, g, beta, scale):
    """One token for a batch of (sequence, head) states.

    state: [..., V, K] fp32 (pool layout, M = Sᵀ); q, k: [..., K]; v: [..., V]; g, beta: [...].
    Returns (new state, o [..., V]), all fp32.
    """
    state = state * torch.exp(g)[..., None, None]
    k_read = torch.einsum("...vk,...k->...v", state, k)  # Sᵀk
    u = beta[..., None] * (v - k_read)
    state = state + u[..., :, None] * k[..., None, :]  # S += k uᵀ
    o = torch.einsum("...vk,...k->...v", state, scale * q)  # Sᵀ(scale·q)
    return state, o


def _initial_states(state_pool: torch.Tensor, state_indices: torch.Tensor) -> torch.Tensor:
    """[N, HV, V, K] fp32: the pool row of each sequence, zeros for padding (-1)."""
    N = state_indices.shape[0]
    states = state_pool.new_zeros((N, *state_pool.shape[1:]))
    real = state_indices >= 0
    states[real] = state_pool[state_indices[real].long()]
    return states


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale):
    T, HV, V = v.shape
    out_dtype = v.dtype
    q, k = _expand_qk_heads(q, HV), _expand_qk_heads(k, HV)
    v = v.float()
    o = torch.zeros(T, HV, V, dtype=torch.float32, device=v.device)
    offsets = cu_seqlens.tolist()
    for n, slot in enumerate(state_indices.tolist()):
        begin, end = offsets[n], offsets[n + 1]
        state = state_pool[slot].clone() if slot >= 0 else state_pool.new_zeros(state_pool.shape[1:])
        for t in range(begin, end):
            state, o_t = _gdn_step(state, q[t], k[t], v[t], g[t], beta[t], scale)
            if slot >= 0:
                o[t] = o_t
        if slot >= 0:
            state_pool[slot] = state
    return o.to(out_dtype)


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale):
    HV = v.shape[1]
    out_dtype = v.dtype
    state = _initial_states(state_pool, state_indices)
    state, o = _gdn_step(state, _expand_qk_heads(q, HV), _expand_qk_heads(k, HV), v.float(), g, beta, scale)
    real = state_indices >= 0
    o[~real] = 0
    state_pool[state_indices[real].long()] = state[real]
    return o.to(out_dtype)


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale):
    N, D = intermediate_states.shape[:2]
    HV = v.shape[1]
    out_dtype = v.dtype
    # Sequence-major tokens: [N*D, ...] -> [N, D, ...].
    q = _expand_qk_heads(q, HV).unflatten(0, (N, D))
    k = _expand_qk_heads(k, HV).unflatten(0, (N, D))
    v = v.float().unflatten(0, (N, D))
    g, beta = g.unflatten(0, (N, D)), beta.unflatten(0, (N, D))
    real = state_indices >= 0

    state = _initial_states(state_pool, state_indices)
    o = torch.zeros(N, D, *v.shape[2:], dtype=torch.float32, device=v.device)
    for d in range(D):
        state, o[:, d] = _gdn_step(state, q[:, d], k[:, d], v[:, d], g[:, d], beta[:, d], scale)
        intermediate_states[real, d] = state[real]
    o[~real] = 0
    return o.flatten(0, 1).to(out_dtype)
