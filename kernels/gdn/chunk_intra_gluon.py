"""The chunked prefill's intra launch in Gluon, for sm_90 (H100 / H200) and bf16 inputs: what
``chunk_intra._intra_chunk`` computes — per (chunk, value head) the rows of ``Tβ = (I + A)^{-1} diag(β)`` and
the fp32 gate sums (γ_i, γ_C − γ_i) — with its data movement stated; its diagonal blocks' inverse by
forward substitution in fp32 where the Triton launch refines a tf32 product form (the same precision:
``tests/kernels/gdn_emulation.py``, ``diag="substitution"``).

Why Gluon: the Triton kernel is instruction-bound (Nsight Compute, 16k tokens: IPC
2.06), and much of its 2504 instructions a warp move data between the layouts its compiler picks: the
strided β is loaded again for each layout it is used in (228 instructions), the 16×16 diagonal blocks are
cut out of the 64×64 tile and put back (SHFL / SEL / STS). Here, one warpgroup per (chunk, value head):

- K arrives by TMA (a partial chunk's rows past the sequence are whatever follows; the rows of A they
  would touch are selected away before any product) and K Kᵀ is one wgmma from shared memory;
- g and β are loaded once, γ summed in fp64 and kept as an fp32 pair (hi, lo) as in
  ``chunk_common._cumsum_hi_lo``, and each moved to the accumulator's rows or columns by one
  ``convert_layout``;
- A's blocks below the diagonal blocks go to shared memory (the solve's operand) before D^{-1} is made,
  so that A holds no registers through it;
- the diagonal blocks' inverse ``D^{-1}`` by forward substitution in fp32, block w in warp w and a
  column in a lane: row i is e_i − Σ_{k<i} a_ik x_k, each a_ik one broadcast load from shared memory,
  the rows held as a tuple (so that each FMA's dependence on the row before is the only chain) and
  joined in registers (``gl.join``): stored row by row to shared memory they cost a barrier each, as
  Triton's barrier pass sees every row's store write the one buffer. The product form it replaced —
  ``(I − a)(I + a²)(I + a⁴)(I + a⁸)`` on batched tf32 ``mma.sync`` with a refinement step on tf32
  pairs — took 1544 instructions a warp and 118 registers;
- the solve merged from D^{-1}'s blocks (``_tbeta_of_a``): the 32×32 pairs' lower-left blocks
  −(L_b A_{b,b−1}) L_{b−1} by two batched fp16 ``mma.sync`` in each warp's registers (A_{b,b−1} from
  shared memory, stored beside D^{-1}'s blocks under one barrier), then T = L1 − (L1 A') L1 with L1 the
  32×32 block-diagonal inverse and A' A's lower-left 32×32 block (exact, as (L1 A')² = 0) by two fp16
  wgmma; the precision of the series it replaced (``tests/kernels/gdn_emulation.py``,
  ``merge="fp16-blocks-left"`` against ``"fp16-depth3"``, ``(I + N²)(I − N) D^{-1}`` in three
  dependent wgmma).

1320 instructions a warp against the Triton launch's 2496, 108 registers (four programs per SM), 16
KiB, 28 barriers (``benchmarks/gdn_kernel_resources.py --only intra,gluon_intra``), with fp16 solve
operands and β folded into the decay's exponent (``chunk_common._log2_pair``). On an H100 (12-06,
benchmarks/RESULTS.md): this launch 0.197 ms on 16×2048, 0.095 on 16k, 0.422 on 64k against 0.207 /
0.101 / 0.433 with that series (1288 instructions, 99 registers, 29 barriers; on the H200 the series
0.202 / 0.100 / 0.407, against 0.212 / 0.105 / 0.430 with D^{-1}'s rows stored one by one and a
four-product solve). Forms measured slower: the gate vectors whole in every warp (each warp loading all
of g and β; 7–11% slower here, though they help the fused pass's worker), and a cap of 96 registers for
five programs an SM (the merged solve then spills and ptxas serializes its wgmma:
``LaunchConfig.gluon_intra_maxnreg``).

With ``STORE_P`` (``LaunchConfig.gluon_p_from_intra``, the default before ``chunk_gluon``) it also copies
the chunk's queries in and writes P = scale (Q Kᵀ ⊙ E) for ``chunk_gluon``'s state pass, first, by
``chunk_gluon._masked_p`` (``_store_p``): 1664 instructions a warp, 109 registers, 32 KiB (four programs
an SM; two beside a state program); the launch 25–28% longer, the prefill 5–7% shorter.

It writes no segment schedule and no flags: ``chunk_intra._launch_intra`` launches it
(``LaunchConfig.gluon_intra``) after a launch of the Triton kernel that writes the schedule alone, where
the Triton passes run after it (the Gluon state pass reads no schedule; before the fused pass whose
worker makes Tβ, that pass's gate sums launch writes it). A chunk's math is ``_gate_loads``, ``_gate_sums`` and
``_tbeta_of_chunk``, which ``chunk_gluon_fused``'s worker warpgroup runs too; before that pass this
launch takes ``seg_chunks`` and leaves out the chunks whose Tβ that worker makes (``FUSED_MAKES_LAST``):
then its programs — ``STRIDED_PROGRAMS_PER_SM`` an SM, over value heads — each take every P-th chunk of
the sequences' segments before their last, so that a batch whose sequences all fit a segment (most
batches: 16×2048 splits none) costs one short wave (1.7 µs on an H200) rather than a grid of one
program a chunk and value head that nearly all return at once (19.2 µs on an H100; benchmarks/RESULTS.md);
a chunk's work is the same code either way (``_chunk``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
)

from stampgen.kernels.chunked.gluon_pdl import launch_dependents
from stampgen.kernels.gdn import chunk_tma
from stampgen.kernels.gdn.chunk_common import _LOG2E, CHUNK, sm_count
from stampgen.kernels.gdn.chunk_gluon import _masked_p

# A chunk's 64×64 tile in the wgmma accumulator's layout of one warpgroup (K Kᵀ, A, D^{-1}, Tβ, P)
CHUNK_ACC = gl.constexpr(
    gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, 64, 16])
)
# Programs an SM where the launch takes only the segment pass's chunks (``FUSED_MAKES_LAST``): each
# takes every P-th of them, so that a batch with none (no sequence outgrows a segment) starts a few
# hundred programs rather than one a chunk and value head. Four fit an SM at once, and no more are
# launched: a fifth would wait for one of them and then run its whole share alone.
STRIDED_PROGRAMS_PER_SM = 4


def supported(k: torch.Tensor) -> bool:
    """Whether this launch applies: bf16 keys (fp16 ones would take the same math, the solve on fp16
    operands as in the Triton launch, but are not measured here: they keep the Triton launch) whose
    TMA tiles run here (``chunk_tma.tiles_apply``: sm_90, aligned, K 64 or 128, a chunk)."""
    return k.dtype == torch.bfloat16 and chunk_tma.tiles_apply(k)


@gluon.jit
def _add(a, b):
    return a + b


@gluon.jit
def _exp2(x):
    """2^x as one ``ex2.approx.ftz`` (as ``chunk_common._exp2``)."""
    return gl.inline_asm_elementwise(
        "ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=gl.float32, is_pure=True, pack=1
    )


@gluon.jit
def _log2(x):
    """log2 x as one ``lg2.approx.ftz`` (β ∈ [0, 1]: −inf at 0; ~2^-22 absolute error, well below
    what Tβ keeps)."""
    return gl.inline_asm_elementwise(
        "lg2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=gl.float32, is_pure=True, pack=1
    )


@gluon.jit
def _sequences(cu_seqlens, N, BN: gl.constexpr):
    """The sequences' bounds [lo, hi) (``BN`` ≥ N + 1 lanes, the last ones 0) and their lane indices."""
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    offs = gl.arange(0, BN, layout=layout)
    lo = gl.load(cu_seqlens + offs, mask=offs < N, other=0)
    hi = gl.load(cu_seqlens + offs + 1, mask=offs < N, other=0)
    return offs, lo, hi


