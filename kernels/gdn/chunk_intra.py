"""Launch 1 of the chunked GDN prefill in Triton (``chunk.py``'s docstring has the math): per (chunk,
value head) the rows of ``Tβ = (I + A)^{-1} diag(β)`` and the fp32 gate sums (γ_i, γ_C − γ_i), and, from
the programs of value head 0, the segment schedule the passes of ``chunk_state`` read
(``chunk_common._write_schedule``). With ``LaunchConfig.gluon_intra`` where it applies, ``Tβ`` and the
gate sums are ``chunk_intra_gluon``'s instead, after a launch of this kernel that writes the schedule
alone.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from stampgen.kernels.gdn import chunk_common
from stampgen.kernels.gdn.chunk_common import (
    _INTERPRET,
    _SCHEDULE_ROW,
    CHUNK,
    _chunk_rows,
    _common,
    _cumsum_hi_lo,
    _exp2,
    _load_rows,
    _locate,
    _log2_pair,
    _segment_programs,
    _solve_precision,
    _store_rows,
    _write_schedule,
)
from stampgen.kernels.gdn.chunk_config import LaunchConfig


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


def _intra_outputs(k: torch.Tensor, T: int, HV: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The intra launch's outputs: Tβ [T, HV, 64] in the input dtype, the gate sums [2, HV, T] fp32."""
    tbeta = chunk_common._empty((T, HV, CHUNK), k.dtype, k.device)
    return tbeta, chunk_common._empty((2, HV, T), torch.float32, k.device)


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
    table = chunk_common._empty((2, n_programs, _SCHEDULE_ROW.value), torch.int64, k.device)
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
