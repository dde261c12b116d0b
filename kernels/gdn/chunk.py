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
   (``chunked.solve.inv_unit_lower_blocks``), and with N = D^{-1}(A − blocks), strictly block-lower so N⁴ = 0,
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
(``gluon_pdl``). One sequence of 16k tokens and more, in a call captured into a CUDA graph, runs in windows instead (``gluon_window_first``,
``_gluon_prefill_windows``): the state pass of a window while the intra launch of the next runs on a
second stream, joined back before the call returns (5.6–6.6% less time at 16k–64k). Before that pass the
Gluon intra launch also makes each chunk's P once per value head (``gluon_p_from_intra``), which the
state pass's V-tile programs read instead of each making it (5–7% less time at 4k–64k).

Precision (benchmarks/RESULTS.md, "GDN prefill precision", and ``benchmarks/gdn_precision.py``): for
16-bit inputs the intra launch's four 64×64 solve dots take fp16 operands (fp32 sums: 16-bit dots, 20%
off that launch against tf32 ones; fp16's rounding to nearest, not bf16's 8 bits or tf32's truncation,
``tests/kernels/test_gdn_solve_precision.py``) and D^{-1} is refined once. Without both, D^{-1}'s
powers on tf32 put the final state on correlated keys 5–7× (fp16) and 2.3–5.3× (bf16) further from the
fp64 recurrence than fla's (``tests/kernels/test_gdn_prefill_emulation.py``); with them, measured,
0.34–0.68× and 0.82–1.26×.

On sm_90 with bf16 inputs, ``LaunchConfig.gluon_intra`` (on by default) replaces launch 1 by
``chunk_intra_gluon``'s (the same Tβ in Gluon, its D^{-1} by forward substitution in fp32 rather than
refined tf32 powers, and its solve merged from those blocks' inverses in two levels of two products
rather than a chain of four, at the same precision; 1320 instructions a warp against 2496 here), before either state pass; before the passes
above a launch of ``_gdn_chunk_intra_kernel`` with ``SCHEDULE_ONLY`` writes the segment schedule
first. Measured: 8–9% less time on one sequence and 10% on 16×2048 than with the Triton intra launch
(benchmarks/RESULTS.md).

On sm_90 with 16-bit inputs and V a multiple of 128 (``chunk_gluon_batch.supported``),
``LaunchConfig.gluon_batch`` (the default wherever the passes above run) replaces launch 3 by
``chunk_gluon_batch``'s: the same segments, schedule and initial
states, the state transposed in the wgmma accumulator, two warpgroups a program sharing its tiles, one
program per SM. Measured: 16×2048 0.614 against 0.792 ms for the Triton state pass (benchmarks/RESULTS.md).

