"""Launches 2, 2b and 3 of the chunked GDN prefill in Triton (``chunk.py``'s docstring has the math):
the segment pass (the affine map (M, B) of every segment that is not its sequence's last), the carry
launch (every later segment's initial state) and the state pass (the recurrence over each segment's
chunks with the output fused in; it updates the pool in place). They read Tβ, the gate sums and the
segment schedule that ``chunk_intra`` wrote.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.gdn import chunk_common, chunk_tma
from stampgen.kernels.gdn.chunk_common import (
    _LOG2E,
    CHUNK,
    _block_k,
    _block_n,
    _chunk_rows,
    _common,
    _exp2,
    _load_rows,
    _locate,
    _scheduled,
    _solve_precision,
    _store_rows,
)


@triton.jit
def _chunk_gates(gates, n_tokens, hv, HV: tl.constexpr, bos, eos, c, rows, FULL: tl.constexpr):
    """(γ, exp(γ_C − γ_i), exp(γ_C)) of chunk ``c`` of a sequence, from the gate sums the intra launch
    wrote ([2, HV, T]: contiguous loads); zero past the sequence's end (``FULL``: the caller knows the
    chunk is whole). In the state pass Triton's pipeliner issues these as ``cp.async`` copies with the
    tiles, at the end of the step before (sm_90a SASS); the segment pass asks for the next chunk's a step
    ahead itself (measured: 11–13% faster)."""
    tok0, ok = _chunk_rows(bos, eos, c, rows)
    gam_of_hv = gates + tl.cast(hv, tl.int64) * n_tokens + tok0
    after_of_hv = gam_of_hv + tl.cast(n_tokens, tl.int64) * HV
    if FULL:
        gam = tl.load(gam_of_hv + rows)
        to_end = tl.exp(tl.load(after_of_hv + rows))
        # γ_C = γ_0 + (γ_C − γ_0), both sums of same-sign gates
        total = tl.load(gam_of_hv) + tl.load(after_of_hv)
    else:
        gam = tl.load(gam_of_hv + rows, mask=ok, other=0.0)
        to_end = tl.exp(tl.load(after_of_hv + rows, mask=ok, other=0.0))
        total = tl.load(gam_of_hv, mask=tok0 < eos, other=0.0)
        total += tl.load(after_of_hv, mask=tok0 < eos, other=0.0)
    return gam, to_end, tl.exp(total)


@triton.jit
def _scratch_rows(seg, hv, offs_k, HV: tl.constexpr, K: tl.constexpr):
    """Row indices [BK, 1] of (segment ``seg``, value head ``hv``) in a [segments, HV, K, cols] scratch."""
    return (seg * HV + hv) * K + offs_k[:, None]


@triton.jit
def _pool_tile(state_pool, slot, pool_slot_stride, hv, offs_k, cols, K: tl.constexpr, V: tl.constexpr):
    """Pointers to the state tile S[offs_k, cols] of a slot; the pool stores Sᵀ, K last."""
    return state_pool + slot * pool_slot_stride + hv * (V * K) + cols[None, :] * K + offs_k[:, None]


@triton.jit
def _advance(state, state_op, k_c, t_beta, v_c, gam, to_end, chunk_decay, dt, IN_PREC: tl.constexpr):
    """One chunk of the recurrence on a state tile: ``v_new = Tβ (V − (exp(γ)⊙K) S)`` and
    ``S ← exp(γ_C) S + Kᵀ (exp(γ_C − γ)⊙v_new)``. exp(γ) scales the rows of K S after the dot, so K
    feeds both dots straight from one load."""
    k_s = tl.dot(k_c, state_op, input_precision=IN_PREC) * tl.exp(gam)[:, None]
    v_new = tl.dot(t_beta, (v_c - k_s).to(dt), input_precision=IN_PREC)
    v_dec = (v_new * to_end[:, None]).to(dt)
    state = tl.dot(tl.trans(k_c), v_dec, acc=state * chunk_decay, input_precision=IN_PREC)
    return v_new, state


@triton.jit
def _segment_chunks(
    state,
    k,
    gates,
    n_tokens,
    v,
    tbeta,
    bos,
    eos,
    c_lo,
    seg_chunks,
    h,
    hv,
    offs_k,
    mask_k,
    v_cols,
    mask_v,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BV: tl.constexpr,
    IN_PREC: tl.constexpr,
    COLS: tl.constexpr,
    HAS_V: tl.constexpr,
):
    """The segment pass's chunk loop on one column tile: the recurrence over ``seg_chunks`` full chunks
    from ``state``, with the real V (``HAS_V``, a tile of B) or V = 0 (a tile of M)."""
    BT: tl.constexpr = 64
    dt = k.dtype.element_ty
    rows = tl.arange(0, BT)
    c_last = c_lo + seg_chunks - 1
    gam_next, to_end_next, decay_next = _chunk_gates(gates, n_tokens, hv, HV, bos, eos, c_lo, rows, True)
    for c in range(c_lo, c_lo + seg_chunks):
        tok0, _ = _chunk_rows(bos, eos, c, rows)
        gam, to_end, chunk_decay = gam_next, to_end_next, decay_next
        # The next chunk's gate sums, loaded a step ahead: measured, the pass takes 1.04 ms at 64k tokens
        # against 1.18 with them loaded in the step (H200). Within the segment,
        # whose chunks are all full, so unmasked: its last step loads its own chunk again, unused.
        gam_next, to_end_next, decay_next = _chunk_gates(
            gates, n_tokens, hv, HV, bos, eos, tl.minimum(c + 1, c_last), rows, True
        )
        k_c = _load_rows(k + h * K, tok0, rows, rows, H * K, offs_k, mask_k, False, COLS)
        t_c = _load_rows(tbeta + hv * BT, tok0, rows, rows, HV * BT, rows, rows, False, False)
        if HAS_V:
            v_c = _load_rows(v + hv * V, tok0, rows, rows, HV * V, v_cols, mask_v, False, COLS)
        else:
            v_c = tl.zeros([BT, BV], dt)
        v_new, state = _advance(state, state.to(dt), k_c, t_c, v_c, gam, to_end, chunk_decay, dt, IN_PREC)
    return state


@triton.jit
def _gdn_chunk_segment_kernel(
    k,
    gates,
    n_tokens,
    v,
    tbeta,
    state_pool,
    state_indices,
    schedule,
    n_programs,
    affine,
    start,
    pool_slot_stride,
    seg_chunks,
    N,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BN: tl.constexpr,
    IN_PREC: tl.constexpr,
):
    i_c = tl.program_id(0)
    hv = tl.program_id(1)
    pid = tl.program_id(2)
    h = hv // (HV // H)
    n, j, bos, eos, n_segs, first_non_last = _scheduled(schedule, pid, n_programs, True)
    if n >= N:
        return
    slot = tl.load(state_indices + n).to(tl.int64)
    if slot < 0:
        return
    NV: tl.constexpr = (V + BV - 1) // BV
    is_m = i_c >= NV  # a column tile of M (K×K) rather than of B (K×V)
    if (j == 0) & is_m:
        return  # the first segment runs from the pool state: no M needed

    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    cols = tl.where(is_m, i_c - NV, i_c) * BV + tl.arange(0, BV)
    mask_c = cols < tl.where(is_m, K, V)
    tile_mask = mask_k[:, None] & mask_c[None, :]
    row = _scratch_rows(pid, hv, offs_k, HV, K)
    if j == 0:
        s_ptrs = _pool_tile(state_pool, slot, pool_slot_stride, hv, offs_k, cols, K, V)
        state = tl.load(s_ptrs, mask=tile_mask, other=0.0)
        tl.store(start + row * V + cols[None, :], state, mask=tile_mask)
    else:
        state = tl.where(is_m & (offs_k[:, None] == cols[None, :]), 1.0, 0.0)

    # A segment that is not its sequence's last has only full chunks: no row predicates on its tiles,
    # and none on the columns where the tiles divide K and V.
    COLS: tl.constexpr = (K != BK) or (K % BV != 0) or (V % BV != 0)
    # M's columns run with V = 0: a loop of their own that loads no v (two copies of the chunk step).
    if is_m:
        state = _segment_chunks(
            state, k, gates, n_tokens, v, tbeta, bos, eos, j * seg_chunks, seg_chunks, h, hv, offs_k, mask_k,
            cols, mask_c, H, HV, K, V, BV, IN_PREC, COLS, False,
        )  # fmt: skip
    else:
        state = _segment_chunks(
            state, k, gates, n_tokens, v, tbeta, bos, eos, j * seg_chunks, seg_chunks, h, hv, offs_k, mask_k,
            i_c * BV + tl.arange(0, BV), i_c * BV + tl.arange(0, BV) < V, H, HV, K, V, BV, IN_PREC, COLS, True,
        )  # fmt: skip

    tl.store(affine + row * (V + K) + tl.where(is_m, V, 0) + cols[None, :], state, mask=tile_mask)


@triton.jit
def _through_segment(
    affine,
    state,
    seg,
    hv,
    offs_k,
    offs_v,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    PREC: tl.constexpr,
):
    """S ← M S + B, with the affine map of non-last segment ``seg`` (its rows of ``affine``)."""
    mask_k = offs_k < K
    row = _scratch_rows(seg, hv, offs_k, HV, K)
    m = tl.load(
        affine + row * (V + K) + V + offs_k[None, :], mask=mask_k[:, None] & mask_k[None, :], other=0.0
    )
    b = tl.load(
        affine + row * (V + K) + offs_v[None, :], mask=mask_k[:, None] & (offs_v < V)[None, :], other=0.0
    )
    return tl.dot(m, state, acc=b, input_precision=PREC)


@triton.jit
def _gdn_chunk_carry_kernel(
    affine,
    carry,
    state_indices,
    cu_seqlens,
    seg_chunks,
    N,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BN: tl.constexpr,
    PREC: tl.constexpr,
):
    """The initial state of every segment after a sequence's first, in order: segment 0's end state
    carried through the (M, B) of the segments between. One program per (V tile, value head, split
    sequence), so the state pass loads its initial state instead of multiplying it out (the K×K fp32
    operand of that product took 120 KiB of the state pass's shared memory)."""
    i_v = tl.program_id(0)
    hv = tl.program_id(1)
    pid = tl.program_id(2)
    n, j, bos, eos, n_segs, first_non_last = _locate(cu_seqlens, N, pid, seg_chunks, BN, True)
    if (n >= N) | (j != 0):
        return  # one program per split sequence: the one of its first segment
    if tl.load(state_indices + n) < 0:
        return
    offs_k = tl.arange(0, BK)
    offs_v = i_v * BV + tl.arange(0, BV)
    tile_mask = (offs_k < K)[:, None] & (offs_v < V)[None, :]
    row = _scratch_rows(first_non_last, hv, offs_k, HV, K)
    state = tl.load(affine + row * (V + K) + offs_v[None, :], mask=tile_mask, other=0.0)
    tl.store(carry + row * V + offs_v[None, :], state, mask=tile_mask)
    for i in range(1, n_segs - 1):
        state = _through_segment(affine, state, first_non_last + i, hv, offs_k, offs_v, HV, K, V, PREC)
        row = _scratch_rows(first_non_last + i, hv, offs_k, HV, K)
        tl.store(carry + row * V + offs_v[None, :], state, mask=tile_mask)


@triton.jit
def _output_chunk(
    state,
    heads,
    gates,
    n_tokens,
    bos,
    eos,
    c,
    hv,
    offs_k,
    mask_k,
    offs_v,
    mask_v,
    scale,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    IN_PREC: tl.constexpr,
    ROWS: tl.constexpr,
    COLS: tl.constexpr,
    descs=None,
    TMA: tl.constexpr = False,
):
    """One chunk of the state pass on its state tile: the output rows, written, and the next state.
    ``heads`` = (q, k, v, Tβ, o) at token 0 of this program's heads; ``ROWS`` / ``COLS``: whether the
    chunk may be partial / the tiles may overhang K or V (``_load_rows``). ``TMA``: a whole chunk's
    tiles come through ``descs`` = (q, k, v, Tβ tensor descriptors, their column offsets q/k, v, Tβ)."""
    BT: tl.constexpr = 64
    q_head, k_head, v_head, t_head, o_head = heads
    rows = tl.arange(0, BT)
    tok0, ok = _chunk_rows(bos, eos, c, rows)
    # Not a step ahead as in the segment pass: here that pushed the spills from 568 to 668 bytes and
    # made the prefill slower (measured on the H200: 3.81 ms at 64k tokens against 3.54).
    gam, to_end, chunk_decay = _chunk_gates(gates, n_tokens, hv, HV, bos, eos, c, rows, not ROWS)
    if TMA:
        q_desc, k_desc, v_desc, t_desc, col_qk, col_v, col_t = descs
        row0 = tok0.to(tl.int32)
        q_c = q_desc.load([row0, col_qk])
        k_c = k_desc.load([row0, col_qk])
        t_c = t_desc.load([row0, col_t])
        v_c = v_desc.load([row0, col_v])
    else:
        q_c = _load_rows(q_head, tok0, rows, ok, H * K, offs_k, mask_k, ROWS, COLS)
        k_c = _load_rows(k_head, tok0, rows, ok, H * K, offs_k, mask_k, ROWS, COLS)
        t_c = _load_rows(t_head, tok0, rows, ok, HV * BT, rows, rows, ROWS, False)
        v_c = _load_rows(v_head, tok0, rows, ok, HV * V, offs_v, mask_v, ROWS, COLS)
    # P = scale (Q Kᵀ ⊙ E) from the tiles loaded anyway: cheaper than a stored P's bytes and shared
    # memory (it lets two programs per SM pipeline their loads). scale·E_ij = 2^(a_i − b_j) with
    # b = γ·log2 e and a = b + log2(scale): one add and one MUFU an element (the exponent is off by
    # ~|γ|·2e-7 from the roundings, within the fp32 tests' bound). Above the diagonal it may overflow to
    # inf; the causal select after the product discards it.
    dt = q_head.dtype.element_ty
    qk = tl.dot(q_c, tl.trans(k_c), input_precision=IN_PREC)
    b_log2 = gam * _LOG2E
    a_log2 = b_log2 + tl.log2(scale)
    p_c = tl.where(rows[:, None] >= rows[None, :], qk * _exp2(a_log2[:, None] - b_log2[None, :]), 0.0).to(dt)

    # scale (Q⊙exp(γ)) S as a row scale of Q S, so Q feeds the dot straight from its load.
    state_op = state.to(dt)
    out = tl.dot(q_c, state_op, input_precision=IN_PREC) * (tl.exp(gam) * scale)[:, None]
    v_new, state = _advance(state, state_op, k_c, t_c, v_c, gam, to_end, chunk_decay, dt, IN_PREC)
    out = tl.dot(p_c, v_new.to(dt), acc=out, input_precision=IN_PREC)
    _store_rows(o_head, tok0, rows, ok, HV * V, offs_v, mask_v, out, ROWS, COLS)
    return state


@triton.jit
def _gdn_chunk_state_kernel(
    q,
    k,
    v,
    gates,
    n_tokens,
    tbeta,
    o,
    q_desc,
    k_desc,
    v_desc,
    t_desc,
    state_pool,
    state_indices,
    schedule,
    n_programs,
    start,
    carry,
    pool_slot_stride,
    scale,
    seg_chunks,
    N,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BN: tl.constexpr,
    IN_PREC: tl.constexpr,
    TMA: tl.constexpr,
):
    BT: tl.constexpr = 64
    i_v = tl.program_id(0)
    hv = tl.program_id(1)
    pid = tl.program_id(2)
    h = hv // (HV // H)
    n, j, bos, eos, n_segs, first_non_last = _scheduled(schedule, pid, n_programs, False)
    if n >= N:
        return
    slot = tl.load(state_indices + n).to(tl.int64)
    n_chunks = (eos - bos + BT - 1) // BT
    c_lo = j * seg_chunks
    c_hi = tl.minimum(c_lo + seg_chunks, n_chunks)

    rows = tl.arange(0, BT)
    offs_k = tl.arange(0, BK)
    offs_v = i_v * BV + tl.arange(0, BV)
    mask_k = offs_k < K
    mask_v = offs_v < V
    o_head = o + hv * V

    if slot < 0:
        # Padding: nothing read or written in the pool, output rows zero.
        for c in range(c_lo, c_hi):
            tok0, ok = _chunk_rows(bos, eos, c, rows)
            zero = tl.zeros([BT, BV], tl.float32)
            _store_rows(o_head, tok0, rows, ok, HV * V, offs_v, mask_v, zero, True, True)
        return

    # The state tile S[K, BV] (logical K×V); the pool stores Sᵀ, K last.
    tile_mask = mask_k[:, None] & mask_v[None, :]
    s_ptrs = _pool_tile(state_pool, slot, pool_slot_stride, hv, offs_k, offs_v, K, V)
    first = _scratch_rows(first_non_last, hv, offs_k, HV, K)
    if n_segs == 1:
        state = tl.load(s_ptrs, mask=tile_mask, other=0.0)
    elif j == 0:
        state = tl.load(start + first * V + offs_v[None, :], mask=tile_mask, other=0.0)
    else:
        row = _scratch_rows(first_non_last + j - 1, hv, offs_k, HV, K)
        state = tl.load(carry + row * V + offs_v[None, :], mask=tile_mask, other=0.0)

    # Every chunk but a sequence's last is full: those run without row predicates on their tiles (and
    # without column ones where the tiles divide K and V); a partial last chunk runs after the loop.
    heads = (q + h * K, k + h * K, v + hv * V, tbeta + hv * BT, o_head)
    COLS: tl.constexpr = (K != BK) or (V % BV != 0)
    full_hi = tl.minimum(c_hi, (eos - bos) // BT)
    descs = (q_desc, k_desc, v_desc, t_desc, h * K, hv * V + i_v * BV, hv * BT)
    for c in range(c_lo, full_hi):
        state = _output_chunk(
            state, heads, gates, n_tokens, bos, eos, c, hv, offs_k, mask_k, offs_v, mask_v, scale,
            H, HV, K, V, IN_PREC, False, COLS, descs, TMA and not COLS,
        )  # fmt: skip
    if full_hi < c_hi:
        state = _output_chunk(
            state, heads, gates, n_tokens, bos, eos, full_hi, hv, offs_k, mask_k, offs_v, mask_v, scale,
            H, HV, K, V, IN_PREC, True, True,
        )  # fmt: skip

    if j == n_segs - 1:
        tl.store(s_ptrs, state, mask=tile_mask)


def _launch_segments(k, gates, v, tbeta, state_pool, state_indices, schedule, config):
    """Launch 2 (only if some sequence can be longer than one segment): (M, B) of every segment that
    is not its sequence's last — at most T // (64·seg_chunks) of them — and the first segments' states."""
    T, HV, V = v.shape
    K = k.shape[2]
    N = state_indices.shape[0]
    non_last = T // (CHUNK * config.seg_chunks)
    if non_last == 0:
        return None, None
    affine = chunk_common._empty((non_last, HV, K, V + K), torch.float32, v.device)
    start = chunk_common._empty((non_last, HV, K, V), torch.float32, v.device)
    grid = (triton.cdiv(V, config.block_v) + triton.cdiv(K, config.block_v), HV, non_last)
    _gdn_chunk_segment_kernel[grid](
        k,
        gates,
        T,
        v,
        tbeta,
        state_pool,
        state_indices,
        schedule,
        schedule.shape[1],
        affine,
        start,
        state_pool.stride(0),
        config.seg_chunks,
        N,
        BV=config.block_v,
        num_warps=config.state_warps,
        num_stages=config.segment_stages,
        V=V,
        **({"maxnreg": config.segment_maxnreg} if config.segment_maxnreg else {}),
        **_common(k, HV, state_indices),
    )
    return affine, start


def _launch_carry(affine, state_indices, cu_seqlens, dtype, config):
    """Launch 2b (some sequence split): the initial state of every segment after a sequence's first,
    indexed like the non-last segments (segment j of a sequence reads row j − 1 of its own)."""
    if affine is None:
        return None
    non_last, HV, K, VK = affine.shape
    V = VK - K
    N = state_indices.shape[0]
    carry = chunk_common._empty((non_last, HV, K, V), torch.float32, affine.device)
    _gdn_chunk_carry_kernel[(triton.cdiv(V, config.block_v), HV, non_last)](
        affine,
        carry,
        state_indices,
        cu_seqlens,
        config.seg_chunks,
        N,
        HV=HV,
        K=K,
        V=V,
        BK=_block_k(K),
        BV=config.block_v,
        BN=_block_n(N),
        PREC=_solve_precision(dtype),
        num_warps=config.carry_warps,
        num_stages=config.carry_stages,
    )
    return carry


def _launch_state(q, k, v, gates, tbeta, o, state_pool, state_indices, schedule, start, carry, scale, config):
    """Launch 3: the state pass over every segment with the output fused in; updates the pool in place."""
    T, HV, V = v.shape
    N = state_indices.shape[0]
    if start is None:  # no sequence is split: never read (the kernel never branches there)
        start = carry = state_pool
    segments = schedule.shape[1]  # _segment_programs
    descs = chunk_tma.tile_descriptors(q, k, v, tbeta, config.block_v)
    _gdn_chunk_state_kernel[(triton.cdiv(V, config.block_v), HV, segments)](
        q,
        k,
        v,
        gates,
        T,
        tbeta,
        o,
        *(descs or (None,) * 4),
        state_pool,
        state_indices,
        schedule,
        segments,
        start,
        carry,
        state_pool.stride(0),
        float(scale),
        config.seg_chunks,
        N,
        BV=config.block_v,
        TMA=descs is not None,
        num_warps=config.state_warps,
        num_stages=config.state_stages,
        V=V,
        **_common(q, HV, state_indices),
    )
