"""Our Triton chunked lightning prefill: one fused pass per (sequence, head, V-tile), no scratch buffers.

Each program walks its sequence in chunks of ``CHUNK_SIZE`` = 64 tokens (``kernels.chunked``) with its
[K, BV] slice of the state in registers. The decay is one constant ``g`` per head, so within a chunk the
cumulative log-decay of token i is (i + 1) g and every weight is a difference of integer multiples of g,
formed exactly and always ≤ 0. Per chunk of L real tokens, S the state before it (K-major; the pool
holds Sᵀ):

    O = scale [(Q ⊙ exp((i + 1) g)) S + (Q Kᵀ ⊙ exp((i − j) g) ⊙ [i ≥ j]) V]
    S ← exp(L g) S + (K ⊙ exp((L − 1 − j) g))ᵀ V

Rows past the end of the sequence are read as zeros and their weights are masked to exp(−inf) = 0
before they could overflow (for j > L − 1 the exponent (L − 1 − j) g would be positive). No delta rule,
no q/k normalisation, scale 1.0 by default. Padding (index −1): zero initial state, zero output, nothing
stored. Products in fp32 (``input_precision="ieee"``); GPU speed not measured yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.blocks import decay, pool_slot, program_tile, sequence_bounds
from stampgen.kernels.chunked.common import CHUNK_SIZE, chunk_tiles, head_dim_contiguous


@triton.jit
def _lightning_chunk_prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    o_ptr,
    state_pool_ptr,
    state_indices_ptr,
    cu_seqlens_ptr,
    stride_q_tok,
    stride_q_head,
    stride_v_tok,
    stride_v_head,
    stride_pool_slot,
    scale,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BC: tl.constexpr,
):
    i_n, i_hv, i_h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, BC)
    steps = (rows[:, None] - rows[None, :]).to(tl.float32)  # i − j

    state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
    s_offs = offs_v[None, :] * K + offs_k[:, None]  # S [BK, BV], K-major view of the pool tile
    s_mask = mask_k[:, None] & mask_v[None, :]
    S = tl.load(state_base + s_offs, mask=s_mask & real, other=0.0)

    g = tl.load(g_ptr + i_hv)
    intra = decay(tl.where(steps >= 0, steps * g, float("-inf"))) * scale  # [i, j]: exp((i − j) g), i ≥ j
    q_decay = decay((rows + 1).to(tl.float32) * g) * scale

    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    for i_c in range(0, tl.cdiv(eos - bos, BC)):
        first = bos + tl.cast(i_c, tl.int64) * BC
        toks = first + rows
        in_seq = toks < eos
        length = tl.minimum(eos - first, BC).to(tl.float32)
        qk_offs = toks[:, None] * stride_q_tok + i_h * stride_q_head + offs_k[None, :]
        qk_mask = in_seq[:, None] & mask_k[None, :]
        q = tl.load(q_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        v_offs = toks[:, None] * stride_v_tok + i_hv * stride_v_head + offs_v[None, :]
        v = tl.load(v_ptr + v_offs, mask=in_seq[:, None] & mask_v[None, :], other=0.0).to(tl.float32)

        P = tl.dot(q, tl.trans(k), input_precision="ieee") * intra
        o = tl.dot(q * q_decay[:, None], S, input_precision="ieee") + tl.dot(P, v, input_precision="ieee")
        o = tl.where(real, o, 0.0)
        o_offs = (toks[:, None] * HV + i_hv) * V + offs_v[None, :]
        tl.store(o_ptr + o_offs, o.to(o_ptr.dtype.element_ty), mask=in_seq[:, None] & mask_v[None, :])

        k_decay = decay(tl.where(in_seq, (length - 1 - rows.to(tl.float32)) * g, float("-inf")))
        S = S * decay(length * g) + tl.dot(tl.trans(k * k_decay[:, None]), v, input_precision="ieee")

    tl.store(state_base + s_offs, S, mask=s_mask & real)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale, BV=None):
    """Lightning chunked prefill over the packed sequences of ``cu_seqlens``; pool updated in place.
    ``beta`` is ignored."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = state_indices.shape[0]
    q, k, v = head_dim_contiguous(q, k, v)
    g, cu_seqlens = g.contiguous(), cu_seqlens.contiguous()
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if T == 0 or N == 0:
        return o
    BK, auto_BV = chunk_tiles(K, V, next_power_of_2=triton.next_power_of_2)
    BV = BV or auto_BV
    grid = (triton.cdiv(V, BV) * N * HV,)
    _lightning_chunk_prefill_kernel[grid](
        q,
        k,
        v,
        g,
        o,
        state_pool,
        state_indices,
        cu_seqlens,
        q.stride(0),
        q.stride(1),
        v.stride(0),
        v.stride(1),
        state_pool.stride(0),
        scale,
        H=H,
        HV=HV,
        K=K,
        V=V,
        BK=BK,
        BV=BV,
        BC=CHUNK_SIZE,
        num_warps=8,  # [64, 128] q and k tiles and the [64, 64] decay matrix stay in registers
    )
    return o
