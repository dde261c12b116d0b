"""The lightning prefill's output pass in Gluon, for sm_90 (H100 / H200): ``chunk._lightning_output_kernel``'s
math and roundings with its copies, waits and barriers placed by hand (``chunk.LaunchConfig.gluon``, on
where ``supported``; GPU tests and memcheck on the H200, speed in benchmarks/RESULTS.md).

One program per (global segment, value head, V tile of ``BV``), one warpgroup. Per whole chunk, with the
q / k / v tiles in one of two TMA buffers (an mbarrier each) and S the fp32 [K, BV] state in the wgmma
accumulator layout:

- S is stored as this step's bf16 B operand (one barrier), then Q S and Q Kᵀ are issued as async wgmma;
- while they run: the previous step's output rows leave (shared memory, TMA store), V's rows are
  weighted by exp((63 − j) g) into a bf16 operand (second barrier), the next chunk's copies are issued
  (every thread is past its wait for the last wgmma that read that buffer), and the state product
  ``exp(64 g) S + Kᵀ (w ⊙ V)`` is issued;
- P = Q Kᵀ ⊙ scale·exp((i − j) g) (causal) becomes a register A operand of ``P V``, accumulated onto
  ``scale·exp((i + 1) g) ⊙ (Q S)``; the state is waited for, the output rows complete behind the next
  step's first products.

A segment's partial last chunk runs after the loop from masked pointer loads into the same tiles. The
segment pass and the segment schedule are ``chunk``'s (the initial state of a later segment: the first
segment's copy carried through the B of those before it, as there).
"""

from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from stampgen.kernels.chunked.common import LOG2E
from stampgen.kernels.chunked.gluon_pdl import wait_for_primary
from stampgen.kernels.gdn.chunk_tma import descriptor

_LOG2E = gl.constexpr(LOG2E)


@gluon.jit
def _segment_of_program(seg_offsets, N, HV: gl.constexpr, V: gl.constexpr, BV: gl.constexpr):
    """(global segment, sequence, segment within it, segments of the sequence, value head, V tile's first
    column): ``chunk._segment_of_program``, the sequence found by a binary search over the offsets."""
    pid = gl.program_id(0)
    NV: gl.constexpr = (V + BV - 1) // BV
    i_v = pid % NV
    i_hv = (pid // NV) % HV
    s = pid // (NV * HV)
    lo = s * 0
    hi = s * 0 + N + 1  # offsets[hi] > s, offsets[N + 1] read as +inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        below = gl.load(seg_offsets + mid) <= s
        lo = gl.where(below, mid, lo)
        hi = gl.where(below, hi, mid)
    n = gl.minimum(lo, N - 1)
    first_seg = gl.load(seg_offsets + n)
    n_segs = gl.load(seg_offsets + n + 1) - first_seg
    return s, n, s - first_seg, n_segs, i_hv, i_v * BV


@gluon.jit
def _state_tile(
    base, V: gl.constexpr, K: gl.constexpr, v0, BV: gl.constexpr, layout: gl.constexpr, K_MAJOR: gl.constexpr
):
    """Pointers to the [K, BV] tile of a [V, K] pool row (``K_MAJOR`` False: the pool stores Sᵀ) or of a
    [K, V] scratch row (``K_MAJOR``: ``partial`` / ``start``) at ``base``."""
    rows = gl.arange(0, K, layout=gl.SliceLayout(1, layout))
    cols = v0 + gl.arange(0, BV, layout=gl.SliceLayout(0, layout))
    if K_MAJOR:
        return base + rows[:, None] * V + cols[None, :]
    return base + cols[None, :] * K + rows[:, None]


@gluon.jit
def _copy_tiles(descs, bufs, bar, row, col_qk, col_v, nbytes: gl.constexpr, pred):
    """TMA copies of the q / k / v tiles of the whole chunk at ``row`` into one buffer, counted on ``bar``."""
    q_desc, k_desc, v_desc = descs
    q_s, k_s, v_s = bufs
    mbarrier.expect(bar, nbytes, pred=pred)
    tma.async_copy_global_to_shared(q_desc, [row, col_qk], bar, q_s, pred=pred)
    tma.async_copy_global_to_shared(k_desc, [row, col_qk], bar, k_s, pred=pred)
    tma.async_copy_global_to_shared(v_desc, [row, col_v], bar, v_s, pred=pred)


@gluon.jit
def _load_tile(dst, base, tok0, n_rows, row_stride, COLS: gl.constexpr, layout: gl.constexpr):
    """Rows [tok0, tok0 + n_rows) of a [T, row_stride] view's column block at ``base`` into ``dst``
    ([64, COLS]), rows past ``n_rows`` as zeros (a partial chunk: TMA would read the next sequence)."""
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    ptrs = base + (tok0 + rows.to(gl.int64))[:, None] * row_stride + cols[None, :]
    dst.store(gl.load(ptrs, mask=(rows < n_rows)[:, None], other=0.0))


@gluon.jit
def _step(state, q_t, k_t, v_t, s_s, w_s, weights, acc_v: gl.constexpr, acc_t: gl.constexpr,
          p_op: gl.constexpr, BV: gl.constexpr):  # fmt: skip
    """One chunk on tiles in shared memory, S already in ``s_s``: returns (output rows in flight, P, the
    next state, waited for). ``weights`` = (scale·E [64, 64], scale·exp((i + 1) g), V's row weights,
    exp(L g))."""
    intra, q_decay, v_decay, chunk_decay = weights
    qs = warpgroup_mma(q_t, s_s, gl.zeros([64, BV], gl.float32, acc_v), use_acc=False, is_async=True)
    qk = warpgroup_mma(
        q_t, k_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc_t), use_acc=False, is_async=True
    )
    w_s.store((v_t.load(acc_v).to(gl.float32) * v_decay[:, None]).to(w_s.dtype))
    fence_async_shared()
    gl.thread_barrier()
    state = warpgroup_mma(k_t.permute((1, 0)), w_s, state * chunk_decay, is_async=True)
    qs, qk = warpgroup_mma_wait(num_outstanding=1, deps=(qs, qk))
    p = gl.convert_layout((qk * intra).to(s_s.dtype), p_op)
    out = warpgroup_mma(p, v_t, qs * q_decay[:, None], is_async=True)
    state = warpgroup_mma_wait(num_outstanding=1, deps=(state,))
    return out, p, state


