"""Chunked Gated DeltaNet prefill in Triton (our own kernels; math in reference/kernels.md §1.1, §2.2).

Two launches, no host synchronisation, so the call can be captured in a CUDA graph:

1. ``_gdn_chunk_intra_kernel`` — fully parallel over (chunk, qk-head); everything in a chunk that does
   not depend on the running state. With γ the within-chunk cumulative log-decay (fp32, reset each chunk)
   and A the strictly lower matrix ``β_i (k_i·k_j) exp(γ_i − γ_j)``, it writes two C×C matrices per token
   row and value head:
       ``Tβ = (I + A)^{-1} diag(β)``                    (so w = Tβ (exp(γ)⊙K) and u = Tβ V)
       ``P  = scale · (Q Kᵀ ⊙ exp(γ_i − γ_j) ⊙ [i ≥ j])``
   The inverse is blocked in 16×16 tiles: diagonal tiles by ``(I−a)(I+a²)(I+a⁴)(I+a⁸)`` (a is nilpotent),
   off-diagonal tiles by block forward substitution. The 16×16 tiles of KKᵀ and QKᵀ are shared by the
   value heads of one qk-head (GVA), which halves that work for Qwen3-Next. Decays are built from sums of
   same-sign g (prefix, suffix, whole tiles), never as a difference of two chunk-long prefix sums, which
   would cancel catastrophically under strong decay (|γ| in the thousands).
2. ``_gdn_chunk_state_kernel`` — sequential over the chunks of one sequence, parallel over
   (sequence, value head, V tile). Per chunk, with S the K×BV state tile in fp32 registers:
       ``w = Tβ (exp(γ)⊙K)``, ``u = Tβ V``, ``v_new = u − w S``,
       ``o = scale (Q⊙exp(γ)) S + P v_new``,  ``S ← exp(γ_C) S + (K⊙exp(γ_C − γ))ᵀ v_new``.
   The output is fused into the state pass, so no per-chunk state is ever written to memory; the pool row
   is read once at the start and written once at the end.

Bytes per token for Qwen3-Next shapes (H=16, HV=32, K=V=128, bf16): launch 1 reads q, k (8 KiB) and
writes Tβ, P (8 KiB); launch 2 reads q, k, v, Tβ, P (24 KiB; the V tiles and the two value heads of a
qk-head share their reads through L2) and writes o (8 KiB) — about 48 KiB/token against a 24.8 KiB
minimum (fla's pipeline: ~160 KiB/token).

Measured on the H200 (``benchmarks/gdn_prefill_probe.py``): correct (bf16 output rel RMSE 3.4e-3 against
fp32), but slow — 8 Mtok/s on one long sequence (fla: 16.9) and 19 Mtok/s on 16×2048 (fla: 14.7). The
state pass takes ~6.5 µs per chunk step with only 64 programs per sequence (BV=64, see
``launch_config``), and the intra launch ~20 ns/token. Known costs, in the order to attack them: w is
recomputed by every V tile (2/3 of the state pass's FLOPs; store it from launch 1 instead); Tβ and P
are loaded under an element-wise causal mask, which defeats vector loads (store the zero upper
triangle in launch 1 and mask rows only); register pressure at BK=128 (w and S both fp32 in registers);
the many small 16×16 tiles of launch 1.

Chunks never straddle a ``cu_seqlens`` boundary. Launch 1 runs a fixed grid of ``T // 64 + N`` chunk
programs (an upper bound on ``Σ ceil(len_n / 64)``); each finds its sequence by a prefix sum over the
per-sequence chunk counts in registers, and the programs past the last chunk exit at once.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl

CHUNK = 64
SUB = 16  # tile of the blocked triangular inverse

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def _empty(shape, dtype, device) -> torch.Tensor:
    """Every buffer this module allocates (tests replace it to poison outputs and scratch with NaN)."""
    return torch.empty(shape, dtype=dtype, device=device)


@triton.jit
def _inv_unit_lower(a, eye, PREC: tl.constexpr):
    """(I + a)^{-1} for a strictly lower 16×16 tile: a^16 = 0, so the Neumann series factors exactly."""
    x = eye - a
    a2 = tl.dot(a, a, input_precision=PREC)
    x = tl.dot(x, eye + a2, input_precision=PREC)
    a4 = tl.dot(a2, a2, input_precision=PREC)
    x = tl.dot(x, eye + a4, input_precision=PREC)
    a8 = tl.dot(a4, a4, input_precision=PREC)
    return tl.dot(x, eye + a8, input_precision=PREC)


@triton.jit
def _load_rows(base, tok, valid, row_stride, offs_k, mask_k):
    """A [rows, BK] tile of a packed [T, heads, K] tensor, zero outside the chunk."""
    ptrs = base + tok[:, None] * row_stride + offs_k[None, :]
    return tl.load(ptrs, mask=valid[:, None] & mask_k[None, :], other=0.0)


@triton.jit
def _diag_decay(g_tile, r16):
    """exp(γ_i − γ_j) on a diagonal tile, zero above it, as exp(Σ_{j<m≤i} g_m): a sum of same-sign
    terms, so no cancellation when γ is large (strong decay)."""
    d = tl.cumsum(tl.where(r16[:, None] > r16[None, :], g_tile[:, None], 0.0), 0)
    return tl.where(r16[:, None] >= r16[None, :], tl.exp(d), 0.0)


@triton.jit
def _store_tile(base, tok, ok, row_stride, col0, r16, tile):
    tl.store(
        base + tok[:, None] * row_stride + col0 + r16[None, :],
        tile.to(base.dtype.element_ty),
        mask=ok[:, None],
    )


@triton.jit
def _gdn_chunk_intra_kernel(
    q,
    k,
    g,
    beta,
    state_indices,
    cu_seqlens,
    tmat,
    pmat,
    scale,
    N,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    BK: tl.constexpr,
    BN: tl.constexpr,
    PREC: tl.constexpr,
    IN_PREC: tl.constexpr,
):
    BT: tl.constexpr = 64
    B: tl.constexpr = 16
    G: tl.constexpr = HV // H
    pid_c = tl.program_id(0)
    h = tl.program_id(1)

    # Which sequence and which of its chunks this program owns: a prefix sum of ceil(len / 64).
    offs_n = tl.arange(0, BN)
    in_batch = offs_n < N
    seq_lo = tl.load(cu_seqlens + offs_n, mask=in_batch, other=0).to(tl.int64)
    seq_hi = tl.load(cu_seqlens + offs_n + 1, mask=in_batch, other=0).to(tl.int64)
    n_chunks = (seq_hi - seq_lo + BT - 1) // BT
    chunk_end = tl.cumsum(n_chunks, 0)
    n = tl.sum((chunk_end <= pid_c).to(tl.int32), 0)
    if n >= N:
        return
    slot = tl.load(state_indices + n)
    if slot < 0:
        return
    this = offs_n == n
    bos = tl.sum(tl.where(this, seq_lo, 0), 0)
    eos = tl.sum(tl.where(this, seq_hi, 0), 0)
    first = tl.sum(tl.where(this, chunk_end - n_chunks, 0), 0)
    t0 = bos + (pid_c - first) * BT

    r16 = tl.arange(0, B)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    eye = tl.where(r16[:, None] == r16[None, :], 1.0, 0.0)

    # The chunk as four 16-row tiles; rows past the sequence end load as zeros.
    tok0 = t0 + r16
    tok1 = t0 + B + r16
    tok2 = t0 + 2 * B + r16
    tok3 = t0 + 3 * B + r16
    ok0 = tok0 < eos
    ok1 = tok1 < eos
    ok2 = tok2 < eos
    ok3 = tok3 < eos
    k_head = k + h * K
    q_head = q + h * K
    k0 = _load_rows(k_head, tok0, ok0, H * K, offs_k, mask_k)
    k1 = _load_rows(k_head, tok1, ok1, H * K, offs_k, mask_k)
    k2 = _load_rows(k_head, tok2, ok2, H * K, offs_k, mask_k)
    k3 = _load_rows(k_head, tok3, ok3, H * K, offs_k, mask_k)
    q0 = _load_rows(q_head, tok0, ok0, H * K, offs_k, mask_k)
    q1 = _load_rows(q_head, tok1, ok1, H * K, offs_k, mask_k)
    q2 = _load_rows(q_head, tok2, ok2, H * K, offs_k, mask_k)
    q3 = _load_rows(q_head, tok3, ok3, H * K, offs_k, mask_k)
    # Lower tiles of KKᵀ and QKᵀ, shared by the G value heads of this qk-head.
    kt0 = tl.trans(k0)
    kt1 = tl.trans(k1)
    kt2 = tl.trans(k2)
    kt3 = tl.trans(k3)
    kk00 = tl.dot(k0, kt0, input_precision=IN_PREC)
    kk10 = tl.dot(k1, kt0, input_precision=IN_PREC)
    kk11 = tl.dot(k1, kt1, input_precision=IN_PREC)
    kk20 = tl.dot(k2, kt0, input_precision=IN_PREC)
    kk21 = tl.dot(k2, kt1, input_precision=IN_PREC)
    kk22 = tl.dot(k2, kt2, input_precision=IN_PREC)
    kk30 = tl.dot(k3, kt0, input_precision=IN_PREC)
    kk31 = tl.dot(k3, kt1, input_precision=IN_PREC)
    kk32 = tl.dot(k3, kt2, input_precision=IN_PREC)
    kk33 = tl.dot(k3, kt3, input_precision=IN_PREC)
    qk00 = tl.dot(q0, kt0, input_precision=IN_PREC) * scale
    qk10 = tl.dot(q1, kt0, input_precision=IN_PREC) * scale
    qk11 = tl.dot(q1, kt1, input_precision=IN_PREC) * scale
    qk20 = tl.dot(q2, kt0, input_precision=IN_PREC) * scale
    qk21 = tl.dot(q2, kt1, input_precision=IN_PREC) * scale
    qk22 = tl.dot(q2, kt2, input_precision=IN_PREC) * scale
    qk30 = tl.dot(q3, kt0, input_precision=IN_PREC) * scale
    qk31 = tl.dot(q3, kt1, input_precision=IN_PREC) * scale
    qk32 = tl.dot(q3, kt2, input_precision=IN_PREC) * scale
    qk33 = tl.dot(q3, kt3, input_precision=IN_PREC) * scale
    strict = r16[:, None] > r16[None, :]

    for i_g in range(G):
        hv = h * G + i_g
        g0 = tl.load(g + tok0 * HV + hv, mask=ok0, other=0.0)
        g1 = tl.load(g + tok1 * HV + hv, mask=ok1, other=0.0)
        g2 = tl.load(g + tok2 * HV + hv, mask=ok2, other=0.0)
        g3 = tl.load(g + tok3 * HV + hv, mask=ok3, other=0.0)
        b0 = tl.load(beta + tok0 * HV + hv, mask=ok0, other=0.0)
        b1 = tl.load(beta + tok1 * HV + hv, mask=ok1, other=0.0)
        b2 = tl.load(beta + tok2 * HV + hv, mask=ok2, other=0.0)
        b3 = tl.load(beta + tok3 * HV + hv, mask=ok3, other=0.0)

        # exp(γ_i − γ_j) per tile. Across tiles: (prefix of g in row i's tile) + (suffix of g in column
        # j's tile after j) + (the whole tiles between): every term ≤ 0, so nothing cancels.
        pre1 = tl.cumsum(g1, 0)
        pre2 = tl.cumsum(g2, 0)
        pre3 = tl.cumsum(g3, 0)
        suf0 = tl.cumsum(g0, 0, reverse=True) - g0
        suf1 = tl.cumsum(g1, 0, reverse=True) - g1
        suf2 = tl.cumsum(g2, 0, reverse=True) - g2
        sum1 = tl.sum(g1, 0)
        sum2 = tl.sum(g2, 0)
        e00 = _diag_decay(g0, r16)
        e11 = _diag_decay(g1, r16)
        e22 = _diag_decay(g2, r16)
        e33 = _diag_decay(g3, r16)
        e10 = tl.exp(pre1[:, None] + suf0[None, :])
        e21 = tl.exp(pre2[:, None] + suf1[None, :])
        e32 = tl.exp(pre3[:, None] + suf2[None, :])
        e20 = tl.exp(pre2[:, None] + suf0[None, :] + sum1)
        e31 = tl.exp(pre3[:, None] + suf1[None, :] + sum2)
        e30 = tl.exp(pre3[:, None] + suf0[None, :] + (sum1 + sum2))

        # A = β_i (k_i·k_j) exp(γ_i − γ_j), strictly lower.
        a00 = tl.where(strict, b0[:, None] * kk00 * e00, 0.0)
        a11 = tl.where(strict, b1[:, None] * kk11 * e11, 0.0)
        a22 = tl.where(strict, b2[:, None] * kk22 * e22, 0.0)
        a33 = tl.where(strict, b3[:, None] * kk33 * e33, 0.0)
        a10 = b1[:, None] * kk10 * e10
        a20 = b2[:, None] * kk20 * e20
        a21 = b2[:, None] * kk21 * e21
        a30 = b3[:, None] * kk30 * e30
        a31 = b3[:, None] * kk31 * e31
        a32 = b3[:, None] * kk32 * e32

        # T = (I + A)^{-1}: diagonal tiles, then T_ij = −T_ii Σ_{j≤m<i} A_im T_mj.
        t00 = _inv_unit_lower(a00, eye, PREC)
        t11 = _inv_unit_lower(a11, eye, PREC)
        t22 = _inv_unit_lower(a22, eye, PREC)
        t33 = _inv_unit_lower(a33, eye, PREC)
        t10 = -tl.dot(t11, tl.dot(a10, t00, input_precision=PREC), input_precision=PREC)
        t21 = -tl.dot(t22, tl.dot(a21, t11, input_precision=PREC), input_precision=PREC)
        s20 = tl.dot(a20, t00, input_precision=PREC) + tl.dot(a21, t10, input_precision=PREC)
        t20 = -tl.dot(t22, s20, input_precision=PREC)
        t32 = -tl.dot(t33, tl.dot(a32, t22, input_precision=PREC), input_precision=PREC)
        s31 = tl.dot(a31, t11, input_precision=PREC) + tl.dot(a32, t21, input_precision=PREC)
        t31 = -tl.dot(t33, s31, input_precision=PREC)
        s30 = (
            tl.dot(a30, t00, input_precision=PREC)
            + tl.dot(a31, t10, input_precision=PREC)
            + tl.dot(a32, t20, input_precision=PREC)
        )
        t30 = -tl.dot(t33, s30, input_precision=PREC)

        # Tβ = T diag(β) and P = scale · QKᵀ ⊙ exp(γ_i − γ_j), lower tiles only (the state pass masks
        # everything above the diagonal when it loads them).
        rs = HV * BT
        t_head = tmat + hv * BT
        p_head = pmat + hv * BT
        _store_tile(t_head, tok0, ok0, rs, 0, r16, t00 * b0[None, :])
        _store_tile(t_head, tok1, ok1, rs, 0, r16, t10 * b0[None, :])
        _store_tile(t_head, tok1, ok1, rs, B, r16, t11 * b1[None, :])
        _store_tile(t_head, tok2, ok2, rs, 0, r16, t20 * b0[None, :])
        _store_tile(t_head, tok2, ok2, rs, B, r16, t21 * b1[None, :])
        _store_tile(t_head, tok2, ok2, rs, 2 * B, r16, t22 * b2[None, :])
        _store_tile(t_head, tok3, ok3, rs, 0, r16, t30 * b0[None, :])
        _store_tile(t_head, tok3, ok3, rs, B, r16, t31 * b1[None, :])
        _store_tile(t_head, tok3, ok3, rs, 2 * B, r16, t32 * b2[None, :])
        _store_tile(t_head, tok3, ok3, rs, 3 * B, r16, t33 * b3[None, :])
        _store_tile(p_head, tok0, ok0, rs, 0, r16, qk00 * e00)
        _store_tile(p_head, tok1, ok1, rs, 0, r16, qk10 * e10)
        _store_tile(p_head, tok1, ok1, rs, B, r16, qk11 * e11)
        _store_tile(p_head, tok2, ok2, rs, 0, r16, qk20 * e20)
        _store_tile(p_head, tok2, ok2, rs, B, r16, qk21 * e21)
        _store_tile(p_head, tok2, ok2, rs, 2 * B, r16, qk22 * e22)
        _store_tile(p_head, tok3, ok3, rs, 0, r16, qk30 * e30)
        _store_tile(p_head, tok3, ok3, rs, B, r16, qk31 * e31)
        _store_tile(p_head, tok3, ok3, rs, 2 * B, r16, qk32 * e32)
        _store_tile(p_head, tok3, ok3, rs, 3 * B, r16, qk33 * e33)


@triton.jit
def _gdn_chunk_state_kernel(
    q,
    k,
    v,
    g,
    tmat,
    pmat,
    o,
    state_pool,
    state_indices,
    cu_seqlens,
    pool_slot_stride,
    scale,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    IN_PREC: tl.constexpr,
):
    BT: tl.constexpr = 64
    G: tl.constexpr = HV // H
    i_v = tl.program_id(0)
    hv = tl.program_id(1)
    i_n = tl.program_id(2)
    h = hv // G

    slot = tl.load(state_indices + i_n).to(tl.int64)
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    n_chunks = (eos - bos + BT - 1) // BT

    rows = tl.arange(0, BT)
    offs_k = tl.arange(0, BK)
    offs_v = i_v * BV + tl.arange(0, BV)
    mask_k = offs_k < K
    mask_v = offs_v < V
    o_head = o + hv * V + offs_v[None, :]

    if slot < 0:
        # Padding: nothing read or written in the pool, output rows zero.
        for c in range(n_chunks):
            tok = bos + tl.cast(c, tl.int64) * BT + rows
            ok = tok < eos
            zeros = tl.zeros([BT, BV], dtype=o.dtype.element_ty)
            tl.store(o_head + tok[:, None] * (HV * V), zeros, mask=ok[:, None] & mask_v[None, :])
        return

    # State tile S[K, BV] (logical K×V); the pool stores Sᵀ, K last.
    s_ptrs = state_pool + slot * pool_slot_stride + hv * (V * K) + offs_v[None, :] * K + offs_k[:, None]
    s_mask = mask_k[:, None] & mask_v[None, :]
    state = tl.load(s_ptrs, mask=s_mask, other=0.0)

    dt = q.dtype.element_ty
    q_head = q + h * K
    k_head = k + h * K
    lower = rows[None, :] <= rows[:, None]
    for c in range(n_chunks):
        tok = bos + tl.cast(c, tl.int64) * BT + rows
        ok = tok < eos
        g_c = tl.load(g + tok * HV + hv, mask=ok, other=0.0)
        gam = tl.cumsum(g_c, 0)
        gam_last = tl.sum(g_c, 0)
        q_c = _load_rows(q_head, tok, ok, H * K, offs_k, mask_k)
        k_c = _load_rows(k_head, tok, ok, H * K, offs_k, mask_k)
        v_c = tl.load(
            v + tok[:, None] * (HV * V) + hv * V + offs_v[None, :],
            mask=ok[:, None] & mask_v[None, :],
            other=0.0,
        )
        m_ptrs = tok[:, None] * (HV * BT) + hv * BT + rows[None, :]
        t_c = tl.load(tmat + m_ptrs, mask=ok[:, None] & lower, other=0.0)
        p_c = tl.load(pmat + m_ptrs, mask=ok[:, None] & lower, other=0.0)

        decay = tl.exp(gam)
        w = tl.dot(t_c, (k_c * decay[:, None]).to(dt), input_precision=IN_PREC)
        u = tl.dot(t_c, v_c.to(dt), input_precision=IN_PREC)
        state_op = state.to(dt)
        v_new = u - tl.dot(w.to(dt), state_op, input_precision=IN_PREC)
        v_new_op = v_new.to(dt)
        q_dec = (q_c * (decay * scale)[:, None]).to(dt)
        out = tl.dot(q_dec, state_op, input_precision=IN_PREC)
        out = tl.dot(p_c, v_new_op, acc=out, input_precision=IN_PREC)
        tl.store(
            o_head + tok[:, None] * (HV * V), out.to(o.dtype.element_ty), mask=ok[:, None] & mask_v[None, :]
        )

        # exp(γ_C − γ_i) as exp(Σ_{m>i} g_m), not a difference of two large prefix sums.
        k_dec = (k_c * tl.exp(tl.cumsum(g_c, 0, reverse=True) - g_c)[:, None]).to(dt)
        state = state * tl.exp(gam_last)
        state = tl.dot(tl.trans(k_dec), v_new_op, acc=state, input_precision=IN_PREC)

    tl.store(s_ptrs, state, mask=s_mask)


class LaunchConfig(NamedTuple):
    """How the two launches are shaped (no autotuning: the state pass updates the pool in place, so a
    benchmark run of it would apply the update several times)."""

    block_v: int  # V tile of the state pass
    state_warps: int
    state_stages: int
    intra_warps: int


def launch_config(num_seqs: int, num_v_heads: int, v_dim: int) -> LaunchConfig:
    """The V tile is 64 on GPUs: Triton 3.6 on sm_90 miscompiles the state pass's output for BV ≤ 32
    with K ≥ 64 (measured on the H200: wrong outputs, correct final states, and out-of-bounds shared
    memory reads under compute-sanitizer; notes in ``benchmarks/gdn_prefill_probe.py``). A narrower
    tile would put more programs on a single long sequence."""
    if _INTERPRET:
        return LaunchConfig(max(16, min(32, triton.next_power_of_2(v_dim))), 4, 1, 4)
    # Intra-chunk launch on 2 warps: 1.7x faster than 4 at every probe case (H200, 2026-11-29).
    return LaunchConfig(64, 4, 2, 2)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale: float) -> torch.Tensor:
    """Chunked GDN prefill; arguments already validated by ``kernels.gdn.prefill`` (DESIGN §7)."""
    T = q.shape[0]
    N = state_indices.shape[0]
    o = _empty(v.shape, v.dtype, v.device)
    if T == 0 or N == 0:
        return o
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    g, beta = g.contiguous(), beta.contiguous()
    state_indices, cu_seqlens = state_indices.contiguous(), cu_seqlens.contiguous()
    config = launch_config(N, v.shape[1], v.shape[2])
    tmat, pmat = _launch_intra(q, k, g, beta, state_indices, cu_seqlens, scale, config)
    _launch_state(q, k, v, g, tmat, pmat, o, state_pool, state_indices, cu_seqlens, scale, config)
    return o


def _input_precision(dtype: torch.dtype) -> str | None:
    """Dots on input-dtype operands: IEEE for fp32 inputs (fp32 throughout); 16-bit operands take
    the tensor cores' 16-bit path with fp32 accumulation (the precision setting does not apply)."""
    return "ieee" if dtype == torch.float32 else None


