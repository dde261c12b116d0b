"""The chunked GDN prefill's state pass over segments (launch 3 of ``chunk_state``) in Gluon for sm_90:
``chunk_gluon_batch``'s step with the work off the state's chain moved to a worker warpgroup — each
chunk's P and gate factors (and, if asked, its Tβ) made a chunk or two ahead, in shared memory.

``chunk_gluon_batch``'s two warpgroups make P (Q Kᵀ masked and scaled by the decay) themselves, between
the products of the state's chain; its step takes ~3.0 µs on 16×2048, the chain alone ~2.4. Here one
program (a V tile of 128, value head, segment) is three warpgroups, as in FlashInfer's kernel
(benchmarks/RESULTS.md, the prefill's "Where the time goes on 16×2048"):

- two state warpgroups (the default partition, 64 rows of Sᵀ each): ``chunk_gluon_batch``'s step without
  Q Kᵀ and P — (K S)ᵀ and (Q S)ᵀ from Sᵀ, v_newᵀ = uᵀ Tβᵀ, the update and the output rows — on the q / k /
  v tiles they copy by TMA, ``STAGES`` deep, and Tβ, P and the gate factors the worker left in one of
  two slots (mbarriers ``ready`` / ``free``);
- one worker warpgroup (``gl.warp_specialize``, ``WORKER_REGS`` registers a thread, the state
  warpgroups the rest): per chunk, from the same q and k tiles and the gates and β it loads a chunk
  ahead, Q Kᵀ masked and scaled by the decay into P, the factors exp γ, exp(γ_C − γ) and exp γ_C, and
  Tβ: made here (``LaunchConfig.gluon_fused_tbeta="worker"``, the default: ``chunk_intra_gluon._tbeta_of_a``,
  the intra launch's D^{-1} and solve, on an A whose decay matrix is P's too: one exponential a chunk
  for both, β and the scale as factors; ``MAKE_TBETA``), or the intra launch's, copied in by TMA
  (``"intra"``).

Where the worker makes every chunk's Tβ, its chain is the pass's pace (the state warpgroups' step is
shorter), so its path carries no work it can leave: the gate sums (γ as an fp32 pair and γ_C − γ) come
from ``_gate_sums_kernel``, a small launch before the pass (one program a chunk, all value heads; it
also writes the segment schedule and zeroes the persistent programs' claim counter), rather than from a
scan on the worker; Q Kᵀ
runs while the decay is made; the decay's exponents and β reach A's row and column layouts through one
shared-memory round trip; P and A share one mask (A's diagonal is read by no step of the solve); and
the solve's last operand buffer is the slot its Tβ goes to.

A sequence's partial last chunk goes through the same step: its tiles by TMA reach into the next
sequence's rows (or TMA's zeros past the end), whose β the worker loads as 0, so Tβ's rows and columns
there are 0 (made here; copied in, that chunk's Tβ comes by masked loads, zeros past the end) and so is
v_new; nothing they touch reaches the state or a stored output row, and the chunk's output rows leave by
masked stores.

Items — (V tile, value head, segment) — run one a program, or (``PERSISTENT``, where there are more than
``PERSISTENT_ITEMS`` an SM) on one program an SM that runs item after item. A program's first item is
its own (item p); each next is the first not yet taken, claimed by the state warpgroups with one atomic
add ``STAGES + 1`` steps before the item's end — as the hardware hands an emptied SM the next program,
so that items of unequal lengths still spread — and published to the worker in shared memory with its
facts (sequence, pool slot, value head, V tile, tokens, chunks, its initial state's source: ``_stash``),
which the state warpgroups read at its start and end and the worker when it takes it: no item change
waits on a chain of dependent global loads (schedule row → pool slot → state), which every program of a
batch of equal sequences would pay at once; and the worker loads the next item's first gate sums in its
item's last step (H100 12-07, against the form without either: 64×512 1.4–1.8% faster, 16×2048 and the
rest within 1%, the worker's chain being their pace). The item's last ``STAGES − 1`` steps copy the next
item's first tiles in, so the worker goes on to it while the state warpgroups load the next initial
state, then store the last rows and the pool row (the next initial state's pool row fetched into L2
when the item is published: on batches of equal sequences every program's items end together, and
those 64 KiB loads would all reach DRAM at once; H200 12-06: 16×2048 0.4795 / 0.4797 against 0.4858 /
0.4898 ms), where a program an item leaves the SM to empty and refill. (``LaunchConfig.gluon_fused_programs``
asks for it on fewer programs: for tests.) An H100 (12-06, ``benchmarks/gdn_intra_probe.py`` against
the one-item form in one process): 16×2048 0.507–0.509 against 0.518–0.523 ms, 64×512 0.586–0.591
against 0.621–0.626, 16k + 15×1k level (claimed statically, item p + k·P, it was 1.11 against 0.93: the
programs that began on the long sequence's segments still ran their share of the short ones); at two
items an SM or fewer the one-item form (8×4096 persistent: −1 to +3%).

Segments, their schedule and their initial states are the Triton passes' (``chunk_state``), as for
``chunk_gluon_batch``; where the worker makes Tβ, the intra launch before this pass leaves out the
chunks it makes (``chunk_intra_gluon.launch(..., seg_chunks=..., fused_makes_last=True)``: every chunk
of a sequence's last segment).

Measured (benchmarks/RESULTS.md, the prefill's "Now" and History's "GDN prefill on 12-06"): with Tβ copied
in, 16×2048 0.556 ms on the H200 (4×8192 0.529), the batch pass's output bit for bit, and ahead of the
batch pass on 2×4096, 8×4096, 64×512 and 16k + 15×1k as well. With Tβ made by the worker, as above: on
an H100 16×2048 0.513 against 0.565–0.572 ms copied in, 4×8192 0.479–0.481 against 0.534 (before
12-06 its ~4.2 µs a chunk made it level or slower). Making only every 2nd or 3rd chunk's Tβ and copying
in the rest was no faster (12-04: with two slots a made chunk's solve waits for the state warpgroups'
step before it) and was removed on 12-06. Two workers taking alternate chunks do not fit: at 104 registers each the state
warpgroups get 152 and ptxas serializes every wgmma of the kernel (C7512); the worker at 128 registers
leaves the state warpgroups too few as well (serialized), so Q Kᵀ and K Kᵀ cannot both run while the
decay is made (spills at 120).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

from stampgen.kernels.chunked.common import tma_addressable
from stampgen.kernels.gdn import chunk_common
from stampgen.kernels.gdn.chunk_common import (
    _LOG2E,
    _SCHEDULE_ROW,
    CHUNK,
    _cumsum_hi_lo,
    _locate,
    _write_schedule,
    sm_count,
)
from stampgen.kernels.gdn.chunk_config import LaunchConfig, worker_makes_tbeta
from stampgen.kernels.gdn.chunk_gluon import _copy_tiles, _load_tile, _masked_p
from stampgen.kernels.gdn.chunk_gluon_batch import (
    _initial_state,
    _output_tile,
    _pool_ptrs,
    _state_ptrs,
    _store_last_and_refill,
    _zero_rows,
)
from stampgen.kernels.gdn.chunk_intra_gluon import (
    CHUNK_ACC,
    _exp2,
    _gate_loads,
    _gate_sums,
    _tbeta_of_a,
    _to_end,
)
from stampgen.kernels.gdn.chunk_tma import descriptor, tiles_apply

BLOCK_V = 128  # two state warpgroups of 64 rows of Sᵀ
# Persistent programs (``PERSISTENT``) where each would run more than this many items on average: each
# item after a program's first saves the SM's emptying and refilling, while the worker's one spilled
# register costs every chunk (the persistent state step's longer loop measured nothing: RESULTS.md)
PERSISTENT_ITEMS = 2
# The fields of a program's stamp row for one item (``STAMPS``, ``_stamp``; read by
# benchmarks/gdn_fused_timeline.py), each a pair (global timer in ns, a value): the state warpgroups' start
# (the item) and end (the program's chunks so far), the worker's start and end (the same), the SM; and
# on the state warpgroups (the chunk): their first step's products issued (the initial state in
# registers), the ends of their first and last steps, and the last rows stored (the TMA store waited for)
STAMP_STATE_START, STAMP_STATE_END, STAMP_WORKER_START, STAMP_WORKER_END, STAMP_SM = (
    gl.constexpr(field) for field in range(5)
)
STAMP_STATE_FIRST, STAMP_STATE_LAST, STAMP_STATE_LOADED, STAMP_STATE_STORED = (
    gl.constexpr(field) for field in range(5, 9)
)
STAMP_FIELDS = gl.constexpr(STAMP_STATE_STORED.value + 1)
# The worker warpgroup's registers a thread (``setmaxnreg``); the state warpgroups get what is left of
# the SM's 64 K (Triton: 200 a thread beside 96–104, 192 beside 112–120).
WORKER_REGS = 120
# An item's facts as the state warpgroups stash them in shared memory when they publish it (``_stash``):
# sequence, pool slot, value head, V tile, first token, one past its last, chunks, segment, its
# sequence's segments, the first non-last segment's row; read at the item's start and end and by the
# worker, where each would otherwise wait for a chain of dependent global loads. A row holds ``FACTS``
# int32, ``FACTS_USED`` of them used (gl.arange takes a power of two)
FACTS, FACTS_USED = gl.constexpr(16), gl.constexpr(10)


def supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether this pass applies: bf16 inputs (the worker's Tβ is the Gluon intra launch's, measured for
    bf16 keys), ``tiles_apply(q, k, v)`` and V a multiple of the V tile."""
    return k.dtype == torch.bfloat16 and tiles_apply(q, k, v) and v.shape[2] % BLOCK_V == 0


