"""The chunked GDN prefill's state pass (launch 3 of ``chunk_state``) in Gluon for sm_90, over the same
segments: the state transposed, Sᵀ [BV, K] in the wgmma accumulator, so that every product of the state's
chain takes its left operand from registers.

``chunk_gluon``'s pass holds S [K, BV] and feeds it, and V − K S and v_new after it, to the next product
as B operands through shared memory: a store, a fence and a barrier between each dependent pair of
products, and V tiles of 32 columns (its registers). Here, with uᵀ = Vᵀ − (K S)ᵀ and so on:

- (K S)ᵀ = Sᵀ Kᵀ and (Q S)ᵀ = Sᵀ Qᵀ take Sᵀ (bf16) as the register A operand, Kᵀ / Qᵀ from the TMA tiles;
- v_newᵀ = uᵀ Tβᵀ takes uᵀ from registers (an accumulator becomes an A operand in place, as
  FlashAttention-3 feeds P), and so does the update Sᵀ ← exp(γ_C) Sᵀ + (exp(γ_C − γ)⊙v_new)ᵀ K;
- the output rows oᵀ = scale exp(γ)⊙(Q S)ᵀ + v_newᵀ Pᵀ take P (made from Q Kᵀ, off the chain) as the
  only operand written to shared memory in a step: one barrier a step, not on the state's chain;
- one warpgroup per 64 columns of a (V tile, value head, segment): at V tiles of 128 (the default) two
  warpgroups share the q / k / Tβ tiles a step reads, and their two state chains (each bound by its
  products' latency) interleave on the SM; one program per SM (255 registers a thread).

The same math and roundings as ``chunk_gluon`` and the Triton pass (S, V − K S and v_new rounded to the
input dtype where they enter a product). Segments, their schedule and their initial states are the Triton
passes' (``chunk_state``): a program reads its row of the schedule, starts from the pool row, the segment
pass's copy of it or the carry launch's state, and only a sequence's last segment writes the pool row.

Every product is waited for within the step that issues it: ptxas serializes all of a kernel's wgmma
(warning C7514, "non wgmma instructions reading accumulator registers", each k-step waited for before
the next) when one stays in flight across the loop's back edge, as the output rows' product did while
it was waited for under the next step's reads (``benchmarks/gdn_kernel_resources.py`` names a
serialized kernel in its ``wgmma`` column).

Measured on the H200 (benchmarks/RESULTS.md): at V tiles of 128, 16×2048 0.614 ms (0.672 with the
serialized wgmma, 0.792 with the Triton state pass), 4×8192 0.596 (0.646, 0.779); at 64 (one warpgroup
a program, measured serialized) slower than the Triton pass (0.939 and 0.916). GPU tests:
``tests/kernels/test_gdn_chunk_gluon_gpu.py``.
"""

from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from stampgen.kernels.gdn.chunk_common import _LOG2E, _SCHEDULE_ROW, CHUNK
from stampgen.kernels.gdn.chunk_config import LaunchConfig
from stampgen.kernels.gdn.chunk_gluon import _copy_tiles, _gate_loads, _gates_ready, _load_tile, _masked_p
from stampgen.kernels.gdn.chunk_tma import descriptor, tiles_apply


def supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block_v: int) -> bool:
    """Whether this pass applies: ``tiles_apply(q, k, v)`` and V a multiple of the V tile (64 or 128)."""
    return block_v in (64, 128) and tiles_apply(q, k, v) and v.shape[2] % block_v == 0


