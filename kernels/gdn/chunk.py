"""Chunked Gated DeltaNet prefill in Triton (our own kernels; the math is in docs/kernels.md).

Up to four launches, no host synchronisation, so the call can be captured in a CUDA graph:

1. ``_gdn_chunk_intra_kernel`` — fully parallel over (chunk, value head); what in a chunk does not
   depend on the running state and is too costly to redo per V tile. With γ the within-chunk cumulative
   log-decay (reset each chunk), E = exp(γ_i − γ_j) on and below the diagonal, and A the strictly lower
   matrix ``β_i (k_i·k_j) E_ij``, it writes per token row and value head a row of 64 of
       ``Tβ = (I + A)^{-1} diag(β)`` (the WY / UT form)
   and the fp32 gate sums (γ_i, γ_C − γ_i), so the passes never scan the gates themselves.
   The inverse: with D = I + (the 16×16 diagonal blocks of A), ``D^{-1} = (I−a)(I+a²)(I+a⁴)(I+a⁸)``
   (a^16 = 0) as batched 16×16 dots on the four blocks, refined once on 16-bit inputs
   (``_inv_unit_lower_blocks``), and with N = D^{-1}(A − blocks), strictly block-lower so N⁴ = 0,
   ``(I + A)^{-1} = (I − N + N² − N³) D^{-1}`` — forward substitution by 16-blocks, as dots. γ is summed
   in fp64 and kept as an fp32 pair (hi, lo), so γ_i − γ_j is right to a rounding of the difference,
   not of |γ| (thousands under strong decay, where fp32 prefix sums would cancel).
   The WY vectors themselves (w = Tβ (exp(γ)⊙K), u = Tβ V, 64×128 each) are never stored: the passes
   below apply Tβ to ``V − (exp(γ)⊙K) S`` instead, which reads a 64×64 Tβ where w and u took four
   times the bytes, at the price of one more 64×64×64 dot per chunk step.
2. ``_gdn_chunk_segment_kernel`` — only when one sequence is long enough to be split (context
   parallelism). A sequence is cut into segments of ``seg_chunks`` chunks; the state after a segment is
   affine in the state before it, ``S' = M S + B``. For every segment but a sequence's last, this pass
   runs the state recurrence over the segment on the columns ``[V | K]`` at once: from S = 0 with the
   real V (giving B) and from S = I with V = 0 (giving M). A sequence's first segment instead runs from
   its pool state (and keeps a copy of it, see 3).
   ``_gdn_chunk_carry_kernel`` then carries segment 0's end state through the (M, B) of the segments
   between, once per split sequence, and writes every segment's initial state (in the state pass, that
   product's K×K operand took 120 KiB of shared memory: one program per SM instead of two).
3. ``_gdn_chunk_state_kernel`` — parallel over (segment, value head, V tile), sequential over the chunks
   of one segment. The segment's initial state is the pool row (one segment), the copy made in 2 (first
   of several), or the first segment's end state carried through the (M, B) of the segments between.
   Per chunk, with S the K×BV state tile in fp32 registers:
       ``v_new = Tβ (V − (K⊙exp(γ)) S)``,  ``o = scale (Q⊙exp(γ)) S + P v_new``,
       ``S ← exp(γ_C) S + (K⊙exp(γ_C − γ))ᵀ v_new``,
   with ``P = scale (Q Kᵀ ⊙ E)`` made here from the Q and K tiles the step loads anyway: one more dot,
   but no P to store and load, and the shared memory it would take lets two programs per SM pipeline
   their loads.
   The output is fused into the state pass, so no per-chunk state is ever written to memory; a
   sequence's last segment writes the pool row. (The first segment reads the copy, not the pool, since
   the last one may already have written it.)

These kernels are issue-bound (Nsight Compute, 16k tokens: every launch holds 8–12 warps per SM and
issues an instruction every 5–11 cycles per scheduler), so the code is shaped to cut instructions per
chunk step and to raise the programs per SM: chunk-relative 32-bit row offsets, P masked after its
product, ``fast_expf``, full chunks (all but a sequence's last) loaded and stored with no predicates,
the decay matrix as one ``ex2.approx.ftz`` an element, the segment schedule read from a table, the
intra launch's merge in Horner's order; the intra launch capped at 128 registers, the segment pass at
168. Measured speeds, against the peers: benchmarks/RESULTS.md.

On sm_90 with 16-bit inputs, ``LaunchConfig.gluon_state`` replaces passes 2 and 3 by ``chunk_gluon``'s
one Gluon kernel (every sequence unsplit, copies and dots scheduled by hand). ``launch_config`` takes it
where its programs fit on the GPU at once — one long sequence at Qwen3-Next's heads — and keeps the
passes above for batches (measured on 16×2048: its 2048 programs run in 16 waves of one per SM, and the
Triton passes take ~18% less time); the state pass is the intra launch's programmatic dependent
(``gluon_pdl``).

Precision (benchmarks/RESULTS.md, "GDN prefill precision", and ``benchmarks/gdn_precision.py``): for
16-bit inputs the intra launch's four 64×64 solve dots take fp16 operands (fp32 sums: 16-bit dots, 20%
off that launch against tf32 ones; fp16's rounding to nearest, not bf16's 8 bits or tf32's truncation,
``tests/kernels/test_gdn_solve_precision.py``) and D^{-1} is refined once. Without both, D^{-1}'s
powers on tf32 put the final state on correlated keys 5–7× (fp16) and 2.3–5.3× (bf16) further from the
fp64 recurrence than fla's (``tests/kernels/test_gdn_prefill_emulation.py``); with them, measured,
0.34–0.68× and 0.82–1.26×.

On sm_90 with bf16 inputs, ``LaunchConfig.gluon_intra`` (on by default) replaces launch 1 by
``chunk_intra_gluon``'s (the same math in Gluon, 1544 instructions a warp against 2496 here), before
either state pass; before the passes above a launch of ``_gdn_chunk_intra_kernel`` with
``SCHEDULE_ONLY`` writes the segment schedule first. Measured: 8–9% less time on one sequence and 10%
on 16×2048 than with the Triton intra launch (benchmarks/RESULTS.md).

Chunks and segments never straddle a ``cu_seqlens`` boundary. Every launch has a fixed grid, an upper
bound on the work (``T // 64 + N`` chunks, ``T // (64·seg_chunks) + N`` segments, ``T // (64·seg_chunks)``
segments that are not last); each program finds its sequence by a prefix sum over the per-sequence
counts in registers (``_locate``), and programs past the end exit at once. The segment and state
passes read that answer from a table the intra launch writes (``_write_schedule``): made in their own
prologue, its values sat in per-thread registers through the chunk loop (resources tool: 12% of the
state pass's chunk step and half its spills).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

CHUNK = 64
_SM_COUNT_HINT = 132  # H200; shapes how a long sequence is split and where the Gluon pass is preferred

_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
# Smallest K tile. 64 on GPUs: Triton 3.6 on sm_90 miscompiles these kernels' dots when one tile
# dimension is 32 beside others of 64 (measured on the H200: K=32 gave outputs off by 29 % rel RMSE, as
# a V tile of 32 beside K=128 did); a narrower head is zero-padded instead.
_MIN_TILE = 16 if _INTERPRET else 64
# exp and 2^x through ex2.approx on a GPU; the interpreter runs no PTX (see _exp2)
_FAST_EXP = tl.constexpr(not _INTERPRET)
_LOG2E = tl.constexpr(1.4426950408889634)


def _empty(shape, dtype, device) -> torch.Tensor:
    """Every buffer this module allocates (tests replace it to poison outputs and scratch with NaN)."""
    return torch.empty(shape, dtype=dtype, device=device)


@triton.jit
def _locate(cu_seqlens, N, pid, seg_chunks, BN: tl.constexpr, NON_LAST: tl.constexpr):
    """Which sequence and which of its segments (of ``seg_chunks`` chunks) program ``pid`` owns.

    Counts every segment, or (``NON_LAST``) only the segments that are not their sequence's last.
    Returns (n, j, bos, eos, segments of n, index of n's first segment among all non-last segments);
    n ≥ N means the program has no work.
    """
    offs_n = tl.arange(0, BN)
    in_batch = offs_n < N
    lo = tl.load(cu_seqlens + offs_n, mask=in_batch, other=0).to(tl.int64)
    hi = tl.load(cu_seqlens + offs_n + 1, mask=in_batch, other=0).to(tl.int64)
    span = 64 * seg_chunks
    segs = (hi - lo + span - 1) // span
    extra = tl.maximum(segs - 1, 0)
    if NON_LAST:
        count = extra
    else:
        count = segs
    end = tl.cumsum(count, 0)
    n = tl.sum((end <= pid).to(tl.int32), 0)
    this = offs_n == n
    bos = tl.sum(tl.where(this, lo, 0), 0)
    eos = tl.sum(tl.where(this, hi, 0), 0)
    j = pid - tl.sum(tl.where(this, end - count, 0), 0)
    n_segs = tl.sum(tl.where(this, segs, 0), 0)
    first_non_last = tl.sum(tl.where(this, tl.cumsum(extra, 0) - extra, 0), 0)
    return n, j, bos, eos, n_segs, first_non_last


# Fields of a schedule row: n, j, bos, eos, segments of n, first non-last index (int64; 8 a row, 64 B).
_SCHEDULE_ROW = tl.constexpr(8)


@triton.jit
def _write_schedule(schedule, pid, n_programs, cu_seqlens, N, seg_chunks, BN: tl.constexpr):
    """Row ``pid`` of the two tables (every segment; the non-last ones) that the segment and state
    passes read instead of running ``_locate`` themselves. There its results, uniform across a program
    but made by reductions, live through the chunk loop in per-thread registers: ~130 more
    instructions a step and most of the state pass's spills (gdn_kernel_resources.py)."""
    if pid < n_programs:
        for table in tl.static_range(2):
            n, j, bos, eos, n_segs, first = _locate(cu_seqlens, N, pid, seg_chunks, BN, table == 1)
            row = schedule + (table * n_programs + pid) * _SCHEDULE_ROW
            tl.store(row, n.to(tl.int64))
            tl.store(row + 1, j.to(tl.int64))
            tl.store(row + 2, bos)
            tl.store(row + 3, eos)
            tl.store(row + 4, n_segs.to(tl.int64))
            tl.store(row + 5, first.to(tl.int64))


@triton.jit
def _scheduled(schedule, pid, n_programs, NON_LAST: tl.constexpr):
    """``_locate``'s answer for ``pid``, as the intra launch wrote it (``_write_schedule``)."""
    row = schedule + ((1 if NON_LAST else 0) * n_programs + pid) * _SCHEDULE_ROW
    n = tl.load(row).to(tl.int32)
    return n, tl.load(row + 1), tl.load(row + 2), tl.load(row + 3), tl.load(row + 4), tl.load(row + 5)


@triton.jit
def _tile(base, tok0, rows, valid, row_stride, offs, mask, ROWS: tl.constexpr, COLS: tl.constexpr):
    """(pointers, mask) of a [rows, cols] tile of a packed [T, heads, cols] tensor (``base``: token 0 of
    the head). The chunk's first token ``tok0`` is one 64-bit scalar offset and ``rows`` count from it,
    so the per-element offsets stay 32-bit (rows < 64): a third fewer instructions than 64-bit token
    indices per element. ``ROWS`` / ``COLS``: whether ``valid`` (rows) / ``mask`` (cols) can be false
    anywhere (when not, the argument is ignored and the mask is a constant the compiler drops, so a full
    chunk of a tile that divides its dimension loads and stores with no predicate at all)."""
    ptrs = base + tok0 * row_stride + rows[:, None] * row_stride + offs[None, :]
    in_rows = valid[:, None] if ROWS else tl.full((rows.shape[0], 1), True, tl.int1)
    in_cols = mask[None, :] if COLS else tl.full((1, offs.shape[0]), True, tl.int1)
    return ptrs, in_rows & in_cols


@triton.jit
def _load_rows(base, tok0, rows, valid, row_stride, offs, mask, ROWS: tl.constexpr, COLS: tl.constexpr):
    """The tile ``_tile`` names, zero outside it."""
    ptrs, in_tile = _tile(base, tok0, rows, valid, row_stride, offs, mask, ROWS, COLS)
    return tl.load(ptrs, mask=in_tile, other=0.0)


@triton.jit
def _store_rows(
    base, tok0, rows, valid, row_stride, offs, mask, tile, ROWS: tl.constexpr, COLS: tl.constexpr
):
    """Stores a tile where ``_load_rows`` loads it, with the same predicates."""
    ptrs, in_tile = _tile(base, tok0, rows, valid, row_stride, offs, mask, ROWS, COLS)
    tl.store(ptrs, tile.to(base.dtype.element_ty), mask=in_tile)


@triton.jit
def _same_block(NB: tl.constexpr):
    """[NB, 1, NB, 1] mask of a [NB, 16, NB, 16] view of a tile: block row == block column."""
    b = tl.arange(0, NB)
    return b[:, None, None, None] == b[None, None, :, None]


@triton.jit
def _diag_blocks(x, BT: tl.constexpr):
    """The 16×16 diagonal blocks of a [BT, BT] tile, stacked as [BT // 16, 16, 16]."""
    NB: tl.constexpr = BT // 16
    return tl.sum(tl.where(_same_block(NB), tl.reshape(x, (NB, 16, NB, 16)), 0.0), axis=2)


@triton.jit
def _block_diag(blocks, BT: tl.constexpr):
    """The [BT, BT] block-diagonal tile of stacked [BT // 16, 16, 16] blocks (inverse of _diag_blocks)."""
    NB: tl.constexpr = BT // 16
    return tl.reshape(tl.where(_same_block(NB), blocks[:, :, None, :], 0.0), (BT, BT))


@triton.jit
def _inv_unit_lower_blocks(a, PREC: tl.constexpr):
    """(I + a)^{-1} for stacked strictly lower 16×16 blocks a (a^16 = 0): the Neumann series, factored
    exactly, as batched 16×16 dots (a quarter of the work of the same product on the 64×64 tile).

    On tf32 operands (``PREC``, 16-bit inputs) one step of iterative refinement follows: the powers grow
    before they cancel (a⁸ ~10 with correlated keys, where the inverse is O(1)) and a tf32 operand drops
    its low 13 mantissa bits, so X is off by up to ~1% there (the prefill's final state then 7× further
    from fp64 than fla's: benchmarks/RESULTS.md, "GDN prefill precision"). With the residual
    R = I − (I + a)X = (I − X) − a X on tf32x3 operands (each a tf32 pair, about fp32-exact),
    X + X R is off by ~|R|² and rounding: ~1e-5 (``tests/kernels/test_gdn_prefill_emulation.py``), for
    two more dots where tf32x3 throughout would triple all six."""
    i = tl.arange(0, 16)
    eye = tl.where(i[:, None] == i[None, :], 1.0, 0.0)[None, :, :]
    x = eye - a
    a2 = tl.dot(a, a, input_precision=PREC)
    x = tl.dot(x, eye + a2, input_precision=PREC)
    a4 = tl.dot(a2, a2, input_precision=PREC)
    x = tl.dot(x, eye + a4, input_precision=PREC)
    a8 = tl.dot(a4, a4, input_precision=PREC)
    x = tl.dot(x, eye + a8, input_precision=PREC)
    if PREC == "tf32":
        residual = (eye - x) - tl.dot(a, x, input_precision="tf32x3")
        x = tl.dot(x, residual, acc=x, input_precision="tf32")
    return x


@triton.jit
def _cumsum_hi_lo(g):
    """The cumulative sum of a chunk's fp32 gates, formed in fp64 and returned as fp32 (hi, lo) with
    hi + lo exact to ~1e-14: a difference γ_i − γ_j taken as (hi_i − hi_j) + (lo_i − lo_j) is then right
    to a rounding of the difference itself, not of |γ| (thousands under strong decay)."""
    gam = tl.cumsum(g.to(tl.float64), 0)
    hi = gam.to(tl.float32)
    return hi, (gam - hi.to(tl.float64)).to(tl.float32), gam


@triton.jit
def _log2_pair(hi, lo):
    """γ log2 e as an fp32 pair (p_hi, p_lo) from γ's pair (``_cumsum_hi_lo``): p_hi + p_lo is
    hi·log2 e exactly (the fma's remainder) plus lo·log2 e, so p_i − p_j taken as
    (p_hi_i − p_hi_j) + (p_lo_i − p_lo_j) is right to a rounding of the difference; scaling each
    element's difference by log2 e instead costs a multiply an element, and so do β's rows, which here
    ride in the row term as log2 β."""
    p_hi = hi * _LOG2E
    return p_hi, tl.fma(hi, _LOG2E, -p_hi) + lo * _LOG2E


@triton.jit
def _exp2(x):
    """2^x, on a GPU as one ``ex2.approx.ftz`` (a MUFU; ``tl.exp2`` adds a denormal fix-up, 2–3
    instructions an element more here, and a relative error of 2e-7 is far below what the kernels
    keep). The interpreter runs no PTX."""
    if _FAST_EXP:
        return tl.inline_asm_elementwise(
            "ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1
        )
    else:
        return tl.exp2(x)


@triton.jit
def _exp(x):
    """exp, on a GPU as ``_exp2(x · log2 e)`` (libdevice's fast_expf, spelled out); exact ``tl.exp`` in
    the interpreter, where the fp32 tests hold the kernels to the reference."""
    if _FAST_EXP:
        return _exp2(x * _LOG2E)
    else:
        return tl.exp(x)


@triton.jit
def _intra_chunk(
    k, g, beta, t_out, gates, n_tokens, bos, eos, j, hv, h,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, BK: tl.constexpr, PREC: tl.constexpr,
    IN_PREC: tl.constexpr, SOLVE_16: tl.constexpr,
):  # fmt: skip
    """Chunk ``j`` of the sequence [bos, eos) for value head ``hv`` (qk head ``h``): its rows of Tβ and
    of the gate sums, stored."""
    BT: tl.constexpr = 64
    # Each operand is loaded just before its first use and each result stored as soon as it is made,
    # so few [64, 64] fp32 tiles are live at once (the kernel is register-bound).
    rows = tl.arange(0, BT)
    tok0, ok = _chunk_rows(bos, eos, j, rows)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    k_c = _load_rows(k + h * K, tok0, rows, ok, H * K, offs_k, mask_k, True, K != BK)
    g_c = tl.load(g + tok0 * HV + rows * HV + hv, mask=ok, other=0.0)
    # β = 1 past the sequence, where k = 0 makes A's rows zero anyway: log2 β stays finite there, and
    # those rows of Tβ are never stored (nor read: the rows before them do not depend on them)
    b_c = tl.load(beta + tok0 * HV + rows * HV + hv, mask=ok, other=1.0)

    # The gate sums (γ_i, γ_C − γ_i) the passes read, formed in fp64 (masked rows add 0 to γ_C).
    hi, lo, gam = _cumsum_hi_lo(g_c)
    # gates is [2, HV, T], so a chunk's sums are contiguous for the passes' loads
    rows_of_hv = gates + tl.cast(hv, tl.int64) * n_tokens + tok0 + rows
    tl.store(rows_of_hv, hi, mask=ok)
    after = (tl.sum(g_c.to(tl.float64), 0) - gam).to(tl.float32)
    tl.store(rows_of_hv + tl.cast(n_tokens, tl.int64) * HV, after, mask=ok)
    # β_i E_ij = 2^(p_i − p_j + log2 β_i), p = γ log2 e (``_log2_pair``); above the diagonal it may
    # overflow to inf, which the select discards.
    p_hi, p_lo = _log2_pair(hi, lo)
    row_lo = p_lo + tl.log2(b_c)
    beta_decay = _exp2((p_hi[:, None] - p_hi[None, :]) + (row_lo[:, None] - p_lo[None, :]))
    a = tl.where(
        rows[:, None] > rows[None, :],
        tl.dot(k_c, tl.trans(k_c), input_precision=IN_PREC) * beta_decay,
        0.0,
    )

    # (I + A)^{-1} = (I − N + N² − N³) D^{-1}, D = I + the diagonal blocks of A, N = D^{-1}(A − blocks),
    # in Horner's order D^{-1} − N(D^{-1} − N(D^{-1} − N D^{-1})): N is the left operand of every dot,
    # so it is moved into the dot's register layout once (the factored (I − N)(I + N²) D^{-1} moved
    # three operands; 2616 instructions per warp against 2816, gdn_kernel_resources.py).
    diag_block = (rows[:, None] // 16) == (rows[None, :] // 16)
    d_inv = _block_diag(_inv_unit_lower_blocks(_diag_blocks(a, BT), PREC), BT)
    if SOLVE_16:
        # The four 64×64 dots on fp16 operands (fp32 sums) for either 16-bit input: they make the
        # off-diagonal corrections, and fp16 rounds to nearest with 11 bits where tf32 truncates to 11
        # and bf16 rounds to 8. On correlated keys (fp64 emulation, 4 × 1024 tokens, no decay) the final
        # state is then 1.01× (bf16 inputs) and 1.5× (fp16) what fp32 dots give, where bf16 operands
        # gave 1.5× and tf32 ones 2.7× (tests/kernels/test_gdn_solve_precision.py; benchmarks/RESULTS.md,
        # "GDN prefill precision").
        # Range: |A| ≤ 1, and D^{-1}, N and the partial inverses stay far below fp16's 65504 wherever
        # the Tβ they make is worth storing in 16 bits.
        d_lo = d_inv.to(tl.float16)
        nil = tl.dot(d_lo, tl.where(diag_block, 0.0, a).to(tl.float16)).to(tl.float16)
        t_inv = d_inv - tl.dot(nil, d_lo)
        t_inv = d_inv - tl.dot(nil, t_inv.to(tl.float16))
        t_beta = (d_inv - tl.dot(nil, t_inv.to(tl.float16))) * b_c[None, :]
    else:
        nil = tl.dot(d_inv, tl.where(diag_block, 0.0, a), input_precision=PREC)
        t_inv = d_inv - tl.dot(nil, d_inv, input_precision=PREC)
        t_inv = d_inv - tl.dot(nil, t_inv, input_precision=PREC)
        t_beta = (d_inv - tl.dot(nil, t_inv, input_precision=PREC)) * b_c[None, :]
    _store_rows(t_out + hv * BT, tok0, rows, ok, HV * BT, rows, rows, t_beta, True, False)


@triton.jit
def _gdn_chunk_intra_kernel(
    k,
    g,
    beta,
    state_indices,
    cu_seqlens,
    t_out,
    gates,
    n_tokens,
    schedule,
    n_programs,
    seg_chunks,
    N,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    BK: tl.constexpr,
    BN: tl.constexpr,
    PREC: tl.constexpr,
    IN_PREC: tl.constexpr,
    SOLVE_16: tl.constexpr = False,
    LAUNCH_DEPENDENTS: tl.constexpr = False,
    SCHEDULE_ONLY: tl.constexpr = False,
):
    if LAUNCH_DEPENDENTS:
        # The Gluon state pass after this launch (``gluon_pdl``) may start once every program here has:
        # it waits for this launch's end before it reads what this launch writes.
        tl.extra.cuda.gdc_launch_dependents()
    pid = tl.program_id(0)
    hv = tl.program_id(1)
    if hv == 0:
        _write_schedule(schedule, pid, n_programs, cu_seqlens, N, seg_chunks, BN)
    if SCHEDULE_ONLY:
        return  # before the Gluon intra launch (``gluon_intra``), on a grid of (n_programs, 1)
    h = hv // (HV // H)
    n, j, bos, eos, n_segs, first_non_last = _locate(cu_seqlens, N, pid, 1, BN, False)
    if n >= N:
        return
    if tl.load(state_indices + n) < 0:
        return  # padding: the state pass waits for no chunk of it
    _intra_chunk(
        k, g, beta, t_out, gates, n_tokens, bos, eos, j, hv, h, H, HV, K, BK, PREC, IN_PREC, SOLVE_16
    )  # fmt: skip


@triton.jit
def _chunk_rows(bos, eos, c, rows):
    """(first token, in-sequence mask of ``rows``) of chunk ``c`` of the sequence [bos, eos). Tiles are
    addressed from the first token (one 64-bit scalar) with 32-bit row offsets: fewer instructions per
    chunk step than 64-bit token indices per row (resources tool: 1654 -> 1559 in the state pass)."""
    tok0 = bos + tl.cast(c, tl.int64) * 64
    return tok0, rows < tl.cast(tl.minimum(eos - tok0, 64), tl.int32)


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


class LaunchConfig(NamedTuple):
    """How the launches are shaped (no autotuning: the state pass updates the pool in place, so a
    benchmark run of it would apply the update several times)."""

    block_v: int  # V (and M-column) tile of the segment and state passes
    state_warps: int
    state_stages: int  # software-pipelining stages of the state pass
    intra_warps: int
    seg_chunks: int  # chunks per segment; a sequence of at most this many chunks is not split
    # The segment pass holds two programs per SM at two stages too (72 KiB of shared memory; registers
    # are its limit), so it always pipelines its loads (64k tokens: 4.26 ms against 4.54 at one stage,
    # two runs).
    segment_stages: int = 2
    # A register cap for the intra launch (Triton's ``maxnreg``): uncapped it takes 167 registers (three
    # programs per SM); capped at 128 it holds four, with no spills (gdn_kernel_resources.py). None: no cap.
    intra_maxnreg: int | None = None
    # The same for the segment pass: capped at 168 (with some spills) it holds three programs per SM,
    # so the (M, B) tiles of four segments (10 per value head) run in one wave instead of 1.2.
    segment_maxnreg: int | None = None
    # The carry launch (one program per split sequence and V tile, ~15 µs at 16k tokens, Nsight Compute:
    # latency-bound at 0.34 instructions per cycle). One stage: Triton's default three, to pipeline the
    # K×K loads of M, need 240 KiB of shared memory, more than an SM has; two fit (176 KiB, no spills)
    # and so do 8 warps (no spills), but neither moved the total by more than 1% (measured, H200).
    carry_warps: int = 4
    carry_stages: int = 1
    # The segment, carry and state passes replaced by ``chunk_gluon``'s one Gluon kernel (sm_90, 16-bit
    # q/k/v, ``chunk_gluon.supported``; every sequence unsplit, so worth it when its programs run in one
    # wave: ``launch_config``).
    gluon_state: bool = False
    # With ``gluon_state`` (intra launch before it): the state pass launched as a programmatic dependent
    # of the intra launch (PDL), so its programs take the SMs the intra launch's last wave leaves and
    # read their pool rows while it ends; they wait for it (``griddepcontrol.wait``) before reading Tβ.
    # Measured: 1.2 / 1.6 / 0.7% less time at 4k / 16k / 64k tokens (benchmarks/RESULTS.md).
    gluon_pdl: bool = False
    # The intra launch is ``chunk_intra_gluon``'s where it applies (sm_90, bf16 keys:
    # ``chunk_intra_gluon.supported``), the same math with its layouts stated; before the Triton passes a
    # launch of the Triton kernel writes their schedule first. Measured: 8–9% less time on one sequence
    # of 4k–64k tokens (Gluon state pass) and 10% on 16×2048 (Triton passes) than with the Triton intra
    # launch (benchmarks/RESULTS.md).
    gluon_intra: bool = False


_PROGRAMS_PER_SM = 2  # state-pass programs one SM holds (registers: 255 per thread)


def launch_config(
    num_tokens: int, num_seqs: int, num_v_heads: int, v_dim: int, *, interpret: bool = _INTERPRET
) -> LaunchConfig:
    """The configuration for a prefill of ``num_tokens`` tokens in ``num_seqs`` sequences. Why each
    choice, as measured on the H200 (``benchmarks/gdn_prefill_probe.py``, Qwen3-Next shapes):

    - V tile 64. Triton 3.6 on sm_90 miscompiles the state pass at BV = 32 with one stage (outputs off
      by 89 % rel RMSE); at two stages BV = 32 is right but slower (4.10 against 3.61 ms at 64k tokens,
      1.42 against 1.25 on 16×2048).
    - A long sequence is cut into ``2·SMs // tiles`` segments (4 at HV = 32, V = 128), so the state
      pass fills the GPU in one wave at two programs per SM (4.52 ms at 64k tokens, against 4.62 with
      five segments carried inside the state pass and 4.92 unsplit, on an earlier form of the passes);
      never shorter than four chunks. More segments than that were 5–38% slower.
    - Two pipelining stages in the state pass: with P made in the pass, two programs per SM still fit
      (105 KiB of shared memory each), 3–8 % faster than one stage. At two stages Triton issues the
      next chunk's copies at the end of a step and waits for them at the top of the next, so they hide
      little (Nsight Compute); three stages would hide them behind a whole step but leave one program
      per SM (153.5 KiB) and were 1.28–1.38× slower.
    - The intra launch runs on 4 warps (8: 1.8× slower), capped at 128 registers: four programs per SM,
      no spills (1–3.4 % faster than at 168, three per SM).
    - The segment pass capped at 168 registers (some spills): three programs per SM, so a long
      sequence's (M, B) tiles run in one wave (3 % faster at 16k and 64k tokens, equal at 4k and on
      16×2048).

    - The Gluon state pass (``gluon_state``, the intra launch before it) where its programs — (V tile
      of 32, value head, sequence), every sequence unsplit, one per SM — fit in one wave with an SM to
      spare: one long sequence at Qwen3-Next's 32 value heads (0.155 / 0.591 / 2.306 ms at 4k / 16k /
      64k tokens against 0.194 / 0.665 / 2.522 for the Triton passes). Where they do not, the Triton
      passes, which split long sequences and run short ones two programs per SM (16×2048: 2048 Gluon
      programs, 1.162 against 0.948 ms). Only where ``chunk_gluon.supported`` holds (sm_90, 16-bit
      inputs). With it the state pass is the intra launch's programmatic dependent (``gluon_pdl``:
      0.7–1.6% less).
    - The intra launch in Gluon (``gluon_intra``) wherever it applies (sm_90, bf16), before either
      state pass: 8–9% less time on one sequence, 10% on 16×2048.
    """
    if interpret:
        return LaunchConfig(max(16, min(32, triton.next_power_of_2(v_dim))), 4, 1, 4, 4)
    block_v = 64
    tiles = num_v_heads * triton.cdiv(v_dim, block_v)
    slots = _PROGRAMS_PER_SM * _SM_COUNT_HINT
    segments = max(1, slots // tiles)
    seg_chunks = max(4, triton.cdiv(triton.cdiv(num_tokens, CHUNK), segments))
    from stampgen.kernels.gdn import chunk_gluon  # imported here: where Gluon applies

    gluon = chunk_gluon.programs(num_v_heads, v_dim, num_seqs) < _SM_COUNT_HINT
    return LaunchConfig(
        block_v, 4, 2, 4, seg_chunks, intra_maxnreg=128, segment_maxnreg=168,
        gluon_state=gluon, gluon_pdl=gluon, gluon_intra=True,
    )  # fmt: skip


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale: float) -> torch.Tensor:
    """Chunked GDN prefill; arguments already validated by ``kernels.gdn.prefill`` (docs/design.md)."""
    T = q.shape[0]
    N = state_indices.shape[0]
    o = _empty(v.shape, v.dtype, v.device)
    if T == 0 or N == 0:
        return o
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    g, beta = g.contiguous(), beta.contiguous()
    state_indices, cu_seqlens = state_indices.contiguous(), cu_seqlens.contiguous()
    config = launch_config(T, N, v.shape[1], v.shape[2])
    if _gluon_state(q, k, v, config):
        _gluon_prefill(q, k, v, g, beta, o, state_pool, state_indices, cu_seqlens, scale, config)
        return o
    tbeta, gates, schedule = _launch_intra(k, g, beta, state_indices, cu_seqlens, config)
    affine, start = _launch_segments(k, gates, v, tbeta, state_pool, state_indices, schedule, config)
    carry = _launch_carry(affine, state_indices, cu_seqlens, q.dtype, config)
    _launch_state(q, k, v, gates, tbeta, o, state_pool, state_indices, schedule, start, carry, scale, config)
    return o


def _gluon_prefill(q, k, v, g, beta, o, state_pool, state_indices, cu_seqlens, scale, config) -> None:
    """The intra launch and ``chunk_gluon``'s state pass (``_gluon_state`` true), one after the other."""
    from stampgen.kernels.gdn import chunk_gluon  # imported here: Gluon kernels only where they run

    pdl = config.gluon_pdl
    tbeta, gates, _ = _launch_intra(
        k, g, beta, state_indices, cu_seqlens, config, dependents=pdl, schedule=False
    )
    chunk_gluon.launch_state(q, k, v, gates, tbeta, o, state_pool, state_indices, cu_seqlens, scale, pdl=pdl)


def _gluon_state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: LaunchConfig) -> bool:
    """Whether this call's state pass is ``chunk_gluon``'s (asked for, and it applies here)."""
    if not config.gluon_state or _INTERPRET:
        return False
    from stampgen.kernels.gdn import chunk_gluon

    return chunk_gluon.supported(q, k, v)


def _input_precision(dtype: torch.dtype) -> str | None:
    """Dots on input-dtype operands: IEEE for fp32 inputs (fp32 throughout); 16-bit operands take
    the tensor cores' 16-bit path with fp32 accumulation (the precision setting does not apply)."""
    return "ieee" if dtype == torch.float32 else None


def _solve_precision(dtype: torch.dtype) -> str:
    """Dots on fp32 operands (the triangular solve, the segment carry): tf32 when the result is
    rounded to 16 bits anyway."""
    return "ieee" if dtype == torch.float32 else "tf32"


def _block_k(K: int) -> int:
    """The K tile: the head dimension rounded up to a power of two, at least ``_MIN_TILE``."""
    return max(_MIN_TILE, triton.next_power_of_2(K))


def _block_n(N: int) -> int:
    """The tile over the batch that ``_locate`` scans (N sequences and one bound more)."""
    return triton.next_power_of_2(N + 1)


def _common(q, num_v_heads, state_indices):
    """Meta-parameters every launch but the carry shares."""
    H, K = q.shape[1], q.shape[2]
    return dict(
        H=H,
        HV=num_v_heads,
        K=K,
        BK=_block_k(K),
        BN=_block_n(state_indices.shape[0]),
        IN_PREC=_input_precision(q.dtype),
    )


def _segment_programs(T: int, N: int, config) -> int:
    """The state pass's grid over segments: an upper bound on how many there are, with no host sync."""
    return T // (CHUNK * config.seg_chunks) + N


def _intra_outputs(k: torch.Tensor, T: int, HV: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The intra launch's outputs: Tβ [T, HV, 64] in the input dtype, the gate sums [2, HV, T] fp32."""
    return _empty((T, HV, CHUNK), k.dtype, k.device), _empty((2, HV, T), torch.float32, k.device)


def _launch_intra(
    k, g, beta, state_indices, cu_seqlens, config, dependents: bool = False, schedule: bool = True
):
    """Launch 1: Tβ, a row of 64 per token and value head in the input dtype, the fp32 gate sums
    (γ_i, γ_C − γ_i) of every token and value head ([2, HV, T]), and the segment schedule the later
    passes read ([2, segment programs, 8]: ``_write_schedule``). ``dependents``: the next launch is a
    programmatic dependent of this one (``gluon_pdl``). With ``gluon_intra`` where it applies, Tβ and the
    gate sums are ``chunk_intra_gluon``'s, after a launch of this kernel that writes the schedule alone
    (none with ``schedule`` false: the Gluon state pass reads none)."""
    T, HV = g.shape
    N = state_indices.shape[0]
    tbeta, gates = _intra_outputs(k, T, HV)
    n_programs = _segment_programs(T, N, config)  # ≤ the intra grid's T // 64 + N programs
    table = _empty((2, n_programs, _SCHEDULE_ROW.value), torch.int64, k.device)
    args = (k, g, beta, state_indices, cu_seqlens, tbeta, gates, T, table, n_programs, config.seg_chunks, N)
    gluon = _gluon_intra(k, config)
    if gluon and schedule:
        _gdn_chunk_intra_kernel[(n_programs, 1)](
            *args, **_intra_meta(k, HV, state_indices, config, SCHEDULE_ONLY=True)
        )
    if gluon:
        from stampgen.kernels.gdn import chunk_intra_gluon

        chunk_intra_gluon.launch(k, g, beta, state_indices, cu_seqlens, tbeta, gates, dependents=dependents)
        return tbeta, gates, table
    # Σ ceil(len_n / 64) ≤ T // 64 + N: a fixed grid, so no host sync to count the chunks.
    _gdn_chunk_intra_kernel[(T // CHUNK + N, HV)](
        *args,
        **_intra_meta(k, HV, state_indices, config, LAUNCH_DEPENDENTS=dependents),
    )
    return tbeta, gates, table


def _gluon_intra(k: torch.Tensor, config: LaunchConfig) -> bool:
    """Whether this call's intra launch is ``chunk_intra_gluon``'s (asked for, and it applies here)."""
    if not config.gluon_intra or _INTERPRET:
        return False
    from stampgen.kernels.gdn import chunk_intra_gluon

    return chunk_intra_gluon.supported(k)


def _intra_meta(k, HV: int, state_indices, config, **extra) -> dict:
    """The intra kernel's meta-parameters and launch options, the same for both of its launches."""
    cap = {"maxnreg": config.intra_maxnreg} if config.intra_maxnreg else {}
    return dict(
        PREC=_solve_precision(k.dtype),
        SOLVE_16=k.dtype != torch.float32,  # the four big solve dots on fp16 operands
        num_warps=config.intra_warps,
        **cap,
        **_common(k, HV, state_indices),
        **extra,
    )


def _launch_segments(k, gates, v, tbeta, state_pool, state_indices, schedule, config):
    """Launch 2 (only if some sequence can be longer than one segment): (M, B) of every segment that
    is not its sequence's last — at most T // (64·seg_chunks) of them — and the first segments' states."""
    T, HV, V = v.shape
    K = k.shape[2]
    N = state_indices.shape[0]
    non_last = T // (CHUNK * config.seg_chunks)
    if non_last == 0:
        return None, None
    affine = _empty((non_last, HV, K, V + K), torch.float32, v.device)
    start = _empty((non_last, HV, K, V), torch.float32, v.device)
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
    carry = _empty((non_last, HV, K, V), torch.float32, affine.device)
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


def tma_addressable(rows: torch.Tensor) -> bool:
    """Whether TMA can address a [T, cols] view: its base and its row pitch 16-byte aligned."""
    return rows.data_ptr() % 16 == 0 and (rows.stride(0) * rows.element_size()) % 16 == 0


def _tile_descriptors(q, k, v, tbeta, block_v: int):
    """Tensor descriptors (TMA) of the whole-chunk tiles of the state pass: q and k [64, K] of one qk
    head, v [64, BV], Tβ [64, 64], each over a [T, heads · cols] view. None where the tiles would
    overhang their head (K not a power of two, V not a multiple of BV) or a view is not 16-byte
    aligned, as TMA needs; the pass then loads through pointers."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    views = [(q.view(T, H * K), K), (k.view(T, H * K), K), (v.view(T, HV * V), block_v)]
    views.append((tbeta.view(T, HV * CHUNK), CHUNK))
    if K != _block_k(K) or V % block_v:
        return None
    if not all(tma_addressable(t) for t, _ in views):
        return None
    return tuple(TensorDescriptor.from_tensor(t, [CHUNK, cols]) for t, cols in views)


def _launch_state(q, k, v, gates, tbeta, o, state_pool, state_indices, schedule, start, carry, scale, config):
    """Launch 3: the state pass over every segment with the output fused in; updates the pool in place."""
    T, HV, V = v.shape
    N = state_indices.shape[0]
    if start is None:  # no sequence is split: never read (the kernel never branches there)
        start = carry = state_pool
    segments = schedule.shape[1]  # _segment_programs
    descs = _tile_descriptors(q, k, v, tbeta, config.block_v)
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
