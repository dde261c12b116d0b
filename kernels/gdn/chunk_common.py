"""What the chunked GDN prefill's launches share: the chunk size, the Triton helpers that find a
program's sequence and segment and address a chunk's rows, the exp2 / log-space helpers, the host
choices of tiles and dot precisions, and the one allocator of every buffer.

``chunk_intra`` (launch 1), ``chunk_state`` (the segment, carry and state passes), ``chunk_config`` and
``chunk_tma`` import this module and nothing imports them back, so the import graph stays acyclic
(``tests/kernels/test_gdn_module_graph.py``). What is the same as in ``kernels.chunked`` (the chunk size,
log2 e, the SM count hint, the interpreter test) is taken from there; what only looks alike is not:
``kernels.chunked.blocks.decay`` takes ``tl.exp2`` (its denormal fix-up) where ``_exp2`` here is one
``ex2.approx.ftz``, and ``blocks.pool_slot`` clamps padding to slot 0 where these passes return before
any pool access. The ``@triton.jit`` helpers keep their names: the kernels read them (and the constexpr
globals ``_FAST_EXP``, ``_LOG2E``, ``_SCHEDULE_ROW``) from their own module's globals, so each importer
imports them by name, and their machine code is that of the kernels before the split (sm_90a SASS
hashes, ``benchmarks/gdn_kernel_resources.py --sass``).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked import blocks as chunked_blocks
from stampgen.kernels.chunked import common as chunked_common

CHUNK = chunked_common.CHUNK_SIZE  # tokens per chunk: 64
# H200; shapes how a long sequence is split and where the Gluon pass is preferred
_SM_COUNT_HINT = chunked_common.SM_COUNT_HINT

_INTERPRET = chunked_common.triton_interpreted()
# Smallest K tile. 64 on GPUs: Triton 3.6 on sm_90 miscompiles these kernels' dots when one tile
# dimension is 32 beside others of 64 (measured on the H200: K=32 gave outputs off by 29 % rel RMSE, as
# a V tile of 32 beside K=128 did); a narrower head is zero-padded instead.
_MIN_TILE = 16 if _INTERPRET else 64
# exp and 2^x through ex2.approx on a GPU; the interpreter runs no PTX (see _exp2)
_FAST_EXP = tl.constexpr(not _INTERPRET)
_LOG2E = chunked_blocks.LOG2E  # a tl.constexpr: the kernels read it


@functools.cache
def sm_count(device: torch.device) -> int:
    """The device's SMs, for launches whose programs are counted by them (persistent or strided)."""
    return torch.cuda.get_device_properties(device).multi_processor_count


def _empty(shape, dtype, device) -> torch.Tensor:
    """Every buffer the prefill allocates, called as ``chunk_common._empty`` from each launch module, so
    tests that replace it here poison every output and scratch buffer with NaN."""
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
def _chunk_rows(bos, eos, c, rows):
    """(first token, in-sequence mask of ``rows``) of chunk ``c`` of the sequence [bos, eos). Tiles are
    addressed from the first token (one 64-bit scalar) with 32-bit row offsets: fewer instructions per
    chunk step than 64-bit token indices per row (resources tool: 1654 -> 1559 in the state pass)."""
    tok0 = bos + tl.cast(c, tl.int64) * 64
    return tok0, rows < tl.cast(tl.minimum(eos - tok0, 64), tl.int32)


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
