"""The token-by-token torch driver behind the ``torch`` backend of every chunked op.

An op supplies its one-token step on a batch of K-last states,

    step(state [..., V, K], q [..., K], k [..., K], v [..., V], g, beta, scale) -> (state, o [..., V])

with its own gate shape (``g``: KDA ``[..., K]``, lightning ``[...]``), all fp32, and this module runs
the phases with the contract's pool semantics: prefill loops over sequences and tokens, decode and verify
are batched over sequences; padding (index −1) starts from zeros, writes nothing and outputs zeros.
Written for clarity, not speed. Inputs are validated by the op's public function before they get here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

Step = Callable[..., tuple[torch.Tensor, torch.Tensor]]


def expand_qk_heads(x: torch.Tensor, HV: int) -> torch.Tensor:
    """[T, H, K] -> [T, HV, K] fp32: v-head h reads qk-head h // (HV // H)."""
    return x.float().repeat_interleave(HV // x.shape[1], dim=1)


def initial_states(state_pool: torch.Tensor, state_indices: torch.Tensor) -> torch.Tensor:
    """[N, HV, V, K] fp32: the pool row of each sequence, zeros for padding (never gathered with −1)."""
    states = state_pool.new_zeros((state_indices.shape[0], *state_pool.shape[1:]))
    real = state_indices >= 0
    states[real] = state_pool[state_indices[real].long()]
    return states


def prefill(step: Step, q, k, v, g_of_tokens, beta, *, state_pool, state_indices, cu_seqlens, scale):
    """``g_of_tokens(begin, end)`` gives the gate of tokens [begin, end) per v-head; ``beta`` may be None."""
    T, HV, V = v.shape
    q, k, vf = expand_qk_heads(q, HV), expand_qk_heads(k, HV), v.float()
    o = torch.zeros(T, HV, V, dtype=torch.float32, device=v.device)
    offsets = cu_seqlens.tolist()
    for n, slot in enumerate(state_indices.tolist()):
        begin, end = offsets[n], offsets[n + 1]
        state = state_pool[slot].clone() if slot >= 0 else state_pool.new_zeros(state_pool.shape[1:])
        gates = g_of_tokens(begin, end)
        for t in range(begin, end):
            b = None if beta is None else beta[t]
            state, o_t = step(state, q[t], k[t], vf[t], gates[t - begin], b, scale)
            if slot >= 0:
                o[t] = o_t
        if slot >= 0:
            state_pool[slot] = state
    return o.to(v.dtype)


def decode(step: Step, q, k, v, g, beta, *, state_pool, state_indices, scale):
    """``g``: the gate of the N tokens, per v-head."""
    HV = v.shape[1]
    state = initial_states(state_pool, state_indices)
    state, o = step(state, expand_qk_heads(q, HV), expand_qk_heads(k, HV), v.float(), g, beta, scale)
    real = state_indices >= 0
    o[~real] = 0
    state_pool[state_indices[real].long()] = state[real]
    return o.to(v.dtype)


def verify(step: Step, q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale):
    """``g``: the gate of the N·D tokens, sequence-major, per v-head."""
    N, D = intermediate_states.shape[:2]
    HV = v.shape[1]
    q = expand_qk_heads(q, HV).unflatten(0, (N, D))
    k = expand_qk_heads(k, HV).unflatten(0, (N, D))
    vf = v.float().unflatten(0, (N, D))
    g = g.unflatten(0, (N, D))
    beta = None if beta is None else beta.unflatten(0, (N, D))
    real = state_indices >= 0
    state = initial_states(state_pool, state_indices)
    o = torch.zeros(N, D, *vf.shape[2:], dtype=torch.float32, device=v.device)
    for d in range(D):
        b = None if beta is None else beta[:, d]
        state, o[:, d] = step(state, q[:, d], k[:, d], vf[:, d], g[:, d], b, scale)
        intermediate_states[real, d] = state[real]
    o[~real] = 0
    return o.flatten(0, 1).to(v.dtype)
