"""The chunked prefill's state pass in Gluon, for sm_90 (H100 / H200): ``chunk_state``'s segment, carry
and state passes replaced by one kernel, with the same math and roundings (``chunk_state._output_chunk``).

Why Gluon: in Triton 3.6's kernel language the compiler places each chunk step's copy waits and picks
each dot operand's register layout; Gluon (shipped inside Triton 3.6) states both. Per program — one
(V tile of 32, value head, sequence), 4 warps, the whole sequence, never split:

- the q / k / v / Tβ tiles of full chunk c+1 are copied by TMA early in step c into the second of two
  buffers (an mbarrier per buffer), so they land while step c runs;
- K S, Q S and Q Kᵀ are async wgmma on the tiles where they landed; the state stays in the wgmma
  accumulator layout and enters the dots as a bf16 B operand through shared memory, as do V − K S
  (for Tβ(·)) and v_new; P is a register A operand (shared memory with ``P_IN``, below);
- the output rows' dot of step c completes behind the first dots of step c+1 and leaves by TMA store;
- a step has three barriers, each after a shared-memory store the wgmma read (the state, V − K S,
  v_new): the copies of chunk c+1 are issued after the first (every thread is past its wait for the
  last wgmma that read their buffers), the output rows of chunk c−1 are stored to their buffer before
  the second and leave by TMA after it (the store that last read that buffer waited for before the
  first). Barriers of their own for these measured 3–8% slower (0.1436 / 0.5365 / 2.0739 ms at 4k /
  16k / 64k with them, 0.1323 / 0.5043 / 1.9811 without);
- the gate sums of chunk c+1 are loaded at the top of step c and used only after step c's last wait
  (arithmetic on them right at the load stalled every step on its latency, 22% of the samples;
  arithmetic at the top of the next step made ptxas serialize the wgmmas, C7515).

With ``P_IN`` (``LaunchConfig.gluon_p_from_intra``, the default wherever the Gluon intra launch runs
before this pass) P comes made by the intra launch (``chunk_intra_gluon._store_p``: ``_masked_p`` on
the same product and gate sums), a fifth TMA tile a chunk, and the output rows' wgmma reads it from
shared memory: no Q Kᵀ, no P arithmetic and no γ by the [64, 64] tile here (824 → 558 instructions a
step, 255 → 131 registers), where each of a value head's four V-tile programs made it again. Measured
5–7% less time at 4k / 16k / 64k (benchmarks/RESULTS.md), though the intra launch takes 25–28% longer.
P has three buffers, so that chunk c + 1's is copied in while the output rows' wgmma of step c − 1
still reads its own; that wgmma is waited for just before step c's first ones are issued (with two
buffers it was waited for before the copies: 1–4% slower; waited for with those in flight, ptxas
serializes the wgmma, C7514).

A sequence's partial last chunk runs once more after the loop with masked pointer loads into the same
shared-memory tiles and masked stores (TMA tiles would reach into the next sequence's rows).

Why this pass and not the Triton ones for one long sequence: measured on the H200 (CUDA-graph replays,
the intra launch before it), 0.155 / 0.591 / 2.306 ms for one sequence of 4k / 16k / 64k tokens at
Qwen3-Next's heads against 0.194 / 0.665 / 2.522 for the Triton passes; the Triton passes keep 16×2048
(0.948 against 1.162 here: 2048 programs, 16 waves of one per SM), so ``chunk_config.launch_config``
picks this pass where its programs fit at once. The chunk loop's gate loads are unmasked (a partial chunk's come
after the loop): 2.3–3.3% faster than masked.

Launched after the intra launch, it is that launch's programmatic dependent (``LaunchConfig.gluon_pdl``):
its programs start on the SMs the intra launch's last wave leaves, read their pool rows and wait
(``griddepcontrol.wait``) before their first read of Tβ or the gate sums: 1.2 / 1.6 / 0.7% less time at
4k / 16k / 64k. Forms that measured slower and are not used (benchmarks/RESULTS.md, "History"): P made
by the intra launch in its first form (11-30, on the pass and intra launch of then: 34–40% slower; the
form above is faster), scale·E made by the intra launch (1.5× slower), the next chunk's K S made a
step ahead (1.2× slower), two warpgroups per program (the pass itself 1.5× slower), the intra launch
beside this pass on a second stream, flagging each chunk (slower on every case: beside a state program
only two intra programs fit on an SM, half the intra launch's rate alone). This pass is ~75%
of a one-sequence prefill. GPU tests (``tests/kernels/test_gdn_chunk_gluon_gpu.py``) and memcheck
(``gdn_memcheck.py``) cover it.
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
    warpgroup_mma_init,
    warpgroup_mma_wait,
)

from stampgen.kernels.chunked.gluon_pdl import wait_for_primary
from stampgen.kernels.gdn.chunk_common import _LOG2E, CHUNK
from stampgen.kernels.gdn.chunk_tma import descriptor, tiles_apply

# 128 programs per sequence at HV = 32, V = 128 (64: spills; 16: 256 programs, two per SM, but 20–25%
# slower on the H200: each loads a step's whole K, Q and Tβ tiles for half the columns)
BLOCK_V = 32


def supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether this pass applies: ``tiles_apply(q, k, v)`` and V a multiple of the V tile."""
    return tiles_apply(q, k, v) and v.shape[2] % BLOCK_V == 0