@gluon.jit
def _reads(state, q_t, k_t, dt: gl.constexpr, a_c: gl.constexpr, acc_c: gl.constexpr, acc_p: gl.constexpr,
           BV: gl.constexpr):  # fmt: skip
    """(K S)ᵀ, Q Kᵀ and (Q S)ᵀ as async wgmma, in the order the step waits for them, and Sᵀ as their
    register operand (to be kept alive until they are waited for)."""
    s_op = gl.convert_layout(state.to(dt), a_c)
    ks = warpgroup_mma(s_op, k_t.permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c), use_acc=False,
                       is_async=True)  # fmt: skip
    qk = warpgroup_mma(q_t, k_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc_p), use_acc=False,
                       is_async=True)  # fmt: skip
    qs = warpgroup_mma(s_op, q_t.permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c), use_acc=False,
                       is_async=True)  # fmt: skip
    return ks, qk, qs, s_op


@gluon.jit
def _state_ptrs(
    state_pool, state_indices, n, pool_slot_stride, hv, i_v,
    K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, acc_s: gl.constexpr,
):  # fmt: skip
    """Pointers to this program's Sᵀ [BV, K] in its pool row (the pool stores Sᵀ, K last), made before
    the chunk loop and again after it from the slot loaded again, so that the [BV, K] pointer tile is
    not held in registers through the loop."""
    return _pool_ptrs(state_pool, gl.load(state_indices + n), pool_slot_stride, hv, i_v, K, V, BV, acc_s)


@gluon.jit
def _pool_ptrs(
    state_pool, slot, pool_slot_stride, hv, i_v,
    K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, acc_s: gl.constexpr,
):  # fmt: skip
    """Pointers to Sᵀ [BV, K] of (value head ``hv``, V tile ``i_v``) in pool row ``slot``."""
    rows = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_s))
    cols = gl.arange(0, K, layout=gl.SliceLayout(0, acc_s))
    return (
        state_pool + slot.to(gl.int64) * pool_slot_stride + hv * (V * K) + rows[:, None] * K + cols[None, :]
    )


@gluon.jit
def _scratch_ptrs(
    scratch, seg, hv, i_v, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    acc_s: gl.constexpr,
):  # fmt: skip
    """Pointers to Sᵀ [BV, K] of (segment ``seg``, value head ``hv``) in the segment and carry launches'
    [segments, HV, K, V] fp32 scratch (S, not Sᵀ: V last)."""
    rows = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_s))
    cols = gl.arange(0, K, layout=gl.SliceLayout(0, acc_s))
    return scratch + (seg.to(gl.int64) * HV + hv) * (K * V) + cols[None, :] * V + rows[:, None]


@gluon.jit
def _initial_state(
    state_pool, slot, pool_slot_stride, start, carry, n_segs, j, first_non_last, hv, i_v,
    HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, acc_s: gl.constexpr,
):  # fmt: skip
    """Sᵀ [BV, K] at the start of segment ``j`` of a sequence whose pool row is ``slot``: that row (one
    segment), the copy the segment pass made of it (the first of several: the last may write the row
    first), or the state the carry launch made."""
    if n_segs == 1:
        state = gl.load(_pool_ptrs(state_pool, slot, pool_slot_stride, hv, i_v, K, V, BV, acc_s))
    elif j == 0:
        state = gl.load(_scratch_ptrs(start, first_non_last, hv, i_v, HV, K, V, BV, acc_s))
    else:
        state = gl.load(_scratch_ptrs(carry, first_non_last + j - 1, hv, i_v, HV, K, V, BV, acc_s))
    return state


@gluon.jit
def _store_gate_factors(g_s, row, gam, after):
    """A chunk's gate factors from its gate sums γ and γ_C − γ into rows ``row`` (γ·log2 e, the
    exponent of P's E), ``row + 1`` (exp γ) and ``row + 2`` (exp(γ_C − γ)) of ``g_s``."""
    g_s.index(row).store(gam * _LOG2E)
    g_s.index(row + 1).store(gl.exp(gam))
    g_s.index(row + 2).store(gl.exp(after))