@triton.jit
def _gate_sums_kernel(
    g, cu_seqlens, sums, counter, schedule, n_programs, seg_chunks, n_tokens, N,
    HV: tl.constexpr, BLOCK_HV: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    """The fp32 gate sums of chunk ``program_id(0)`` (counting every sequence's chunks in order, as the
    intra launch does: ``T // 64 + N`` programs, no host sync), for every value head (``BLOCK_HV``: HV's
    next power of two): γ as the pair (hi, lo) and γ_C − γ (``chunk_intra_gluon._gate_sums`` and
    ``_to_end``'s values, formed in fp64), into ``sums`` [3, HV, T], so that the worker that makes Tβ
    loads them rather than scanning a chunk's gates on its path. Programs below ``n_programs`` (never
    more than the chunks) also write their row of the segment schedule, and program 0 zeroes the
    persistent pass's claim counter: a launch for each fewer (``launch_gate_sums``)."""
    pid = tl.program_id(0)
    if pid == 0:
        tl.store(counter, 0)
    _write_schedule(schedule, pid, n_programs, cu_seqlens, N, seg_chunks, BN)
    n, j, bos, eos, _, _ = _locate(cu_seqlens, N, pid, 1, BN, False)
    if n >= N:
        return
    tok0 = bos + j * 64
    rows = tl.arange(0, 64)
    heads = tl.arange(0, BLOCK_HV)
    ok = (tok0 + rows < eos)[:, None] & (heads < HV)[None, :]
    at = (tok0 + rows).to(tl.int64)[:, None]
    g_c = tl.load(g + at * HV + heads[None, :], mask=ok, other=0.0)
    hi, lo, gam = _cumsum_hi_lo(g_c)
    out = sums + heads[None, :].to(tl.int64) * n_tokens + at
    tl.store(out, hi, mask=ok)
    tl.store(out + HV * n_tokens, lo, mask=ok)
    tl.store(out + 2 * HV * n_tokens, (tl.sum(g_c.to(tl.float64), 0)[None, :] - gam).to(tl.float32), mask=ok)


@gluon.jit
def _sums_loads(sums, beta, tok0, n_rows, hv, n_tokens, HV: gl.constexpr, layout: gl.constexpr):
    """A chunk's (hi, lo, γ_C − γ, β) of value head ``hv`` from ``_gate_sums_kernel``'s output and β, in
    ``layout``. Rows past ``n_rows`` take the last row's (hi, lo), as a scan over gates loaded as 0 there
    gives them: the decay between such a row and the chunk's first stays finite (with γ as 0 there,
    2^(−γ_j log2 e) overflows under strong decay, and 0 · inf is NaN where β = 0 must hold the row out);
    their γ_C − γ and β are 0. A chunk past the segment's end (the loop's look-ahead) loads nothing."""
    r = gl.arange(0, 64, layout=layout)
    last = sums + hv.to(gl.int64) * n_tokens + tok0 + gl.minimum(r, n_rows - 1)
    some = (r >= 0) & (n_rows > 0)
    hi = gl.load(last, mask=some, other=0.0)
    lo = gl.load(last + HV * n_tokens, mask=some, other=0.0)
    at = sums + hv.to(gl.int64) * n_tokens + tok0 + r
    after = gl.load(at + 2 * HV * n_tokens, mask=r < n_rows, other=0.0)
    b = gl.load(beta + (tok0.to(gl.int64) + r) * HV + hv, mask=r < n_rows, other=0.0)
    return hi, lo, after, b


@gluon.jit
def _copy_tbeta(t_s, t_bars, t_desc, tbeta, buf, tok0, n_rows, hv, HV: gl.constexpr):
    """The intra launch's Tβ of the chunk at ``tok0`` into slot ``buf``: by TMA, counted on ``t_bars``,
    or (a partial chunk: TMA would read the next sequence's rows) by masked loads."""
    ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    if n_rows == 64:
        mbarrier.expect(t_bars.index(buf), t_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(t_desc, [tok0, hv * 64], t_bars.index(buf), t_s.index(buf))
    else:
        _load_tile(t_s.index(buf), tbeta + hv * 64, tok0, n_rows, HV * 64, 64, ld)
        # counted on the slot's barrier as a copy is, so that its phase counts chunks across items
        mbarrier.arrive(t_bars.index(buf), count=1)


@gluon.jit
def _p_for_copied(p_s, qk, hi, buf, t_bars, t_phase, log2_scale, dt: gl.constexpr):
    """P of a chunk whose Tβ is copied in, as every Gluon state pass makes it (``_masked_p``: the batch
    pass's bit for bit), then the wait for that copy."""
    acc: gl.constexpr = CHUNK_ACC
    r = gl.arange(0, 64, layout=gl.SliceLayout(1, acc))
    c_p = gl.arange(0, 64, layout=gl.SliceLayout(0, acc))
    b = hi * _LOG2E
    b_row, b_col = gl.convert_layout(b, gl.SliceLayout(1, acc)), gl.convert_layout(b, gl.SliceLayout(0, acc))
    p_s.index(buf).store(_masked_p(qk, b_row, b_col, r, c_p, log2_scale).to(dt))
    mbarrier.wait(t_bars.index(buf), t_phase)


@gluon.jit
def _p_and_tbeta_made(p_s, t_s, x_s, q_t, k_t, hi, lo, b_c, buf, log2_scale, dt: gl.constexpr):
    """P and Tβ of a chunk made here: one decay matrix for P and for A (γ's pair in both), β and the
    scale as factors (``chunk_intra_gluon._tbeta_of_a``, the intra launch's D^{-1} and solve). The
    decay's exponents and β go to A's row and column layouts through ``x_s`` in one round trip
    (``_decay`` converts each vector on its own, a barrier pair each). Q Kᵀ is issued first and runs
    while the decay is made (K Kᵀ beside it as well: spills at ``WORKER_REGS``)."""
    acc: gl.constexpr = CHUNK_ACC
    rows: gl.constexpr = gl.SliceLayout(1, acc)
    cols: gl.constexpr = gl.SliceLayout(0, acc)
    qk = warpgroup_mma(
        q_t, k_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc), use_acc=False, is_async=True
    )
    p_hi = hi * _LOG2E
    x_s.index(0).store(p_hi)
    x_s.index(1).store(gl.fma(hi, _LOG2E, -p_hi) + lo * _LOG2E)
    x_s.index(2).store(b_c)
    hi_r, hi_c = x_s.index(0).load(rows), x_s.index(0).load(cols)
    lo_r, lo_c = x_s.index(1).load(rows), x_s.index(1).load(cols)
    b_r, b_cc = x_s.index(2).load(rows), x_s.index(2).load(cols)
    r = gl.arange(0, 64, layout=rows)
    c_p = gl.arange(0, 64, layout=cols)
    # scale E_ij on and below the diagonal (the scale in row i's exponent), masked once for P and A: A's
    # diagonal is read by no step of the solve
    e = gl.where(
        r[:, None] >= c_p[None, :],
        _exp2((hi_r[:, None] - hi_c[None, :]) + ((lo_r + log2_scale)[:, None] - lo_c[None, :])),
        0.0,
    )
    qk = warpgroup_mma_wait(num_outstanding=0, deps=(qk,))
    p_s.index(buf).store((qk * e).to(dt))
    kk = warpgroup_mma(k_t, k_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc), use_acc=False)
    # the solve's last operand buffer the slot Tβ goes to (shared memory: the pass has no room for another)
    t_beta, _ = _tbeta_of_a(kk * e * (b_r * gl.exp2(-log2_scale))[:, None], b_cc, t_s.index(buf))
    gl.thread_barrier()  # every warp past its wait for the solve's last product, which read the slot
    t_s.index(buf).store(t_beta.to(dt))


