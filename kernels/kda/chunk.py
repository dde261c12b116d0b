"""Our Triton chunked KDA prefill: an intra-chunk pass parallel over chunks (the WY form of the delta
rule), then a state pass sequential over chunks that writes the output.

Chunks of ``CHUNK_SIZE`` = 64 tokens. Per chunk, with γ_t = Σ_{s≤t} g_s the
cumulative log-decay from the chunk start (per key channel, fp32) and S the state before the chunk
(K-major; the pool holds Sᵀ):

    A[i, j] = β_i Σ_c k_i[c] k_j[c] exp(γ_i[c] − γ_j[c])        i > j   (strictly lower triangular)
    P[i, j] = scale Σ_c q_i[c] k_j[c] exp(γ_i[c] − γ_j[c])      i ≥ j
    Tβ = (I + A)⁻¹ diag(β),  W = Tβ (K ⊙ exp γ),  Ũ = Tβ V                          (intra pass)
    Q̃ = scale Q ⊙ exp γ,  K̃ = K ⊙ exp(γ_C − γ),  d = exp γ_C                        (intra pass)
    U = Ũ − W S,  O = Q̃ S + P U,  S ← diag(d) S + K̃ᵀ U                               (state pass)

so the state pass is four tensor-core products a chunk on operands the intra pass stored in the input
dtype, as GDN's is: the per-channel decay costs it nothing more than loads.

No exponential is unbounded (a per-channel decay forbids exp(γ_i) · exp(−γ_j), which overflows once a
chunk decays past e^88: docs/kernels.md, "Numerical pitfalls"):

* a chunk that decays by at most ``SAFE_SPAN`` (e^60) in every key channel: A and P as one tensor-core
  product each through the middle row r, exp(γ_i − γ_j) = exp(γ_i − γ_r) · exp(γ_r − γ_j), every factor
  within e^±60 (finite and normal in fp32);
* any other chunk is redone by halving levels (``_levels_blocks``: each block's upper half against its
  lower half through the block's middle row, every factor ≤ 1), in a second launch of the intra kernel
  on a fixed grid whose programs walk the chunks the first launch marked;
* Tβ by ``kernels.chunked.solve`` (the solve GDN's prefill uses).

1. ``_chunk_offsets_kernel`` (``kernels.chunked.chunk_map``): each sequence's first global chunk index.
2. ``_kda_intra_kernel``, launched twice: one program per (global chunk, v-head) through the middle row,
   then the levels for the chunks it marked: Q̃, W, Ũ, P (token-major, the input dtype), K̃ (by chunk,
   C rows each with zeros past the sequence, where the state pass takes TMA tiles; else token-major) and
   d (fp32, per chunk).
3. ``_kda_state_kernel``, one program per (sequence, v-head, V-tile): walks the chunks with its fp32
   [K, BV] state tile in registers (the V columns evolve independently under the delta rule), its
   tiles by TMA on the GPU, writes O and finally the pool.

Rows past a sequence's end in its last chunk add nothing to the state and do not decay it: through
pointers they read as 0; by TMA they are the next sequence's rows (or zeros past the buffer): their
rows of U are zeroed, and K̃'s, the one operand contracted over the rows, are zeros of this chunk's
own. Padding (index −1): zero initial state, zero output, nothing stored. Zero-length sequences store
their state back unchanged. No host sync anywhere.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from stampgen.kernels.chunked.blocks import LOG2E, chunk_tile, decay, pool_slot, program_tile, sequence_bounds
from stampgen.kernels.chunked.chunk_map import chunk_offsets, chunk_sequence, max_chunks
from stampgen.kernels.chunked.common import (
    CHUNK_SIZE,
    SM_COUNT_HINT,
    head_dim_contiguous,
    triton_interpreted,
)
from stampgen.kernels.chunked.solve import unit_lower_solve

# The largest decay across a chunk (in one key channel, in nats) for which the chunk's A and P are one
# product each through its middle row: the factors stay within e^±60, far inside fp32's normal range
# (e^±87). A chunk that decays faster takes the halving levels, whose factors are all ≤ 1.
SAFE_SPAN = tl.constexpr(60.0)


class LaunchConfig(NamedTuple):
    """Launch settings of the two passes. ``key_block``: key channels per step of the intra pass's
    A / P loop; ``block_v``: the state pass's V tile (None: ``launch_config`` picks by grid size);
    ``levels_only``: every chunk by the halving levels, none through the middle row (for A/B runs and
    tests of the levels on inputs the middle row would take); ``stages``: of the state pass's chunk
    loop (four do not fit in shared memory). Key blocks of 32 and a one-stage state pass end in an
    illegal memory access on the H200 (Triton 3.6's sm_90 build; the interpreter computes
    both right): benchmarks/RESULTS.md."""

    key_block: int = 64
    intra_warps: int = 4
    block_v: int | None = None
    warps: int = 4
    stages: int = 3
    levels_only: bool = False
    tma: bool = True  # the state pass's tiles by TMA where ``_tma_applies``


@triton.jit
def _tile(ptr, row_offs, ok, offs, mask):
    """The [rows, cols] tile at ``ptr + row_offs[:, None] + offs[None, :]``, zero outside ``ok × mask``."""
    return tl.load(ptr + row_offs[:, None] + offs[None, :], mask=ok[:, None] & mask[None, :], other=0.0)


@triton.jit
def _put(ptr, row_offs, ok, offs, mask, x):
    """Stores ``x`` where ``_tile`` loads, in ``ptr``'s dtype."""
    tl.store(
        ptr + row_offs[:, None] + offs[None, :], x.to(ptr.dtype.element_ty), mask=ok[:, None] & mask[None, :]
    )