@gluon.jit
def _zero_rows(o, base, end, o_rows, c_tok, HV: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
               acc_c: gl.constexpr):  # fmt: skip
    """Zeros into the output rows [base, end) of a padding sequence's segment, columns ``o_rows``."""
    for c in range((end - base + 63) // 64):
        tok = base + c * 64 + c_tok
        gl.store(o + tok.to(gl.int64)[None, :] * (HV * V) + o_rows[:, None],
                 gl.zeros([BV, 64], o.dtype.element_ty, acc_c), mask=(tok < end)[None, :])  # fmt: skip


@gluon.jit
def _store_last_and_refill(
    o_desc, o_s, descs, bufs, bars, c, tok0, col_v, base, cols, nbytes: gl.constexpr, n_chunks,
    STAGES: gl.constexpr,
):  # fmt: skip
    """Right after a step's barrier: the previous chunk's output rows out by TMA (written into their
    buffer before the barrier) and the tiles of the chunk ``STAGES − 1`` ahead in, into the buffer the
    previous step read."""
    if c > 0:
        tma.async_copy_shared_to_global(o_desc, [tok0 - 64, col_v], o_s.index((c - 1) % 2))
    ahead = c + STAGES - 1
    _copy_tiles(descs, bufs, bars, ahead % STAGES, base + ahead * 64, cols, nbytes, ahead < n_chunks)


@gluon.jit
def _output_tile(o_s, out, dt: gl.constexpr):
    """oᵀ [BV, 64] into the [64, BV] output tile ``o_s`` (row = token), for a TMA store or masked rows."""
    o_s.store(gl.permute(out.to(dt), (1, 0)))


@gluon.jit
def _gdn_gluon_batch_state_kernel(
    q_desc, k_desc, v_desc, t_desc, o_desc,
    q, k, v, tbeta, o, gates, state_pool, state_indices, schedule, start, carry,
    n_tokens, pool_slot_stride, scale, seg_chunks, N,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    STAGES: gl.constexpr,
):  # fmt: skip
    i_v = gl.program_id(0)
    hv = gl.program_id(1)
    # The segment this program runs, from the schedule the intra launch wrote (every segment's row:
    # ``chunk_common._write_schedule``; Gluon cannot call its Triton reader)
    row = schedule + gl.program_id(2).to(gl.int64) * _SCHEDULE_ROW
    n = gl.load(row).to(gl.int32)
    if n >= N:
        return
    j = gl.load(row + 1).to(gl.int32)
    bos = gl.load(row + 2).to(gl.int32)
    eos = gl.load(row + 3).to(gl.int32)
    n_segs = gl.load(row + 4).to(gl.int32)
    first_non_last = gl.load(row + 5).to(gl.int32)
    h = hv // (HV // H)
    col_qk = h * K
    col_v = hv * V + i_v * BV
    col_t = hv * 64
    c_lo = j * seg_chunks
    base = bos + c_lo * 64  # the segment's first token
    end = gl.minimum(base + seg_chunks * 64, eos)  # one past its last
    n_full = (end - base) // 64
    tail = (end - base) % 64  # a partial chunk: the sequence's last, in its last segment
    slot = gl.load(state_indices + n).to(gl.int64)

    # Accumulators: Sᵀ [BV, K]; (K S)ᵀ, (Q S)ᵀ, v_newᵀ, oᵀ [BV, 64], a warpgroup's 64 rows each; Q Kᵀ
    # [64, 64], its columns split between the warpgroups.
    W: gl.constexpr = BV // 16  # warps: a warpgroup per 64 rows of Sᵀ
    acc_s: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[W, 1], instr_shape=[16, K, 16]
    )
    acc_c: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[W, 1], instr_shape=[16, 64, 16]
    )
    acc_p: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, W // 4], instr_shape=[16, 64 // (W // 4), 16]
    )
    # register A operands: of a product into a [·, 64] accumulator (Sᵀ, uᵀ, v_newᵀ), into Sᵀ (the update)
    a_c: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_c, k_width=2)
    a_s: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_s, k_width=2)
    tok_c: gl.constexpr = gl.SliceLayout(0, acc_c)  # a token index along a [BV, 64] tile's columns
    c_tok = gl.arange(0, 64, layout=tok_c)
    rows_p: gl.constexpr = gl.SliceLayout(1, acc_p)  # P's rows and columns (tokens both)
    cols_p: gl.constexpr = gl.SliceLayout(0, acc_p)
    r_p = gl.arange(0, 64, layout=rows_p)
    c_p = gl.arange(0, 64, layout=cols_p)
    ld_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [W, 1], [1, 0])

    # oᵀ's elements by pointer (padding, the partial last chunk): column = token
    o_rows = col_v + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_c))

    if slot < 0:
        _zero_rows(o, base, end, o_rows, c_tok, HV, V, BV, acc_c)
        return

    dt: gl.constexpr = q_desc.dtype
    q_s = gl.allocate_shared_memory(dt, [STAGES, 64, K], q_desc.layout)
    k_s = gl.allocate_shared_memory(dt, [STAGES, 64, K], k_desc.layout)
    v_s = gl.allocate_shared_memory(dt, [STAGES, 64, BV], v_desc.layout)
    t_s = gl.allocate_shared_memory(dt, [STAGES, 64, 64], t_desc.layout)
    p_s = gl.allocate_shared_memory(dt, [2, 64, 64], gl.NVMMASharedLayout.get_default_for([64, 64], dt))
    o_s = gl.allocate_shared_memory(dt, [2, 64, BV], o_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    nbytes: gl.constexpr = 2 * q_desc.block_type.nbytes + v_desc.block_type.nbytes + t_desc.block_type.nbytes

    state = _initial_state(
        state_pool, gl.load(state_indices + n), pool_slot_stride, start, carry, n_segs, j, first_non_last, hv,
        i_v, HV, K, V, BV, acc_s,
    )  # fmt: skip
    descs = (q_desc, k_desc, v_desc, t_desc)
    bufs = (q_s, k_s, v_s, t_s)
    cols = (col_qk, col_qk, col_v, col_t)
    for i in gl.static_range(STAGES - 1):
        _copy_tiles(descs, bufs, bars, i, base + i * 64, cols, nbytes, i < n_full)

    gam_of_hv = gates + hv.to(gl.int64) * n_tokens
    after_of_hv = gam_of_hv + n_tokens.to(gl.int64) * HV
    log2_scale = gl.log2(scale)
    # The loop's gate factors go through shared memory: by token along a [BV, 64] tile's columns each
    # is 16 registers a thread, too many to hold a step ahead. The next chunk's gate sums are loaded a
    # step ahead into one register a thread; before the step's barrier their factors (γ·log2 e, exp γ,
    # exp(γ_C − γ): three rows of a buffer, two exponentials a thread) are stored, and read back where
    # they are used.
    g_s = gl.allocate_shared_memory(gl.float32, [6, 64], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    flat: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
    r_flat = gl.arange(0, 64, layout=flat)
    first = r_flat < end - base  # read by the loop only where the first chunk is whole
    _store_gate_factors(g_s, 0, gl.load(gam_of_hv + base + r_flat, mask=first, other=0.0),
                        gl.load(after_of_hv + base + r_flat, mask=first, other=0.0))  # fmt: skip
    decay_c = gl.exp(
        gl.load(gam_of_hv + base) + gl.load(after_of_hv + base)
    )  # exp γ_C = exp(γ_0 + (γ_C − γ_0))
    gl.thread_barrier()
    out = gl.zeros([BV, 64], gl.float32, acc_c)
    for c in range(n_full):
        stage = c % STAGES
        tok0 = base + c * 64
        tok_n = gl.minimum(tok0 + 64, base + (n_full - 1) * 64)
        gam_next = gl.load(gam_of_hv + tok_n + r_flat)
        after_next = gl.load(after_of_hv + tok_n + r_flat)
        ends_next = gl.load(gam_of_hv + tok_n) + gl.load(after_of_hv + tok_n)
        now = 3 * (c % 2)

        mbarrier.wait(bars.index(stage), (c // STAGES) & 1)
        q_t = q_s.index(stage)
        k_t = k_s.index(stage)
        ks, qk, qs, s_op = _reads(state, q_t, k_t, dt, a_c, acc_c, acc_p, BV)
        # The previous chunk's output rows (complete since the end of its step) into their buffer: the
        # TMA store that last read it (two steps ago) was waited for before the last barrier
        if c > 0:
            _output_tile(o_s.index((c - 1) % 2), out, dt)
        ks, s_op = warpgroup_mma_wait(num_outstanding=2, deps=(ks, s_op))
        v_c = v_s.index(stage).permute((1, 0)).load(acc_c)  # Vᵀ [BV, 64]
        u_op = gl.convert_layout(
            (v_c.to(gl.float32) - ks * g_s.index(now + 1).load(tok_c)[None, :]).to(dt), a_c
        )
        v_new = warpgroup_mma(u_op, t_s.index(stage).permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c),
                              use_acc=False, is_async=True)  # fmt: skip
        tma.store_wait(pendings=0)

        # P while Tβ (·) runs
        qk, qs, s_op = warpgroup_mma_wait(num_outstanding=1, deps=(qk, qs, s_op))
        b_row, b_col = g_s.index(now).load(rows_p), g_s.index(now).load(cols_p)
        p_s.index(c % 2).store(_masked_p(qk, b_row, b_col, r_p, c_p, log2_scale).to(dt))
        _store_gate_factors(g_s, 3 * ((c + 1) % 2), gam_next, after_next)
        fence_async_shared()
        # The step's one barrier: P, the output rows and the next gate sums written; every thread past
        # its waits for the products of step c − 1, the last readers of the buffers written next
        gl.thread_barrier()
        _store_last_and_refill(
            o_desc, o_s, descs, bufs, bars, c, tok0, col_v, base, cols, nbytes, n_full, STAGES
        )

        v_new, u_op = warpgroup_mma_wait(num_outstanding=0, deps=(v_new, u_op))
        to_end = g_s.index(now + 2).load(tok_c)
        d_op = gl.convert_layout((v_new * to_end[None, :]).to(dt), a_s)
        state = warpgroup_mma(d_op, k_t, state * decay_c, is_async=True)
        vn_op = gl.convert_layout(v_new.to(dt), a_c)
        o_scale = g_s.index(now + 1).load(tok_c) * scale
        out = warpgroup_mma(vn_op, p_s.index(c % 2).permute((1, 0)), qs * o_scale[None, :], is_async=True)
        # Both waited for here: a product left in flight across the loop's back edge (the output rows,
        # to be waited for under the next step's reads) makes ptxas serialize every wgmma of the kernel
        # (its warning C7514: each k-step waited for before the next), which cost 9% of the prefill
        state, d_op, out, vn_op = warpgroup_mma_wait(num_outstanding=0, deps=(state, d_op, out, vn_op))
        decay_c = gl.exp(ends_next)

    if n_full > 0:
        tma.store_wait(pendings=0)
        gl.thread_barrier()
        _output_tile(o_s.index((n_full - 1) % 2), out, dt)
        fence_async_shared()
        gl.thread_barrier()
        tma.async_copy_shared_to_global(
            o_desc, [base + (n_full - 1) * 64, col_v], o_s.index((n_full - 1) % 2)
        )

    if tail > 0:
        # The partial last chunk: masked loads into buffer 0 (its copies, if any, were waited for in
        # the loop), the same step on one thread barrier more, masked stores.
        tok0 = base + n_full * 64
        gam, to_end, decay_c, b_row, b_col = _gates_ready(
            _gate_loads(gam_of_hv, after_of_hv, tok0, tail, c_tok, r_p, c_p, False)
        )
        gl.thread_barrier()
        _load_tile(q_s.index(0), q + col_qk, tok0, tail, H * K, K, ld_layout)
        _load_tile(k_s.index(0), k + col_qk, tok0, tail, H * K, K, ld_layout)
        _load_tile(v_s.index(0), v + col_v, tok0, tail, HV * V, BV, ld_layout)
        _load_tile(t_s.index(0), tbeta + col_t, tok0, tail, HV * 64, 64, ld_layout)
        fence_async_shared()
        gl.thread_barrier()
        q_t = q_s.index(0)
        k_t = k_s.index(0)
        ks, qk, qs, s_op = _reads(state, q_t, k_t, dt, a_c, acc_c, acc_p, BV)
        v_c = v_s.index(0).permute((1, 0)).load(acc_c).to(gl.float32)
        ks, qk, qs, s_op = warpgroup_mma_wait(num_outstanding=0, deps=(ks, qk, qs, s_op))
        u_op = gl.convert_layout((v_c - ks * gl.exp(gam)[None, :]).to(dt), a_c)
        v_new = warpgroup_mma(u_op, t_s.index(0).permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c),
                              use_acc=False, is_async=True)  # fmt: skip
        p_s.index(0).store(_masked_p(qk, b_row, b_col, r_p, c_p, log2_scale).to(dt))
        fence_async_shared()
        gl.thread_barrier()
        v_new, u_op = warpgroup_mma_wait(num_outstanding=0, deps=(v_new, u_op))
        d_op = gl.convert_layout((v_new * to_end[None, :]).to(dt), a_s)
        state = warpgroup_mma(d_op, k_t, state * decay_c, is_async=True)
        vn_op = gl.convert_layout(v_new.to(dt), a_c)
        out = warpgroup_mma(vn_op, p_s.index(0).permute((1, 0)), qs * (gl.exp(gam) * scale)[None, :],
                            is_async=True)  # fmt: skip
        state, d_op, out, vn_op = warpgroup_mma_wait(num_outstanding=0, deps=(state, d_op, out, vn_op))
        tok = tok0 + c_tok
        gl.store(o + tok.to(gl.int64)[None, :] * (HV * V) + o_rows[:, None], out.to(o.dtype.element_ty),
                 mask=(tok < tok0 + tail)[None, :])  # fmt: skip

    tma.store_wait(pendings=0)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(bars.index(i))
    # j and n_segs loaded again, not held through the loop (registers)
    if gl.load(row + 1) == gl.load(row + 4) - 1:
        gl.store(_state_ptrs(state_pool, state_indices, n, pool_slot_stride, hv, i_v, K, V, BV, acc_s), state)


def launch_state(
    q, k, v, gates, tbeta, o, state_pool, state_indices, schedule, start, carry, scale: float,
    config: LaunchConfig,
) -> None:  # fmt: skip
    """Launch 3 of ``chunk_state`` in this form: the state pass over every segment, with the output fused
    in, on the intra launch's Tβ, gate sums and schedule and the segment and carry launches' initial
    states (``start`` / ``carry``: None where no sequence can be split); updates the pool in place.
    ``supported(q, k, v, config.gluon_batch_block_v)`` true."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    block_v = config.gluon_batch_block_v
    if start is None:  # no sequence is split: never read (n_segs is 1 in every schedule row)
        start = carry = state_pool
    descs = (
        descriptor(q, K),
        descriptor(k, K),
        descriptor(v, block_v),
        descriptor(tbeta, CHUNK),
        descriptor(o, block_v),
    )
    segments = schedule.shape[1]
    _gdn_gluon_batch_state_kernel[(triton.cdiv(V, block_v), HV, segments)](
        *descs, q, k, v, tbeta, o, gates, state_pool, state_indices, schedule, start, carry,
        T, state_pool.stride(0), float(scale), config.seg_chunks, state_indices.shape[0],
        H=H, HV=HV, K=K, V=V, BV=block_v, STAGES=config.gluon_batch_stages, num_warps=block_v // 16,
    )  # fmt: skip
