"""Our Triton chunked lightning prefill: one pass that walks a segment's chunks with the state tile in
registers and writes each chunk's output as it goes, so no per-chunk state is ever stored.

The decay is one constant ``g`` per head, so within a chunk of ``CHUNK_SIZE`` = 64 tokens the
cumulative log-decay of token i is (i + 1) g and every weight is a difference of integer multiples of
g, formed exactly and always ≤ 0. Per chunk of L real tokens, S the state before it (K-major; the pool
holds Sᵀ):

    O = scale [diag(exp((i + 1) g)) (Q S) + (Q Kᵀ ⊙ exp((i − j) g) ⊙ [i ≥ j]) V]
    S ← exp(L g) S + (K ⊙ exp((L − 1 − j) g))ᵀ V

Without a delta rule nothing in a chunk step reads S except Q S, so the step's products do not wait on
each other, and the state after a run of n full chunks is affine in the state before it with a scalar
slope: S' = exp(64 n g) S + B. That is what lets a long sequence be cut into segments of
``seg_chunks`` chunks run side by side (the grid would otherwise be one program per (head, V tile),
fewer than the SMs at MiniMax's 64 heads):

1. ``_chunk_offsets_kernel`` (``kernels.chunked.chunk_map``), once with the segment length as its
   "chunk": each sequence's first global segment index.
2. ``_lightning_segment_kernel`` (only if some sequence can be split), one program per (global segment,
   head, V tile): for every segment but its sequence's last, B = the state its chunks leave from S = 0 —
   one product over its tokens, each weighted by exp((distance to the segment's end) g) — into the
   scratch ``partial``; a split sequence's first segment also copies the pool state to ``start``, since
   the sequence's last segment overwrites the pool in pass 3.
3. ``_lightning_output_kernel``, one program per (global segment, head, V tile): the segment's initial
   state (the pool row for a sequence's first segment; else ``start`` carried through the B of the
   segments before it, S ← exp(64 · seg_chunks · g) S + B), then the chunk loop above with the output
   fused in; a sequence's last segment writes the pool.

All chunks but a sequence's last are whole, so the loop runs them unmasked with decays computed once
per program and their tiles moved by TMA (where the heads allow: ``_tma_applies``), and the last chunk
runs after it with masked pointer loads; rows past the end of a sequence are read as
zeros and their weights are masked to exp(−inf) = 0 before they could overflow (for j > L − 1 the
exponent (L − 1 − j) g would be positive). Padding (index −1): zero state, zero output (its output
weights are zeroed once per program), nothing stored. Products: for bf16 inputs the operands are bf16
(Q, K, V as given; the decayed V, the weighted Q Kᵀ and S rounded to bf16), fp32 accumulation, the
carried state fp32; otherwise fp32 operands (tf32 on a GPU, exact in the interpreter). No host sync
anywhere: grids and scratch are sized by upper bounds.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from stampgen.kernels.chunked.blocks import chunk_tile, decay, pool_slot, sequence_bounds
from stampgen.kernels.chunked.chunk_map import chunk_offsets, chunk_sequence, max_chunks
from stampgen.kernels.chunked.common import (
    CHUNK_SIZE,
    SM_COUNT_HINT,
    head_dim_contiguous,
    tma_addressable,
    triton_interpreted,
)


@triton.jit
def _segment_of_program(seg_offsets_ptr, N, HV: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    """(global segment, sequence, segment within it, segments of the sequence, v-head, first column of
    the V tile) of this program; the grid is 1-D over (global segment, v-head, V tile), tiles fastest. A
    program past the last segment (the grid is an upper bound) gets a segment index ≥ its sequence's
    segment count (``chunk_map.chunk_sequence`` clamps it to the last sequence)."""
    pid = tl.program_id(0)
    NV: tl.constexpr = (V + BV - 1) // BV
    i_v = pid % NV
    i_hv = (pid // NV) % HV
    s = pid // (NV * HV)
    i_n, i_s, _ = chunk_sequence(seg_offsets_ptr, N, s)
    n_segs = tl.load(seg_offsets_ptr + i_n + 1) - tl.load(seg_offsets_ptr + i_n)
    return tl.cast(s, tl.int64), i_n, i_s, n_segs, i_hv, i_v * BV


@triton.jit
def _state_update(S, k, v, v_decay, chunk_decay, LOW: tl.constexpr):
    """``S ← chunk_decay · S + Kᵀ (v_decay ⊙ V)`` on an fp32 [BK, BV] state tile: the token weights
    exp((L − 1 − j) g) scale V's rows (BV wide), not K's (K wide)."""
    vd = v.to(tl.float32) * v_decay[:, None]
    if LOW:
        return tl.dot(tl.trans(k), vd.to(v.dtype), acc=S * chunk_decay)
    return tl.dot(tl.trans(k.to(tl.float32)), vd, acc=S * chunk_decay)


@triton.jit
def _lightning_segment_kernel(
    k_ptr,
    v_ptr,
    g_ptr,
    partial_ptr,
    start_ptr,
    state_pool_ptr,
    state_indices_ptr,
    cu_seqlens_ptr,
    seg_offsets_ptr,
    k_desc,
    v_desc,
    N,
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
    SEG_CHUNKS: tl.constexpr,
    LOW: tl.constexpr,
    TMA: tl.constexpr,
    COPY_START: tl.constexpr = True,
    START_ONLY: tl.constexpr = False,
    LAUNCH_DEPENDENTS: tl.constexpr = False,
):
    if LAUNCH_DEPENDENTS:
        # The Gluon output pass after this launch (``gluon_pdl``) may start its programs now: those of
        # first segments need nothing from here, the others wait for this launch's end.
        tl.extra.cuda.gdc_launch_dependents()
    s, i_n, i_s, n_segs, i_hv, v0 = _segment_of_program(seg_offsets_ptr, N, HV, V, BV)
    if i_s >= n_segs - 1:
        return  # a sequence's last segment (pass 3 alone runs it), or past the last segment
    i_h = i_hv // (HV // H)
    offs_k = tl.arange(0, BK)
    cols_v = tl.arange(0, BV)
    offs_v = v0 + cols_v
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, BC)
    s_mask = mask_k[:, None] & mask_v[None, :]
    scratch = (s * HV + i_hv) * (K * V)
    tile = offs_k[:, None] * V + offs_v[None, :]
    if COPY_START and i_s == 0:  # the initial state, before pass 3's last segment overwrites the pool
        state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
        S0 = tl.load(state_base + offs_v[None, :] * K + offs_k[:, None], mask=s_mask & real, other=0.0)
        tl.store(start_ptr + scratch + tile, S0, mask=s_mask)
    if START_ONLY:
        return  # the copy alone, in a launch before the segment pass (``gluon_pdl``)

    # B = Σ_t exp((n − 1 − t) g) k_t v_tᵀ over the segment's n tokens: one product summed over its
    # chunks, each token weighted straight from its distance to the segment's end (a whole number of
    # steps times g, ≤ 0), so the accumulator is never rescaled between the chunks' products.
    g = tl.load(g_ptr + i_hv)
    bos, _ = sequence_bounds(cu_seqlens_ptr, i_n)
    first = bos + tl.cast(i_s, tl.int64) * (SEG_CHUNKS * BC)
    k_col = i_h * stride_k_head
    v_col = i_hv * stride_v_head + v0
    B = tl.zeros([BK, BV], dtype=tl.float32)
    for i_c in range(0, SEG_CHUNKS):  # a segment that is not its sequence's last is whole
        tok0 = first + i_c * BC
        k = chunk_tile(k_desc, k_ptr, tok0, rows, stride_k_tok, k_col, offs_k, K, BC, TMA)
        v = chunk_tile(v_desc, v_ptr, tok0, rows, stride_v_tok, v_col, cols_v, V - v0, BC, TMA)
        weight = decay(((SEG_CHUNKS - i_c) * BC - 1 - rows).to(tl.float32) * g)
        B = _state_update(B, k, v, weight, 1.0, LOW)
    tl.store(partial_ptr + scratch + tile, B, mask=s_mask)


@triton.jit
def _output_chunk(
    S, io, descs, tok0, length, consts, FULL: tl.constexpr, LOW: tl.constexpr, TMA: tl.constexpr,
    TMA_STORE: tl.constexpr,
):  # fmt: skip
    """One chunk's output rows (stored) and the state after it. ``FULL``: the chunk is whole, and the
    weights in ``consts`` are a whole chunk's; otherwise V's row weights and the chunk's decay are made
    here from ``length``. ``io`` and ``descs``: the pointers, strides and column offsets of q, k, v, o
    and their TMA descriptors (``TMA``: whole chunks come through them)."""
    (
        q_ptr,
        k_ptr,
        v_ptr,
        o_ptr,
        stride_q_tok,
        stride_k_tok,
        stride_v_tok,
        stride_o_tok,
        qk_col,
        q_col,
        v_col,
    ) = io
    q_desc, k_desc, v_desc, o_desc = descs
    g, intra, q_decay, v_decay, chunk_decay, rows, cols_k, K, cols_v, n_v = consts
    WHOLE: tl.constexpr = FULL and TMA
    q = chunk_tile(q_desc, q_ptr, tok0, rows, stride_q_tok, q_col, cols_k, K, length, WHOLE)
    k = chunk_tile(k_desc, k_ptr, tok0, rows, stride_k_tok, qk_col, cols_k, K, length, WHOLE)
    v = chunk_tile(v_desc, v_ptr, tok0, rows, stride_v_tok, v_col, cols_v, n_v, length, WHOLE)
    if not FULL:
        in_seq = rows < length
        v_decay = decay(tl.where(in_seq, (length - 1 - rows).to(tl.float32) * g, float("-inf")))
        chunk_decay = decay(length.to(tl.float32) * g)
    if LOW:
        P = tl.dot(q, tl.trans(k)) * intra
        o = tl.dot(P.to(v.dtype), v, acc=tl.dot(q, S.to(v.dtype)) * q_decay[:, None])
    else:
        q32 = q.to(tl.float32)
        P = tl.dot(q32, tl.trans(k.to(tl.float32))) * intra
        o = tl.dot(P, v.to(tl.float32), acc=tl.dot(q32, S) * q_decay[:, None])
    S = _state_update(S, k, v, v_decay, chunk_decay, LOW)
    o = o.to(o_ptr.dtype.element_ty)
    if WHOLE and TMA_STORE:
        o_desc.store([tok0.to(tl.int32), v_col.to(tl.int32)], o)
    else:
        o_ptrs = (o_ptr + tok0 * stride_o_tok + v_col) + (rows[:, None] * stride_o_tok + cols_v[None, :])
        tl.store(o_ptrs, o, mask=(rows < length)[:, None] & (cols_v < n_v)[None, :])
    return S


@triton.jit
def _lightning_output_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    o_ptr,
    partial_ptr,
    start_ptr,
    state_pool_ptr,
    state_indices_ptr,
    cu_seqlens_ptr,
    seg_offsets_ptr,
    q_desc,
    k_desc,
    v_desc,
    o_desc,
    N,
    stride_q_tok,
    stride_q_head,
    stride_k_tok,
    stride_k_head,
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
    SEG_CHUNKS: tl.constexpr,
    LOW: tl.constexpr,
    TMA: tl.constexpr,
    TMA_STORE: tl.constexpr,
):
    s, i_n, i_s, n_segs, i_hv, v0 = _segment_of_program(seg_offsets_ptr, N, HV, V, BV)
    if i_s >= n_segs:
        return  # past the last segment
    i_h = i_hv // (HV // H)
    offs_k = tl.arange(0, BK)
    cols_v = tl.arange(0, BV)
    offs_v = v0 + cols_v
    mask_k = offs_k < K
    mask_v = offs_v < V
    rows = tl.arange(0, BC)
    s_mask = mask_k[:, None] & mask_v[None, :]
    state_base, real = pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K)
    pool_tile = offs_v[None, :] * K + offs_k[:, None]  # S [BK, BV], K-major view of the pool tile
    g = tl.load(g_ptr + i_hv)

    if n_segs == 1:
        S = tl.load(state_base + pool_tile, mask=s_mask & real, other=0.0)
    else:  # the copy pass 2 made, carried through the segments before this one
        s0 = s - i_s  # the sequence's first segment
        tile = offs_k[:, None] * V + offs_v[None, :]
        S = tl.load(start_ptr + (s0 * HV + i_hv) * (K * V) + tile, mask=s_mask, other=0.0)
        seg_decay = decay((SEG_CHUNKS * BC) * g)
        for j in range(0, i_s):
            B = tl.load(partial_ptr + ((s0 + j) * HV + i_hv) * (K * V) + tile, mask=s_mask, other=0.0)
            S = S * seg_decay + B

    # The output's weights, once per program. Padding (index −1) zeroes them, so its output rows come
    # out as zeros with no select in the chunk step (its state is zero and never stored).
    keep = real.to(tl.float32) * scale
    steps = (rows[:, None] - rows[None, :]).to(tl.float32)  # i − j
    intra = decay(tl.where(steps >= 0, steps * g, float("-inf"))) * keep  # [i, j]: exp((i − j) g), i ≥ j
    q_decay = decay((rows + 1).to(tl.float32) * g) * keep
    v_decay = decay((BC - 1 - rows).to(tl.float32) * g)
    chunk_decay = decay(BC * g)
    consts = (g, intra, q_decay, v_decay, chunk_decay, rows, offs_k, K, cols_v, V - v0)
    io = (
        q_ptr, k_ptr, v_ptr, o_ptr, stride_q_tok, stride_k_tok, stride_v_tok, HV * V,
        i_h * stride_k_head, i_h * stride_q_head, i_hv * stride_v_head + v0,
    )  # fmt: skip
    descs = (q_desc, k_desc, v_desc, o_desc)
    bos, eos = sequence_bounds(cu_seqlens_ptr, i_n)
    first = bos + tl.cast(i_s, tl.int64) * (SEG_CHUNKS * BC)
    last = tl.minimum(first + SEG_CHUNKS * BC, eos)  # this segment's end
    n_full = (last - first - 1) // BC  # whole chunks before the segment's last one
    for i_c in range(0, n_full):
        S = _output_chunk(
            S, io, descs, first + i_c * BC, BC, consts, FULL=True, LOW=LOW, TMA=TMA, TMA_STORE=TMA_STORE
        )
    tail = first + n_full * BC
    length = (last - tail).to(tl.int32)
    S = _output_chunk(S, io, descs, tail, length, consts, FULL=False, LOW=LOW, TMA=TMA, TMA_STORE=TMA_STORE)
    if i_s == n_segs - 1:
        tl.store(state_base + pool_tile, S, mask=s_mask & real)


class LaunchConfig(NamedTuple):
    """How the launches are shaped (no autotuning: the output pass updates the pool in place, so a
    benchmark run of it would apply the update several times)."""

    block_v: int  # V tile of both passes
    warps: int  # of the output pass
    stages: int  # software-pipelining stages of the output pass's chunk loop
    seg_chunks: int  # chunks per segment; a sequence of at most this many chunks is not split
    segment_block_v: int = 64  # V tile of the segment pass
    segment_warps: int = 4
    segment_stages: int = 2
    tma_store: bool = True  # whole chunks' output rows leave by TMA (where their loads come by TMA)
    maxnreg: int | None = None  # a register cap for the output pass (Triton's ``maxnreg``)
    # the output pass in Gluon (``chunk_gluon``) where it applies (sm_90, bf16, K = 128, V tile 64,
    # TMA-aligned heads): 6–13% faster than the Triton pass at MiniMax's heads (benchmarks/RESULTS.md)
    gluon: bool = True
    # with ``gluon`` and a split sequence: the output pass launched as the segment pass's programmatic
    # dependent (PDL), its first segments' programs running beside the segment pass (the pool copies
    # they read made by a launch before it)
    gluon_pdl: bool = True


# Output-pass programs one SM holds at the default tiles (registers are the limit), and the waves of
# them a single sequence is cut into segments for: the Triton pass two an SM in two waves (measured on
# the H200 at MiniMax's heads: four segments, 154.6 / 513.1 µs at 4k / 16k tokens, against 160.6 / 562.5
# for two in one wave, 187.9 / 551.0 for eight, 173.5 at 4k for one); the Gluon pass, one an SM (its
# shared memory), in one wave: its chunk step is ~1.3 µs in long programs and ~1.6 in short ones, and a
# segment pass costs 38–52 µs at 4k, so at MiniMax's heads one segment (no segment pass) takes 87.4 /
# 313.1 µs at 4k / 16k against 110.1 / 369.2 for two and 148.7 / 454.8 for four (benchmarks/RESULTS.md)
_PROGRAMS_PER_SM = {False: 2, True: 1}
_WAVES = {False: 2, True: 1}


def launch_config(
    num_tokens: int, num_v_heads: int, K: int, V: int, *, gluon: bool = False, interpret: bool | None = None
):
    """The configuration for a prefill of ``num_tokens`` tokens: V tiles of 64 (16 in the interpreter),
    and a single sequence cut into segments for the output pass's waves (``gluon``: for the Gluon pass),
    never shorter than four chunks. Narrower heads keep the 64-wide tile, masked: at 32 columns Triton
    3.6's sm_90 build of the output pass left the final states wrong (rel RMSE 0.25 on the H200, right in
    the interpreter) and before TMA tiles read out of bounds, as GDN's state pass once did at that width."""
    interpret = triton_interpreted() if interpret is None else interpret
    if interpret:
        # small tiles, and small cases still split into segments
        BV = min(max(16, triton.next_power_of_2(V)), 16)
        return LaunchConfig(BV, 4, 1, 2, segment_block_v=16, segment_warps=4, segment_stages=1)
    block_v = 64
    tiles = num_v_heads * triton.cdiv(V, block_v)
    segments = max(1, _WAVES[gluon] * _PROGRAMS_PER_SM[gluon] * SM_COUNT_HINT // tiles)
    seg_chunks = max(4, triton.cdiv(triton.cdiv(max(num_tokens, 1), CHUNK_SIZE), segments))
    return LaunchConfig(block_v, 4, 2, seg_chunks)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale, config=None):
    """Lightning chunked prefill over the packed sequences of ``cu_seqlens``; pool updated in place.
    ``beta`` is ignored; ``config`` overrides :func:`launch_config` (tests, probes)."""
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
    config = config or default_config(q, k, v)
    BK, BV = max(16, triton.next_power_of_2(K)), config.block_v
    seg_tokens = config.seg_chunks * BC
    n_segs = max_chunks(T, N, seg_tokens)
    seg_offsets = torch.empty(N + 1, dtype=torch.int32, device=q.device)
    chunk_offsets(cu_seqlens, seg_tokens, seg_offsets)
    split = T > seg_tokens  # some sequence may have more than one segment
    scratch = (n_segs if split else 0, HV, K, V)
    partial = torch.empty(scratch, dtype=torch.float32, device=q.device)
    start = torch.empty(scratch, dtype=torch.float32, device=q.device)
    seg_BV = config.segment_block_v
    tma = _tma_applies(q, k, v, BK, BV, seg_BV)
    q_desc, k_desc, v_desc, o_desc, v_seg_desc = (
        (_descriptor(x, cols) for x, cols in ((q, BK), (k, BK), (v, BV), (o, BV), (v, seg_BV)))
        if tma
        else (None,) * 5
    )
    shared = dict(H=H, HV=HV, K=K, V=V, BK=BK, BC=BC, SEG_CHUNKS=config.seg_chunks, LOW=low, TMA=tma)
    gluon = _gluon_runs(q, k, v, config)
    pdl = gluon and split and config.gluon_pdl
    segment_args = (
        k, v, g, partial, start, state_pool, state_indices, cu_seqlens, seg_offsets, k_desc, v_seg_desc,
        N, k.stride(0), k.stride(1), v.stride(0), v.stride(1), state_pool.stride(0),
    )  # fmt: skip
    segment_meta = dict(BV=seg_BV, num_warps=config.segment_warps, num_stages=config.segment_stages, **shared)
    segment_grid = (n_segs * HV * triton.cdiv(V, seg_BV),)
    if pdl:
        # the first segments' copies of the pool first, so that the output pass's first segments read
        # nothing the segment pass writes and run beside it
        _lightning_segment_kernel[segment_grid](*segment_args, START_ONLY=True, **segment_meta)
    if split:
        _lightning_segment_kernel[segment_grid](
            *segment_args, COPY_START=not pdl, LAUNCH_DEPENDENTS=pdl, **segment_meta
        )  # fmt: skip
    if gluon:
        from stampgen.kernels.lightning import chunk_gluon

        chunk_gluon.launch_output(
            q, k, v, g, o, partial, start, state_pool, state_indices, cu_seqlens, seg_offsets, scale,
            seg_chunks=config.seg_chunks, block_v=BV, grid=n_segs * HV * triton.cdiv(V, BV), pdl=pdl,
        )  # fmt: skip
        return o
    _lightning_output_kernel[(n_segs * HV * triton.cdiv(V, BV),)](
        q, k, v, g, o, partial, start, state_pool, state_indices, cu_seqlens, seg_offsets,
        q_desc, k_desc, v_desc, o_desc, N,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), v.stride(0), v.stride(1), state_pool.stride(0),
        scale, BV=BV, TMA_STORE=tma and config.tma_store, num_warps=config.warps, num_stages=config.stages,
        **shared, **({} if config.maxnreg is None else dict(maxnreg=config.maxnreg)),
    )  # fmt: skip
    return o