def _solve_precision(dtype: torch.dtype) -> str:
    """The fp32 16×16 tiles of the triangular solve: tf32 when its result is rounded to 16 bits anyway."""
    return "ieee" if dtype == torch.float32 else "tf32"


def _launch_intra(q, k, g, beta, state_indices, cu_seqlens, scale, config):
    """Launch 1: Tβ and P, one 64-wide row per token and value head, in the input dtype."""
    T, H, K = q.shape
    HV = g.shape[1]
    N = state_indices.shape[0]
    tmat = _empty((T, HV, CHUNK), q.dtype, q.device)
    pmat = _empty((T, HV, CHUNK), q.dtype, q.device)
    # Σ ceil(len_n / 64) ≤ T // 64 + N: a fixed grid, so no host sync to count the chunks.
    max_chunks = T // CHUNK + N
    _gdn_chunk_intra_kernel[(max_chunks, H)](
        q,
        k,
        g,
        beta,
        state_indices,
        cu_seqlens,
        tmat,
        pmat,
        float(scale),
        N,
        H=H,
        HV=HV,
        K=K,
        BK=max(16, triton.next_power_of_2(K)),
        BN=triton.next_power_of_2(N + 1),
        PREC=_solve_precision(q.dtype),
        IN_PREC=_input_precision(q.dtype),
        num_warps=config.intra_warps,
    )
    return tmat, pmat


def _launch_state(q, k, v, g, tmat, pmat, o, state_pool, state_indices, cu_seqlens, scale, config):
    """Launch 2: the sequential state pass with the output fused in; updates the pool in place."""
    H, K = q.shape[1], q.shape[2]
    HV, V = v.shape[1], v.shape[2]
    N = state_indices.shape[0]
    _gdn_chunk_state_kernel[(triton.cdiv(V, config.block_v), HV, N)](
        q,
        k,
        v,
        g,
        tmat,
        pmat,
        o,
        state_pool,
        state_indices,
        cu_seqlens,
        state_pool.stride(0),
        float(scale),
        H=H,
        HV=HV,
        K=K,
        V=V,
        BK=max(16, triton.next_power_of_2(K)),
        BV=config.block_v,
        IN_PREC=_input_precision(q.dtype),
        num_warps=config.state_warps,
        num_stages=config.state_stages,
    )