@gluon.jit
def _owner(offs, lo, hi, count, ends, at):
    """(n, bos, eos, j): of the chunks counted ``count`` a sequence from each sequence's first, in order
    (``ends`` their running sum), ``at`` is chunk j of sequence n = [bos, eos); n ≥ N: past them all."""
    n = gl.sum((ends <= at).to(gl.int32), axis=0)
    this = offs == n
    bos = gl.sum(gl.where(this, lo, 0), axis=0)
    eos = gl.sum(gl.where(this, hi, 0), axis=0)
    j = at - gl.sum(gl.where(this, ends - count, 0), axis=0)
    return n, bos, eos, j


@gluon.jit
def _locate(cu_seqlens, N, pid, BN: gl.constexpr):
    """(n, bos, eos, j): program ``pid`` owns chunk j of sequence n = [bos, eos), counting the chunks of
    every sequence in order (``chunk_common._locate`` with one chunk a segment); n ≥ N: no work."""
    offs, lo, hi = _sequences(cu_seqlens, N, BN)
    count = (hi - lo + 63) // 64
    return _owner(offs, lo, hi, count, gl.associative_scan(count, 0, _add), pid)


@gluon.jit
def _gate_loads(g, beta, tok0, n_rows, hv, HV: gl.constexpr, layout: gl.constexpr):
    """A chunk's gates and β of value head ``hv`` (rows past ``n_rows`` as 0)."""
    r = gl.arange(0, 64, layout=layout)
    ok = r < n_rows
    at = (tok0.to(gl.int64) + r) * HV + hv
    return gl.load(g + at, mask=ok, other=0.0), gl.load(beta + at, mask=ok, other=0.0)