def programs(v_heads: int, v_dim: int, n_seqs: int) -> int:
    """This pass's grid: one program per (V tile, value head, sequence)."""
    return triton.cdiv(v_dim, BLOCK_V) * v_heads * n_seqs


@gluon.jit
def _chunk_load(base, offs, n_rows, FULL: gl.constexpr):
    """``base[offs]``, offsets past ``n_rows`` as 0 unless ``FULL`` (a whole chunk: no mask)."""
    if FULL:
        return gl.load(base + offs)
    else:
        return gl.load(base + offs, mask=offs < n_rows, other=0.0)


@gluon.jit
def _gate_loads(
    gam_of_hv, after_of_hv, tok0, n_rows, r_v, r_t, c_t, FULL: gl.constexpr, P_IN: gl.constexpr = False
):
    """The gate sums of the chunk at ``tok0`` as loaded (rows past ``n_rows`` as 0): γ by rows of both
    tile shapes and by columns, γ_C − γ by rows, and γ_0, γ_C − γ_0. No arithmetic here (see above).
    ``FULL``: the caller knows the chunk is whole (no masks: the chunk loop's loads, fewer instructions
    and registers a step). ``P_IN``: P comes made, so γ by the [64, 64] tile's rows and columns is not
    loaded (γ by the value tile's rows stands in for both, unread)."""
    gam_v = _chunk_load(gam_of_hv + tok0, r_v, n_rows, FULL)
    after_v = _chunk_load(after_of_hv + tok0, r_v, n_rows, FULL)
    if P_IN:
        b_row = gam_v
        b_col = gam_v
    else:
        b_row = _chunk_load(gam_of_hv + tok0, r_t, n_rows, FULL)
        b_col = _chunk_load(gam_of_hv + tok0, c_t, n_rows, FULL)
    gam0 = gl.load(gam_of_hv + tok0)
    after0 = gl.load(after_of_hv + tok0)
    return gam_v, after_v, gam0, after0, b_row, b_col


@gluon.jit
def _gates_ready(loads, P_IN: gl.constexpr = False):
    """(γ, exp(γ_C − γ), exp(γ_C), γ·log2 e by rows, by columns) from ``_gate_loads`` (with ``P_IN`` the
    last two unread, as loaded)."""
    gam_v, after_v, gam0, after0, b_row, b_col = loads
    if not P_IN:
        b_row = b_row * _LOG2E
        b_col = b_col * _LOG2E
    return gam_v, gl.exp(after_v), gl.exp(gam0 + after0), b_row, b_col


