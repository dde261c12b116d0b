"""Our Triton chunked lightning prefill: a state pass, sequential over chunks, then an output pass
parallel over chunks, with tensor-core products (fla's ``chunk_simple_gla`` structure).

The decay is one constant ``g`` per head, so within a chunk of ``CHUNK_SIZE`` = 64 tokens the
cumulative log-decay of token i is (i + 1) g and every weight is a difference of integer multiples of
g, formed exactly and always ≤ 0. Per chunk of L real tokens, S the state before it (K-major; the pool
holds Sᵀ):

    O = scale [diag(exp((i + 1) g)) (Q S) + (Q Kᵀ ⊙ exp((i − j) g) ⊙ [i ≥ j]) V]
    S ← exp(L g) S + (K ⊙ exp((L − 1 − j) g))ᵀ V

1. ``_chunk_offsets_kernel`` (``kernels.chunked.chunk_map``): each sequence's first global chunk index.
2. ``_lightning_states_kernel``, one program per (sequence, head, K-tile, V-tile) — without a delta rule
   the K rows of the state evolve independently, so K is tiled too: walks the sequence's chunks with its
   fp32 [BK, BV] state tile in registers, writes the state before each chunk to the scratch ``h``
   ([chunks, HV, K, V], bf16 for bf16 inputs, else fp32) and the final state to the pool.
3. ``_lightning_output_kernel``, one program per (global chunk, head, V-tile): the two products above.

Rows past the end of a sequence are read as zeros and their weights are masked to exp(−inf) = 0
before they could overflow (for j > L − 1 the exponent (L − 1 − j) g would be positive). Padding
(index −1): zero state, zero output, nothing stored. Products: for bf16 inputs the operands are bf16
(Q, K, V as given; the decayed K and the weighted Q Kᵀ rounded to bf16; S as stored in h), fp32
accumulation, the carried state fp32; otherwise fp32 operands (tf32 on a GPU, exact in the interpreter).
No host sync anywhere: grids and ``h`` are sized by an upper bound on the chunk count.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.blocks import decay, pool_slot, sequence_bounds
from stampgen.kernels.chunked.chunk_map import chunk_offsets, chunk_sequence, max_chunks
from stampgen.kernels.chunked.common import CHUNK_SIZE, head_dim_contiguous, triton_interpreted


@triton.jit
def _lightning_states_kernel(
    k_ptr,
    v_ptr,
    g_ptr,
    h_ptr,
    state_pool_ptr,
    state_indices_ptr,
    cu_seqlens_ptr,
    offsets_ptr,
    stride_k_tok,
    stride_k_head,
    stride_v_tok,
    stride_v_head,
    stride_pool_slot,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BC: tl.constexpr,
    LOW: tl.constexpr,
):
    pid = tl.program_id(0)
    NV: tl.constexpr = (V + BV - 1) // BV
    NK: tl.constexpr = (K + BK - 1) // BK
    i_v = pid % NV
    i_k = (pid // NV) % NK
    i_nh = pid // (NV * NK)
    i_hv = i_nh % HV
    i_n = i_nh // HV
    i_h = i_hv // (HV // H)
    offs_k = i_k * BK + tl.arange(0, BK)
    offs_v = i_v * BV + tl.arange(0, BV)
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, BC)

    state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
    s_offs = offs_v[None, :] * K + offs_k[:, None]  # S [BK, BV], K-major view of the pool tile
    s_mask = mask_k[:, None] & mask_v[None, :]
    S = tl.load(state_base + s_offs, mask=s_mask & real, other=0.0)
    h_offs = offs_k[:, None] * V + offs_v[None, :]

    g = tl.load(g_ptr + i_hv)
    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    c0 = tl.load(offsets_ptr + i_n).to(tl.int64)
    for i_c in range(0, tl.cdiv(eos - bos, BC)):
        h_base = h_ptr + ((c0 + i_c) * HV + i_hv) * (K * V)
        tl.store(h_base + h_offs, S.to(h_ptr.dtype.element_ty), mask=s_mask)
        first = bos + tl.cast(i_c, tl.int64) * BC
        toks = first + rows
        in_seq = toks < eos
        length = tl.minimum(eos - first, BC).to(tl.float32)
        k = tl.load(
            k_ptr + toks[:, None] * stride_k_tok + i_h * stride_k_head + offs_k[None, :],
            mask=in_seq[:, None] & mask_k[None, :],
            other=0.0,
        )
        v = tl.load(
            v_ptr + toks[:, None] * stride_v_tok + i_hv * stride_v_head + offs_v[None, :],
            mask=in_seq[:, None] & mask_v[None, :],
            other=0.0,
        )
        k_decay = decay(tl.where(in_seq, (length - 1 - rows.to(tl.float32)) * g, float("-inf")))
        kd = k.to(tl.float32) * k_decay[:, None]
        S = S * decay(length * g)
        if LOW:
            S = tl.dot(tl.trans(kd.to(k.dtype)), v, acc=S)
        else:
            S = tl.dot(tl.trans(kd), v.to(tl.float32), acc=S)

    tl.store(state_base + s_offs, S, mask=s_mask & real)


@triton.jit
def _lightning_output_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    h_ptr,
    o_ptr,
    state_indices_ptr,
    cu_seqlens_ptr,
    offsets_ptr,
    N,
    stride_q_tok,
    stride_q_head,
    stride_v_tok,
    stride_v_head,
    scale,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BC: tl.constexpr,
    LOW: tl.constexpr,
):
    pid = tl.program_id(0)
    NV: tl.constexpr = (V + BV - 1) // BV
    i_v = pid % NV
    i_hv = (pid // NV) % HV
    c = pid // (NV * HV)
    i_h = i_hv // (HV // H)
    i_n, i_c, is_chunk = chunk_sequence(offsets_ptr, N, c)
    offs_k = tl.arange(0, BK)
    offs_v = i_v * BV + tl.arange(0, BV)
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, BC)
    steps = (rows[:, None] - rows[None, :]).to(tl.float32)  # i − j

    real = tl.load(state_indices_ptr + i_n) >= 0
    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    first = bos + tl.cast(i_c, tl.int64) * BC
    toks = first + rows
    in_seq = (toks < eos) & is_chunk

    qk_offs = toks[:, None] * stride_q_tok + i_h * stride_q_head + offs_k[None, :]
    qk_mask = in_seq[:, None] & mask_k[None, :]
    q = tl.load(q_ptr + qk_offs, mask=qk_mask, other=0.0)
    k = tl.load(k_ptr + qk_offs, mask=qk_mask, other=0.0)
    v_offs = toks[:, None] * stride_v_tok + i_hv * stride_v_head + offs_v[None, :]
    v = tl.load(v_ptr + v_offs, mask=in_seq[:, None] & mask_v[None, :], other=0.0)
    h_base = h_ptr + (tl.cast(c, tl.int64) * HV + i_hv) * (K * V)
    h = tl.load(
        h_base + offs_k[:, None] * V + offs_v[None, :],
        mask=mask_k[:, None] & mask_v[None, :] & is_chunk,
        other=0.0,
    )

    g = tl.load(g_ptr + i_hv)
    intra = decay(tl.where(steps >= 0, steps * g, float("-inf"))) * scale  # [i, j]: exp((i − j) g), i ≥ j
    q_decay = decay((rows + 1).to(tl.float32) * g) * scale
    if LOW:
        P = tl.dot(q, tl.trans(k)) * intra
        o = tl.dot(q, h) * q_decay[:, None] + tl.dot(P.to(v.dtype), v)
    else:
        q32 = q.to(tl.float32)
        P = tl.dot(q32, tl.trans(k.to(tl.float32))) * intra
        o = tl.dot(q32, h.to(tl.float32)) * q_decay[:, None] + tl.dot(P, v.to(tl.float32))
    o = tl.where(real, o, 0.0)
    o_offs = (toks[:, None] * HV + i_hv) * V + offs_v[None, :]
    tl.store(o_ptr + o_offs, o.to(o_ptr.dtype.element_ty), mask=in_seq[:, None] & mask_v[None, :])


def _tiles(K: int, V: int):
    """(BK of the output pass = all of K, BK and BV of the state pass, BV of the output pass)."""
    BK = max(16, triton.next_power_of_2(K))
    BV_full = max(16, triton.next_power_of_2(V))
    if triton_interpreted():
        return BK, min(BK, 32), min(BV_full, 16), min(BV_full, 16)
    return BK, min(BK, 64), min(BV_full, 64), min(BV_full, 64)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale):
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
    BC = CHUNK_SIZE
    low = q.dtype == torch.bfloat16 and k.dtype == torch.bfloat16 and v.dtype == torch.bfloat16
    NC = max_chunks(T, N, BC)
    offsets = chunk_offsets(cu_seqlens, BC, torch.empty(N + 1, dtype=torch.int32, device=q.device))
    h = torch.empty((NC, HV, K, V), dtype=torch.bfloat16 if low else torch.float32, device=q.device)
    BK, BK_state, BV_state, BV = _tiles(K, V)
    grid = (N * HV * triton.cdiv(K, BK_state) * triton.cdiv(V, BV_state),)
    _lightning_states_kernel[grid](
        k, v, g, h, state_pool, state_indices, cu_seqlens, offsets,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1), state_pool.stride(0),
        H=H, HV=HV, K=K, V=V, BK=BK_state, BV=BV_state, BC=BC, LOW=low,
        num_warps=8, num_stages=2,  # 4 warps spill (sm_90 build: 255 registers)
    )  # fmt: skip
    grid = (NC * HV * triton.cdiv(V, BV),)
    _lightning_output_kernel[grid](
        q, k, v, g, h, o, state_indices, cu_seqlens, offsets, N,
        q.stride(0), q.stride(1), v.stride(0), v.stride(1), scale,
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV, BC=BC, LOW=low,
        num_warps=8, num_stages=2,  # 4 warps spill (sm_90 build: 255 registers)
    )  # fmt: skip
    return o