@gluon.jit
def _gate_sums(g_c):
    """A chunk's gate sums from its gates, in fp64: γ, and γ as an fp32 pair (hi, lo) with hi + lo its
    fp64 value (``chunk_common._cumsum_hi_lo``). γ_C − γ: ``_to_end(g_c, gam)``."""
    gam = gl.associative_scan(g_c.to(gl.float64), 0, _add)
    hi = gam.to(gl.float32)
    return gam, hi, (gam - hi.to(gl.float64)).to(gl.float32)


@gluon.jit
def _to_end(g_c, gam):
    """γ_C − γ of a chunk, rounded to fp32 from its fp64 sums."""
    return (gl.sum(g_c.to(gl.float64), axis=0) - gam).to(gl.float32)


@gluon.jit
def _share(dst, x):
    """Store x as the next wgmma's shared operand: every thread's store done and visible to the async
    proxy before any thread issues it (and every wgmma that read ``dst`` before was waited for)."""
    gl.thread_barrier()
    dst.store(x.to(dst.dtype))
    fence_async_shared()
    gl.thread_barrier()


@gluon.jit
def _join_rows(xs):
    """The rows xs ([4, 1, 16] each, row i at xs[i]) as one [4, 16, 16] tensor, joined in registers."""
    level = xs
    for _ in gl.static_range(4):
        nxt = ()
        for i in gl.static_range(len(level) // 2):
            nxt = nxt + (gl.join(level[2 * i], level[2 * i + 1]),)
        level = nxt
    # [4, 1, 16, b0, b1, b2, b3] with row = 8 b3 + 4 b2 + 2 b1 + b0
    m = gl.reshape(level[0], [4, 16, 2, 2, 2, 2])
    return gl.reshape(gl.permute(m, (0, 5, 4, 3, 2, 1)), [4, 16, 16])


@gluon.jit
def _diag_inverse(blocks, out_layout: gl.constexpr):
    """(I + a)^{-1} for stacked strictly lower 16×16 blocks a ([4, 16, 16]) by forward substitution in
    fp32: row i of the inverse is e_i − Σ_{k<i} a_ik x_k, block b in warp b, a lane a column, the a_ik
    read from shared memory (one broadcast load each); the rows joined in registers (a store of each
    row to shared memory costs a barrier: Triton's barrier pass sees every row store write the one
    buffer); returned in ``out_layout``."""
    sl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])
    blk_s = gl.allocate_shared_memory(gl.float32, [4, 16, 16], sl)
    blk_s.store(blocks)
    gl.thread_barrier()
    row_l: gl.constexpr = gl.BlockedLayout([1, 1, 1], [1, 1, 32], [4, 1, 1], [2, 1, 0])
    col = gl.arange(0, 16, layout=gl.SliceLayout(0, gl.SliceLayout(1, row_l)))[None, None, :]
    xs = ()
    for i in gl.static_range(16):
        x = gl.where(col == i, 1.0, 0.0) + gl.zeros([4, 1, 16], gl.float32, row_l)
        for k in gl.static_range(i):
            x = x - blk_s.slice(i, 1, dim=1).slice(k, 1, dim=2).load(row_l) * xs[k]
        xs = xs + (x,)
    return gl.convert_layout(_join_rows(xs), out_layout)