@gluon.jit
def _masked_p(qk, b_row, b_col, rows, cols, log2_scale):
    """P = scale (Q Kᵀ ⊙ E) of a chunk on and below the diagonal, 0 above it, from Q Kᵀ (fp32) and
    b = γ·log2 e along its rows and its columns (``rows`` / ``cols``: their token indices), in Q Kᵀ's
    layout: E_ij = 2^(b_i − b_j), the scale in the exponent. Above the diagonal E may overflow to inf,
    which the select discards. Every Gluon state pass makes P this way (the fused pass's worker too,
    where Tβ is copied in), so that they agree bit for bit; the intra launch's P for ``P_IN`` too, but
    there ptxas may fuse γ·log2 e + log2 scale into one rounding (an FMA), so it agrees to ~4e-5."""
    e = gl.exp2((b_row + log2_scale)[:, None] - b_col[None, :])
    return gl.where(rows[:, None] >= cols[None, :], qk * e, 0.0)


@gluon.jit
def _issue_reads(
    q_t, k_t, s_s, acc_v: gl.constexpr, acc_t: gl.constexpr, BV: gl.constexpr, P_IN: gl.constexpr
):
    """K S, Q S and Q Kᵀ as async wgmma, in the order the step waits for them (with ``P_IN`` no Q Kᵀ:
    ``qk`` is Q S again, unread)."""
    ks = warpgroup_mma(k_t, s_s, gl.zeros([64, BV], gl.float32, acc_v), use_acc=False, is_async=True)
    qs = warpgroup_mma(q_t, s_s, gl.zeros([64, BV], gl.float32, acc_v), use_acc=False, is_async=True)
    if P_IN:
        qk = qs
    else:
        qk = warpgroup_mma(
            q_t, k_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc_t), use_acc=False, is_async=True
        )
    return ks, qs, qk


@gluon.jit
def _finish(
    ks, qs, qk, state, k_t, v_t, t_t, u_s, n_s, d_s, gates, log2_scale, scale,
    acc_v: gl.constexpr, p_op: gl.constexpr, r_t, c_t, o_desc, o_buf, row, col, has_out, p_t=None,
):  # fmt: skip
    """The rest of a chunk step once ``_issue_reads`` is in flight (and nothing else but them):
    ``v_new = Tβ (V − exp(γ)⊙(K S))``, ``P = scale (Q Kᵀ ⊙ E)``, the next state
    ``exp(γ_C) S + Kᵀ (exp(γ_C − γ)⊙v_new)`` (waited for) and the output rows
    ``scale exp(γ)⊙(Q S) + P v_new`` (returned in flight, with P, its register operand). With
    ``has_out`` the previous chunk's rows, already in ``o_buf``, leave by TMA to ``[row, col]`` after
    the first barrier here."""
    dt: gl.constexpr = u_s.dtype
    gam_v, to_end, decay_c, b_row, b_col = gates
    v_c = v_t.load(acc_v).to(gl.float32)
    if p_t is None:  # Q S and Q Kᵀ behind it
        ks = warpgroup_mma_wait(num_outstanding=2, deps=(ks,))
    else:  # Q S behind it
        ks = warpgroup_mma_wait(num_outstanding=1, deps=(ks,))
    u_s.store((v_c - ks * gl.exp(gam_v)[:, None]).to(dt))
    fence_async_shared()
    gl.thread_barrier()
    v_new = warpgroup_mma(t_t, u_s, gl.zeros_like(ks), use_acc=False, is_async=True)
    if has_out:  # the previous chunk's rows, stored to o_buf before the fence and barrier above
        tma.async_copy_shared_to_global(o_desc, [row, col], o_buf)

    # P while Tβ (·) runs (with ``p_t``: the intra launch's, read by the wgmma from shared memory)
    if p_t is None:
        qs, qk = warpgroup_mma_wait(num_outstanding=1, deps=(qs, qk))
        p = gl.convert_layout(_masked_p(qk, b_row, b_col, r_t, c_t, log2_scale).to(dt), p_op)
    else:
        qs = warpgroup_mma_wait(num_outstanding=1, deps=(qs,))
        p = p_t
    o_init = qs * (gl.exp(gam_v) * scale)[:, None]

    v_new = warpgroup_mma_wait(num_outstanding=0, deps=(v_new,))
    n_s.store(v_new.to(dt))
    d_s.store((v_new * to_end[:, None]).to(dt))
    fence_async_shared()
    gl.thread_barrier()
    # The state first: the caller waits for it alone; the output rows complete behind it.
    state = warpgroup_mma(k_t.permute((1, 0)), d_s, state * decay_c, is_async=True)
    out = warpgroup_mma(p, n_s, o_init, is_async=True)
    state = warpgroup_mma_wait(num_outstanding=1, deps=(state,))
    if p_t is not None:
        p = 0  # no register P to keep alive
    return out, p, state