@gluon.jit
def _lightning_gluon_output_kernel(
    q_desc, k_desc, v_desc, o_desc,
    q, k, v, g, o, partial, start, state_pool, state_indices, cu_seqlens, seg_offsets,
    N, pool_slot_stride, scale,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    SEG_CHUNKS: gl.constexpr,
    PDL: gl.constexpr,
):  # fmt: skip
    s, n, i_s, n_segs, hv, v0 = _segment_of_program(seg_offsets, N, HV, V, BV)
    if i_s >= n_segs:
        return  # past the last segment
    h = hv // (HV // H)
    col_qk = h * K
    col_v = hv * V + v0
    bos = gl.load(cu_seqlens + n).to(gl.int32)  # TMA coordinates are 32-bit
    eos = gl.load(cu_seqlens + n + 1).to(gl.int32)
    first = bos + i_s * (SEG_CHUNKS * 64)
    last = gl.minimum(first + SEG_CHUNKS * 64, eos)
    n_full = (last - first) // 64
    tail = (last - first) % 64
    slot = gl.load(state_indices + n).to(gl.int64)

    acc_v: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BV, 16]
    )
    acc_t: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16]
    )
    p_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_v, k_width=2)
    rows_v: gl.constexpr = gl.SliceLayout(1, acc_v)
    ld_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    r_v = gl.arange(0, 64, layout=rows_v)
    c_v = gl.arange(0, BV, layout=gl.SliceLayout(0, acc_v))
    r_t = gl.arange(0, 64, layout=gl.SliceLayout(1, acc_t))
    c_t = gl.arange(0, 64, layout=gl.SliceLayout(0, acc_t))

    if slot < 0:  # padding: output rows zero, nothing read or written in the pool
        for c in range((last - first + 63) // 64):
            tok = first + c * 64 + r_v
            ptrs = o + col_v + c_v[None, :] + tok.to(gl.int64)[:, None] * (HV * V)
            gl.store(ptrs, gl.zeros([64, BV], o.dtype.element_ty, acc_v), mask=(tok < last)[:, None])
        return

    # The segment's initial state: the pool row, or the first segment's copy carried through the B
    # of the segments before this one (chunk.py's segment pass wrote both).
    gamma = gl.load(g + hv)
    if n_segs == 1:
        state = gl.load(
            _state_tile(state_pool + slot * pool_slot_stride + hv * (V * K), V, K, v0, BV, acc_v, False)
        )
    else:
        s0 = (s - i_s).to(gl.int64)
        state = gl.load(_state_tile(start + (s0 * HV + hv) * (K * V), V, K, v0, BV, acc_v, True))
        seg_decay = gl.exp2((SEG_CHUNKS * 64) * gamma * _LOG2E)
        if PDL:
            # launched as the segment pass's programmatic dependent (``LaunchConfig.gluon_pdl``): a
            # later segment's program waits before its first read of the segment pass's B; a first
            # segment's reads only the pool or the copy of it made before, so it runs beside that pass
            if i_s > 0:
                wait_for_primary()
        for j in range(i_s):
            b = gl.load(_state_tile(partial + ((s0 + j) * HV + hv) * (K * V), V, K, v0, BV, acc_v, True))
            state = state * seg_decay + b

    steps = (r_t[:, None] - c_t[None, :]).to(gl.float32)
    intra = gl.where(steps >= 0, gl.exp2(steps * gamma * _LOG2E), 0.0) * scale  # above: inf, discarded
    q_decay = gl.exp2((r_v + 1).to(gl.float32) * gamma * _LOG2E) * scale
    v_decay = gl.exp2((63 - r_v).to(gl.float32) * gamma * _LOG2E)
    chunk_decay = gl.exp2(64 * gamma * _LOG2E)
    weights = (intra, q_decay, v_decay, chunk_decay)

    dt: gl.constexpr = q_desc.dtype
    q_s = gl.allocate_shared_memory(dt, [2, 64, K], q_desc.layout)
    k_s = gl.allocate_shared_memory(dt, [2, 64, K], k_desc.layout)
    v_s = gl.allocate_shared_memory(dt, [2, 64, BV], v_desc.layout)
    o_s = gl.allocate_shared_memory(dt, [2, 64, BV], o_desc.layout)  # a TMA store may still read one
    s_s = gl.allocate_shared_memory(dt, [K, BV], gl.NVMMASharedLayout.get_default_for([K, BV], dt))
    w_s = gl.allocate_shared_memory(dt, [64, BV], gl.NVMMASharedLayout.get_default_for([64, BV], dt))
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    nbytes: gl.constexpr = 2 * q_desc.block_type.nbytes + v_desc.block_type.nbytes
    descs = (q_desc, k_desc, v_desc)
    _copy_tiles(descs, (q_s.index(0), k_s.index(0), v_s.index(0)), bars.index(0), first, col_qk, col_v,
                nbytes, n_full > 0)  # fmt: skip

    out = warpgroup_mma_init(gl.zeros([64, BV], gl.float32, acc_v))
    p = gl.zeros([64, 64], dt, p_op)
    for c in range(n_full):
        stage = c % 2
        tok0 = first + c * 64
        # The previous step's P V, the last reader of the other buffer's V tile, is done here; the TMA
        # store before the last, which read the output buffer filled below, too (waited for before the
        # barrier, so every thread writes that buffer after it).
        out, p = warpgroup_mma_wait(num_outstanding=0, deps=(out, p))
        tma.store_wait(pendings=1)
        s_s.store(state.to(dt))  # S as this step's operand
        fence_async_shared()
        gl.thread_barrier()
        # Every thread is past its waits for the last readers of the other buffer: the next chunk's
        # copies go there now, a whole step ahead.
        _copy_tiles(descs, (q_s.index(1 - stage), k_s.index(1 - stage), v_s.index(1 - stage)),
                    bars.index(1 - stage), tok0 + 64, col_qk, col_v, nbytes, c + 1 < n_full)  # fmt: skip
        if c > 0:  # the previous rows into their buffer; _step's fence and barrier precede their TMA store
            o_s.index(1 - stage).store(out.to(dt))
        mbarrier.wait(bars.index(stage), (c // 2) & 1)
        out, p, state = _step(
            state,
            q_s.index(stage),
            k_s.index(stage),
            v_s.index(stage),
            s_s,
            w_s,
            weights,
            acc_v,
            acc_t,
            p_op,
            BV,
        )
        if c > 0:
            tma.async_copy_shared_to_global(o_desc, [tok0 - 64, col_v], o_s.index(1 - stage))

    out, p = warpgroup_mma_wait(num_outstanding=0, deps=(out, p))
    if n_full > 0:
        tma.store_wait(pendings=1)
        gl.thread_barrier()
        o_s.index((n_full - 1) % 2).store(out.to(dt))
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(
            o_desc, [first + (n_full - 1) * 64, col_v], o_s.index((n_full - 1) % 2)
        )

    if tail > 0:  # the partial last chunk: masked loads into the tiles, its own V weights, masked stores
        tok0 = first + n_full * 64
        gl.thread_barrier()
        _load_tile(q_s.index(0), q + col_qk, tok0, tail, H * K, K, ld_layout)
        _load_tile(k_s.index(0), k + col_qk, tok0, tail, H * K, K, ld_layout)
        _load_tile(v_s.index(0), v + col_v, tok0, tail, HV * V, BV, ld_layout)
        s_s.store(state.to(dt))
        fence_async_shared()
        gl.thread_barrier()
        length = tail.to(gl.float32)
        tail_v = gl.where(
            r_v < tail, gl.exp2(gl.maximum(length - 1 - r_v.to(gl.float32), 0.0) * gamma * _LOG2E), 0.0
        )
        tail_weights = (intra, q_decay, tail_v, gl.exp2(length * gamma * _LOG2E))
        out, p, state = _step(
            state, q_s.index(0), k_s.index(0), v_s.index(0), s_s, w_s, tail_weights, acc_v, acc_t, p_op, BV
        )
        out, p = warpgroup_mma_wait(num_outstanding=0, deps=(out, p))
        tok = tok0 + r_v
        ptrs = o + col_v + c_v[None, :] + tok.to(gl.int64)[:, None] * (HV * V)
        gl.store(ptrs, out.to(o.dtype.element_ty), mask=(tok < last)[:, None])

    tma.store_wait(pendings=0)
    mbarrier.invalidate(bars.index(0))
    mbarrier.invalidate(bars.index(1))
    if i_s == n_segs - 1:
        gl.store(
            _state_tile(state_pool + slot * pool_slot_stride + hv * (V * K), V, K, v0, BV, acc_v, False),
            state,
        )


def launch_output(q, k, v, g, o, partial, start, state_pool, state_indices, cu_seqlens, seg_offsets, scale,
                  *, seg_chunks: int, block_v: int, grid: int, pdl: bool = False) -> None:  # fmt: skip
    """The output pass over every segment (where ``supported``: the caller checks); ``pdl``: launched as
    the segment pass's programmatic dependent (that launch must have called ``gdc_launch_dependents``)."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    descs = (descriptor(q, K), descriptor(k, K), descriptor(v, block_v), descriptor(o, block_v))
    _lightning_gluon_output_kernel[(grid,)](
        *descs, q, k, v, g, o, partial, start, state_pool, state_indices, cu_seqlens, seg_offsets,
        state_indices.shape[0], state_pool.stride(0), float(scale),
        H=H, HV=HV, K=K, V=V, BV=block_v, SEG_CHUNKS=seg_chunks, PDL=pdl, num_warps=4, launch_pdl=pdl,
    )  # fmt: skip


def supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_v: int) -> bool:
    """Whether this pass applies: sm_90, bf16, K = 128 and V tiles of 64 (what the H200 ran: V tiles of
    32 faulted there, in the GPU test's sequences that fill a segment of 100 chunks), TMA-aligned."""
    from stampgen.kernels.gdn.chunk_tma import tiles_apply

    return (
        q.dtype == torch.bfloat16
        and q.shape[2] == 128
        and block_v == 64
        and tiles_apply(q, k, v)
        and v.shape[2] % block_v == 0
    )