@gluon.jit
def _chunk_product(a_t, b_t):
    """a bᵀ of two [64, K] chunk tiles in shared memory (K Kᵀ, Q Kᵀ), fp32 in ``CHUNK_ACC``, with that
    layout's row and column indices."""
    acc: gl.constexpr = CHUNK_ACC
    r = gl.arange(0, 64, layout=gl.SliceLayout(1, acc))
    c = gl.arange(0, 64, layout=gl.SliceLayout(0, acc))
    return warpgroup_mma(a_t, b_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc), use_acc=False), r, c


@gluon.jit
def _tbeta_of_chunk(k_t, hi, lo, b_c, n_rows, k_bar=None):
    """Tβ = (I + A)^{-1} diag(β) of one chunk, [64, 64] fp32 in the wgmma accumulator's layout of one
    warpgroup, from its keys ``k_t`` ([64, K] in shared memory: rows past ``n_rows`` may hold anything
    finite), γ as the pair (hi, lo) and β (rows past ``n_rows`` as 0). The solve's shared operands are
    allocated after K Kᵀ, so they may take the keys' place; the solve's last operand buffer, free once
    it returns, is returned with Tβ to hold its bf16 rows for a TMA store. ``k_bar``: the keys' copy barrier, which a program of one
    chunk (the intra launch) invalidates right after K Kᵀ (invalidated after the solve instead, ptxas
    takes one register more and another schedule)."""
    kk, r, c = _chunk_product(k_t, k_t)
    if k_bar is not None:
        mbarrier.invalidate(k_bar)

    # β_i E_ij = 2^(p_i − p_j + log2 β_i) (``chunk_common._log2_pair``); above the diagonal it may overflow
    # to inf, which the select discards, as it does the rows past the sequence (K there is the next
    # sequence's, or TMA's zeros).
    beta_decay = _decay(hi, lo, b_c)
    lower = (r[:, None] > c[None, :]) & (r < n_rows)[:, None]
    return _tbeta_of_a(gl.where(lower, kk * beta_decay, 0.0), b_c)


@gluon.jit
def _decay(hi, lo, beta=None):
    """E_ij = 2^(p_i − p_j) of one chunk, [64, 64] fp32 in the wgmma accumulator's layout (unmasked:
    above the diagonal it may overflow to inf), p = γ log2 e as a pair from γ's pair (hi, lo). With
    ``beta``: β_i E_ij, A's factor, log2 β_i added to row i's low part (no multiply, and one rounding
    fewer)."""
    acc: gl.constexpr = CHUNK_ACC
    rows: gl.constexpr = gl.SliceLayout(1, acc)
    cols: gl.constexpr = gl.SliceLayout(0, acc)
    p_hi = hi * _LOG2E
    p_lo = gl.fma(hi, _LOG2E, -p_hi) + lo * _LOG2E
    row_lo = p_lo
    if beta is not None:
        row_lo = p_lo + _log2(beta)
    lo_r = gl.convert_layout(row_lo, rows)
    hi_r, hi_c, lo_c = (
        gl.convert_layout(p_hi, rows),
        gl.convert_layout(p_hi, cols),
        gl.convert_layout(p_lo, cols),
    )
    return _exp2((hi_r[:, None] - hi_c[None, :]) + (lo_r[:, None] - lo_c[None, :]))