@gluon.jit
def _wait_out(out, p, P_IN: gl.constexpr):
    """The output rows' wgmma waited for (with its register operand P, unless ``P_IN``)."""
    if P_IN:
        out = warpgroup_mma_wait(num_outstanding=0, deps=(out,))
    else:
        out, p = warpgroup_mma_wait(num_outstanding=0, deps=(out, p))
    return out


@gluon.jit
def _store_state_operand(s_s, state, WAIT_OUT: gl.constexpr = False):
    """The state as this step's bf16 B operand (after everyone is done with the previous one). With
    WAIT_OUT the barrier also tells every thread that the output buffer it fills this step is free:
    the TMA store before the last, which read it, is waited for before it."""
    s_s.store(state.to(s_s.dtype))
    if WAIT_OUT:
        tma.store_wait(pendings=1)
    fence_async_shared()
    gl.thread_barrier()


@gluon.jit
def _tma_out(o_desc, o_s, out, row, col):
    """The output rows of a full chunk through shared memory (one of two buffers) and a TMA store: the
    store before the last, which read this buffer, must be done."""
    tma.store_wait(pendings=1)
    gl.thread_barrier()
    o_s.store(out.to(o_s.dtype))
    fence_async_shared()
    gl.thread_barrier()
    tma.async_copy_shared_to_global(o_desc, [row, col], o_s)


@gluon.jit
def _out_rows(o, col_v, tok, HV: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, acc_v: gl.constexpr):
    """Pointers to the output rows ``tok`` of this program's V tile (made where they are stored: a
    pointer tile made before the chunk loop and used after it stays in registers through it)."""
    c_v = gl.arange(0, BV, layout=gl.SliceLayout(0, acc_v))
    return o + (col_v + c_v)[None, :] + tok.to(gl.int64)[:, None] * (HV * V)


@gluon.jit
def _state_ptrs(
    state_pool, state_indices, n, pool_slot_stride, hv, i_v,
    K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, acc_v: gl.constexpr,
):  # fmt: skip
    """Pointers to this program's state tile S[K, BV] in its pool row (the pool stores Sᵀ, K last),
    made before the chunk loop and again after it from the slot loaded again (the compiler cannot
    merge a load across the loop's stores), so the [K, BV] pointer tile is not held through it."""
    slot = gl.load(state_indices + n).to(gl.int64)
    rows = gl.arange(0, K, layout=gl.SliceLayout(1, acc_v))
    cols = i_v * BV + gl.arange(0, BV, layout=gl.SliceLayout(0, acc_v))
    return state_pool + slot * pool_slot_stride + hv * (V * K) + cols[None, :] * K + rows[:, None]


@gluon.jit
def _load_tile(dst, base, tok0, n_rows, row_stride, COLS: gl.constexpr, layout: gl.constexpr):
    """Rows [tok0, tok0 + n_rows) of a [T, row_stride] tensor's column block at ``base`` into the shared
    tile ``dst`` ([64, COLS]), rows past ``n_rows`` as zeros: a partial chunk, which TMA would fill from
    the next sequence's rows."""
    rows = gl.arange(0, 64, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, COLS, layout=gl.SliceLayout(0, layout))
    ptrs = base + (tok0 + rows.to(gl.int64))[:, None] * row_stride + cols[None, :]
    dst.store(gl.load(ptrs, mask=(rows < n_rows)[:, None], other=0.0))


