"""How the chunked GDN prefill's launches are shaped: ``LaunchConfig`` and ``launch_config``, the
measured choice for a call's shape (no autotuning; why each choice: ``launch_config``'s docstring).

Host code only; it imports ``chunk_gluon`` (for the size of its grid) only where the Gluon pass can run.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

import triton

from stampgen.kernels.gdn.chunk_common import _INTERPRET, _SM_COUNT_HINT, CHUNK


class LaunchConfig(NamedTuple):
    """How the launches are shaped (no autotuning: the state pass updates the pool in place, so a
    benchmark run of it would apply the update several times)."""

    block_v: int  # V (and M-column) tile of the segment and state passes
    state_warps: int
    state_stages: int  # software-pipelining stages of the state pass
    intra_warps: int
    seg_chunks: int  # chunks per segment; a sequence of at most this many chunks is not split
    # The segment pass holds two programs per SM at two stages too (72 KiB of shared memory; registers
    # are its limit), so it always pipelines its loads (64k tokens: 4.26 ms against 4.54 at one stage,
    # two runs).
    segment_stages: int = 2
    # A register cap for the intra launch (Triton's ``maxnreg``): uncapped it takes 167 registers (three
    # programs per SM); capped at 128 it holds four, with no spills (gdn_kernel_resources.py). None: no cap.
    intra_maxnreg: int | None = None
    # The same for the segment pass: capped at 168 (with some spills) it holds three programs per SM,
    # so the (M, B) tiles of four segments (10 per value head) run in one wave instead of 1.2.
    segment_maxnreg: int | None = None
    # The carry launch (one program per split sequence and V tile, ~15 µs at 16k tokens, Nsight Compute:
    # latency-bound at 0.34 instructions per cycle). One stage: Triton's default three, to pipeline the
    # K×K loads of M, need 240 KiB of shared memory, more than an SM has; two fit (176 KiB, no spills)
    # and so do 8 warps (no spills), but neither moved the total by more than 1% (measured, H200).
    carry_warps: int = 4
    carry_stages: int = 1
    # The segment, carry and state passes replaced by ``chunk_gluon``'s one Gluon kernel (sm_90, 16-bit
    # q/k/v, ``chunk_gluon.supported``; every sequence unsplit, so worth it when its programs run in one
    # wave: ``launch_config``).
    gluon_state: bool = False
    # With ``gluon_state`` (intra launch before it): the state pass launched as a programmatic dependent
    # of the intra launch (PDL), so its programs take the SMs the intra launch's last wave leaves and
    # read their pool rows while it ends; they wait for it (``griddepcontrol.wait``) before reading Tβ.
    # Measured: 1.2 / 1.6 / 0.7% less time at 4k / 16k / 64k tokens (benchmarks/RESULTS.md).
    gluon_pdl: bool = False
    # The intra launch is ``chunk_intra_gluon``'s where it applies (sm_90, bf16 keys:
    # ``chunk_intra_gluon.supported``), the same math with its layouts stated; before the Triton passes a
    # launch of the Triton kernel writes their schedule first. Measured: 8–9% less time on one sequence
    # of 4k–64k tokens (Gluon state pass) and 10% on 16×2048 (Triton passes) than with the Triton intra
    # launch (benchmarks/RESULTS.md).
    gluon_intra: bool = False
    # A register cap for the Gluon intra launch (``maxnreg``; None: none, 108 registers, four programs an
    # SM). None by default: 96 (five an SM) was 4% faster before the fused pass with the series solve,
    # but spills 112 B and serializes the merged solve's wgmma, and batches now make Tβ in the fused
    # pass (``launch_config``); beside ``chunk_gluon``'s windows it gained nothing
    gluon_intra_maxnreg: int | None = None
    # Launch 3 of the Triton passes (the state pass over segments) is ``chunk_gluon_batch``'s where it
    # applies (sm_90, 16-bit q/k/v, V a multiple of its V tile): the state transposed in the wgmma
    # accumulator, one program an SM; the segment and carry launches before it as for the Triton one.
    gluon_batch: bool = False
    # ``chunk_gluon_batch``'s V tile: 128 (two warpgroups a program, sharing its tiles) or 64 (one)
    gluon_batch_block_v: int = 128
    # ``chunk_gluon_batch``'s TMA buffers of the q / k / v / Tβ tiles: at 3 a step's copies are issued a
    # step and a half ahead (217.5 KiB of shared memory at V tiles of 128; 2: 161.5 KiB, measured 7–8%
    # slower on 16×2048 and 4×8192, benchmarks/RESULTS.md)
    gluon_batch_stages: int = 3
    # Where ``gluon_batch`` applies with bf16 inputs: ``chunk_gluon_fused``'s state pass in its place, P
    # and the gate factors made inside it by a worker warpgroup; its TMA stages are
    # ``gluon_batch_stages``.
    gluon_fused: bool = False
    # Where ``gluon_fused``'s Tβ comes from: "intra" (the intra launch's, over every chunk, copied in by
    # the worker) or "worker" (made by the worker beside P; the intra launch writes only what the
    # segment pass reads). ``launch_config`` takes "worker" (faster since 12-06: the worker's chain
    # shortened, ``chunk_gluon_fused``)
    gluon_fused_tbeta: Literal["intra", "worker"] = "intra"
    # ``gluon_fused``'s programs made persistent, this many of them (0: persistent, one an SM, only
    # where there are more than ``chunk_gluon_fused.PERSISTENT_ITEMS`` items an SM, else one an item);
    # set only to test that a program runs many items of every kind right
    gluon_fused_programs: int = 0
    # With ``gluon_state`` and one sequence: the tokens cut into windows (whole chunks) that the state
    # pass runs one after another, the pool row carrying the state between them, while the intra launch
    # of the next window runs on a second stream beside it, so that only the first window's intra
    # launch is not hidden. The first window's chunks (0: one window, nothing overlapped) and how much
    # longer each next window is (the intra launch of a window must end before the state pass of the
    # one before it does). No PDL between them (``gluon_pdl`` is for the unwindowed call).
    gluon_window_first: int = 0
    gluon_window_growth: float = 1.5
    # With ``gluon_state`` and the Gluon intra launch: P = scale (Q Kᵀ ⊙ E) made once per chunk and value
    # head by the intra launch and read by ``chunk_gluon``'s state pass from shared memory, where each
    # of its V-tile programs would make it again (its chunk step 824 → 558 instructions, 255 → 131
    # registers; the intra launch 1288 → 1648 instructions).
    gluon_p_from_intra: bool = False
    # The Gluon intra launch's programs in (chunk, value head) order, a chunk's value heads next to each
    # other, so that the two programs of a key head (HV = 2H) read its keys and queries from DRAM once
    # and from L2 the second time; False: (value head, chunk), a head's chunks next to each other, where
    # a key head's second value head comes a whole sweep of the tokens later (``launch_config``).
    gluon_intra_heads_inner: bool = False


def worker_makes_tbeta(config: LaunchConfig) -> bool:
    """Whether the fused pass's worker makes every chunk's Tβ (``gluon_fused_tbeta`` "worker"), else
    copies the intra launch's in ("intra"). A bad value is refused here, where the prefill reads it (a
    NamedTuple has no construction hook): a typo would otherwise pick a form silently."""
    if config.gluon_fused_tbeta not in ("intra", "worker"):
        raise ValueError(f"gluon_fused_tbeta must be 'intra' or 'worker', not {config.gluon_fused_tbeta!r}")
    return config.gluon_fused_tbeta == "worker"


def check_fused(config: LaunchConfig) -> None:
    """Refuse a ``gluon_fused`` configuration the fused pass cannot launch — a bad Tβ source
    (``worker_makes_tbeta``) or a program count that is not a whole number ≥ 0 (a negative one would
    reach the launch as a negative grid) — where the prefill reads it, before any launch."""
    worker_makes_tbeta(config)
    programs = config.gluon_fused_programs
    if isinstance(programs, bool) or not isinstance(programs, int) or programs < 0:
        raise ValueError(f"gluon_fused_programs must be an int of at least 0, not {programs!r}")


# A call this long (tokens) on the Gluon state pass has the intra launch's programs in (chunk, value head)
# order (``gluon_intra_heads_inner``): the shortest measured to gain was 64k, 16k was level.
HEADS_INNER_TOKENS = 32768

# One sequence this long (tokens) on the Gluon state pass, in a call being captured into a CUDA graph, goes
# window by window (``launch_config``): the shortest measured to gain (16k; 4k, where the target is met,
# unmeasured).
WINDOWED_TOKENS = 16384

# Triton state-pass programs (V tiles of 64) one SM holds (registers: 255 per thread). chunk_gluon_batch
# holds one of twice the tile, so the segments that fill the GPU are the same count.
_PROGRAMS_PER_SM = 2


def launch_config(
    num_tokens: int,
    num_seqs: int,
    num_v_heads: int,
    v_dim: int,
    *,
    interpret: bool = _INTERPRET,
    captured: bool = False,
) -> LaunchConfig:
    """The configuration for a prefill of ``num_tokens`` tokens in ``num_seqs`` sequences, ``captured``
    into a CUDA graph or called eagerly. Why each
    choice, as measured on the H200 (``benchmarks/gdn_prefill_probe.py``, Qwen3-Next shapes):

    - V tile 64. Triton 3.6 on sm_90 miscompiles the state pass at BV = 32 with one stage (outputs off
      by 89 % rel RMSE); at two stages BV = 32 is right but slower (4.10 against 3.61 ms at 64k tokens,
      1.42 against 1.25 on 16×2048).
    - A long sequence is cut into ``2·SMs // tiles`` segments (4 at HV = 32, V = 128), so the state
      pass fills the GPU in one wave at two programs per SM (4.52 ms at 64k tokens, against 4.62 with
      five segments carried inside the state pass and 4.92 unsplit, on an earlier form of the passes);
      never shorter than four chunks. More segments than that were 5–38% slower.
    - Two pipelining stages in the state pass: with P made in the pass, two programs per SM still fit
      (105 KiB of shared memory each), 3–8 % faster than one stage. At two stages Triton issues the
      next chunk's copies at the end of a step and waits for them at the top of the next, so they hide
      little (Nsight Compute); three stages would hide them behind a whole step but leave one program
      per SM (153.5 KiB) and were 1.28–1.38× slower.
    - The intra launch runs on 4 warps (8: 1.8× slower), capped at 128 registers: four programs per SM,
      no spills (1–3.4 % faster than at 168, three per SM).
    - The segment pass capped at 168 registers (some spills): three programs per SM, so a long
      sequence's (M, B) tiles run in one wave (3 % faster at 16k and 64k tokens, equal at 4k and on
      16×2048).

    - The Gluon state pass (``gluon_state``, the intra launch before it) where its programs — (V tile
      of 32, value head, sequence), every sequence unsplit, one per SM — fit in one wave with an SM to
      spare: one long sequence at Qwen3-Next's 32 value heads (0.155 / 0.591 / 2.306 ms at 4k / 16k /
      64k tokens against 0.194 / 0.665 / 2.522 for the Triton passes). Where they do not, the Triton
      passes, which split long sequences and run short ones two programs per SM (16×2048: 2048 Gluon
      programs, 1.162 against 0.948 ms). Only where ``chunk_gluon.supported`` holds (sm_90, 16-bit
      inputs). With it the state pass is the intra launch's programmatic dependent (``gluon_pdl``:
      0.7–1.6% less).
    - The intra launch in Gluon (``gluon_intra``) wherever it applies (sm_90, bf16), before either
      state pass: 8–9% less time on one sequence, 10% on 16×2048. Uncapped: capped at 96 registers
      (``gluon_intra_maxnreg``; five programs an SM) it was 4% faster before the Triton passes with the
      series solve (12-04: the prefill 0.547 against 0.563 ms on 16×2048), but the merged solve spills
      there and ptxas serializes its wgmma (the prefill 0.572 against 0.565 with Tβ copied in), and
      batches now make Tβ in the fused pass; on one sequence no gain (0.430 against 0.427 at 16k).
    - Where the Triton passes run, their state pass is ``chunk_gluon_batch``'s (``gluon_batch``) where
      it applies, at V tiles of 128: one program an SM over (segment, value head), so the segments
      above (2·SMs // tiles of 64 = SMs // tiles of 128) fill the GPU as they do for the Triton pass.
      Measured: 16×2048 0.614 against 0.792 ms, 4×8192 0.596 against 0.781 (2×4096, two segments a
      sequence, with the wgmma still serialized: 0.268 against 0.299; V tiles of 64, serialized: 0.939
      and 0.916 on the first two, slower than the Triton pass).
    - One sequence of at least ``WINDOWED_TOKENS`` on the Gluon state pass goes window by window
      (``gluon_window_first`` 16 chunks, each next window 1.5× longer), the next window's intra launch
      beside the state pass on a second stream: 0.436 against 0.462 ms at 16k tokens, 1.720 against
      1.842 at 64k (first windows of 8 chunks 0.439 / 1.733; growth 2: 0.452 / 1.752). That saves far
      less than the intra launch's 0.110 / 0.433 ms: its programs share the state pass's SMs (128 state
      programs, one an SM, leave room for two of its) and slow the state's chain. Only where the call
      is ``captured`` into a CUDA graph (as every timing here is): called eagerly, each window's two
      launches cost ~0.3 ms of the host's Python, more than the windows save on the GPU (an H100: 16k
      2.19 ms and 64k 4.34 eagerly in windows, against 0.41 and 1.52 in a graph), so there one window
      (eagerly then 0.60 and 1.80 ms).
    - Before ``chunk_gluon``, unwindowed or in windows, P made by the Gluon intra launch
      (``gluon_p_from_intra``): 0.113 / 0.397 / 1.544 ms at 4k / 16k / 64k against 0.121 / 0.428 /
      1.657 with P made in each of the state pass's V-tile programs (H200, P in two buffers; the
      intra launch alone 0.036 / 0.124 / 0.516 against 0.028 / 0.099 / 0.404); in three buffers, on
      an H100, 0.112 / 0.408 / 1.550 against 0.119 / 0.437 / 1.627. The windows' settings kept:
      first windows of 8 or 24 chunks, growth 1.1, 1.25 or 2 were level or slower at 16k and 64k.
    - And there ``gluon_fused`` (``chunk_gluon_fused``: that pass with P and the gate factors made by a
      worker warpgroup beside the state's chain, Tβ copied in from the intra launch): 16×2048 0.583
      against 0.627 ms, 4×8192 0.554 against 0.601. With Tβ made by the worker too
      (``gluon_fused_tbeta="worker"``, the intra launch cut to what the segment pass reads), the
      default since 12-06: on an H100 16×2048 0.513 against 0.565–0.572 ms with the intra launch's Tβ
      copied in, 4×8192 0.479–0.481 against 0.534 (the worker's chain shortened: the gate sums
      loaded from a small launch, the block-merged solve, one round trip for the decay's vectors;
      before it, level or slower, its ~4.2 µs a chunk the pass's pace). The worker making only every
      2nd or 3rd chunk's was no faster (12-04: 0.567 / 0.563 against 0.554 on 16×2048), a made chunk's
      solve waiting for its slot, so for the state warpgroups' step before it; that option
      (``gluon_fused_worker_every``) was removed on 12-06. Its programs persistent where there are
      more than two items (V tile, value head, segment) an SM (``chunk_gluon_fused.PERSISTENT_ITEMS``):
      16×2048 0.507 against 0.518 ms, 64×512 0.586 against 0.626 (H100).
    - With ``chunk_gluon`` on at least ``HEADS_INNER_TOKENS`` tokens, the intra launch's programs in
      (chunk, value head) order (``gluon_intra_heads_inner``): at 64k tokens the intra launch alone
      0.668 → 0.471 ms and the prefill 1.551 / 1.560 → 1.511 ms (H100; another H100 1.563 / 1.581 →
      1.552 / 1.539), where in the (value head, chunk) order a key head's keys and queries are read
      again a whole sweep of ~50 MB later, out of L2. At 16k level (0.404 / 0.409 against 0.410; that
      sweep fits L2), at 4k 1–1.5% slower, and on 16×2048 before the fused pass level.
    """
    if interpret:
        return LaunchConfig(max(16, min(32, triton.next_power_of_2(v_dim))), 4, 1, 4, 4)
    block_v = 64
    tiles = num_v_heads * triton.cdiv(v_dim, block_v)
    slots = _PROGRAMS_PER_SM * _SM_COUNT_HINT
    segments = max(1, slots // tiles)
    seg_chunks = max(4, triton.cdiv(triton.cdiv(num_tokens, CHUNK), segments))
    from stampgen.kernels.gdn import chunk_gluon  # imported here: where Gluon applies

    gluon = chunk_gluon.programs(num_v_heads, v_dim, num_seqs) < _SM_COUNT_HINT
    windowed = captured and gluon and num_seqs == 1 and num_tokens >= WINDOWED_TOKENS
    return LaunchConfig(
        block_v, 4, 2, 4, seg_chunks, intra_maxnreg=128, segment_maxnreg=168,
        gluon_state=gluon, gluon_pdl=gluon, gluon_intra=True,
        gluon_batch=not gluon, gluon_fused=not gluon, gluon_fused_tbeta="intra" if gluon else "worker",
        gluon_window_first=16 if windowed else 0,
        gluon_p_from_intra=gluon, gluon_intra_heads_inner=gluon and num_tokens >= HEADS_INNER_TOKENS,
    )  # fmt: skip
