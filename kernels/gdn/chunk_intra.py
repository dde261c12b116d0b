"""Launch 1 of the chunked GDN prefill in Triton (``chunk.py``'s docstring has the math): per (chunk,
value head) the rows of ``Tβ = (I + A)^{-1} diag(β)`` and the fp32 gate sums (γ_i, γ_C − γ_i), and, from
the programs of value head 0, the segment schedule the passes of ``chunk_state`` read
(``chunk_common._write_schedule``). With ``LaunchConfig.gluon_intra`` where it applies, ``Tβ`` and the
gate sums are ``chunk_intra_gluon``'s instead, after a launch of this kernel that writes the schedule
alone (or, before ``chunk_gluon_fused`` where its worker makes Tβ, none: its gate sums launch writes it).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.solve import unit_lower_solve
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

    t_beta = unit_lower_solve(a, b_c, rows, PREC, SOLVE_16)
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
    k, g, beta, state_indices, cu_seqlens, config, dependents: bool = False, schedule: bool = True,
    fused_makes_last: bool = False, p_of: PFromIntra | None = None,
):  # fmt: skip
    """Launch 1: Tβ, a row of 64 per token and value head in the input dtype, the fp32 gate sums
    (γ_i, γ_C − γ_i) of every token and value head ([2, HV, T]), and the segment schedule the later
    passes read ([2, segment programs, 8]: ``_write_schedule``). ``dependents``: the next launch is a
    programmatic dependent of this one (``gluon_pdl``). With ``gluon_intra`` where it applies, Tβ and the
    gate sums are ``chunk_intra_gluon``'s, after a launch of this kernel that writes the schedule alone
    (none with ``schedule`` false: the Gluon state pass reads none, and before the fused pass whose
    worker makes Tβ ``chunk_gluon_fused.launch_gate_sums`` writes it). ``fused_makes_last``: none of a
    sequence's last segment, whose Tβ ``chunk_gluon_fused``'s worker makes
    (``chunk_config.worker_makes_tbeta``): only what the segment pass reads; the Gluon launch only: the
    Triton one writes every chunk's.
    ``p_of`` (``_p_of``, only where the Gluon launch runs): that launch writes P too."""
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

        chunk_intra_gluon.launch(
            k, g, beta, state_indices, cu_seqlens, tbeta, gates, dependents=dependents,
            seg_chunks=config.seg_chunks, fused_makes_last=fused_makes_last, maxnreg=config.gluon_intra_maxnreg,
            p_of=p_of, heads_inner=config.gluon_intra_heads_inner,
        )  # fmt: skip
        return tbeta, gates, table
    if p_of is not None:
        raise ValueError("P is made by the Gluon intra launch only (_p_of)")
    # Σ ceil(len_n / 64) ≤ T // 64 + N: a fixed grid, so no host sync to count the chunks.
    _gdn_chunk_intra_kernel[(T // CHUNK + N, HV)](
        *args,
        **_intra_meta(k, HV, state_indices, config, LAUNCH_DEPENDENTS=dependents),
    )
    return tbeta, gates, table


class PFromIntra(NamedTuple):
    """What the Gluon intra launch reads and writes to make P = scale (Q Kᵀ ⊙ E) for ``chunk_gluon``."""

    q: torch.Tensor
    p: torch.Tensor  # [T, HV, 64], written by the launch, read by the state pass
    scale: float


def _p_of(q: torch.Tensor, k: torch.Tensor, HV: int, scale: float, config: LaunchConfig) -> PFromIntra | None:
    """P's inputs and a buffer for it where the Gluon intra launch makes P for ``chunk_gluon``'s state
    pass (``LaunchConfig.gluon_p_from_intra``, and that launch runs here), else None (the state pass
    makes P)."""
    if not (config.gluon_p_from_intra and _gluon_intra(k, config)):
        return None
    return PFromIntra(q, chunk_common._empty((q.shape[0], HV, CHUNK), q.dtype, q.device), scale)


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