@gluon.jit
def _copy_tiles(descs, bufs, bars, buf, row, cols, nbytes: gl.constexpr, pred):
    """TMA copies of the tiles of the full chunk at ``row`` (one per descriptor: its column ``cols[i]``,
    into buffer ``buf`` of ``bufs[i]``), counted on that buffer's mbarrier (if ``pred``)."""
    bar = bars.index(buf)
    mbarrier.expect(bar, nbytes, pred=pred)
    for i in gl.static_range(len(descs)):
        tma.async_copy_global_to_shared(descs[i], [row, cols[i]], bar, bufs[i].index(buf), pred=pred)


@gluon.jit
def _gdn_gluon_state_kernel(
    q_desc, k_desc, v_desc, t_desc, o_desc, p_desc,
    q, k, v, tbeta, o, p_in, gates, state_pool, state_indices, cu_seqlens,
    n_tokens, pool_slot_stride, scale,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    PDL: gl.constexpr, P_IN: gl.constexpr = False,
):  # fmt: skip
    i_v = gl.program_id(0)
    hv = gl.program_id(1)
    n = gl.program_id(2)
    h = hv // (HV // H)
    col_qk = h * K
    col_v = hv * V + i_v * BV
    col_t = hv * 64
    bos = gl.load(cu_seqlens + n).to(gl.int32)  # int32 or int64 offsets; TMA coordinates are 32-bit
    eos = gl.load(cu_seqlens + n + 1).to(gl.int32)
    n_full = (eos - bos) // 64
    tail = (eos - bos) % 64
    n_chunks = (eos - bos + 63) // 64
    slot = gl.load(state_indices + n).to(gl.int64)

    # wgmma accumulators: [64 | K, BV] tiles (K S, Q S, v_new, the output rows, the state), [64, 64] (Q Kᵀ).
    acc_v: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BV, 16]
    )
    acc_t: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16]
    )
    p_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_v, k_width=2)
    rows_v: gl.constexpr = gl.SliceLayout(1, acc_v)
    rows_t: gl.constexpr = gl.SliceLayout(1, acc_t)
    cols_t: gl.constexpr = gl.SliceLayout(0, acc_t)
    ld_layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])  # partial-chunk loads
    r_v = gl.arange(0, 64, layout=rows_v)
    r_t = gl.arange(0, 64, layout=rows_t)
    c_t = gl.arange(0, 64, layout=cols_t)

    if slot < 0:
        # Padding: nothing read or written in the pool, output rows zero.
        for c in range(n_chunks):
            tok = bos + c * 64 + r_v
            gl.store(_out_rows(o, col_v, tok, HV, V, BV, acc_v), gl.zeros([64, BV], o.dtype.element_ty, acc_v),
                     mask=(tok < eos)[:, None])  # fmt: skip
        return
    if n_chunks == 0:
        return  # an empty sequence: its state is its initial state, the pool row as it is

    dt: gl.constexpr = q_desc.dtype
    q_s = gl.allocate_shared_memory(dt, [2, 64, K], q_desc.layout)
    k_s = gl.allocate_shared_memory(dt, [2, 64, K], k_desc.layout)
    v_s = gl.allocate_shared_memory(dt, [2, 64, BV], v_desc.layout)
    t_s = gl.allocate_shared_memory(dt, [2, 64, 64], t_desc.layout)
    # Two output buffers: a TMA store may still read one.
    o_s = gl.allocate_shared_memory(dt, [2, 64, BV], o_desc.layout)
    b_layout: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, BV], dt)
    s_s = gl.allocate_shared_memory(dt, [K, BV], gl.NVMMASharedLayout.get_default_for([K, BV], dt))
    u_s = gl.allocate_shared_memory(dt, [64, BV], b_layout)  # V − exp(γ)⊙(K S)
    n_s = gl.allocate_shared_memory(dt, [64, BV], b_layout)  # v_new
    d_s = gl.allocate_shared_memory(dt, [64, BV], b_layout)  # exp(γ_C − γ)⊙v_new
    if P_IN:  # the intra launch's P, a tile a chunk like Tβ's, in three buffers (see above)
        p_s = gl.allocate_shared_memory(dt, [3, 64, 64], p_desc.layout)
    bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    mbarrier.init(bars.index(0), count=1)
    mbarrier.init(bars.index(1), count=1)
    nbytes: gl.constexpr = (
        2 * q_desc.block_type.nbytes
        + v_desc.block_type.nbytes
        + (2 if P_IN else 1) * t_desc.block_type.nbytes
    )

    # The state S[K, BV] (logical K×V): the pool is not the intra launch's, so it is read before the wait.
    state = gl.load(_state_ptrs(state_pool, state_indices, n, pool_slot_stride, hv, i_v, K, V, BV, acc_v))
    if PDL:
        # launched as the intra launch's programmatic dependent (``LaunchConfig.gluon_pdl``): this
        # program may start while the intra launch's last programs run; it waits before its first read
        # of Tβ or the gate sums
        wait_for_primary()
    # The first full chunk's tiles; each step then asks for the next one's first.
    descs = (q_desc, k_desc, v_desc, t_desc)
    bufs = (q_s, k_s, v_s, t_s)
    cols = (col_qk, col_qk, col_v, col_t)
    _copy_tiles(descs, bufs, bars, 0, bos, cols, nbytes, n_full > 0)
    if P_IN:  # on the same barrier, whose expected bytes count it
        tma.async_copy_global_to_shared(p_desc, [bos, col_t], bars.index(0), p_s.index(0), pred=n_full > 0)

    gam_of_hv = gates + hv.to(gl.int64) * n_tokens
    after_of_hv = gam_of_hv + n_tokens.to(gl.int64) * HV
    log2_scale = gl.log2(scale)
    gates_now = _gates_ready(
        _gate_loads(gam_of_hv, after_of_hv, bos, gl.minimum(eos - bos, 64), r_v, r_t, c_t, False, P_IN), P_IN
    )
    out = warpgroup_mma_init(gl.zeros([64, BV], gl.float32, acc_v))
    if P_IN:
        p = 0  # P is not in registers (``_finish``)
    else:
        p = gl.zeros([64, 64], dt, p_op)
    for c in range(n_full):
        stage = c % 2
        tok0 = bos + c * 64
        # The next full chunk's gate sums (this one's again after the last: a partial chunk's are
        # loaded, masked, after the loop).
        tok_n = gl.minimum(tok0 + 64, bos + (n_full - 1) * 64)
        gates_next = _gate_loads(gam_of_hv, after_of_hv, tok_n, 64, r_v, r_t, c_t, True, P_IN)

        _store_state_operand(s_s, state, True)
        # Chunk c + 1's copies into the other buffers, after the barrier above: every thread reaches
        # it past its wait for step c − 1's state wgmma, their last reader (no barrier of their own).
        _copy_tiles(descs, bufs, bars, 1 - stage, tok0 + 64, cols, nbytes, c + 1 < n_full)
        if P_IN:  # P's buffer of chunk c + 1 was last read by step c − 2's output rows, waited for
            tma.async_copy_global_to_shared(
                p_desc, [tok0 + 64, col_t], bars.index(1 - stage), p_s.index((c + 1) % 3), pred=c + 1 < n_full
            )
        mbarrier.wait(bars.index(stage), (c // 2) & 1)
        if P_IN:  # the previous step's output rows, finished while the above ran
            out = warpgroup_mma_wait(num_outstanding=0, deps=(out,))
        ks, qs, qk = _issue_reads(q_s.index(stage), k_s.index(stage), s_s, acc_v, acc_t, BV, P_IN)
        if not P_IN:  # the previous step's output rows, finished while these run
            out, p = warpgroup_mma_wait(num_outstanding=3, deps=(out, p))
        # The previous chunk's output rows into their buffer (free: the barrier above came after the
        # wait for the TMA store that last read it); _finish's first barrier syncs them, then TMA.
        if c > 0:
            o_s.index(1 - stage).store(out.to(o_s.dtype))
        out, p, state = _finish(
            ks, qs, qk, state, k_s.index(stage), v_s.index(stage), t_s.index(stage), u_s, n_s, d_s,
            gates_now, log2_scale, scale, acc_v, p_op, r_t, c_t,
            o_desc, o_s.index(1 - stage), tok0 - 64, col_v, c > 0, p_s.index(c % 3) if P_IN else None,
        )  # fmt: skip
        gates_now = _gates_ready(gates_next, P_IN)

    out = _wait_out(out, p, P_IN)
    if n_full > 0:
        _tma_out(o_desc, o_s.index((n_full - 1) % 2), out, bos + (n_full - 1) * 64, col_v)

    if tail > 0:
        # The partial last chunk: masked loads into the tiles, the same step, masked stores.
        tok0 = bos + n_full * 64
        gates_now = _gates_ready(
            _gate_loads(gam_of_hv, after_of_hv, tok0, tail, r_v, r_t, c_t, False, P_IN), P_IN
        )
        gl.thread_barrier()
        _load_tile(q_s.index(0), q + col_qk, tok0, tail, H * K, K, ld_layout)
        _load_tile(k_s.index(0), k + col_qk, tok0, tail, H * K, K, ld_layout)
        _load_tile(v_s.index(0), v + col_v, tok0, tail, HV * V, BV, ld_layout)
        _load_tile(t_s.index(0), tbeta + col_t, tok0, tail, HV * 64, 64, ld_layout)
        if P_IN:
            _load_tile(p_s.index(0), p_in + col_t, tok0, tail, HV * 64, 64, ld_layout)
        _store_state_operand(s_s, state)
        ks, qs, qk = _issue_reads(q_s.index(0), k_s.index(0), s_s, acc_v, acc_t, BV, P_IN)
        out, p, state = _finish(
            ks, qs, qk, state, k_s.index(0), v_s.index(0), t_s.index(0), u_s, n_s, d_s,
            gates_now, log2_scale, scale, acc_v, p_op, r_t, c_t, o_desc, o_s.index(0), tok0, col_v, False,
            p_s.index(0) if P_IN else None,
        )  # fmt: skip
        out = _wait_out(out, p, P_IN)
        tok = tok0 + r_v
        gl.store(
            _out_rows(o, col_v, tok, HV, V, BV, acc_v), out.to(o.dtype.element_ty), mask=(tok < eos)[:, None]
        )

    tma.store_wait(pendings=0)
    mbarrier.invalidate(bars.index(0))
    mbarrier.invalidate(bars.index(1))
    gl.store(_state_ptrs(state_pool, state_indices, n, pool_slot_stride, hv, i_v, K, V, BV, acc_v), state)


def launch_state(
    q, k, v, gates, tbeta, o, state_pool, state_indices, cu_seqlens, scale: float, pdl=False, p=None
) -> None:
    """The state pass over every sequence unsplit, on ``chunk_intra._launch_intra``'s Tβ and gate sums (``o``
    and the pool rows written; arguments contiguous and validated, ``supported(q, k, v)`` true). With
    ``pdl`` it is launched as a programmatic
    dependent of the intra launch just before it on the stream, which must then have been launched
    with ``LAUNCH_DEPENDENTS``. ``p``: P of every chunk ([T, HV, 64], the intra launch's with
    ``LaunchConfig.gluon_p_from_intra``), read instead of made here."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = state_indices.shape[0]
    t_desc = descriptor(tbeta, CHUNK)
    p_desc = t_desc if p is None else descriptor(p, CHUNK)
    p_in = tbeta if p is None else p  # without P, Tβ and its descriptor in P's places, unread
    descs = (
        descriptor(q, K),
        descriptor(k, K),
        descriptor(v, BLOCK_V),
        t_desc,
        descriptor(o, BLOCK_V),
        p_desc,
    )
    _gdn_gluon_state_kernel[(V // BLOCK_V, HV, N)](
        *descs, q, k, v, tbeta, o, p_in, gates, state_pool, state_indices, cu_seqlens,
        T, state_pool.stride(0), scale,
        H=H, HV=HV, K=K, V=V, BV=BLOCK_V, PDL=pdl, P_IN=p is not None, num_warps=4, launch_pdl=pdl,
    )  # fmt: skip
