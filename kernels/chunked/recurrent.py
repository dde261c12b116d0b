"""One token-serial Triton kernel for the decode and verify of KDA and lightning.

The recurrence, per token, on a [BV, K] tile of the K-last state M = Sᵀ (docs/kernels.md):

    M ← M ⊙ exp(g)                    KDA: g per key channel, broadcast over V rows
                                      lightning: one g per value head, the same for every token
    u = β (v − M k)  (delta rule)     lightning: u = v
    M ← M + u kᵀ
    o = M (scale · q)

Decode and verify are one program shape: one program per (sequence, v-head, V-tile), looping over the
sequence's ``D`` tokens with the state in registers (decode: ``D = 1``). Decode then writes the pool in
place; verify writes the state after each token to ``intermediate_states`` and never the pool. It is
shaped like a copy kernel (the state read once, written once per token) because decode does under one
FLOP per byte; ``common.recurrent_tile`` sizes the tile as ``kernels.gdn.fused_recurrent`` measured.

Padding (index −1): zero initial state, output rows zero, nothing stored (neither the pool nor, in
verify, ``intermediate_states``, whose padding rows stay untouched). No host sync: CUDA-graph safe.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.blocks import decay, pool_slot, program_tile
from stampgen.kernels.chunked.common import head_dim_contiguous, recurrent_tile, triton_interpreted

GATE_PER_KEY = "per_key"  # g: [T, HV, K] (KDA)
GATE_PER_HEAD = "per_head"  # g: [HV], constant over tokens (lightning)


@triton.jit
def _recurrent_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    state_pool_ptr,
    state_indices_ptr,
    inter_ptr,
    stride_q_tok,
    stride_q_head,
    stride_v_tok,
    stride_v_head,
    stride_pool_slot,
    stride_inter_seq,
    stride_inter_draft,
    scale,
    D,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    GATE_PER_KEY: tl.constexpr,
    DELTA_RULE: tl.constexpr,
    WRITE_POOL: tl.constexpr,
):
    i_n, i_hv, i_h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V
    state_offs = offs_v[:, None] * K + offs_k[None, :]
    state_mask = mask_v[:, None] & mask_k[None, :]

    state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
    state = tl.load(state_base + state_offs, mask=state_mask & real, other=0.0, eviction_policy="evict_first")
    if not GATE_PER_KEY:
        head_decay = decay(tl.load(g_ptr + i_hv))

    n64 = tl.cast(i_n, tl.int64)
    inter_base = inter_ptr + n64 * stride_inter_seq + i_hv * (V * K)
    for i_d in range(0, D):
        d64 = tl.cast(i_d, tl.int64)
        tok = n64 * D + d64
        q = tl.load(q_ptr + tok * stride_q_tok + i_h * stride_q_head + offs_k, mask=mask_k, other=0.0)
        k = tl.load(k_ptr + tok * stride_q_tok + i_h * stride_q_head + offs_k, mask=mask_k, other=0.0)
        v = tl.load(v_ptr + tok * stride_v_tok + i_hv * stride_v_head + offs_v, mask=mask_v, other=0.0)
        q, k, v = q.to(tl.float32), k.to(tl.float32), v.to(tl.float32)
        if GATE_PER_KEY:
            g = tl.load(g_ptr + (tok * HV + i_hv) * K + offs_k, mask=mask_k, other=0.0)
            state = state * decay(g)[None, :]
        else:
            state = state * head_decay
        if DELTA_RULE:
            beta = tl.load(beta_ptr + tok * HV + i_hv)
            v = beta * (v - tl.sum(state * k[None, :], axis=1))  # β(v − Sᵀk), one value per V row
        state = state + v[:, None] * k[None, :]  # S += k uᵀ
        o = tl.sum(state * (q * scale)[None, :], axis=1)  # Sᵀ(scale·q)
        o = tl.where(real, o, 0.0)
        tl.store(o_ptr + (tok * HV + i_hv) * V + offs_v, o.to(o_ptr.dtype.element_ty), mask=mask_v)
        if not WRITE_POOL:
            tl.store(
                inter_base + d64 * stride_inter_draft + state_offs,
                state,
                mask=state_mask & real,
                eviction_policy="evict_first",
            )
    if WRITE_POOL:
        tl.store(state_base + state_offs, state, mask=state_mask & real, eviction_policy="evict_first")


def run_recurrent(
    q, k, v, g, beta, *, state_pool, state_indices, intermediate_states=None, scale, gate, delta_rule, BV=None
):
    """Decode (``intermediate_states is None``: pool updated in place) or verify (D draft tokens per
    sequence, states after each to ``intermediate_states``, pool untouched). Returns o [T, HV, V]."""
    if gate not in (GATE_PER_KEY, GATE_PER_HEAD):
        raise ValueError(f"gate must be {GATE_PER_KEY!r} or {GATE_PER_HEAD!r}, got {gate!r}")
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = state_indices.shape[0]
    q, k, v = head_dim_contiguous(q, k, v)
    g = g.contiguous()
    beta = beta.contiguous() if delta_rule else g  # lightning has no beta: any pointer, never read
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if T == 0:
        return o
    verify = intermediate_states is not None
    D = intermediate_states.shape[1] if verify else 1
    inter = intermediate_states if verify else state_pool
    BV = BV or recurrent_tile(N * HV, V, K, next_power_of_2=triton.next_power_of_2)
    if verify and BV > 1 and not triton_interpreted():
        BV //= 2  # each program loops over D tokens: half decode's tile (as GDN verify measured)
    grid = (triton.cdiv(V, BV) * N * HV,)
    _recurrent_kernel[grid](
        q,
        k,
        v,
        g,
        beta,
        o,
        state_pool,
        state_indices,
        inter,
        q.stride(0),
        q.stride(1),
        v.stride(0),
        v.stride(1),
        state_pool.stride(0),
        inter.stride(0) if verify else 0,
        inter.stride(1) if verify else 0,
        scale,
        D,
        H=H,
        HV=HV,
        K=K,
        V=V,
        BK=triton.next_power_of_2(K),
        BV=BV,
        GATE_PER_KEY=gate == GATE_PER_KEY,
        DELTA_RULE=delta_rule,
        WRITE_POOL=not verify,
        num_warps=1,
    )
    return o