@triton.jit
def _halving_level(A, P, q_c, k_c, gam, gam_rows, offs, rows, HALF: tl.constexpr, PITCH: tl.constexpr,
                   PREC: tl.constexpr):  # fmt: skip
    """A and P plus one level of ``_levels_blocks``' halving: the pairs (upper half, lower half) of every
    block of 2·HALF rows, through the block's middle row m (read back from the γ scratch, whose rows
    ``gam_rows`` are ``PITCH`` apart)."""
    m = (rows // (2 * HALF)) * (2 * HALF) + HALF - 1
    gam_m = tl.load(gam_rows + (m - rows)[:, None] * PITCH + offs[None, :])  # γ at each row's m
    upper = ((rows // HALF) % 2 == 1)[:, None]
    e = decay(tl.where(upper, gam - gam_m, gam_m - gam))
    col = tl.trans(tl.where(upper, 0.0, k_c * e))
    same = (rows[:, None] // (2 * HALF)) == (rows[None, :] // (2 * HALF))
    A += tl.where(same, tl.dot(tl.where(upper, k_c * e, 0.0), col, input_precision=PREC), 0.0)
    P += tl.where(same, tl.dot(tl.where(upper, q_c * e, 0.0), col, input_precision=PREC), 0.0)
    return A, P


@triton.jit
def _levels_blocks(q, k, g, q_out, k_out, kin_out, d_out, gam_scratch, tok0, n_rows, c, hv, stride_q_tok,
                   qk_head, scale, K, HV: tl.constexpr, BK: tl.constexpr, BKB: tl.constexpr,
                   C: tl.constexpr, PREC: tl.constexpr, BY_CHUNK: tl.constexpr):  # fmt: skip
    """(A without β, P without scale) of one chunk whatever its decay, [C, C] fp32, summed over blocks of
    BKB key channels (the decay is per channel, so every block stands alone); Q̃, K̃, K ⊙ exp γ and d
    stored (``_gated_tiles``). ``gam_scratch``: this program's own [C, BK] of γ.

    The strictly lower triangle is split by halving: at the level of blocks of 2h rows, each block's
    upper half (rows i) against its lower half (columns j), through the block's middle row m (the last
    of the lower half): exp(γ_i − γ_j) = exp(γ_i − γ_m) · exp(γ_m − γ_j), both factors ≤ 1, so each
    level is one tensor-core product per key block, with the pairs of other blocks masked off after it:
    one exponential an element a level, six levels for 64 rows. γ at each row's m is a gather, so γ goes
    through the scratch (a row-indexed load from registers does not exist)."""
    rows = tl.arange(0, C)
    ok = rows < n_rows
    qk_rows = (tok0 + rows) * stride_q_tok + qk_head
    g_rows = (tok0 + rows) * (HV * K) + hv * K
    A = tl.zeros((C, C), dtype=tl.float32)
    P = tl.zeros((C, C), dtype=tl.float32)
    for kb in tl.static_range(0, BK, BKB):
        offs = kb + tl.arange(0, BKB)
        mask = offs < K
        k_c = _tile(k, qk_rows, ok, offs, mask).to(tl.float32)
        q_c = _tile(q, qk_rows, ok, offs, mask).to(tl.float32)
        g_c = _tile(g, g_rows, ok, offs, mask)  # rows past the sequence read g = 0: γ stays flat there
        gam = tl.cumsum(g_c, 0)
        gam_rows = gam_scratch + rows[:, None] * BK
        tl.store(gam_rows + offs[None, :], gam)
        tl.debug_barrier()  # every row of γ written before any is gathered
        P += tl.where(rows[:, None] == rows[None, :], tl.sum(q_c * k_c, 1)[:, None], 0.0)
        for half in tl.static_range(0, 6):  # halves of 32, 16, 8, 4, 2, 1 rows
            A, P = _halving_level(A, P, q_c, k_c, gam, gam_rows, offs, rows, C >> (half + 1), BK, PREC)
        last = tl.sum(g_c, 0)
        to_start = decay(gam)
        _gated_tiles(q_out, k_out, kin_out, d_out, q_c, k_c, to_start * scale, decay(last[None, :] - gam),
                     last, tok0, ok, c, hv, offs, mask, HV, K, C, k_c, to_start, BY_CHUNK)  # fmt: skip
    return A, P


@triton.jit
def _gated_tiles(q_out, k_out, kin_out, d_out, q_c, k_c, q_gate, k_gate, last, tok0, ok, c, hv, offs, mask,
                 HV: tl.constexpr, K, C: tl.constexpr, kin_c, kin_gate, BY_CHUNK: tl.constexpr):  # fmt: skip
    """Stores one key block of Q̃ = q_c ⊙ q_gate, K̃ = k_c ⊙ k_gate, kin_c ⊙ kin_gate (K ⊙ exp γ, made W
    by ``_solved``) and d = exp(last) (the chunk's decay, per global chunk ``c``). ``BY_CHUNK``: K̃ goes
    to the chunk's own C rows (row c · C + i), zeros past the sequence, for the state pass's TMA tiles
    (``_tma_applies``); otherwise token-major like the others."""
    rows = tl.arange(0, C)
    out_rows = ((tok0 + rows) * HV + hv) * K
    _put(q_out, out_rows, ok, offs, mask, q_c * q_gate)
    if BY_CHUNK:
        chunk_rows = ((tl.cast(c, tl.int64) * C + rows) * HV + hv) * K
        _put(k_out, chunk_rows, rows < C, offs, mask, k_c * k_gate)  # k_c is zero past the sequence
    else:
        _put(k_out, out_rows, ok, offs, mask, k_c * k_gate)
    _put(kin_out, out_rows, ok, offs, mask, kin_c * kin_gate)
    tl.store(d_out + (tl.cast(c, tl.int64) * HV + hv) * K + offs, decay(last), mask=mask)


@triton.jit
def _middle_row_blocks(q, k, g, q_out, k_out, kin_out, d_out, gam_scratch, tok0, n_rows, c, hv, stride_q_tok, qk_head,
                       scale, K, HV: tl.constexpr, BK: tl.constexpr, BKB: tl.constexpr, C: tl.constexpr,
                       PREC: tl.constexpr, BY_CHUNK: tl.constexpr):  # fmt: skip
    """``_levels_blocks``' A and P, and whether they are wrong: one product each for the whole chunk
    through its middle row r, exp(γ_i − γ_j) = exp(γ_i − γ_r) · exp(γ_r − γ_j), right wherever the chunk
    decays by at most ``SAFE_SPAN`` in every channel (each factor is then within e^±span: finite and
    normal in fp32, where exp(γ_i) · exp(−γ_j) overflows past e^88). Also the gated tiles, from the same
    factors (exp γ = exp(γ − γ_r) · exp γ_r: no further exponential an element)."""
    rows = tl.arange(0, C)
    ok = rows < n_rows
    qk_rows = (tok0 + rows) * stride_q_tok + qk_head
    g_rows = (tok0 + rows) * (HV * K) + hv * K
    lower = rows[:, None] > rows[None, :]
    A = tl.zeros((C, C), dtype=tl.float32)
    P = tl.zeros((C, C), dtype=tl.float32)
    worst = 0.0
    for kb in tl.static_range(0, BK, BKB):
        offs = kb + tl.arange(0, BKB)
        mask = offs < K
        k_c = _tile(k, qk_rows, ok, offs, mask).to(tl.float32)
        q_c = _tile(q, qk_rows, ok, offs, mask).to(tl.float32)
        g_c = _tile(g, g_rows, ok, offs, mask)
        gam = tl.cumsum(g_c, 0)
        # rows r and C − 1 of γ through this program's [2, BK] scratch: cheaper than two reductions
        at = tl.where(rows == C - 1, 1, 0)[:, None] * BK + offs[None, :]
        tl.store(gam_scratch + at, gam, mask=((rows == C // 2 - 1) | (rows == C - 1))[:, None])
        tl.debug_barrier()
        ref = tl.load(gam_scratch + offs)
        last = tl.load(gam_scratch + BK + offs)
        worst = tl.maximum(worst, tl.max(-last))  # the span γ_0 − γ_last is at most −γ_last
        # ≤ e^span either side of r; clamped so that a chunk left to the levels computes no inf here
        from_ref = tl.exp2(tl.minimum(gam - ref[None, :], SAFE_SPAN) * LOG2E)
        to_ref = tl.exp2(tl.minimum(ref[None, :] - gam, SAFE_SPAN) * LOG2E)
        # the three products both the dots and the gated tiles take, so q, k and the factors die here
        k_from = k_c * from_ref
        q_from = q_c * from_ref
        k_to = k_c * to_ref
        col = tl.trans(k_to)
        # summed unmasked over the key blocks (above the diagonal each term is within e^span, finite),
        # masked once after the loop
        A = tl.dot(k_from, col, acc=A, input_precision=PREC)
        P = tl.dot(q_from, col, acc=P, input_precision=PREC)
        ref_decay = decay(ref)
        _gated_tiles(q_out, k_out, kin_out, d_out, q_from, k_to, (ref_decay * scale)[None, :],
                     decay(last - ref)[None, :], last, tok0, ok, c, hv, offs, mask, HV, K, C,
                     k_from, ref_decay[None, :], BY_CHUNK)  # fmt: skip
    A = tl.where(lower, A, 0.0)
    P = tl.where(lower | (rows[:, None] == rows[None, :]), P, 0.0)
    return A, P, worst > SAFE_SPAN


@triton.jit
def _solved(A, P, v, beta, w_out, u_out, p_out, tok0, n_rows, hv, stride_v_tok, stride_v_head, scale, K,
            V, HV: tl.constexpr, BK: tl.constexpr, BKB: tl.constexpr, BV: tl.constexpr, C: tl.constexpr,
            PREC: tl.constexpr, IN_PREC: tl.constexpr, SOLVE_16: tl.constexpr):  # fmt: skip
    """Tβ from A, then P, W = Tβ (K ⊙ exp γ) (over the K ⊙ exp γ already in ``w_out``) and Ũ = Tβ V
    stored."""
    rows = tl.arange(0, C)
    ok = rows < n_rows
    dt = w_out.dtype.element_ty
    beta_c = tl.load(beta + (tok0 + rows) * HV + hv, mask=ok, other=0.0)
    t_beta = unit_lower_solve(A * beta_c[:, None], beta_c, rows, PREC, SOLVE_16).to(dt)
    out_rows = (tok0 + rows) * HV + hv  # token-major outputs: row (token, v-head)
    _put(p_out, out_rows * C, ok, rows, rows < C, P * scale)
    tl.debug_barrier()  # K ⊙ exp γ stored by every thread before any reads it back
    for kb in tl.static_range(0, BK, BKB):
        offs = kb + tl.arange(0, BKB)
        mask = offs < K
        kin = _tile(w_out, out_rows * K, ok, offs, mask)
        _put(w_out, out_rows * K, ok, offs, mask, tl.dot(t_beta, kin, input_precision=IN_PREC))
    for vb in tl.static_range(0, V, BV):
        offs = vb + tl.arange(0, BV)
        mask = offs < V
        v_c = _tile(v, (tok0 + rows) * stride_v_tok + hv * stride_v_head, ok, offs, mask).to(dt)
        _put(u_out, out_rows * V, ok, offs, mask, tl.dot(t_beta, v_c, input_precision=IN_PREC))


@triton.jit
def _kda_intra_kernel(
    q,
    k,
    v,
    g,
    beta,
    q_out,
    k_out,
    w_out,
    u_out,
    p_out,
    d_out,
    gam_scratch,
    rows_scratch,
    redo,
    n_programs,
    cu_seqlens,
    offsets,
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
    BKB: tl.constexpr,
    BV: tl.constexpr,
    C: tl.constexpr,
    PREC: tl.constexpr,
    IN_PREC: tl.constexpr,
    SOLVE_16: tl.constexpr,
    LEVELS: tl.constexpr,
    K_BY_CHUNK: tl.constexpr,
):
    """Launched twice: first one program per (global chunk, v-head) through the middle row (``LEVELS``
    false), which marks in ``redo`` the chunks that decay too fast for it; then by the halving levels for
    those alone, on a fixed grid whose programs walk the chunks (each with a [C, BK] γ scratch of its own,
    so the scratch does not grow with the batch), a separate launch so that the common case does not
    hold the levels' registers."""
    if LEVELS:
        # one γ scratch for every chunk this program walks: a chunk's gathers from it all precede
        # ``_solved``'s barrier, which every warp passes before the next chunk's stores
        scratch = gam_scratch + tl.cast(tl.program_id(0), tl.int64) * (C * BK)
        for pid in range(tl.program_id(0), n_programs, tl.num_programs(0)):
            if tl.load(redo + pid) != 0:
                _intra_program(
                    pid, q, k, v, g, beta, q_out, k_out, w_out, u_out, p_out, d_out, scratch, redo, cu_seqlens,
                    offsets, N, stride_q_tok, stride_q_head, stride_v_tok, stride_v_head, scale, H, HV, K, V,
                    BK, BKB, BV, C, PREC, IN_PREC, SOLVE_16, True, K_BY_CHUNK,
                )  # fmt: skip
    else:
        pid = tl.program_id(0)
        _intra_program(
            pid, q, k, v, g, beta, q_out, k_out, w_out, u_out, p_out, d_out,
            rows_scratch + tl.cast(pid, tl.int64) * (2 * BK), redo, cu_seqlens, offsets, N, stride_q_tok,
            stride_q_head, stride_v_tok, stride_v_head, scale, H, HV, K, V, BK, BKB, BV, C, PREC, IN_PREC,
            SOLVE_16, False, K_BY_CHUNK,
        )  # fmt: skip


@triton.jit
def _intra_program(pid, q, k, v, g, beta, q_out, k_out, w_out, u_out, p_out, d_out, scratch, redo,
                   cu_seqlens, offsets, N, stride_q_tok, stride_q_head, stride_v_tok, stride_v_head, scale,
                   H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr,
                   BKB: tl.constexpr, BV: tl.constexpr, C: tl.constexpr, PREC: tl.constexpr,
                   IN_PREC: tl.constexpr, SOLVE_16: tl.constexpr, LEVELS: tl.constexpr,
                   K_BY_CHUNK: tl.constexpr):  # fmt: skip
    """Chunk ``pid // HV`` of the launch for value head ``pid % HV`` (``_kda_intra_kernel``)."""
    hv = pid % HV
    c = pid // HV
    h = hv // (HV // H)
    n, i_c, is_chunk = chunk_sequence(offsets, N, c)
    if not LEVELS:
        if not is_chunk:
            tl.store(redo + pid, 0)  # past the last chunk (the grid is an upper bound)
    if is_chunk:
        bos, eos = sequence_bounds(cu_seqlens, n)
        tok0 = bos + tl.cast(i_c, tl.int64) * C
        qk_head = h * stride_q_head
        if LEVELS:
            A, P = _levels_blocks(
                q, k, g, q_out, k_out, w_out, d_out, scratch, tok0, eos - tok0, c, hv, stride_q_tok, qk_head,
                scale, K, HV, BK, BKB, C, PREC, K_BY_CHUNK,
            )  # fmt: skip
            _solved(
                A, P, v, beta, w_out, u_out, p_out, tok0, eos - tok0, hv, stride_v_tok, stride_v_head, scale,
                K, V, HV, BK, BKB, BV, C, PREC, IN_PREC, SOLVE_16,
            )  # fmt: skip
        else:
            A, P, too_fast = _middle_row_blocks(
                q, k, g, q_out, k_out, w_out, d_out, scratch, tok0, eos - tok0, c, hv, stride_q_tok, qk_head,
                scale, K, HV, BK, BKB, C, PREC, K_BY_CHUNK,
            )  # fmt: skip
            tl.store(redo + pid, too_fast.to(tl.int32))
            if not too_fast:
                _solved(
                    A, P, v, beta, w_out, u_out, p_out, tok0, eos - tok0, hv, stride_v_tok, stride_v_head,
                    scale, K, V, HV, BK, BKB, BV, C, PREC, IN_PREC, SOLVE_16,
                )  # fmt: skip


@triton.jit
def _state_chunk(S, inputs, descs, tok0, n_rows, chunk, hv, offs_k, mask_k, v0, offs_v, mask_v, real, K, V,
                 HV: tl.constexpr, C: tl.constexpr, IN_PREC: tl.constexpr, TMA: tl.constexpr):  # fmt: skip
    """One chunk of the state pass (rows ``tok0`` to ``tok0 + min(n_rows, C)``, global chunk ``chunk``):
    its output rows stored, the next state returned. ``TMA``: the tiles come whole through ``descs``, rows
    past the sequence included (the next sequence's, or zeros past the buffer); the new values' rows
    there are zeroed and K̃ is stored by chunk with zero rows past the sequence (``_gated_tiles``), so
    that they add nothing to the state; otherwise through pointers, zeros past the sequence (K̃ by
    token)."""
    q_in, k_in, w_in, u_in, p_in, d_in, o = inputs
    q_desc, k_desc, w_desc, u_desc, p_desc = descs
    rows = tl.arange(0, C)
    ok = rows < n_rows
    dt = w_in.dtype.element_ty
    head_k, head_v = hv * K, hv * V + v0
    w_c = chunk_tile(w_desc, w_in, tok0, rows, HV * K, head_k, offs_k, K, n_rows, TMA)
    q_c = chunk_tile(q_desc, q_in, tok0, rows, HV * K, head_k, offs_k, K, n_rows, TMA)
    if TMA:
        k_row = chunk * C  # K̃ by chunk: C rows of this chunk's own (``_gated_tiles``)
    else:
        k_row = tok0
    k_c = chunk_tile(k_desc, k_in, k_row, rows, HV * K, head_k, offs_k, K, n_rows, TMA)
    p_c = chunk_tile(p_desc, p_in, tok0, rows, HV * C, hv * C, rows, C, n_rows, TMA)
    u_c = chunk_tile(u_desc, u_in, tok0, rows, HV * V, head_v, offs_v - v0, V - v0, n_rows, TMA)
    d_c = tl.load(d_in + (chunk * HV + hv) * K + offs_k, mask=mask_k, other=0.0)

    state_op = S.to(dt)
    u_new = u_c.to(tl.float32) - tl.dot(w_c, state_op, input_precision=IN_PREC)
    if TMA:
        u_new = tl.where(ok[:, None], u_new, 0.0)
    u_op = u_new.to(dt)
    # P is lower triangular: a row in the sequence takes no column past it
    out = tl.dot(p_c, u_op, acc=tl.dot(q_c, state_op, input_precision=IN_PREC), input_precision=IN_PREC)
    _put(o, ((tok0 + rows) * HV + hv) * V, ok, offs_v, mask_v, tl.where(real, out, 0.0))
    return tl.dot(tl.trans(k_c), u_op, acc=S * d_c[:, None], input_precision=IN_PREC)


@triton.jit
def _kda_state_kernel(
    q_in,
    k_in,
    w_in,
    u_in,
    p_in,
    d_in,
    o,
    q_desc,
    k_desc,
    w_desc,
    u_desc,
    p_desc,
    state_pool,
    state_indices,
    cu_seqlens,
    offsets,
    stride_pool_slot,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    C: tl.constexpr,
    IN_PREC: tl.constexpr,
    TMA: tl.constexpr,
):
    n, hv, h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V
    v0 = tl.min(offs_v, 0)  # the tile's first column

    state_base, real = pool_slot(state_pool, state_indices, stride_pool_slot, n, hv, V, K)
    s_offs = offs_v[None, :] * K + offs_k[:, None]  # S [BK, BV], K-major view of the pool tile
    s_mask = mask_k[:, None] & mask_v[None, :]
    S = tl.load(state_base + s_offs, mask=s_mask & real, other=0.0)

    bos, eos = sequence_bounds(cu_seqlens, n)
    c0 = tl.load(offsets + n).to(tl.int64)
    inputs = (q_in, k_in, w_in, u_in, p_in, d_in, o)
    descs = (q_desc, k_desc, w_desc, u_desc, p_desc)
    # one loop over every chunk, the last one too: the sequence's last chunk called apart, through
    # pointers after the loop, came out wrong on the H200 at V tiles of 32 (Triton 3.6)
    for i_c in range(0, tl.cdiv(eos - bos, C)):
        tok0 = bos + i_c * C
        S = _state_chunk(
            S, inputs, descs, tok0, eos - tok0, c0 + i_c, hv, offs_k, mask_k, v0, offs_v, mask_v, real, K, V, HV,
            C, IN_PREC, TMA,
        )  # fmt: skip

    tl.store(state_base + s_offs, S, mask=s_mask & real)


def launch_config(N: int, HV: int, V: int) -> LaunchConfig:
    """The default launch settings: the state pass in V tiles of 64 columns where that still gives two
    programs an SM (a batch of sequences), else of 32 (one sequence: HV · V / 32 programs, 128 for 32
    heads of 128); 16 in the interpreter, so the CPU tests cover several tiles. Measured on the H200:
    benchmarks/RESULTS.md."""
    if triton_interpreted():
        return LaunchConfig(block_v=16)
    block_v = min(64, max(16, triton.next_power_of_2(V)))
    while block_v > 32 and N * HV * triton.cdiv(V, block_v) < 2 * SM_COUNT_HINT:
        block_v //= 2
    return LaunchConfig(block_v=block_v)


def _tma_applies(x: torch.Tensor, K: int, BK: int, V: int, BV: int, T: int, n_chunks: int) -> bool:
    """Whether the state pass's tiles come by TMA: on a GPU (not the interpreter), 16-bit operands,
    tiles inside their head (K a power of two, V a multiple of the V tile), and K̃ by chunk (``C`` rows a
    chunk, for at most ``n_chunks`` chunks) no more than twice its T rows by token: a batch of many short
    sequences takes pointers, whose masked loads need K̃ only by token (a thousand one-token sequences
    would otherwise hold 64 rows of K̃ each). The operands are this module's own contiguous buffers, so
    their alignment holds."""
    gpu = not triton_interpreted() and x.is_cuda and x.dtype != torch.float32
    return gpu and K == BK and V % BV == 0 and n_chunks * CHUNK_SIZE <= 2 * T


def _descriptor(x: torch.Tensor, cols: int) -> TensorDescriptor:
    """A TMA descriptor over a contiguous [T, heads, cols'] buffer as [T, heads · cols'], [C, cols] tiles."""
    return TensorDescriptor.from_tensor(x.view(x.shape[0], -1), [CHUNK_SIZE, cols])


def _levels_programs() -> int:
    """Programs of the levels launch (a fixed grid walking the chunks it must redo): a few per SM, enough
    to fill the GPU when every chunk needs it; in the interpreter three, so that programs walk several."""
    return 3 if triton_interpreted() else 4 * SM_COUNT_HINT


def _precision(dtype: torch.dtype) -> tuple[str, str | None]:
    """(products on fp32 operands, products on operands of the input dtype): exact for fp32 inputs;
    tf32 for the fp32 ones when the results are rounded to 16 bits."""
    return ("ieee", "ieee") if dtype == torch.float32 else ("tf32", None)


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale, config=None):
    """KDA chunked prefill over the packed sequences of ``cu_seqlens``; pool updated in place."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N = state_indices.shape[0]
    q, k, v = head_dim_contiguous(q, k, v)
    g, beta, cu_seqlens = g.contiguous(), beta.contiguous(), cu_seqlens.contiguous()
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if T == 0 or N == 0:
        return o
    config = config or launch_config(N, HV, V)
    C = CHUNK_SIZE
    NC = max_chunks(T, N, C)
    BK = max(16, triton.next_power_of_2(K))
    BV_full = max(16, triton.next_power_of_2(V))
    dt, dev = v.dtype, q.device
    prec, in_prec = _precision(dt)
    offsets = chunk_offsets(cu_seqlens, C, torch.empty(N + 1, dtype=torch.int32, device=dev))
    BV = config.block_v or launch_config(N, HV, V).block_v
    tma = config.tma and _tma_applies(v, K, BK, V, BV, T, NC)
    q_t, w = (torch.empty((T, HV, K), dtype=dt, device=dev) for _ in range(2))
    # K̃ by chunk (C rows each) for TMA tiles, else by token (``_gated_tiles``)
    k_t = torch.empty((NC * C if tma else T, HV, K), dtype=dt, device=dev)
    u = torch.empty((T, HV, V), dtype=dt, device=dev)
    p = torch.empty((T, HV, C), dtype=dt, device=dev)
    d = torch.empty((NC, HV, K), dtype=torch.float32, device=dev)
    # the chunks the middle row cannot take (all of them with levels_only)
    redo = (torch.ones if config.levels_only else torch.empty)(NC * HV, dtype=torch.int32, device=dev)
    # the levels' γ, one [C, BK] per program of their fixed grid; the middle row's two rows of it
    levels_grid = min(NC * HV, _levels_programs())
    gam = torch.empty((levels_grid, C, BK), dtype=torch.float32, device=dev)
    rows = torch.empty((NC * HV, 2, BK), dtype=torch.float32, device=dev)
    for levels in (True,) if config.levels_only else (False, True):
        _kda_intra_kernel[(levels_grid if levels else NC * HV,)](
            q, k, v, g, beta, q_t, k_t, w, u, p, d, gam, rows, redo, NC * HV, cu_seqlens, offsets, N,
            q.stride(0), q.stride(1), v.stride(0), v.stride(1), scale,
            H=H, HV=HV, K=K, V=V, BK=BK, BKB=min(config.key_block, BK), BV=min(BV_full, 64), C=C,
            PREC=prec, IN_PREC=in_prec, SOLVE_16=dt != torch.float32, LEVELS=levels, K_BY_CHUNK=tma,
            num_warps=config.intra_warps,
        )  # fmt: skip
    descs = [
        _descriptor(x, cols) if tma else None for x, cols in ((q_t, BK), (k_t, BK), (w, BK), (u, BV), (p, C))
    ]
    _kda_state_kernel[(triton.cdiv(V, BV) * N * HV,)](
        q_t, k_t, w, u, p, d, o, *descs, state_pool, state_indices, cu_seqlens, offsets, state_pool.stride(0),
        H=H, HV=HV, K=K, V=V, BK=BK, BV=BV, C=C, IN_PREC=in_prec, TMA=tma, num_warps=config.warps,
        num_stages=config.stages,
    )  # fmt: skip
    return o
