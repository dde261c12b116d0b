"""Where one long sequence's eager prefill spends its time: the kernels of one call on a timeline, read from
CUPTI through ``torch.profiler``, on a CUDA GPU.

    python3 benchmarks/gdn_windows_timeline.py [--tokens 65536] [--variations JSON] [--times] [--out DIR]

For each configuration (the default, then each override in ``--variations``, as ``gdn_prefill_probe.py``
takes them) it prints every kernel of one eager call — which launch, its stream, start, end and length
in µs from the call's first kernel — and a summary: how long the intra launches run alone, the state
passes alone and both at once, and each window's state pass in µs a chunk (a pass that runs alone
measures the chain without the intra launch beside it). The profiled call runs the windows a captured
call would have, pinned (``gluon_window_first``; by default an eager call has none). ``--times`` adds what one
call of the configuration as given takes eagerly (to its end on the GPU), its host part (until it
returns) and one call in a CUDA-graph replay, without the profiler. ``--out`` writes the rows as JSON lines.

What it showed (benchmarks/RESULTS.md, 2026-12-06 05:54, H100, 64k tokens): called eagerly, with the
profiler on, the GPU waits for the host between launches (~0.3–0.4 ms from one window's launches to the
next), so the windows do not overlap at all there and the call spans ~7.9 ms where its CUDA-graph replay
takes ~1.5; the state pass alone runs ~1.1 µs a chunk on long windows and up to ~1.5 on the first,
short ones. It profiles eager calls only, so the overlap the windows get under CUDA graphs (as the
benchmarks time them) is not what it shows. Without the profiler (06:07, H100, the same steps as ``--times``
in an inline script): eagerly 4.341 / 2.187 / 0.379 ms a call at 64k / 16k / 4k tokens, its host part
3.302 / 2.155 / 0.304, against 1.520 / 0.410 / 0.110 in a graph — an eager call in windows is the
host's Python (the Triton launcher's argument binding, the TMA descriptors made for each window's
slices), not the GPU. Since then an eager call runs unwindowed (``launch_config``'s ``captured``):
``--times`` at 07:10 on an H100, 0.601 / 1.796 ms eagerly at 16k / 64k.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.gdn_prefill_probe import HV, V, calls_ms, make_case, with_config  # noqa: E402
from benchmarks.launch_overrides import parse_variations  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from stampgen.kernels.gdn import chunk  # noqa: E402

WARMUP = 2


def _kind(name: str) -> str:
    """Which launch a kernel is, from its name."""
    for key, kind in (("intra", "intra"), ("state", "state")):
        if key in name:
            return kind
    return "other"


def _pool_kept(fn):
    """``fn(inputs)`` with ``inputs``' state pool as it was before: every prefill call updates it in place,
    and the next configuration must start from the same states."""

    @functools.wraps(fn)
    def kept(inputs: dict, *args, **kwargs):
        pool0 = inputs["state_pool"].clone()
        try:
            return fn(inputs, *args, **kwargs)
        finally:
            inputs["state_pool"].copy_(pool0)

    return kept


@_pool_kept
def kernels_of_one_call(inputs: dict) -> list[dict]:
    """The GPU kernels of one eager ``chunk.prefill`` call (after ``WARMUP`` calls), in start order,
    times in µs from the first one's start; the state pool as it was."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(WARMUP):
        chunk.prefill(**inputs)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        chunk.prefill(**inputs)
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    rows = [
        dict(
            kind=_kind(e["name"]),
            name=e["name"][:60],
            stream=e["args"].get("stream"),
            start=e["ts"],
            dur=e["dur"],
        )
        for e in events
        if e.get("cat") == "kernel"
    ]
    if not rows:
        raise SystemExit("the profiler saw no kernels (CUPTI unavailable here?)")
    rows.sort(key=lambda r: r["start"])
    t0 = rows[0]["start"]
    for r in rows:
        r["start"] -= t0
        r["end"] = r["start"] + r["dur"]
    return rows


