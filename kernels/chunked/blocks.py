"""Triton ``@jit`` building blocks of the KDA and lightning kernels (Triton inlines them).

Layouts (docs/design.md, "The kernel op API"): packed tokens ``q, k: [T, H, K]``, ``v: [T, HV, V]``
indexed by their token and head strides; the pool ``[slots, HV, V, K]`` fp32 with its slot pitch
``stride_pool_slot`` and dense inner dims. Slot and token offsets are int64, so pools and token buffers
past 2^31 elements work, and nothing here reads from or syncs with the host.
"""

from __future__ import annotations

import triton
import triton.language as tl

from stampgen.kernels.chunked import common

# A constexpr, so the kernels may read it (Triton refuses plain globals inside @jit functions).
LOG2E = tl.constexpr(common.LOG2E)


@triton.jit
def program_tile(H: tl.constexpr, HV: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    """(sequence, v-head, qk-head, V offsets) of this program.

    The grid is 1-D over (sequence, v-head, V-tile), tiles fastest: neighbouring programs stream
    neighbouring state memory, and the grid has no 65535 limit on a second axis. v-head ``h`` reads
    qk-head ``h // (HV // H)``.
    """
    pid = tl.program_id(0)
    i_v = pid % tl.cdiv(V, BV)
    i_nh = pid // tl.cdiv(V, BV)
    i_hv = i_nh % HV
    return i_nh // HV, i_hv, i_hv // (HV // H), i_v * BV + tl.arange(0, BV)


@triton.jit
def pool_slot(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, V, K):
    """(base pointer of this program's [V, K] head state, is-real) for sequence ``i_n``.

    Padding (index −1) never forms an address from −1: it gets slot 0's address, and every access to
    it must be masked with is-real.
    """
    slot = tl.load(state_indices_ptr + i_n).to(tl.int64)
    base = state_pool_ptr + tl.maximum(slot, 0) * stride_pool_slot + i_hv * (V * K)
    return base, slot >= 0


@triton.jit
def sequence_bounds(cu_seqlens_ptr, i_n):
    """(first token, end token) of sequence ``i_n`` of a varlen batch, as int64."""
    bos = tl.load(cu_seqlens_ptr + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens_ptr + i_n + 1).to(tl.int64)
    return bos, eos


@triton.jit
def decay(log_decay):
    """exp(log_decay) through exp2. Callers only pass log-decays ≤ 0 (differences γ_i − γ_j with i ≥ j,
    or −inf where a mask says "no term"), so the factor is in [0, 1] and never overflows."""
    return tl.exp2(log_decay * LOG2E)


@triton.jit
def row_of(x, rows, r):
    """Row ``r`` of the 2-D tile ``x`` (``rows`` = arange over its first dim), as a 1-D tensor."""
    return tl.sum(tl.where((rows == r)[:, None], x, 0.0), axis=0)


@triton.jit
def chunk_tile(desc, ptr, tok0, rows, stride_tok, col0, cols, n_cols, n_rows, WHOLE: tl.constexpr):
    """The [BC, cols] tile at rows ``tok0 + rows``, columns ``col0 + cols`` of a [T, heads · dim] view:
    by TMA through ``desc`` when ``WHOLE`` (``desc`` not None, the tile inside its head: all BC rows,
    whichever sequence they belong to, zeros past the tensor's end; the caller passes it for whole chunks
    or makes rows ≥ ``n_rows`` harmless); otherwise through pointers, rows ≥ ``n_rows`` and columns ≥
    ``n_cols`` read as zeros. The pointers: one 64-bit base and 32-bit offsets within the chunk."""
    if WHOLE:
        return desc.load([tok0.to(tl.int32), col0.to(tl.int32)])
    ptrs = (ptr + tok0 * stride_tok + col0) + (rows[:, None] * stride_tok + cols[None, :])
    return tl.load(ptrs, mask=(rows < n_rows)[:, None] & (cols < n_cols)[None, :], other=0.0)