@gluon.jit
def _tbeta_of_a(a, b_c, out_s=None):
    """Tβ = (I + A)^{-1} diag(β) of one chunk from its A ([64, 64] fp32 in the wgmma accumulator's layout
    of one warpgroup: only its strictly lower part is read) and β; returned with a [64, 64] 16-bit shared
    buffer free once it returns (``_tbeta_of_chunk``: Tβ's rows for a TMA store): ``out_s`` if given (a
    16-bit [64, 64] buffer in the NVMMA layout, which the solve then uses), else one of its own.

    The inverse merged from its diagonal blocks' (the module's docstring): D^{-1}'s 16×16 blocks by
    forward substitution (block w in warp w); the 32×32 pairs' lower-left blocks −(L_b A_{b,b−1}) L_{b−1}
    by two batched mma.sync in each warp's registers; then T = L1 − (L1 A') L1, two wgmma, where the
    series form shared four operands and waited for three wgmma."""
    acc: gl.constexpr = CHUNK_ACC
    rows: gl.constexpr = gl.SliceLayout(1, acc)
    cols: gl.constexpr = gl.SliceLayout(0, acc)
    r = gl.arange(0, 64, layout=rows)
    c = gl.arange(0, 64, layout=cols)
    f16: gl.constexpr = gl.float16
    row_block, col_block = r // 16, c // 16
    same4 = gl.reshape(row_block[:, None] == col_block[None, :], [4, 16, 4, 16])
    sub4 = gl.reshape(row_block[:, None] == col_block[None, :] + 1, [4, 16, 4, 16])
    a4 = gl.reshape(a, [4, 16, 4, 16])
    blocks = gl.sum(gl.where(same4, a4, 0.0), axis=2)  # A_bb
    subs = gl.sum(gl.where(sub4, a4, 0.0), axis=2)  # A_{b,b−1} (b = 0: zero)
    b_s: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], f16)
    sl: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, order=[2, 1, 0])
    m_s = gl.allocate_shared_memory(f16, [64, 64], b_s)
    s_s = gl.allocate_shared_memory(f16, [4, 16, 16], sl)
    # A's lower-left 32×32 block (the second level's operand) and the blocks A_{b,b−1} (the first's),
    # stored before D^{-1}'s substitution, whose barrier they share
    gl.thread_barrier()  # (the buffers' readers of the chunk before: every thread past its waits)
    m_s.store(gl.where((r >= 32)[:, None] & (c < 32)[None, :], a, 0.0).to(f16))
    s_s.store(subs.to(f16))

    mma: gl.constexpr = gl.NVMMADistributedLayout(
        version=[2, 0], warps_per_cta=[4, 1, 1], instr_shape=[1, 16, 8]
    )
    a_op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    b_op: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=mma, k_width=2)
    d = _diag_inverse(blocks, mma)  # L_b, fp32
    d_lo = d.to(f16)
    l_s = gl.allocate_shared_memory(f16, [4, 16, 16], sl)
    l_s.store(d_lo)
    fence_async_shared()  # m_s is the next wgmma's operand
    gl.thread_barrier()
    # each pair's even block (L_0, L_2), for both warps of the pair: warp 2p + 1 takes L_2p as L_{b−1}
    even = (
        l_s.reshape([2, 32, 16])
        .slice(0, 16, dim=1)
        .load(gl.BlockedLayout([1, 1, 8], [1, 16, 2], [2, 2, 1], [2, 1, 0]))
    )
    l_prev = gl.reshape(gl.permute(gl.join(even, even), (0, 3, 1, 2)), [4, 16, 16])
    zero = gl.zeros([4, 16, 16], gl.float32, mma)
    y = mma_v2(gl.convert_layout(d_lo, a_op), s_s.load(b_op), zero)
    x1 = mma_v2(gl.convert_layout(y.to(f16), a_op), gl.convert_layout(l_prev, b_op), zero)
    odd = (gl.arange(0, 4, layout=gl.SliceLayout(1, gl.SliceLayout(2, mma))) % 2) == 1
    x1 = gl.where(odd[:, None, None], -x1, 0.0)  # X_10, X_32 (the even blocks' are not of this level)

    # L1: the diagonal inverses, and X below them in the odd row blocks, back in the accumulator layout
    blk: gl.constexpr = gl.SliceLayout(2, same4.type.layout)
    l1 = gl.where(
        same4,
        gl.expand_dims(gl.convert_layout(d, blk), 2),
        gl.where(sub4, gl.expand_dims(gl.convert_layout(x1, blk), 2), 0.0),
    )
    l1 = gl.convert_layout(gl.reshape(l1, [64, 64]), acc)
    op: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc, k_width=2)
    if out_s is None:
        d_s = gl.allocate_shared_memory(f16, [64, 64], b_s)
    else:
        d_s = out_s._reinterpret(f16, [64, 64], b_s)
    l1_lo = l1.to(f16)
    _share(d_s, l1_lo)
    y2 = warpgroup_mma(gl.convert_layout(l1_lo, op), m_s, gl.zeros_like(l1), use_acc=False)
    t = warpgroup_mma(gl.convert_layout((-y2).to(f16), op), d_s, l1)
    return t * gl.convert_layout(b_c, cols)[None, :], d_s


