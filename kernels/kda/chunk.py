"""Our Triton chunked KDA prefill: an intra-chunk pass parallel over chunks (the WY form of the delta
rule), then a state pass sequential over chunks that also writes the output.

Chunks of ``_CHUNK`` = 32 tokens, two sub-chunks of 16. Per chunk, with γ_t = Σ_{s≤t} g_s the cumulative
log-decay from the chunk start (per key channel, fp32) and S the state before the chunk (K-major; the
pool holds Sᵀ):

    A[i, j] = β_i Σ_c k_i[c] k_j[c] exp(γ_i[c] − γ_j[c])        i > j   (strictly lower triangular)
    P[i, j] = scale Σ_c q_i[c] k_j[c] exp(γ_i[c] − γ_j[c])      i ≥ j
    T = (I + A)⁻¹,  W = T diag(β) (K ⊙ exp γ),  Ũ = T diag(β) V              (intra pass, per chunk)
    U = Ũ − W S,  O = scale (Q ⊙ exp γ) S + P U,  S ← diag(exp γ_last) S + (K ⊙ exp(γ_last − γ))ᵀ U

Every exponent is ≤ 0, so nothing overflows (a per-channel decay forbids exp(γ_i) · exp(−γ_j), which
overflows once a chunk decays past e^88: docs/kernels.md, "Numerical pitfalls"):

* diagonal 16 × 16 blocks: exp(γ_i − γ_j) formed in a [16, 16, 16] tensor per block of 16 key channels,
  −inf above the diagonal before the exponential;
* the off-diagonal block (sub-chunk 1 × sub-chunk 0): factored through the reference point r = 15, the
  last row of sub-chunk 0: exp(γ_i − γ_j) = exp(γ_i − γ_r) · exp(γ_r − γ_j), both factors ≤ 1 (i > r ≥ j),
  so the block is a product (K₁ ⊙ exp(γ − γ_r)) (K₀ ⊙ exp(γ_r − γ))ᵀ on tensor cores;
* T by blocks: D_a = (I + A_aa)⁻¹ = (I − N)(I + N²)(I + N⁴)(I + N⁸) for the nilpotent N = A_aa, and
  T₁₀ = −D₁ A₁₀ D₀.

1. ``_chunk_offsets_kernel`` (``kernels.chunked.chunk_map``): each sequence's first global chunk index.
2. ``_kda_intra_kernel``, one program per (global chunk, v-head): W [C, K], Ũ [C, V], P [C, C] (fp32
   scratch).
3. ``_kda_state_kernel``, one program per (sequence, v-head, V-tile): walks the chunks with its fp32
   [K, BV] state tile in registers (the V columns evolve independently under the delta rule), writes
   O and finally the pool.

The last chunk of a sequence is masked (q, k, v, β, g read as 0: masked rows add nothing and do not
decay). Padding (index −1): zero initial state, zero output, nothing stored. Zero-length sequences store
their state back unchanged. Products: fp32 operands, ``DOT_PRECISION`` (tf32 tensor cores on a GPU;
exact in the interpreter) for the big ones, IEEE fp32 for the 16 × 16 inverse. No host sync anywhere.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.blocks import decay, pool_slot, program_tile, sequence_bounds
from stampgen.kernels.chunked.chunk_map import chunk_offsets, chunk_sequence, max_chunks
from stampgen.kernels.chunked.common import (
    SM_COUNT_HINT,
    head_dim_contiguous,
    triton_interpreted,
)

_CHUNK = 32  # tokens per chunk: two 16-token sub-chunks
_SUB = 16
_KEY_BLOCK = 16  # key channels per block of the [16, 16, 16] diagonal-block tensors
# "tf32" (tensor cores) or "ieee" (CUDA cores, fp32 exact) for the products of W, Ũ, P and the state.
DOT_PRECISION = "tf32"


@triton.jit
def _diagonal_block(q_ptr, k_ptr, g_ptr, qk_offs, g_offs, in_seq, K, BK: tl.constexpr, BKB: tl.constexpr,
                    SUB: tl.constexpr):  # fmt: skip
    """(Σ_c k_i k_j exp(γ_i − γ_j) for i > j, Σ_c q_i k_j exp(γ_i − γ_j) for i ≥ j) of one sub-chunk,
    γ its own cumulative log-decay (the differences do not depend on where the cumsum starts)."""
    rows = tl.arange(0, SUB)
    causal = rows[:, None] >= rows[None, :]
    strictly = rows[:, None] > rows[None, :]
    A = tl.zeros((SUB, SUB), dtype=tl.float32)
    P = tl.zeros((SUB, SUB), dtype=tl.float32)
    for kb in tl.static_range(0, BK, BKB):
        offs_kb = kb + tl.arange(0, BKB)
        mask_kb = in_seq[:, None] & (offs_kb < K)[None, :]
        q_b = tl.load(q_ptr + qk_offs[:, None] + offs_kb[None, :], mask=mask_kb, other=0.0).to(tl.float32)
        k_b = tl.load(k_ptr + qk_offs[:, None] + offs_kb[None, :], mask=mask_kb, other=0.0).to(tl.float32)
        gamma_b = tl.cumsum(tl.load(g_ptr + g_offs[:, None] + offs_kb[None, :], mask=mask_kb, other=0.0), 0)
        diff = gamma_b[:, None, :] - gamma_b[None, :, :]  # [i, j, c]
        weight = decay(tl.where(causal[:, :, None], diff, float("-inf")))
        A += tl.sum(k_b[:, None, :] * k_b[None, :, :] * weight, axis=2)
        P += tl.sum(q_b[:, None, :] * k_b[None, :, :] * weight, axis=2)
    return tl.where(strictly, A, 0.0), P


@triton.jit
def _unit_lower_inverse(N, SUB: tl.constexpr):
    """(I + N)⁻¹ for a strictly lower triangular [16, 16] N: Σ_k (−N)^k = (I − N)(I + N²)(I + N⁴)(I + N⁸)."""
    rows = tl.arange(0, SUB)
    eye = (rows[:, None] == rows[None, :]).to(tl.float32)
    N2 = tl.dot(N, N, input_precision="ieee")
    N4 = tl.dot(N2, N2, input_precision="ieee")
    N8 = tl.dot(N4, N4, input_precision="ieee")
    X = tl.dot(eye - N, eye + N2, input_precision="ieee")
    X = tl.dot(X, eye + N4, input_precision="ieee")
    return tl.dot(X, eye + N8, input_precision="ieee")


@triton.jit
def _kda_intra_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    w_ptr,
    u_ptr,
    p_ptr,
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
    C: tl.constexpr,
    SUB: tl.constexpr,
    BKB: tl.constexpr,
    PREC: tl.constexpr,
):
    pid = tl.program_id(0)
    i_hv = pid % HV
    c = pid // HV
    i_h = i_hv // (HV // H)
    i_n, i_c, is_chunk = chunk_sequence(offsets_ptr, N, c)
    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    first = bos + tl.cast(i_c, tl.int64) * C
    rows = tl.arange(0, SUB)
    offs_k = tl.arange(0, BK)
    offs_v = tl.arange(0, BV)
    mask_k = offs_k < K
    mask_v = offs_v < V
    t0 = first + rows
    t1 = first + SUB + rows
    in0 = (t0 < eos) & is_chunk
    in1 = (t1 < eos) & is_chunk
    qk0 = t0 * stride_q_tok + i_h * stride_q_head
    qk1 = t1 * stride_q_tok + i_h * stride_q_head
    g0_offs = (t0 * HV + i_hv) * K
    g1_offs = (t1 * HV + i_hv) * K

    m0 = in0[:, None] & mask_k[None, :]
    m1 = in1[:, None] & mask_k[None, :]
    k0 = tl.load(k_ptr + qk0[:, None] + offs_k[None, :], mask=m0, other=0.0).to(tl.float32)
    k1 = tl.load(k_ptr + qk1[:, None] + offs_k[None, :], mask=m1, other=0.0).to(tl.float32)
    q1 = tl.load(q_ptr + qk1[:, None] + offs_k[None, :], mask=m1, other=0.0).to(tl.float32)
    cg0 = tl.cumsum(tl.load(g_ptr + g0_offs[:, None] + offs_k[None, :], mask=m0, other=0.0), 0)
    cg1 = tl.cumsum(tl.load(g_ptr + g1_offs[:, None] + offs_k[None, :], mask=m1, other=0.0), 0)
    A00, P00 = _diagonal_block(q_ptr, k_ptr, g_ptr, qk0, g0_offs, in0, K, BK, BKB, SUB)
    A11, P11 = _diagonal_block(q_ptr, k_ptr, g_ptr, qk1, g1_offs, in1, K, BK, BKB, SUB)
    g0_total = tl.sum(tl.where(rows[:, None] == SUB - 1, cg0, 0.0), axis=0)  # γ at row 15 (reference r)
    k0_to_r = k0 * decay(g0_total[None, :] - cg0)  # exp(γ_r − γ_j), j ≤ r
    decay1 = decay(cg1)  # exp(γ_i − γ_r), i > r
    A10 = tl.dot(k1 * decay1, tl.trans(k0_to_r), input_precision=PREC)
    P10 = tl.dot(q1 * decay1, tl.trans(k0_to_r), input_precision=PREC) * scale

    beta0 = tl.load(beta_ptr + t0 * HV + i_hv, mask=in0, other=0.0)
    beta1 = tl.load(beta_ptr + t1 * HV + i_hv, mask=in1, other=0.0)
    D0 = _unit_lower_inverse(A00 * beta0[:, None], SUB)
    D1 = _unit_lower_inverse(A11 * beta1[:, None], SUB)
    T10 = -tl.dot(tl.dot(D1, A10 * beta1[:, None], input_precision="ieee"), D0, input_precision="ieee")

    bk0 = beta0[:, None] * k0 * decay(cg0)  # β K ⊙ exp γ, γ from the chunk start
    bk1 = beta1[:, None] * k1 * decay(g0_total[None, :] + cg1)
    w0 = tl.dot(D0, bk0, input_precision=PREC)
    w1 = tl.dot(T10, bk0, input_precision=PREC) + tl.dot(D1, bk1, input_precision=PREC)
    v0 = tl.load(v_ptr + t0[:, None] * stride_v_tok + i_hv * stride_v_head + offs_v[None, :],
                 mask=in0[:, None] & mask_v[None, :], other=0.0).to(tl.float32)  # fmt: skip
    v1 = tl.load(v_ptr + t1[:, None] * stride_v_tok + i_hv * stride_v_head + offs_v[None, :],
                 mask=in1[:, None] & mask_v[None, :], other=0.0).to(tl.float32)  # fmt: skip
    bv0 = beta0[:, None] * v0
    bv1 = beta1[:, None] * v1
    u0 = tl.dot(D0, bv0, input_precision=PREC)
    u1 = tl.dot(T10, bv0, input_precision=PREC) + tl.dot(D1, bv1, input_precision=PREC)

    base = tl.cast(c, tl.int64) * HV + i_hv
    w_base = w_ptr + base * (C * K)
    tl.store(w_base + rows[:, None] * K + offs_k[None, :], w0, mask=mask_k[None, :] & is_chunk)
    tl.store(w_base + (SUB + rows[:, None]) * K + offs_k[None, :], w1, mask=mask_k[None, :] & is_chunk)
    u_base = u_ptr + base * (C * V)
    tl.store(u_base + rows[:, None] * V + offs_v[None, :], u0, mask=mask_v[None, :] & is_chunk)
    tl.store(u_base + (SUB + rows[:, None]) * V + offs_v[None, :], u1, mask=mask_v[None, :] & is_chunk)
    p_base = p_ptr + base * (C * C)
    cols = tl.arange(0, SUB)
    tl.store(p_base + rows[:, None] * C + cols[None, :], P00 * scale, mask=is_chunk)
    tl.store(p_base + rows[:, None] * C + SUB + cols[None, :], tl.zeros((SUB, SUB), tl.float32),
             mask=is_chunk)  # fmt: skip
    tl.store(p_base + (SUB + rows[:, None]) * C + cols[None, :], P10, mask=is_chunk)
    tl.store(p_base + (SUB + rows[:, None]) * C + SUB + cols[None, :], P11 * scale, mask=is_chunk)


@triton.jit
def _kda_state_kernel(
    q_ptr,
    k_ptr,
    g_ptr,
    w_ptr,
    u_ptr,
    p_ptr,
    o_ptr,
    state_pool_ptr,
    state_indices_ptr,
    cu_seqlens_ptr,
    offsets_ptr,
    stride_q_tok,
    stride_q_head,
    stride_pool_slot,
    scale,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    C: tl.constexpr,
    PREC: tl.constexpr,
):
    i_n, i_hv, i_h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, C)
    cols = tl.arange(0, C)

    state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
    s_offs = offs_v[None, :] * K + offs_k[:, None]  # S [BK, BV], K-major view of the pool tile
    s_mask = mask_k[:, None] & mask_v[None, :]
    S = tl.load(state_base + s_offs, mask=s_mask & real, other=0.0)

    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    c0 = tl.load(offsets_ptr + i_n).to(tl.int64)
    for i_c in range(0, tl.cdiv(eos - bos, C)):
        toks = bos + tl.cast(i_c, tl.int64) * C + rows
        in_seq = toks < eos
        qk_offs = toks[:, None] * stride_q_tok + i_h * stride_q_head + offs_k[None, :]
        qk_mask = in_seq[:, None] & mask_k[None, :]
        q = tl.load(q_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + qk_offs, mask=qk_mask, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + (toks[:, None] * HV + i_hv) * K + offs_k[None, :], mask=qk_mask, other=0.0)
        gamma = tl.cumsum(g, axis=0)  # masked rows add 0
        gamma_last = tl.sum(g, axis=0)
        base = (c0 + i_c) * HV + i_hv
        w = tl.load(
            w_ptr + base * (C * K) + rows[:, None] * K + offs_k[None, :], mask=mask_k[None, :], other=0.0
        )
        u = tl.load(
            u_ptr + base * (C * V) + rows[:, None] * V + offs_v[None, :], mask=mask_v[None, :], other=0.0
        )
        p = tl.load(p_ptr + base * (C * C) + rows[:, None] * C + cols[None, :])

        U = u - tl.dot(w, S, input_precision=PREC)
        o = tl.dot(q * (decay(gamma) * scale), S, input_precision=PREC) + tl.dot(p, U, input_precision=PREC)
        o = tl.where(real, o, 0.0)
        o_offs = (toks[:, None] * HV + i_hv) * V + offs_v[None, :]
        tl.store(o_ptr + o_offs, o.to(o_ptr.dtype.element_ty), mask=in_seq[:, None] & mask_v[None, :])

        k_to_end = k * decay(gamma_last[None, :] - gamma)
        S = tl.dot(tl.trans(k_to_end), U, acc=S * decay(gamma_last)[:, None], input_precision=PREC)

    tl.store(state_base + s_offs, S, mask=s_mask & real)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale, BV=None):
    """KDA chunked prefill over the packed sequences of ``cu_seqlens``; pool updated in place."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = state_indices.shape[0]
    q, k, v = head_dim_contiguous(q, k, v)
    g, beta, cu_seqlens = g.contiguous(), beta.contiguous(), cu_seqlens.contiguous()
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if T == 0 or N == 0:
        return o
    C = _CHUNK
    NC = max_chunks(T, N, C)
    BK = max(16, triton.next_power_of_2(K))
    BV_full = max(16, triton.next_power_of_2(V))
    offsets = chunk_offsets(cu_seqlens, C, torch.empty(N + 1, dtype=torch.int32, device=q.device))
    w = torch.empty((NC, HV, C, K), dtype=torch.float32, device=q.device)
    u = torch.empty((NC, HV, C, V), dtype=torch.float32, device=q.device)
    p = torch.empty((NC, HV, C, C), dtype=torch.float32, device=q.device)
    _kda_intra_kernel[(NC * HV,)](
        q, k, v, g, beta, w, u, p, cu_seqlens, offsets, N,
        q.stride(0), q.stride(1), v.stride(0), v.stride(1), scale,
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV_full, C=C, SUB=_SUB, BKB=_KEY_BLOCK, PREC=DOT_PRECISION,
        num_warps=8,
    )  # fmt: skip
    if BV is None:
        BV = min(BV_full, 16 if triton_interpreted() else 32)
        # Few programs (one long sequence: HV · V/32, 128 for 32 heads of 128) leave SMs idle.
        if not triton_interpreted() and N * HV * triton.cdiv(V, BV) < 2 * SM_COUNT_HINT:
            BV = 16
    grid = (triton.cdiv(V, BV) * N * HV,)
    _kda_state_kernel[grid](
        q, k, g, w, u, p, o, state_pool, state_indices, cu_seqlens, offsets,
        q.stride(0), q.stride(1), state_pool.stride(0), scale,
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV, C=C, PREC=DOT_PRECISION,
        num_warps=8, num_stages=2,  # 4 warps spill (sm_90 build: 255 registers)
    )  # fmt: skip
    return o