@gluon.jit
def _item(schedule, state_indices, it, n_items, seg_chunks, N, HV: gl.constexpr, TV: gl.constexpr):
    """Item ``it`` of the pass — (V tile, value head, segment), the V tile fastest, as a grid of one
    program an item would order them: its schedule row (``chunk_common._write_schedule``), sequence, pool
    slot, value head, V tile, first token, one past its last, chunks (none past the last segment, for a
    padding sequence, or for ``it`` past the last item) and segment."""
    i_v = it % TV
    hv = (it // TV) % HV
    # (an item past the last reads the last row, and runs nothing)
    row = schedule + gl.minimum(it // (TV * HV), n_items // (TV * HV) - 1).to(gl.int64) * _SCHEDULE_ROW
    n = gl.load(row).to(gl.int32)
    live = (n < N) & (it < n_items)
    j = gl.load(row + 1).to(gl.int32)
    bos = gl.load(row + 2).to(gl.int32)
    eos = gl.load(row + 3).to(gl.int32)
    slot = gl.load(state_indices + gl.minimum(n, N - 1))
    base = bos + j * seg_chunks * 64  # the segment's first token
    end = gl.minimum(base + seg_chunks * 64, eos)  # one past its last
    n_chunks = gl.where(live & (slot >= 0), (end - base + 63) // 64, 0)
    end = gl.where(live, end, base)  # no padding rows to zero past the last segment
    return row, n, slot, hv, i_v, base, end, n_chunks, j


@gluon.jit
def _facts(schedule, state_indices, it, n_items, seg_chunks, N, HV: gl.constexpr, TV: gl.constexpr):
    """Item ``it``'s facts (``FACTS``: their order) from the schedule and the state indices: ``_item``'s,
    its segment, its sequence's segments and the first non-last segment's row (the source of its
    initial state)."""
    row, n, slot, hv, i_v, base, end, n_chunks, j = _item(
        schedule, state_indices, it, n_items, seg_chunks, N, HV, TV
    )
    n_segs = gl.load(row + 4).to(gl.int32)
    first_non_last = gl.load(row + 5).to(gl.int32)
    return n, slot, hv, i_v, base, end, n_chunks, j, n_segs, first_non_last


@gluon.jit
def _stash(infos, s, facts, W: gl.constexpr):
    """An item's facts (``_facts``) into row ``s`` of ``infos`` (the caller's barrier makes them seen)."""
    lay: gl.constexpr = gl.BlockedLayout([FACTS], [32], [W], [0])
    r = gl.arange(0, FACTS, layout=lay)
    gl.static_assert(len(facts) == FACTS_USED)
    x = gl.zeros([FACTS], gl.int32, lay)
    for i in gl.static_range(FACTS_USED):
        x = gl.where(r == i, facts[i], x)
    infos.index(s).store(x)


@gluon.jit
def _fact(x, r, i: gl.constexpr):
    """Element ``i`` of a row ``x`` that each thread holds whole (``r``: its indices)."""
    return gl.sum(gl.where(r == i, x, 0), axis=0)


@gluon.jit
def _unstash(infos, s, W: gl.constexpr):
    """The facts ``_stash`` left in row ``s`` of ``infos``, whole in every thread (no shuffles)."""
    lay: gl.constexpr = gl.BlockedLayout([FACTS], [32], [W], [0])
    r = gl.arange(0, FACTS, layout=lay)
    x = infos.index(s).load(lay)
    facts = ()
    for i in gl.static_range(FACTS_USED):
        facts = facts + (_fact(x, r, i),)
    return facts


@gluon.jit
def _state_of(
    facts, state_pool, pool_slot_stride, start, carry,
    HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, acc_s: gl.constexpr,
):  # fmt: skip
    """An item's initial Sᵀ from its facts (``_facts``), with no global load before the state's own;
    zeros for an item without chunks."""
    _, slot, hv, i_v, _, _, n_chunks, j, n_segs, first_non_last = facts
    state = gl.zeros([BV, K], gl.float32, acc_s)
    if n_chunks > 0:
        state = _initial_state(
            state_pool, slot, pool_slot_stride, start, carry, n_segs, j, first_non_last, hv, i_v, HV, K, V, BV,
            acc_s,
        )  # fmt: skip
    return state


@gluon.jit
def _columns(hv, i_v, H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr):
    """An item's columns: of its key head's q / k tiles, and of its value head's V tile."""
    return (hv // (HV // H)) * K, hv * V + i_v * BV


@gluon.jit
def _claim(counter, G, W: gl.constexpr):
    """The next item for this program: the first not yet taken past the ``G`` programs' first ones (one
    atomic add; element 0 of the returned [32 W] vector, a thread an element in a partition of ``W``
    warps)."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
    r = gl.arange(0, 32 * W, layout=one)
    old = gl.atomic_add(counter + r * 0, gl.full([32 * W], 1, gl.int32, one), mask=r == 0)
    return gl.where(r == 0, old + G, 0)


@gluon.jit
def _publish(
    items, infos, item_bars, item_free, m, claimed, schedule, state_indices, n_items, seg_chunks, N,
    HV: gl.constexpr, TV: gl.constexpr, W: gl.constexpr,
):  # fmt: skip
    """Item ``m`` (the program's m-th, m ≥ 1, in slot m % 2; ``claimed`` from ``_claim`` in this partition
    of ``W`` warps) and its facts (``_stash``) for the worker, once it has taken the one the slot held
    before; returned (the item, its facts)."""
    s = m % 2
    mbarrier.wait(item_free.index(s), (((m - 1) // 2) & 1) ^ 1)
    items.index(s).slice(0, 32 * W).store(claimed)
    gl.thread_barrier()  # every thread's store done before the read
    it = _read_item(items, s, W)
    facts = _facts(schedule, state_indices, it, n_items, seg_chunks, N, HV, TV)
    _stash(infos, s, facts, W)
    gl.thread_barrier()  # every thread's store done before the arrival
    mbarrier.arrive(item_bars.index(s), count=1)
    return it, facts


@gluon.jit
def _await(infos, item_bars, m, W: gl.constexpr):
    """Item ``m``'s facts once the state warpgroups have published it (its slot not freed: ``_take``)."""
    s = m % 2
    mbarrier.wait(item_bars.index(s), ((m - 1) // 2) & 1)
    return _unstash(infos, s, W)


@gluon.jit
def _first_chunk(infos, item_bars, m, W: gl.constexpr):
    """Item ``m``'s value head, first token and first chunk's rows, once published (``_await``)."""
    _, _, hv, _, base, end, _, _, _, _ = _await(infos, item_bars, m, W)
    return hv, base, gl.minimum(end - base, 64)


@gluon.jit
def _take(items, infos, item_bars, item_free, m, W: gl.constexpr):
    """Item ``m`` and its facts as the state warpgroups published them (``_publish``), the slot then
    freed for item m + 2; in a partition of ``W`` warps."""
    s = m % 2
    mbarrier.wait(item_bars.index(s), ((m - 1) // 2) & 1)
    it = _read_item(items, s, W)
    facts = _unstash(infos, s, W)
    gl.thread_barrier()  # every thread's read done before the slot is freed
    mbarrier.arrive(item_free.index(s), count=1)
    return it, facts


@gluon.jit
def _read_item(items, s, W: gl.constexpr):
    """Element 0 of slot ``s``, read whole by every warp of a partition of ``W`` warps (no barrier)."""
    whole: gl.constexpr = gl.BlockedLayout([4], [32], [W], [0])
    x = items.index(s).slice(0, 128).load(whole)
    return gl.sum(gl.where(gl.arange(0, 128, layout=whole) == 0, x, 0), axis=0)


@gluon.jit
def _next_item(
    items, infos, item_bars, item_free, m, claimed, schedule, state_indices, state_pool, pool_slot_stride, n_items,
    seg_chunks, N,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr, TV: gl.constexpr,
    W: gl.constexpr, PREFETCH: gl.constexpr,
):  # fmt: skip
    """The state warpgroups' next item (``claimed``, their m-th) published for the worker, and what the
    copies of its first tiles need: its index, first token, q / k and v columns, and chunks. Where its
    initial state is its pool row (its sequence's one segment), that row is fetched into L2 now, a few
    steps before these warpgroups load it: every program's items end at about the same time in a batch
    of equal sequences, and the rows' loads there (64 KiB a program) would otherwise all go to DRAM at
    once, between two chunk steps. ``PREFETCH`` false (a pool whose rows are not 16-byte aligned, which
    a bulk prefetch needs: ``tma_addressable``): not fetched."""
    it, facts = _publish(
        items, infos, item_bars, item_free, m, claimed, schedule, state_indices, n_items, seg_chunks, N, HV, TV, W
    )  # fmt: skip
    _, slot, hv, i_v, base, _, n_chunks, _, n_segs, _ = facts
    if PREFETCH:
        if (n_chunks > 0) & (n_segs == 1):
            one: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
            piece: gl.constexpr = BV * K // W  # fp32 elements a warp: 8 KiB at BV = K = 128, W = 8
            at = state_pool + slot.to(gl.int64) * pool_slot_stride + hv * (V * K) + i_v * (BV * K)
            # one address a warp (its lanes alike): one bulk prefetch a warp
            lanes = gl.arange(0, 32 * W, layout=one)
            _prefetch_l2(at + (lanes // 32) * piece, gl.full([32 * W], piece * 4, gl.int32, one))
    col_qk, col_v = _columns(hv, i_v, H, HV, K, V, BV)
    return it, base, col_qk, col_v, n_chunks


@gluon.jit
def _prefetch_l2(ptrs, nbytes):
    """``nbytes`` (a multiple of 16) from each of ``ptrs`` into L2 (one bulk prefetch for each distinct
    address; nothing waits for it)."""
    gl.inline_asm_elementwise(
        "cp.async.bulk.prefetch.L2.global [$1], $2;\n\tmov.u32 $0, 0;",
        "=r,l,r",
        [ptrs, nbytes],
        dtype=gl.int32,
        is_pure=False,
        pack=1,
    )


@gluon.jit
def _worker(
    q_s, k_s, t_s, p_s, g_s, bars, ready, free, t_bars, t_desc, tbeta, g, beta, sums, schedule, state_indices,
    items, infos, item_bars, item_free, n_items, seg_chunks, N, n_tokens, scale, log2_scale, stamps, stamp_items,
    HV: gl.constexpr, TV: gl.constexpr, STAGES: gl.constexpr, MAKE_TBETA: gl.constexpr, PERSISTENT: gl.constexpr,
    STAMPS: gl.constexpr,
):  # fmt: skip
    """The worker warpgroup: ``_worker_item`` for each item the program runs (``PERSISTENT``: the first
    its own, each next as the state warpgroups claimed it, with its facts, ``_take``; else its one
    item); ``STAMPS``: each item's start and end times (``_stamp``)."""
    x_s = gl.allocate_shared_memory(gl.float32, [3, 64], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    it = gl.program_id(0)
    _, _, _, hv, _, base, end, n_chunks, _ = _item(
        schedule, state_indices, it, n_items, seg_chunks, N, HV, TV
    )
    if PERSISTENT:
        m = 0  # the items this program ran before ``it``
        at0 = 0  # and their chunks
        vec: gl.constexpr = gl.BlockedLayout([2], [32], [4], [0])
        # the first chunk's vectors (each next item's: loaded in the item before's last step)
        vecs0 = _chunk_vectors(
            g, beta, sums, base, gl.minimum(end - base, 64), hv, n_tokens, HV, MAKE_TBETA, vec
        )
        while it < n_items:
            if STAMPS:
                _stamp(stamps, stamp_items, m, STAMP_WORKER_START, it, 4)
            at0, vecs0 = _worker_item(
                q_s, k_s, t_s, p_s, g_s, x_s, bars, ready, free, t_bars, t_desc, tbeta, g, beta, sums, infos,
                item_bars, n_tokens, scale, log2_scale, hv, base, end, n_chunks, at0, vecs0, m + 1,
                HV, STAGES, MAKE_TBETA, PERSISTENT,
            )  # fmt: skip
            if STAMPS:
                _stamp(stamps, stamp_items, m, STAMP_WORKER_END, at0, 4)
            m += 1
            # (its arrival already waited for in the item's last step, ``_await``, where it had one)
            it, facts = _take(items, infos, item_bars, item_free, m, 4)
            _, _, hv, _, base, end, n_chunks, _, _, _ = facts
    else:
        if STAMPS:
            _stamp(stamps, stamp_items, 0, STAMP_WORKER_START, it, 4)
        at0, _ = _worker_item(
            q_s, k_s, t_s, p_s, g_s, x_s, bars, ready, free, t_bars, t_desc, tbeta, g, beta, sums, infos,
            item_bars, n_tokens, scale, log2_scale, hv, base, end, n_chunks, 0,
            0, 1,  # (vecs0 and m_next: unread with one item a program)
            HV, STAGES, MAKE_TBETA, PERSISTENT,
        )  # fmt: skip
        if STAMPS:
            _stamp(stamps, stamp_items, 0, STAMP_WORKER_END, at0, 4)


@gluon.jit
def _worker_item(
    q_s, k_s, t_s, p_s, g_s, x_s, bars, ready, free, t_bars, t_desc, tbeta, g, beta, sums, infos, item_bars,
    n_tokens, scale, log2_scale, hv, base, end, n_chunks, at0, vecs0, m_next,
    HV: gl.constexpr, STAGES: gl.constexpr, MAKE_TBETA: gl.constexpr, PERSISTENT: gl.constexpr,
):  # fmt: skip
    """The worker on an item (value head ``hv``, tokens [base, end), ``n_chunks`` chunks; ``at0`` chunks
    of this program before it): per chunk (``at``: counted across items), Tβ, P and the gate factors
    into slot ``at % 2``, once the state warpgroups have freed it (two chunks before done) and the
    chunk's q / k tiles have landed; Tβ made here (``MAKE_TBETA``, on the gate sums
    ``_gate_sums_kernel`` made) or the intra launch's, copied in (``_copy_tbeta``, the gate sums scanned
    here). Each step loads the next chunk's vectors (gate sums and β, or gates and β); ``PERSISTENT``:
    the first chunk's come in ``vecs0``, and the last step loads those of the program's next item (its
    m_next-th, ``_await``: published by then), so that its first step does not wait for them. Returns
    the chunks up to the next item and those vectors."""
    # The gate vectors whole in every warp: their scan and sums within a warp, no barrier (in the intra
    # launch, with four programs an SM to hide its loads, the same layout measured slower)
    vec: gl.constexpr = gl.BlockedLayout([2], [32], [4], [0])
    acc: gl.constexpr = CHUNK_ACC
    dt: gl.constexpr = t_s.dtype
    if PERSISTENT:
        cur = vecs0
    else:
        cur = _chunk_vectors(
            g, beta, sums, base, gl.minimum(end - base, 64), hv, n_tokens, HV, MAKE_TBETA, vec
        )
    for c in tl.range(0, n_chunks, disable_licm=True):
        at = at0 + c
        buf = at % 2
        stage = at % STAGES
        tok0 = base + c * 64
        n_rows = gl.minimum(end - tok0, 64)
        # the vectors of the chunk after this one: this item's, or (its last step, ``PERSISTENT``) the
        # next item's first, loaded here rather than after the item
        hv_n, tok_n, rows_n = hv, tok0 + 64, gl.minimum(end - tok0 - 64, 64)
        if PERSISTENT and c == n_chunks - 1:
            hv_n, tok_n, rows_n = _first_chunk(infos, item_bars, m_next, 4)
        nxt = _chunk_vectors(g, beta, sums, tok_n, rows_n, hv_n, n_tokens, HV, MAKE_TBETA, vec)
        mbarrier.wait(free.index(buf), ((at // 2) & 1) ^ 1)
        if not MAKE_TBETA:
            _copy_tbeta(t_s, t_bars, t_desc, tbeta, buf, tok0, n_rows, hv, HV)
        mbarrier.wait(bars.index(stage), (at // STAGES) & 1)
        if MAKE_TBETA:
            hi, lo, after, b_c = cur
        else:
            g_c, b_c = cur
            gam, hi, lo = _gate_sums(g_c)
            after = _to_end(g_c, gam)
        first = gl.arange(0, 64, layout=vec) == 0
        # exp γ, exp(γ_C − γ) and exp γ_C = exp(γ_0 + (γ_C − γ_0)), as the batch pass makes them from
        # the stored gate sums (γ rounded to fp32: ``hi``)
        g_s.index(3 * buf).store(gl.exp(hi))
        g_s.index(3 * buf + 1).store(gl.exp(after))
        g_s.index(3 * buf + 2).store(
            gl.zeros_like(hi) + gl.exp(gl.sum(gl.where(first, hi + after, 0.0), axis=0))
        )
        # P = scale (Q Kᵀ ⊙ E) on and below the diagonal; above it E may overflow to inf, which the
        # select discards. Made before Tβ, so that only γ's pair and β live through the solve
        # (registers).
        q_t = q_s.index(stage)
        k_t = k_s.index(stage)
        if MAKE_TBETA:
            _p_and_tbeta_made(p_s, t_s, x_s, q_t, k_t, hi, lo, b_c, buf, log2_scale, dt)
        else:
            qk = warpgroup_mma(q_t, k_t.permute((1, 0)), gl.zeros([64, 64], gl.float32, acc), use_acc=False)
            _p_for_copied(p_s, qk, hi, buf, t_bars, (at // 2) & 1, log2_scale, dt)
        fence_async_shared()  # Tβ and P are read by the state warpgroups' wgmma (the async proxy)
        mbarrier.arrive(ready.index(buf), count=1)
        cur = nxt
    if PERSISTENT:
        if n_chunks == 0:  # (no last step loaded them)
            hv_n, tok_n, rows_n = _first_chunk(infos, item_bars, m_next, 4)
            cur = _chunk_vectors(g, beta, sums, tok_n, rows_n, hv_n, n_tokens, HV, MAKE_TBETA, vec)
    return at0 + n_chunks, cur


@gluon.jit
def _chunk_vectors(g, beta, sums, tok0, n_rows, hv, n_tokens, HV: gl.constexpr, MAKE_TBETA: gl.constexpr,
                   layout: gl.constexpr):  # fmt: skip
    """What the worker loads for a chunk of ``n_rows`` rows at ``tok0``: where it makes Tβ, its gate sums
    and β (``_sums_loads``); else its gates and β (``_gate_loads``), scanned in its step."""
    if MAKE_TBETA:
        return _sums_loads(sums, beta, tok0, n_rows, hv, n_tokens, HV, layout)
    else:
        return _gate_loads(g, beta, tok0, n_rows, hv, HV, layout)


@gluon.jit
def _state(
    q_desc, k_desc, v_desc, o_desc, q_s, k_s, v_s, t_s, p_s, o_s, g_s, bars, ready, free,
    o, state_pool, state_indices, schedule, start, carry, counter, items, infos, item_bars, item_free, n_items,
    seg_chunks, N, pool_slot_stride, scale, stamps, stamp_items,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    TV: gl.constexpr, STAGES: gl.constexpr, PERSISTENT: gl.constexpr, STAMPS: gl.constexpr,
    PREFETCH: gl.constexpr,
):  # fmt: skip
    """The state warpgroups: ``_state_item`` for each item the program runs (``PERSISTENT``: the first
    its own, its facts stashed and its initial state loaded here, each next claimed, stashed and
    published for the worker, and its initial state loaded, by the item before; else its one item);
    ``STAMPS``: each item's start and end times (``_stamp``)."""
    W: gl.constexpr = BV // 16
    acc_s: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[W, 1], instr_shape=[16, K, 16]
    )
    it = gl.program_id(0)
    if PERSISTENT:
        m = 0  # the items this program ran before ``it``
        at0 = 0  # and their chunks
        copied = False  # whether the item before copied this one's first tiles in
        facts = _facts(schedule, state_indices, it, n_items, seg_chunks, N, HV, TV)
        _stash(infos, 0, facts, W)
        gl.thread_barrier()  # every thread's store done before the item's reads
        state = _state_of(facts, state_pool, pool_slot_stride, start, carry, HV, K, V, BV, acc_s)
        while it < n_items:
            if STAMPS:
                _stamp(stamps, stamp_items, m, STAMP_STATE_START, it, W)
            it, at0, copied, state = _state_item(
                q_desc, k_desc, v_desc, o_desc, q_s, k_s, v_s, t_s, p_s, o_s, g_s, bars, ready, free, o,
                state_pool, state_indices, schedule, start, carry, counter, items, infos, item_bars, item_free,
                n_items, seg_chunks, N, pool_slot_stride, scale, it, m, at0, copied, state, stamps, stamp_items,
                H, HV, K, V, BV, TV, STAGES, PERSISTENT, STAMPS, PREFETCH,
            )  # fmt: skip
            if STAMPS:
                _stamp(stamps, stamp_items, m, STAMP_STATE_END, at0, W)
            m += 1
        tma.store_wait(pendings=0)  # the last item's last rows (its end does not wait for them)
    else:
        if STAMPS:
            _stamp(stamps, stamp_items, 0, STAMP_STATE_START, it, W)
        _, at0, _, _ = _state_item(
            q_desc, k_desc, v_desc, o_desc, q_s, k_s, v_s, t_s, p_s, o_s, g_s, bars, ready, free, o,
            state_pool, state_indices, schedule, start, carry, counter, items, infos, item_bars, item_free,
            n_items, seg_chunks, N, pool_slot_stride, scale, it, 0, 0, False, gl.zeros([BV, K], gl.float32, acc_s),
            stamps, stamp_items, H, HV, K, V, BV, TV, STAGES, PERSISTENT, STAMPS, PREFETCH,
        )  # fmt: skip
        if STAMPS:
            _stamp(stamps, stamp_items, 0, STAMP_STATE_END, at0, W)


@gluon.jit
def _stamp(stamps, items, m, field, value, W: gl.constexpr):
    """For ``benchmarks/gdn_fused_timeline.py`` (``STAMPS``): the global timer (ns) and ``value`` into
    ``field`` (``STAMP_*``) of this program's row for its m-th item in ``stamps`` ([programs, items,
    STAMP_FIELDS, 2] int64), and the SM into ``STAMP_SM``; from one thread of a partition of ``W``
    warps."""
    one: gl.constexpr = gl.BlockedLayout([1], [32], [W], [0])
    r = gl.arange(0, 32 * W, layout=one)
    now = gl.inline_asm_elementwise(
        "mov.u64 $0, %globaltimer;", "=l,r", [r], dtype=gl.int64, is_pure=False, pack=1
    )
    sm = gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r,r", [r], dtype=gl.int32, is_pure=False, pack=1)
    row = stamps + (gl.program_id(0).to(gl.int64) * items + m) * (STAMP_FIELDS * 2) + r * 0
    first = r == 0
    gl.store(row + field * 2, now, mask=first)
    gl.store(row + field * 2 + 1, gl.zeros_like(now) + value, mask=first)
    gl.store(row + STAMP_SM * 2, sm.to(gl.int64), mask=first)


@gluon.jit
def _state_item(
    q_desc, k_desc, v_desc, o_desc, q_s, k_s, v_s, t_s, p_s, o_s, g_s, bars, ready, free, o,
    state_pool, state_indices, schedule, start, carry, counter, items, infos, item_bars, item_free,
    n_items, seg_chunks, N, pool_slot_stride, scale, it, m, at0, copied, state, stamps, stamp_items,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    TV: gl.constexpr, STAGES: gl.constexpr, PERSISTENT: gl.constexpr, STAMPS: gl.constexpr,
    PREFETCH: gl.constexpr,
):  # fmt: skip
    """The state warpgroups on item ``it`` (this program's m-th; ``at0`` chunks before it; ``copied``:
    its first tiles copied in by the item before): its initial state, its chunk steps on the worker's Tβ,
    P and gate factors, the output rows, and (a sequence's last segment) the pool row. ``PERSISTENT``:
    the next item claimed (``_claim``) and published for the worker (``_next_item``) ``STAGES + 1``
    steps before the end, and its first tiles copied in by the last ``STAGES − 1`` steps (where both
    have that many chunks), so that the worker starts on it while these warpgroups end this one.
    ``PERSISTENT`` also: its facts read from the stash (``_unstash``) at its start and end, its initial
    state given (``state``), and the next item's loaded at its end before its last rows and pool row are
    stored (the last rows' TMA store not waited for: the next step waits before it writes a buffer, the
    program's end before it exits). ``STAMPS``: its first step's products issued, the ends of its first
    and last steps, its last rows stored (``_stamp``). Returns the next item, the chunks up to it,
    whether its first tiles were copied in, and (``PERSISTENT``) its initial state."""
    W: gl.constexpr = BV // 16
    acc_s: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[W, 1], instr_shape=[16, K, 16]
    )
    acc_c: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[W, 1], instr_shape=[16, 64, 16]
    )
    a_c: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_c, k_width=2)
    a_s: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_s, k_width=2)
    tok_c: gl.constexpr = gl.SliceLayout(0, acc_c)  # a token index along a [BV, 64] tile's columns
    # exp γ_C, one value in every element of its row: each warp holds the whole row, so its maximum is
    # taken within the warp
    whole: gl.constexpr = gl.BlockedLayout([2], [32], [W], [0])
    c_tok = gl.arange(0, 64, layout=tok_c)
    dt: gl.constexpr = q_desc.dtype
    descs = (q_desc, k_desc, v_desc)
    bufs = (q_s, k_s, v_s)
    nbytes: gl.constexpr = 2 * q_desc.block_type.nbytes + v_desc.block_type.nbytes

    G = gl.num_programs(0)
    if PERSISTENT:  # its facts stashed when it was published (and its initial state, ``state``, loaded)
        _, slot, hv, i_v, base, end, n_chunks, _, _, _ = _unstash(infos, m % 2, W)
    else:
        row, n, slot, hv, i_v, base, end, n_chunks, _ = _item(
            schedule, state_indices, it, n_items, seg_chunks, N, HV, TV
        )
    # the next item, claimed STAGES + 1 steps before this one's end (its first tiles are copied in by
    # the last STAGES − 1 steps), or at its start where it is shorter
    it_x, base_x, col_qk_x, col_v_x, n_x = n_items, 0, 0, 0, 0
    claimed = gl.zeros([32 * W], gl.int32, gl.BlockedLayout([1], [32], [W], [0]))
    if PERSISTENT and n_chunks < STAGES + 1:
        it_x, base_x, col_qk_x, col_v_x, n_x = _next_item(
            items, infos, item_bars, item_free, m + 1, _claim(counter, G, W), schedule, state_indices, state_pool,
            pool_slot_stride, n_items, seg_chunks, N, H, HV, K, V, BV, TV, W, PREFETCH,
        )  # fmt: skip
    col_qk, col_v = _columns(hv, i_v, H, HV, K, V, BV)
    o_rows = col_v + gl.arange(0, BV, layout=gl.SliceLayout(1, acc_c))

    if slot < 0:  # padding: zero output rows, nothing read or written else
        _zero_rows(o, base, end, o_rows, c_tok, HV, V, BV, acc_c)

    if not PERSISTENT:  # (persistent: ``state`` given, loaded before the item began)
        # (the segment's fields loaded here rather than held from the item's start: registers)
        j = gl.load(row + 1).to(gl.int32)
        n_segs = gl.load(row + 4).to(gl.int32)
        first_non_last = gl.load(row + 5).to(gl.int32)
        facts = (n, slot, hv, i_v, base, end, n_chunks, j, n_segs, first_non_last)
        state = _state_of(facts, state_pool, pool_slot_stride, start, carry, HV, K, V, BV, acc_s)
    cols = (col_qk, col_qk, col_v)
    if not copied:
        for i in gl.static_range(STAGES - 1):
            _copy_tiles(descs, bufs, bars, (at0 + i) % STAGES, base + i * 64, cols, nbytes, i < n_chunks)

    for c in tl.range(0, n_chunks, disable_licm=True):
        at = at0 + c
        stage = at % STAGES
        buf = at % 2
        tok0 = base + c * 64
        if PERSISTENT and c == n_chunks - (STAGES + 1):
            claimed = _claim(counter, G, W)
        mbarrier.wait(bars.index(stage), (at // STAGES) & 1)
        q_t = q_s.index(stage)
        k_t = k_s.index(stage)
        s_op = gl.convert_layout(state.to(dt), a_c)
        ks = warpgroup_mma(s_op, k_t.permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c),
                           use_acc=False, is_async=True)  # fmt: skip
        qs = warpgroup_mma(s_op, q_t.permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c),
                           use_acc=False, is_async=True)  # fmt: skip
        if STAMPS:
            if c == 0:
                _stamp(stamps, stamp_items, m, STAMP_STATE_LOADED, at, W)
        mbarrier.wait(ready.index(buf), (at // 2) & 1)
        # (Q S)ᵀ waited for with (K S)ᵀ: the tensor cores run a warpgroup's products in the order
        # issued, so v_new's product would wait for it anyway, and holding Sᵀ's operand and (Q S)ᵀ's
        # accumulator beside v_new's in flight takes more registers than the state warpgroups have
        # (ptxas serializes every wgmma then, its note C7512)
        ks, qs, s_op = warpgroup_mma_wait(num_outstanding=0, deps=(ks, qs, s_op))
        v_c = v_s.index(stage).permute((1, 0)).load(acc_c)  # Vᵀ [BV, 64]
        u_op = gl.convert_layout(
            (v_c.to(gl.float32) - ks * g_s.index(3 * buf).load(tok_c)[None, :]).to(dt), a_c
        )
        v_new = warpgroup_mma(u_op, t_s.index(buf).permute((1, 0)), gl.zeros([BV, 64], gl.float32, acc_c),
                              use_acc=False, is_async=True)  # fmt: skip
        tma.store_wait(pendings=0)
        fence_async_shared()
        # The step's one barrier: the output rows written; every thread past its waits for the
        # products of the step before, the last readers of the buffers written next
        gl.thread_barrier()
        if PERSISTENT:
            if c > 0:  # the chunk before's output rows, written into their buffer before the barrier
                tma.async_copy_shared_to_global(o_desc, [tok0 - 64, col_v], o_s.index((at - 1) % 2))
            # the tiles of the chunk STAGES − 1 ahead, this item's or (its last steps) the next's, into
            # the buffer the step before read
            ahead = c + STAGES - 1
            here = ahead < n_chunks
            _copy_tiles(
                descs, bufs, bars, (at + STAGES - 1) % STAGES,
                gl.where(here, base + ahead * 64, base_x + (ahead - n_chunks) * 64),
                (gl.where(here, col_qk, col_qk_x), gl.where(here, col_qk, col_qk_x), gl.where(here, col_v, col_v_x)),
                nbytes, here | ((n_chunks >= STAGES - 1) & (n_x >= STAGES - 1)),
            )  # fmt: skip
        else:  # (one item: its chunks counted from 0, as the batch pass counts them)
            _store_last_and_refill(
                o_desc, o_s, descs, bufs, bars, c, tok0, col_v, base, cols, nbytes, n_chunks, STAGES
            )

        v_new, u_op = warpgroup_mma_wait(num_outstanding=0, deps=(v_new, u_op))
        d_op = gl.convert_layout((v_new * g_s.index(3 * buf + 1).load(tok_c)[None, :]).to(dt), a_s)
        decay_c = gl.max(g_s.index(3 * buf + 2).load(whole), axis=0)
        state = warpgroup_mma(d_op, k_t, state * decay_c, is_async=True)
        vn_op = gl.convert_layout(v_new.to(dt), a_c)
        o_scale = g_s.index(3 * buf).load(tok_c) * scale
        out = warpgroup_mma(vn_op, p_s.index(buf).permute((1, 0)), qs * o_scale[None, :], is_async=True)
        # Both waited for here (a product in flight across the loop's back edge makes ptxas serialize
        # every wgmma of the kernel, ``chunk_gluon_batch``)
        state, d_op, out, vn_op = warpgroup_mma_wait(num_outstanding=0, deps=(state, d_op, out, vn_op))
        mbarrier.arrive(free.index(buf), count=1)
        if STAMPS:
            if c == 0:
                _stamp(stamps, stamp_items, m, STAMP_STATE_FIRST, at, W)
            if c == n_chunks - 1:
                _stamp(stamps, stamp_items, m, STAMP_STATE_LAST, at, W)
        # The output rows into their buffer now, not held into the next step (registers: the state
        # warpgroups have 192): the TMA store that last read it (two chunks before) was waited for
        # before this step's barrier; they leave by TMA after the next step's barrier
        _output_tile(o_s.index(buf), out, dt)
        if PERSISTENT and c == n_chunks - (STAGES + 1):  # the claim's add has long returned
            it_x, base_x, col_qk_x, col_v_x, n_x = _next_item(
                items, infos, item_bars, item_free, m + 1, claimed, schedule, state_indices, state_pool,
                pool_slot_stride, n_items, seg_chunks, N, H, HV, K, V, BV, TV, W, PREFETCH,
            )  # fmt: skip

    nxt = state
    if PERSISTENT:
        # the next item's initial state (its facts stashed when it was published, its pool row fetched
        # into L2 then), loaded before this item's last stores rather than after them
        nxt = _state_of(
            _unstash(infos, (m + 1) % 2, W), state_pool, pool_slot_stride, start, carry, HV, K, V, BV, acc_s
        )
    if n_chunks > 0:
        tok0 = base + (n_chunks - 1) * 64
        last = o_s.index((at0 + n_chunks - 1) % 2)
        tma.store_wait(pendings=0)
        fence_async_shared()
        gl.thread_barrier()
        if end - tok0 == 64:
            tma.async_copy_shared_to_global(o_desc, [tok0, col_v], last)
            if not PERSISTENT:  # (persistent: the next item's first step waits before it writes a buffer)
                tma.store_wait(pendings=0)
        else:  # a sequence's partial last chunk: its rows alone (TMA would write the next sequence's)
            ld: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [W, 1], [1, 0])
            r_o = gl.arange(0, 64, layout=gl.SliceLayout(1, ld))
            c_o = gl.arange(0, BV, layout=gl.SliceLayout(0, ld))
            at_o = (tok0 + r_o).to(gl.int64)[:, None] * (HV * V) + (col_v + c_o)[None, :]
            gl.store(o + at_o, last.load(ld), mask=(r_o < end - tok0)[:, None])
        if STAMPS:
            _stamp(stamps, stamp_items, m, STAMP_STATE_STORED, at0 + n_chunks - 1, W)
        if PERSISTENT:  # the item's facts read again from the stash, not held through the loop
            _, slot, hv, i_v, _, _, _, j, n_segs, _ = _unstash(infos, m % 2, W)
            if j == n_segs - 1:
                gl.store(_pool_ptrs(state_pool, slot, pool_slot_stride, hv, i_v, K, V, BV, acc_s), state)
            # every thread past the last rows' loads before the next item's steps write them
            gl.thread_barrier()
        # j and n_segs loaded again, not held through the loop (registers)
        elif gl.load(row + 1) == gl.load(row + 4) - 1:
            gl.store(
                _state_ptrs(state_pool, state_indices, n, pool_slot_stride, hv, i_v, K, V, BV, acc_s),
                state,
            )
    return it_x, at0 + n_chunks, (n_chunks >= STAGES - 1) & (n_x >= STAGES - 1), nxt


@gluon.jit
def _gdn_gluon_fused_state_kernel(
    q_desc, k_desc, v_desc, o_desc, t_desc,
    o, tbeta, g, beta, sums, state_pool, state_indices, schedule, start, carry,
    pool_slot_stride, scale, seg_chunks, N, n_tokens, counter, n_items, stamps, stamp_items,
    H: gl.constexpr, HV: gl.constexpr, K: gl.constexpr, V: gl.constexpr, BV: gl.constexpr,
    STAGES: gl.constexpr, WORKER_REGS: gl.constexpr, MAKE_TBETA: gl.constexpr, PERSISTENT: gl.constexpr,
    STAMPS: gl.constexpr = False, PREFETCH: gl.constexpr = False,
):  # fmt: skip
    # Persistent: P programs (at most one an SM), program p first running item p, then each next item
    # not yet taken (``counter``: claimed as the hardware would hand a free SM the next program, so that
    # items of unequal lengths still spread), so that at an item's end the worker goes on to the next
    # item's chunks while the state warpgroups store this one's last rows and load the next one's state,
    # where a program an item waits for the SM to empty
    TV: gl.constexpr = V // BV
    dt: gl.constexpr = q_desc.dtype
    q_s = gl.allocate_shared_memory(dt, [STAGES, 64, K], q_desc.layout)
    k_s = gl.allocate_shared_memory(dt, [STAGES, 64, K], k_desc.layout)
    v_s = gl.allocate_shared_memory(dt, [STAGES, 64, BV], v_desc.layout)
    sq: gl.constexpr = gl.NVMMASharedLayout.get_default_for([64, 64], dt)
    t_s = gl.allocate_shared_memory(dt, [2, 64, 64], t_desc.layout)
    p_s = gl.allocate_shared_memory(dt, [2, 64, 64], sq)
    o_s = gl.allocate_shared_memory(dt, [2, 64, BV], o_desc.layout)
    g_s = gl.allocate_shared_memory(gl.float32, [6, 64], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    t_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    # the next items, as the state warpgroups claim them for the worker (``_publish`` / ``_take``)
    items = gl.allocate_shared_memory(gl.int32, [2, 256], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    infos = gl.allocate_shared_memory(gl.int32, [2, FACTS], gl.SwizzledSharedLayout(1, 1, 1, order=[0]))
    item_bars = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    item_free = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(bars.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(free.index(i), count=1)
        mbarrier.init(t_bars.index(i), count=1)
        mbarrier.init(item_bars.index(i), count=1)
        mbarrier.init(item_free.index(i), count=1)
    # (argument tuples written out here: a tuple bound to a name first would make its constexprs tensors)
    gl.warp_specialize(
        [
            (_state, (q_desc, k_desc, v_desc, o_desc, q_s, k_s, v_s, t_s, p_s, o_s, g_s, bars, ready, free,
                      o, state_pool, state_indices, schedule, start, carry, counter, items, infos, item_bars,
                      item_free, n_items, seg_chunks, N, pool_slot_stride, scale, stamps,
                      stamp_items, H, HV, K, V, BV, TV, STAGES, PERSISTENT, STAMPS, PREFETCH)),
            (_worker, (q_s, k_s, t_s, p_s, g_s, bars, ready, free, t_bars, t_desc, tbeta, g, beta, sums,
                       schedule, state_indices, items, infos, item_bars, item_free, n_items, seg_chunks, N,
                       n_tokens, scale, gl.log2(scale), stamps, stamp_items, HV, TV, STAGES,
                       MAKE_TBETA, PERSISTENT, STAMPS)),
        ],
        [4],
        [WORKER_REGS],
    )  # fmt: skip


class GateSums(NamedTuple):
    """What ``launch_gate_sums`` writes for the pass where its worker makes Tβ."""

    sums: torch.Tensor  # [3, HV, T] fp32: γ's pair (hi, lo) and γ_C − γ
    counter: torch.Tensor  # [1] int32, zeroed: the persistent programs' claims


def launch_gate_sums(g, cu_seqlens, schedule, N: int, seg_chunks: int) -> GateSums:
    """Where the worker makes Tβ (``chunk_config.worker_makes_tbeta``), before the segment launch: the gate
    sums the worker loads, the segment schedule ``schedule`` (the intra launch's schedule launch left
    out: ``chunk_intra._launch_intra(schedule=False)``) and the claim counter, in one launch."""
    T, HV = g.shape
    made = GateSums(
        chunk_common._empty((3, HV, T), torch.float32, g.device),
        chunk_common._empty((1,), torch.int32, g.device),
    )
    _gate_sums_kernel[(T // CHUNK + N,)](
        g, cu_seqlens, made.sums, made.counter, schedule, schedule.shape[1], seg_chunks, T, N,
        HV=HV, BLOCK_HV=triton.next_power_of_2(HV), BN=triton.next_power_of_2(N + 1), num_warps=4,
    )  # fmt: skip
    return made


def launch_state(
    q, k, v, g, beta, tbeta, o, state_pool, state_indices, schedule, start, carry, scale: float,
    config: LaunchConfig, made: GateSums | None = None, stamps: Callable[[int, int], torch.Tensor] | None = None,
) -> None:  # fmt: skip
    """Launch 3 of ``chunk_state`` in this form: the state pass over every segment with the intra
    launch's work and the output fused in, on the schedule and the segment and carry launches' initial
    states (``start`` / ``carry``: None where no sequence can be split); updates the pool in place.
    ``made``: ``launch_gate_sums``'s, given exactly where the worker makes Tβ. ``stamps``
    (``benchmarks/gdn_fused_timeline.py``): called with the pass's programs and the most items one may
    run, it returns the int64 buffer [programs, items, STAMP_FIELDS, 2] that the pass built with
    ``STAMPS`` writes each item's stamps into (``_stamp``, the ``STAMP_*`` fields). ``supported(q, k, v)`` true."""
    make = worker_makes_tbeta(config)
    if make != (made is not None):
        raise ValueError("the gate sums (launch_gate_sums) go with a worker that makes Tβ, and only there")
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    if start is None:  # no sequence is split: never read (n_segs is 1 in every schedule row)
        start = carry = state_pool
    descs = (
        descriptor(q, K), descriptor(k, K), descriptor(v, BLOCK_V), descriptor(o, BLOCK_V),
        descriptor(tbeta, CHUNK),
    )  # fmt: skip
    N = state_indices.shape[0]
    n_items = triton.cdiv(V, BLOCK_V) * HV * schedule.shape[1]
    programs, persistent = _grid(n_items, config.gluon_fused_programs, sm_count(q.device))
    sums = g  # unread unless the worker makes Tβ
    counter = schedule  # never read unless persistent
    if made is not None:
        sums, counter = made
    elif persistent:
        counter = torch.zeros(1, dtype=torch.int32, device=q.device)
    stamped = None if stamps is None else stamps(programs, n_items if persistent else 1)
    _gdn_gluon_fused_state_kernel[(programs,)](
        *descs, o, tbeta, g, beta, sums, state_pool, state_indices, schedule, start, carry,
        state_pool.stride(0), float(scale), config.seg_chunks, N, T, counter, n_items,
        counter if stamped is None else stamped, 0 if stamped is None else stamped.shape[1],
        H=H, HV=HV, K=K, V=V, BV=BLOCK_V, STAGES=config.gluon_batch_stages, WORKER_REGS=WORKER_REGS,
        MAKE_TBETA=make, PERSISTENT=persistent, STAMPS=stamped is not None,
        # the bulk prefetch of a pool row needs a 16-byte aligned address, as TMA does (its pieces lie a
        # multiple of 16 bytes into a row): not on a pool view with a slot pitch of 2 mod 4 elements
        PREFETCH=tma_addressable(state_pool), num_warps=BLOCK_V // 16,
    )  # fmt: skip


def _grid(n_items: int, asked: int, sms: int) -> tuple[int, bool]:
    """The pass's programs for ``n_items`` items on ``sms`` SMs, and whether they are persistent: one an
    item, or one an SM (``asked`` of them, if given: ``LaunchConfig.gluon_fused_programs``) where there
    are more than ``PERSISTENT_ITEMS`` items an SM."""
    if asked > 0 or n_items > PERSISTENT_ITEMS * sms:
        return min(n_items, asked or sms), True
    return n_items, False