def default_config(q, k, v) -> LaunchConfig:
    """What ``prefill`` runs without a ``config``: ``launch_config`` for the output pass that will run
    (``_gluon_runs`` at the default tiles)."""
    T, HV, K, V = q.shape[0], v.shape[1], q.shape[2], v.shape[2]
    config = launch_config(T, HV, K, V)
    return launch_config(T, HV, K, V, gluon=True) if _gluon_runs(q, k, v, config) else config


def _gluon_runs(q, k, v, config: LaunchConfig) -> bool:
    """Whether ``prefill`` under ``config`` runs the Gluon output pass: asked for (``config.gluon``),
    bf16 q / k / v, TMA tiles (``_tma_applies``, never in the interpreter) and ``chunk_gluon.supported``
    (imported only then)."""
    if not config.gluon or any(x.dtype != torch.bfloat16 for x in (q, k, v)):
        return False
    BK = max(16, triton.next_power_of_2(q.shape[2]))
    if not _tma_applies(q, k, v, BK, config.block_v, config.segment_block_v):
        return False
    from stampgen.kernels.lightning import chunk_gluon

    return chunk_gluon.supported(q, k, v, config.block_v)


def _tma_applies(q, k, v, BK: int, *v_tiles: int) -> bool:
    """Whether whole-chunk tiles come by TMA — q and k [64, K] of one head, v and o [64, BV] — over
    [T, heads · dim] views: not in the interpreter nor for fp32 inputs; K a power of two and V a
    multiple of every V tile (no tile overhangs its head); heads packed; bases and row pitches 16-byte
    aligned. Otherwise the kernels load through pointers."""
    if triton_interpreted() or not q.is_cuda or q.dtype not in (torch.bfloat16, torch.float16):
        return False
    K, V = q.shape[2], v.shape[2]
    if K != BK or any(V % tile for tile in v_tiles) or any(x.dtype != q.dtype for x in (k, v)):
        return False
    packed = all(x.stride(1) == x.shape[2] and x.stride(2) == 1 for x in (q, k, v))
    return packed and all(tma_addressable(x) for x in (q, k, v))


def _descriptor(x: torch.Tensor, cols: int) -> TensorDescriptor:
    """A TMA descriptor over ``x`` [T, heads, dim] (heads packed) as [T, heads · dim], [64, cols] tiles."""
    flat = x.as_strided((x.shape[0], x.shape[1] * x.shape[2]), (x.stride(0), 1))
    return TensorDescriptor.from_tensor(flat, [CHUNK_SIZE, cols])
