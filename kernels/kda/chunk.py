"""Our Triton chunked KDA prefill: one fused pass per (sequence, v-head, V-tile), no scratch buffers.

Each program walks its sequence in chunks of ``SUBCHUNK_SIZE`` = 16 tokens (``kernels.chunked``), with its
[K, BV] slice of the state in registers (columns of V evolve independently under the delta rule). Per
chunk, with γ_t = Σ_{s≤t} g_s the cumulative log-decay from the chunk start (per key channel, reset every
chunk, fp32) and S the state before the chunk (K-major; the pool holds Sᵀ):

    A[i, j] = β_i Σ_c k_i[c] k_j[c] exp(γ_i[c] − γ_j[c])        i > j   (strictly lower triangular)
    P[i, j] = scale Σ_c q_i[c] k_j[c] exp(γ_i[c] − γ_j[c])      i ≥ j
    (I + A) U = diag(β) (V − (K ⊙ exp(γ)) S)                     forward substitution, 16 rows
    O = scale (Q ⊙ exp(γ)) S + P U
    S ← diag(exp(γ_last)) S + (K ⊙ exp(γ_last − γ))ᵀ U

Why 16-token chunks and no factorisation: with a per-channel decay the intra-chunk weights cannot be a
[C, C] decay matrix times a plain Q Kᵀ; writing them as (K ⊙ exp(γ)) (K ⊙ exp(−γ))ᵀ would form
exp(−γ_j), which overflows fp32 once a chunk's decay passes e^88 (docs/kernels.md, "Numerical
pitfalls"). Here every exponent is a difference γ_i − γ_j with i ≥ j (or γ_last − γ_t, or γ itself),
hence ≤ 0, formed in a [16, 16, 16] tensor per block of 16 key channels; entries above the diagonal are
−inf before the exponential, so they are 0, never inf · 0. Strong gates (g = −5 per token and channel,
γ down to −80) stay inside fp32; stronger ones underflow to 0, the right limit.

The last chunk of a sequence is masked (q, k, v, β, g read as 0: masked rows add nothing and do not
decay). Padding (index −1): zero initial state, zero output, nothing stored. Zero-length sequences store
their state back unchanged. All products are fp32 (``input_precision="ieee"``: no TF32), so fp32 inputs
match the reference to rounding; the speed of this kernel on a GPU has not been measured yet.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.blocks import decay, pool_slot, program_tile, row_of, sequence_bounds
from stampgen.kernels.chunked.common import SUBCHUNK_SIZE, chunk_tiles, head_dim_contiguous

# Key channels per block of the [16, 16, BKB] intra-chunk tensors (registers per thread stay small).
_KEY_BLOCK = 16


@triton.jit
def _kda_chunk_prefill_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
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
    BKB: tl.constexpr,
):
    i_n, i_hv, i_h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, BC)
    causal = rows[:, None] >= rows[None, :]
    strictly_causal = rows[:, None] > rows[None, :]

    state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
    # The state as S [BK, BV] (K-major): element (c, j) of the pool tile lies at j * K + c.
    s_offs = offs_v[None, :] * K + offs_k[:, None]
    s_mask = mask_k[:, None] & mask_v[None, :]
    S = tl.load(state_base + s_offs, mask=s_mask & real, other=0.0)

    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    for i_c in range(0, tl.cdiv(eos - bos, BC)):
        toks = bos + tl.cast(i_c, tl.int64) * BC + rows
        in_seq = toks < eos
        qk_offs = toks[:, None] * stride_q_tok + i_h * stride_q_head
        qk_mask = in_seq[:, None] & mask_k[None, :]
        q = tl.load(q_ptr + qk_offs + offs_k[None, :], mask=qk_mask, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + qk_offs + offs_k[None, :], mask=qk_mask, other=0.0).to(tl.float32)
        v_offs = toks[:, None] * stride_v_tok + i_hv * stride_v_head + offs_v[None, :]
        v = tl.load(v_ptr + v_offs, mask=in_seq[:, None] & mask_v[None, :], other=0.0).to(tl.float32)
        g_offs = (toks[:, None] * HV + i_hv) * K
        g = tl.load(g_ptr + g_offs + offs_k[None, :], mask=qk_mask, other=0.0)
        beta = tl.load(beta_ptr + toks * HV + i_hv, mask=in_seq, other=0.0)
        gamma = tl.cumsum(g, axis=0)  # [BC, BK]; masked rows add 0, so the last row is γ_last
        gamma_last = row_of(gamma, rows, BC - 1)

        # Intra-chunk weights, one block of key channels at a time: exp of differences only.
        A = tl.zeros((BC, BC), dtype=tl.float32)
        P = tl.zeros((BC, BC), dtype=tl.float32)
        for kb in tl.static_range(0, BK, BKB):
            offs_kb = kb + tl.arange(0, BKB)
            mask_kb = in_seq[:, None] & (offs_kb < K)[None, :]
            q_b = tl.load(q_ptr + qk_offs + offs_kb[None, :], mask=mask_kb, other=0.0).to(tl.float32)
            k_b = tl.load(k_ptr + qk_offs + offs_kb[None, :], mask=mask_kb, other=0.0).to(tl.float32)
            gamma_b = tl.cumsum(tl.load(g_ptr + g_offs + offs_kb[None, :], mask=mask_kb, other=0.0), axis=0)
            diff = gamma_b[:, None, :] - gamma_b[None, :, :]  # [i, j, c]
            weight = decay(tl.where(causal[:, :, None], diff, float("-inf")))
            A += tl.sum(k_b[:, None, :] * k_b[None, :, :] * weight, axis=2)
            P += tl.sum(q_b[:, None, :] * k_b[None, :, :] * weight, axis=2)
        A = tl.where(strictly_causal, A * beta[:, None], 0.0)
        P = P * scale

        # (I + A) U = β (V − (K ⊙ exp γ) S), by forward substitution over the chunk's rows.
        U = beta[:, None] * (v - tl.dot(k * decay(gamma), S, input_precision="ieee"))
        for i in range(1, BC):
            a_i = row_of(A, rows, i)  # only j < i are non-zero: rows already solved
            U = tl.where((rows == i)[:, None], U - tl.sum(a_i[:, None] * U, axis=0)[None, :], U)

        o = tl.dot(q * (decay(gamma) * scale), S, input_precision="ieee") + tl.dot(
            P, U, input_precision="ieee"
        )
        o = tl.where(real, o, 0.0)
        o_offs = (toks[:, None] * HV + i_hv) * V + offs_v[None, :]
        tl.store(o_ptr + o_offs, o.to(o_ptr.dtype.element_ty), mask=in_seq[:, None] & mask_v[None, :])

        k_to_end = k * decay(gamma_last[None, :] - gamma)
        S = S * decay(gamma_last)[:, None] + tl.dot(tl.trans(k_to_end), U, input_precision="ieee")

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
    BK, auto_BV = chunk_tiles(K, V, next_power_of_2=triton.next_power_of_2)
    BV = BV or auto_BV
    grid = (triton.cdiv(V, BV) * N * HV,)
    _kda_chunk_prefill_kernel[grid](
        q,
        k,
        v,
        g,
        beta,
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
        BC=SUBCHUNK_SIZE,
        BKB=_KEY_BLOCK,
        num_warps=4,
    )
    return o