@_pool_kept
def eager_and_graph_ms(inputs: dict, repeats: int = 10) -> dict:
    """Median ms of one eager call to its end on the GPU, of its host part alone (the call returning,
    its kernels maybe still queued), and of one call in a CUDA-graph replay (``gdn_prefill_probe``'s
    measure); the state pool as it was."""
    for _ in range(WARMUP):
        chunk.prefill(**inputs)
    whole, host = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        chunk.prefill(**inputs)
        host.append(time.perf_counter() - t0)
        torch.cuda.synchronize()
        whole.append(time.perf_counter() - t0)
    return dict(
        eager=_median_ms(whole), host=_median_ms(host), graph=calls_ms(lambda: chunk.prefill(**inputs))
    )


def _median_ms(seconds: list[float]) -> float:
    return sorted(seconds)[len(seconds) // 2] * 1e3


def overlap_summary(rows: list[dict]) -> dict:
    """µs with only intra launches running, only state passes, both, and the whole call's span."""
    points = sorted({r["start"] for r in rows} | {r["end"] for r in rows})
    alone = {"intra": 0.0, "state": 0.0, "both": 0.0}
    for a, b in zip(points, points[1:]):
        mid = (a + b) / 2
        active = {r["kind"] for r in rows if r["start"] <= mid < r["end"]}
        if {"intra", "state"} <= active:
            alone["both"] += b - a
        elif "intra" in active:
            alone["intra"] += b - a
        elif "state" in active:
            alone["state"] += b - a
    return alone | {"span": max(r["end"] for r in rows) - min(r["start"] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=65536)
    parser.add_argument("--variations", default="[]", help="JSON list of LaunchConfig overrides")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    parser.add_argument(
        "--times",
        action="store_true",
        help="also time each configuration eagerly, its host part, and in a graph",
    )
    args = parser.parse_args()
    try:  # checked before anything runs
        variations = parse_variations(args.variations)
    except ValueError as err:
        parser.error(f"--variations: {err}")
    if args.tokens < 1:
        parser.error(f"--tokens must be a positive number of tokens, got {args.tokens}")
    out_dir(parser, args.out, needs="a CUDA GPU (CUPTI kernel times)")
    inputs = make_case([args.tokens])
    for variation in [None, *variations]:
        # the windows a captured call would have, pinned so that the eager call runs them too (by
        # default an eager call has none)
        cfg = with_config(variation, lambda: chunk.launch_config(args.tokens, 1, HV, V, captured=True))
        windowed = dict(variation or {}, gluon_window_first=cfg.gluon_window_first)
        rows = with_config(windowed, lambda: kernels_of_one_call(inputs))
        bounds = chunk.windows(args.tokens, 1, cfg)
        print(
            f"\n== {variation or 'default'}: windows (chunks) {[(b - a) // chunk.CHUNK for a, b in bounds]}"
        )
        print(f"{'kind':6s} {'stream':>6s} {'start':>9s} {'end':>9s} {'dur':>8s}  name")
        for r in rows:
            print(
                f"{r['kind']:6s} {r['stream']!s:>6s} {r['start']:9.1f} {r['end']:9.1f} {r['dur']:8.1f}  {r['name']}"
            )
        summary = overlap_summary(rows)
        states = [r for r in rows if r["kind"] == "state"]
        per_chunk = [
            round(r["dur"] / ((b - a) // chunk.CHUNK), 3) for r, (a, b) in zip(states, bounds) if b - a >= 64
        ]
        print(
            f"span {summary['span']:.1f} µs: intra alone {summary['intra']:.1f}, state alone "
            f"{summary['state']:.1f}, both {summary['both']:.1f}; state µs a chunk by window {per_chunk}"
        )
        record = dict(variation=variation, rows=rows, summary=summary, per_chunk=per_chunk)
        if args.times:
            record["ms"] = with_config(variation, lambda: eager_and_graph_ms(inputs))
            print(
                "ms a call: eager {eager:.3f}, its host part {host:.3f}, in a CUDA graph {graph:.4f}".format(
                    **record["ms"]
                )
            )
        if args.out:  # each record as it is made: a run cut short keeps what it measured
            with open(os.path.join(args.out, "timeline.jsonl"), "a") as out:
                out.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
