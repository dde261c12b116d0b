"""The triangular solve of the chunked delta-rule prefills (GDN, KDA): ``Tβ = (I + A)^{-1} diag(β)`` for
a chunk's strictly lower triangular [64, 64] fp32 ``A``, in Triton ``@jit`` blocks (inlined by Triton).

The inverse is taken by 16 × 16 diagonal blocks first (the Neumann series of a nilpotent block, factored
exactly) and then corrected for the off-diagonal blocks in Horner's order; see ``unit_lower_solve``.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _same_block(NB: tl.constexpr):
    """[NB, 1, NB, 1] mask of a [NB, 16, NB, 16] view of a tile: block row == block column."""
    b = tl.arange(0, NB)
    return b[:, None, None, None] == b[None, None, :, None]


@triton.jit
def diag_blocks(x, BT: tl.constexpr):
    """The 16×16 diagonal blocks of a [BT, BT] tile, stacked as [BT // 16, 16, 16]."""
    NB: tl.constexpr = BT // 16
    return tl.sum(tl.where(_same_block(NB), tl.reshape(x, (NB, 16, NB, 16)), 0.0), axis=2)


@triton.jit
def block_diag(blocks, BT: tl.constexpr):
    """The [BT, BT] block-diagonal tile of stacked [BT // 16, 16, 16] blocks (inverse of diag_blocks)."""
    NB: tl.constexpr = BT // 16
    return tl.reshape(tl.where(_same_block(NB), blocks[:, :, None, :], 0.0), (BT, BT))


@triton.jit
def inv_unit_lower_blocks(a, PREC: tl.constexpr):
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
def unit_lower_solve(a, b_c, rows, PREC: tl.constexpr, SOLVE_16: tl.constexpr):
    """``Tβ = (I + a)^{-1} diag(b_c)`` for a strictly lower triangular [64, 64] fp32 ``a`` (``rows`` =
    arange(64)).

    (I + A)^{-1} = (I − N + N² − N³) D^{-1}, D = I + the diagonal blocks of A, N = D^{-1}(A − blocks),
    in Horner's order D^{-1} − N(D^{-1} − N(D^{-1} − N D^{-1})): N is the left operand of every dot, so
    it is moved into the dot's register layout once (the factored (I − N)(I + N²) D^{-1} moved three
    operands; 2616 instructions per warp against 2816, gdn_kernel_resources.py)."""
    BT: tl.constexpr = 64
    diag_block = (rows[:, None] // 16) == (rows[None, :] // 16)
    d_inv = block_diag(inv_unit_lower_blocks(diag_blocks(a, BT), PREC), BT)
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
    return t_beta