Chunks and segments never straddle a ``cu_seqlens`` boundary. Every launch has a fixed grid, an upper
bound on the work (``T // 64 + N`` chunks, ``T // (64·seg_chunks) + N`` segments, ``T // (64·seg_chunks)``
segments that are not last); each program finds its sequence by a prefix sum over the per-sequence
counts in registers (``chunk_common._locate``), and programs past the end exit at once. The segment
and state passes read that answer from a table the intra launch writes
(``chunk_common._write_schedule``): made in their own prologue, its values sat in per-thread registers
through the chunk loop (resources tool: 12% of the state pass's chunk step and half its spills).

For bf16 inputs ``LaunchConfig.gluon_fused`` (the default where ``gluon_batch`` is) replaces that pass
by ``chunk_gluon_fused``'s: the same step, with a worker warpgroup beside the state's chain that makes
each chunk's P and gate factors in shared memory and copies in its Tβ (16×2048 0.583 against 0.627 ms).
With ``gluon_fused_tbeta="worker"`` (``launch_config``'s choice since 12-06) the worker makes Tβ too and
the intra launch before it leaves those chunks out (``_launch_intra(fused_makes_last=True)``: it writes only the
chunks the segment pass reads): 16×2048 0.513 against 0.565–0.572 ms on an H100, its module docstring
says how.

The modules, each with one job, import one way (nothing imports this one back:
``tests/kernels/test_gdn_module_graph.py``):

- ``chunk`` (this module): the public entry, ``prefill``, which picks the launch path;
- ``chunk_intra``: launch 1 in Triton (and the segment schedule); ``chunk_intra_gluon``: launch 1 in Gluon;
- ``chunk_state``: launches 2, 2b and 3 in Triton; ``chunk_gluon``: the Gluon state pass of unsplit
  sequences; ``chunk_gluon_batch``: launch 3 in Gluon; ``chunk_gluon_fused``: launch 3 in Gluon with the
  intra launch's work inside;
- ``chunk_config``: ``LaunchConfig`` and ``launch_config``, the measured choice for a call's shape;
- ``chunk_common``: what the launches share (the chunk size, segment location, chunk-row tiles, the
  exp2 / log-space helpers, tile and precision choices, the allocator); ``chunk_tma``: TMA checks and
  descriptors, for the Triton state pass and the Gluon kernels.
"""

from __future__ import annotations

import torch

from stampgen.kernels.gdn import chunk_common
from stampgen.kernels.gdn.chunk_common import _INTERPRET, CHUNK
from stampgen.kernels.gdn.chunk_config import LaunchConfig, check_fused, launch_config, worker_makes_tbeta
from stampgen.kernels.gdn.chunk_intra import _launch_intra, _p_of
from stampgen.kernels.gdn.chunk_state import _launch_carry, _launch_segments, _launch_state
from stampgen.kernels.gdn.chunk_tma import tma_addressable

# What importers (tests, benchmarks, ``kernels.gdn``'s dispatch) read here. ``launch_config`` is looked up
# in this module by ``prefill``, so replacing it here (the probes pin it) changes the launches.
__all__ = ["CHUNK", "LaunchConfig", "launch_config", "prefill", "tma_addressable", "windows"]


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale: float) -> torch.Tensor:
    """Chunked GDN prefill; arguments already validated by ``kernels.gdn.prefill`` (docs/design.md)."""
    T = q.shape[0]
    N = state_indices.shape[0]
    o = chunk_common._empty(v.shape, v.dtype, v.device)
    if T == 0 or N == 0:
        return o
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    g, beta = g.contiguous(), beta.contiguous()
    state_indices, cu_seqlens = state_indices.contiguous(), cu_seqlens.contiguous()
    # (a CPU-only build of torch has no capture to ask about)
    captured = q.is_cuda and torch.cuda.is_current_stream_capturing()
    config = launch_config(T, N, v.shape[1], v.shape[2], captured=captured)
    if _gluon_state(q, k, v, config):
        _gluon_prefill(q, k, v, g, beta, o, state_pool, state_indices, cu_seqlens, scale, config)
        return o
    fused = _fused_state(q, k, v, config)
    makes_last = _fused_makes_last(fused, config)
    tbeta, gates, schedule = _launch_intra(
        k, g, beta, state_indices, cu_seqlens, config, schedule=not makes_last, fused_makes_last=makes_last
    )
    made = None
    if makes_last:  # the schedule written beside the gate sums the fused pass's worker loads
        from stampgen.kernels.gdn import chunk_gluon_fused  # imported here: Gluon only where it runs

        made = chunk_gluon_fused.launch_gate_sums(g, cu_seqlens, schedule, N, config.seg_chunks)
    affine, start = _launch_segments(k, gates, v, tbeta, state_pool, state_indices, schedule, config)
    carry = _launch_carry(affine, state_indices, cu_seqlens, q.dtype, config)
    if fused:
        from stampgen.kernels.gdn import chunk_gluon_fused  # imported here: Gluon only where it runs

        chunk_gluon_fused.launch_state(
            q, k, v, g, beta, tbeta, o, state_pool, state_indices, schedule, start, carry, scale, config, made
        )  # fmt: skip
        return o
    state_pass = _state_pass(q, k, v, config)
    state_pass(q, k, v, gates, tbeta, o, state_pool, state_indices, schedule, start, carry, scale, config)
    return o


def _gluon_prefill(q, k, v, g, beta, o, state_pool, state_indices, cu_seqlens, scale, config) -> None:
    """The intra launch and ``chunk_gluon``'s state pass (``_gluon_state`` true), one after the other, or
    window by window with the next window's intra launch beside the state pass (``windows``)."""
    from stampgen.kernels.gdn import chunk_gluon  # imported here: Gluon kernels only where they run

    bounds = windows(q.shape[0], state_indices.shape[0], config)
    if len(bounds) > 1:
        _gluon_prefill_windows(q, k, v, g, beta, o, state_pool, state_indices, scale, config, bounds)
        return
    pdl = config.gluon_pdl
    p_of = _p_of(q, k, g.shape[1], scale, config)
    tbeta, gates, _ = _launch_intra(
        k, g, beta, state_indices, cu_seqlens, config, dependents=pdl, schedule=False, p_of=p_of
    )
    p = p_of.p if p_of else None
    chunk_gluon.launch_state(
        q, k, v, gates, tbeta, o, state_pool, state_indices, cu_seqlens, scale, pdl=pdl, p=p
    )


def windows(num_tokens: int, num_seqs: int, config: LaunchConfig) -> list[tuple[int, int]]:
    """The token windows ``[a, b)`` of ``_gluon_prefill_windows``: whole chunks, the first
    ``config.gluon_window_first`` of them, each next ``gluon_window_growth`` times longer, a last one
    shorter than half the one before it joined to that one. One window where none is asked for or the
    call has more than one sequence (a window then would cut sequences at other places than their own
    chunks' ends)."""
    chunks = -(-num_tokens // CHUNK)
    first = config.gluon_window_first
    if first <= 0 or num_seqs != 1 or chunks <= first:
        return [(0, num_tokens)]
    sizes: list[int] = []
    size, left = first, chunks
    while left > 0:
        take = min(size, left)
        if sizes and take * 2 < sizes[-1]:
            sizes[-1] += take
        else:
            sizes.append(take)
        left -= take
        size = max(size + 1, int(size * config.gluon_window_growth))
    bounds, start = [], 0
    for size in sizes:
        end = min(start + size * CHUNK, num_tokens)
        bounds.append((start, end))
        start = end
    return bounds


# A second stream per device for the next window's intra launch (one, reused: every call forks from and
# joins the caller's stream, so its work never outlives the call's).
_SIDE_STREAMS: dict = {}


def _gluon_prefill_windows(q, k, v, g, beta, o, state_pool, state_indices, scale, config, bounds) -> None:
    """One sequence window by window (``windows``): the state pass of window i on the caller's stream,
    the intra launch of window i + 1 on a second stream at the same time; the pool row carries the
    state from window to window (the state pass reads it at a window's start and writes it at its end,
    in fp32, so the result is the unwindowed one: the windows end at chunk ends). Each window's offsets
    are made on the device (``torch.arange``: no host copy, so a CUDA graph can capture the call)."""
    from stampgen.kernels.gdn import chunk_gluon

    main = torch.cuda.current_stream(q.device)
    side = _SIDE_STREAMS.get(q.device)
    if side is None:
        side = _SIDE_STREAMS[q.device] = torch.cuda.Stream(q.device)

    def intra(a: int, b: int):
        cu = torch.arange(0, 2 * (b - a), b - a, dtype=torch.int32, device=q.device)  # [0, b - a]
        p_of = _p_of(q[a:b], k[a:b], g.shape[1], scale, config)
        tbeta, gates, _ = _launch_intra(
            k[a:b], g[a:b], beta[a:b], state_indices, cu, config, schedule=False, p_of=p_of
        )
        return cu, tbeta, gates, p_of.p if p_of else None

    side.wait_stream(main)
    made = [intra(*bounds[0])]
    for i, (a, b) in enumerate(bounds):
        ready = None
        if i + 1 < len(bounds):
            with torch.cuda.stream(side):
                made.append(intra(*bounds[i + 1]))
                ready = side.record_event()
        cu, tbeta, gates, p = made[i]
        chunk_gluon.launch_state(
            q[a:b], k[a:b], v[a:b], gates, tbeta, o[a:b], state_pool, state_indices, cu, scale, p=p
        )
        if ready is not None:
            main.wait_event(ready)
    # Joined before ``made`` is dropped: its buffers, taken from the side stream's pool, go back to it
    # only after the state passes that read them (and the side stream's next work forks after them).
    main.wait_stream(side)


def _gluon_state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: LaunchConfig) -> bool:
    """Whether this call's state pass is ``chunk_gluon``'s (asked for, and it applies here)."""
    if not config.gluon_state or _INTERPRET:
        return False
    from stampgen.kernels.gdn import chunk_gluon

    return chunk_gluon.supported(q, k, v)


def _fused_state(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: LaunchConfig) -> bool:
    """Whether this call's state pass is ``chunk_gluon_fused``'s (asked for with the batch pass and the
    Gluon intra launch, and it applies here)."""
    if config.gluon_fused:
        check_fused(config)  # refuses a bad Tβ source or program count before any launch
    if not (config.gluon_fused and config.gluon_batch and config.gluon_intra) or _INTERPRET:
        return False
    from stampgen.kernels.gdn import chunk_gluon_fused, chunk_intra_gluon

    return chunk_gluon_fused.supported(q, k, v) and chunk_intra_gluon.supported(k)


def _fused_makes_last(fused: bool, config: LaunchConfig) -> bool:
    """Whether the intra launch before the Triton passes leaves out the sequences' last segments
    (``_launch_intra(fused_makes_last=True)``): where the state pass is the fused one (``fused``,
    ``_fused_state``) and its worker makes their Tβ (``chunk_config.worker_makes_tbeta``)."""
    return fused and worker_makes_tbeta(config)


def _state_pass(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: LaunchConfig):
    """Launch 3: ``chunk_state``'s Triton pass, or ``chunk_gluon_batch``'s (``gluon_batch``, where it
    applies); the same arguments."""
    if config.gluon_batch and not _INTERPRET:
        from stampgen.kernels.gdn import chunk_gluon_batch  # imported here: Gluon only where it runs

        if chunk_gluon_batch.supported(q, k, v, config.gluon_batch_block_v):
            return chunk_gluon_batch.launch_state
    return _launch_state
