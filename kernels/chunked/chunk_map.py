"""Chunk bookkeeping of the chunk-parallel prefill kernels, on the device (no host sync, graph-safe).

A varlen batch is cut into chunks of ``BC`` tokens that never cross a sequence boundary; chunk ``i``
of sequence ``n`` gets the global index ``offsets[n] + i`` with ``offsets[n] = Σ_{m<n} ⌈L_m / BC⌉``.
The host never reads ``cu_seqlens``: it sizes buffers and grids with :func:`max_chunks`, an upper bound
on ``offsets[N]``, and the kernels find a global chunk's sequence with :func:`chunk_sequence`.
"""

from __future__ import annotations

import triton
import triton.language as tl


def max_chunks(T: int, N: int, BC: int) -> int:
    """An upper bound on the number of chunks of N sequences of T tokens in all:
    Σ ⌈L_n / BC⌉ ≤ Σ (⌊L_n / BC⌋ + 1) ≤ ⌊T / BC⌋ + N, and each chunk holds at least one token."""
    return min(T // BC + N, T)


@triton.jit
def _chunk_offsets_kernel(cu_seqlens_ptr, offsets_ptr, N, BC: tl.constexpr, BLOCK: tl.constexpr):
    """One program: offsets[0] = 0, offsets[n + 1] = Σ_{m≤n} ⌈L_m / BC⌉ (int32)."""
    tl.store(offsets_ptr, 0)
    carry = tl.zeros([], dtype=tl.int32)
    for start in range(0, N, BLOCK):
        n = start + tl.arange(0, BLOCK)
        mask = n < N
        bos = tl.load(cu_seqlens_ptr + n, mask=mask, other=0).to(tl.int32)
        eos = tl.load(cu_seqlens_ptr + n + 1, mask=mask, other=0).to(tl.int32)
        chunks = tl.where(mask, (eos - bos + BC - 1) // BC, 0)
        tl.store(offsets_ptr + n + 1, carry + tl.cumsum(chunks, axis=0), mask=mask)
        carry += tl.sum(chunks, axis=0)


def chunk_offsets(cu_seqlens, BC: int, out):
    """Fill ``out`` ([N + 1] int32) with the chunk offsets of the sequences of ``cu_seqlens``."""
    N = cu_seqlens.shape[0] - 1
    BLOCK = max(16, min(1024, triton.next_power_of_2(max(N, 1))))
    _chunk_offsets_kernel[(1,)](cu_seqlens, out, N, BC=BC, BLOCK=BLOCK, num_warps=4)
    return out


@triton.jit
def chunk_sequence(offsets_ptr, N, c):
    """(sequence n, chunk index within it, is-a-chunk) of global chunk ``c``: the largest n with
    offsets[n] ≤ c (so empty sequences, whose offsets repeat, are skipped). ``c ≥ offsets[N]`` (past the
    last real chunk: the grid is sized by an upper bound) gives is-a-chunk False and n clamped to N − 1."""
    lo = tl.zeros([], dtype=tl.int32)
    hi = tl.zeros([], dtype=tl.int32) + N + 1  # offsets[hi] > c, with offsets[N + 1] read as +inf
    while hi - lo > 1:
        mid = (lo + hi) // 2
        below = tl.load(offsets_ptr + mid) <= c
        lo = tl.where(below, mid, lo)
        hi = tl.where(below, hi, mid)
    n = tl.minimum(lo, N - 1)
    return n, c - tl.load(offsets_ptr + n), lo < N