@gluon.jit
def _store_p(q_t, k_t, hi, scale, p_desc, p_out, tok0, n_rows, hv, HV: gl.constexpr):
    """P = scale (Q Kᵀ ⊙ E) of one chunk and value head, masked above the diagonal, stored (bf16) as
    ``chunk_gluon``'s state pass makes it (``_masked_p`` on the same Q Kᵀ wgmma and the same fp32 γ;
    ptxas may fuse γ·log2 e + log2 scale here, which the pass rounds twice: within ~4e-5). Made before
    Tβ, with its TMA store waited for here, so that the queries' and P's shared buffers are free for
    the solve's operands."""
    qk, r, c = _chunk_product(q_t, k_t)
    b = hi * _LOG2E
    p = _masked_p(
        qk, gl.convert_layout(b, r.type.layout), gl.convert_layout(b, c.type.layout), r, c, gl.log2(scale)
    )
    p_s = gl.allocate_shared_memory(p_desc.dtype, [64, 64], p_desc.layout)
    _store_chunk_rows(p, p_s, p_desc, p_out, tok0, n_rows, hv, HV)


@gluon.jit
def _store_chunk_rows(x, buf, desc, out, tok0, n_rows, hv, HV: gl.constexpr):
    """A chunk's [64, 64] tile of one value head (Tβ or P, in ``CHUNK_ACC``) to its rows of a [T, HV, 64]
    tensor ``out``: a full chunk through the shared buffer ``buf`` and a TMA store, waited for; a partial
    one by masked stores (a TMA tile would reach into the next sequence's rows)."""
    acc: gl.constexpr = CHUNK_ACC
    r = gl.arange(0, 64, layout=gl.SliceLayout(1, acc))
    c = gl.arange(0, 64, layout=gl.SliceLayout(0, acc))
    col = hv * 64
    if n_rows == 64:
        _share(buf, x)
        tma.async_copy_shared_to_global(desc, [tok0, col], buf)
        tma.store_wait(pendings=0)
    else:
        at = (tok0 + r).to(gl.int64)[:, None] * (HV * 64) + (col + c)[None, :]
        gl.store(out + at, x.to(buf.dtype), mask=(r < n_rows)[:, None])


@gluon.jit
def _gdn_gluon_intra_kernel(
    k_desc, t_desc, q_desc, p_desc, g, beta, state_indices, cu_seqlens, tbeta, gates, p_out, n_tokens, N,
    seg_chunks, scale,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, BN: gl.constexpr, LAUNCH_DEPENDENTS: gl.constexpr,
    FUSED_MAKES_LAST: gl.constexpr, STORE_P: gl.constexpr = False, HEADS_INNER: gl.constexpr = False,
):  # fmt: skip
    if LAUNCH_DEPENDENTS:
        # the Gluon state pass after this launch (``gluon_pdl``) may start its programs; it waits for
        # this launch's end before it reads what this launch writes
        launch_dependents()
    if HEADS_INNER:  # a chunk's value heads next to each other in launch order (``launch``)
        pid = gl.program_id(0) // HV
        hv = gl.program_id(0) % HV
    else:
        pid = gl.program_id(0)
        hv = gl.program_id(1)
    h = hv // (HV // H)
    if FUSED_MAKES_LAST:
        # (P, HV) programs, each taking every P-th chunk of the segments the segment pass reads: a batch
        # whose sequences all fit one segment has none, and a grid of one program a chunk would start
        # and end ~T / 64 · HV programs for nothing
        offs, lo, hi = _sequences(cu_seqlens, N, BN)
        # a sequence's chunks before its last segment's (none for one of at most seg_chunks chunks)
        count = gl.maximum((hi - lo + 63) // 64 - 1, 0) // seg_chunks * seg_chunks
        ends = gl.associative_scan(count, 0, _add)
        for at in tl.range(pid, gl.sum(count, axis=0), gl.num_programs(0), disable_licm=True):
            n, bos, eos, j = _owner(offs, lo, hi, count, ends, at)
            if gl.load(state_indices + n) >= 0:  # padding: the state pass reads nothing of it
                _chunk(
                    k_desc, t_desc, q_desc, p_desc, g, beta, tbeta, gates, p_out, n_tokens, scale,
                    bos, eos, j, hv, h, HV, K, STORE_P,
                )  # fmt: skip
    else:
        n, bos, eos, j = _locate(cu_seqlens, N, pid, BN)
        if n >= N:
            return
        if gl.load(state_indices + n) < 0:
            return  # padding: the state pass reads nothing of it
        _chunk(
            k_desc, t_desc, q_desc, p_desc, g, beta, tbeta, gates, p_out, n_tokens, scale, bos, eos, j, hv, h,
            HV, K, STORE_P,
        )  # fmt: skip


@gluon.jit
def _chunk(
    k_desc, t_desc, q_desc, p_desc, g, beta, tbeta, gates, p_out, n_tokens, scale, bos, eos, j, hv, h,
    HV: gl.constexpr, K: gl.constexpr, STORE_P: gl.constexpr,
):  # fmt: skip
    """Chunk ``j`` of the sequence [bos, eos) for value head ``hv`` (key head ``h``): its Tβ and gate sums
    stored (and, ``STORE_P``, its P), its shared buffers and barrier its own."""
    tok0 = (bos + j * 64).to(gl.int32)  # TMA coordinates are 32-bit
    n_rows = gl.minimum(eos.to(gl.int32) - tok0, 64)

    dt: gl.constexpr = k_desc.dtype
    k_s = gl.allocate_shared_memory(dt, [64, K], k_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    mbarrier.init(bar, count=1)
    if STORE_P:  # the queries too, on the keys' barrier
        q_s = gl.allocate_shared_memory(dt, [64, K], q_desc.layout)
        mbarrier.expect(bar, 2 * k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [tok0, h * K], bar, q_s)
    else:
        mbarrier.expect(bar, k_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(k_desc, [tok0, h * K], bar, k_s)

    vec: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
    g_c, b_c = _gate_loads(g, beta, tok0, n_rows, hv, HV, vec)
    gam, hi, lo = _gate_sums(g_c)
    r_vec = gl.arange(0, 64, layout=vec)
    gam_of_hv = gates + hv.to(gl.int64) * n_tokens + tok0
    gl.store(gam_of_hv + r_vec, hi, mask=r_vec < n_rows)
    gl.store(gam_of_hv + n_tokens.to(gl.int64) * HV + r_vec, _to_end(g_c, gam), mask=r_vec < n_rows)

    mbarrier.wait(bar, 0)
    if STORE_P:
        _store_p(q_s, k_s, hi, scale, p_desc, p_out, tok0, n_rows, hv, HV)
    t_beta, free_s = _tbeta_of_chunk(k_s, hi, lo, b_c, n_rows, bar)

    t_s = free_s._reinterpret(dt, [64, 64], t_desc.layout)  # the same 16-bit swizzle
    _store_chunk_rows(t_beta, t_s, t_desc, tbeta, tok0, n_rows, hv, HV)


def launch(
    k,
    g,
    beta,
    state_indices,
    cu_seqlens,
    tbeta,
    gates,
    dependents: bool = False,
    seg_chunks: int = 1,
    fused_makes_last: bool = False,
    maxnreg: int | None = None,
    p_of: tuple | None = None,  # a chunk_intra.PFromIntra (not imported: chunk_intra imports this module)
    heads_inner: bool = False,
) -> None:
    """Tβ ([T, HV, 64], bf16) and the gate sums ([2, HV, T], fp32) of every chunk of every sequence that
    is not padding, as ``chunk_intra._launch_intra`` writes them (no schedule). ``dependents``: the next
    launch is this one's programmatic dependent (``gluon_pdl``). ``fused_makes_last``:
    only a sequence's segments of ``seg_chunks`` chunks but its last (``chunk_gluon_fused``'s worker
    makes the last one's Tβ): what the Triton segment pass reads; else every chunk (``seg_chunks``
    unread). ``maxnreg``: a register cap
    (``LaunchConfig.gluon_intra_maxnreg``; None: none). ``p_of`` (``chunk_intra.PFromIntra``): P of every chunk
    written to p ([T, HV, 64], bf16) too, as ``chunk_gluon``'s state pass would make it from q
    (``LaunchConfig.gluon_p_from_intra``). ``heads_inner``: the programs of a chunk's value heads next to
    each other in launch order (``LaunchConfig.gluon_intra_heads_inner``), so that the two of a key head
    read its keys (and queries) from DRAM once, the second from L2; else a value head's chunks are (with
    ``fused_makes_last`` no order: each program takes every P-th chunk of its value head)."""
    T, H, K = k.shape
    HV = g.shape[1]
    N = state_indices.shape[0]
    k_desc, t_desc = chunk_tma.descriptor(k, K), chunk_tma.descriptor(tbeta, CHUNK)
    if p_of is None:  # the keys' and Tβ's again in P's places, unread
        q_desc, p_desc, p, scale = k_desc, t_desc, tbeta, 1.0
    else:
        q_desc, p_desc = chunk_tma.descriptor(p_of.q, K), chunk_tma.descriptor(p_of.p, CHUNK)
        p, scale = p_of.p, p_of.scale
    descs = (k_desc, t_desc, q_desc, p_desc)
    chunks = T // CHUNK + N
    if fused_makes_last:  # programs that take every P-th chunk (the kernel's FUSED_MAKES_LAST)
        grid = (min(chunks, max(1, STRIDED_PROGRAMS_PER_SM * sm_count(k.device) // HV)), HV)
    else:
        grid = (chunks * HV,) if heads_inner else (chunks, HV)
    _gdn_gluon_intra_kernel[grid](
        *descs, g, beta, state_indices, cu_seqlens, tbeta, gates, p, T, N, seg_chunks, scale,
        H=H, HV=HV, K=K, BN=triton.next_power_of_2(N + 1), LAUNCH_DEPENDENTS=dependents,
        FUSED_MAKES_LAST=fused_makes_last, STORE_P=p_of is not None,
        HEADS_INNER=heads_inner and not fused_makes_last, num_warps=4,
        **({"maxnreg": maxnreg} if maxnreg else {}),
    )  # fmt: skip
