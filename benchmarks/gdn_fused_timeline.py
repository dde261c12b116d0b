"""When each program of the fused state pass (``kernels/gdn/chunk_gluon_fused.py``) starts and ends each of
its items, on both sides, for batch shapes: where the time between items goes (an sm_90 GPU).

    python3 benchmarks/gdn_fused_timeline.py [--cases 16x2048,4x8192] [--out DIR]

A case is ``NxL`` or a name of ``gdn_prefill_probe.CASES``. Each runs one eager prefill (after one to
compile) with the pass built to stamp the global timer (``STAMPS``: its state warpgroups and its
worker at every item's start and end, the state warpgroups also at their first step's products issued,
the ends of their first and last steps and their last rows stored; the stamped build spills, so its steps
run slower than the plain one's: on 12-06 its pass took 506 µs on 16×2048 against 474.5) and prints, over
all programs: the pass's span, the worker's and the state warpgroups' time an item and a chunk, the gaps
between one item's end and the next one's start on each side (persistent programs; a program an item
shows none), and the state warpgroups' item in parts (``STATE_PARTS``: the initial state's arrival, the
first step, a step, the last rows' store, the pool row).
Its question: where a persistent program's items cost more than their chunks (16×2048 runs the same 128
chunk steps an SM as 4×8192 and takes ~25 µs longer; on 12-06 the gaps between items were small and
each item took 6–15 µs more than its chunks at 4×8192's rate). ``--out`` keeps each program's rows
(``timeline.jsonl``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.gdn_bench import HV, V  # noqa: E402
from benchmarks.gdn_kernel_times import seqlens_of  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from stampgen.kernels.gdn import chunk, chunk_gluon_fused  # noqa: E402

# The stamp buffer's fields (``chunk_gluon_fused._stamp``), each a (ns, value) pair
STATE_START, STATE_END, WORKER_START, WORKER_END, SM, STATE_FIRST, STATE_LAST, STATE_LOADED, STATE_STORED = (
    field.value
    for field in (
        chunk_gluon_fused.STAMP_STATE_START,
        chunk_gluon_fused.STAMP_STATE_END,
        chunk_gluon_fused.STAMP_WORKER_START,
        chunk_gluon_fused.STAMP_WORKER_END,
        chunk_gluon_fused.STAMP_SM,
        chunk_gluon_fused.STAMP_STATE_FIRST,
        chunk_gluon_fused.STAMP_STATE_LAST,
        chunk_gluon_fused.STAMP_STATE_LOADED,
        chunk_gluon_fused.STAMP_STATE_STORED,
    )
)


def programs(stamps) -> list[dict]:
    """Each program's items from the pass's stamp buffer ([programs, items, STAMP_FIELDS, 2], -1 where
    unwritten): its SM and, per item, the item index, the state warpgroups' and the worker's start and
    end (ns), the state warpgroups' steps (ns: their first step's products issued, their first and last
    steps' ends, their last rows stored) and the chunks the item ran."""
    rows = []
    for pid, program in enumerate(stamps.tolist()):
        items = []
        done = 0  # the program's chunks before the item
        for item in program:
            if item[STATE_START][0] < 0 or item[WORKER_END][0] < 0:
                break
            chunks = item[STATE_END][1] - done
            done = item[STATE_END][1]
            items.append(
                dict(
                    item=item[STATE_START][1],
                    state=(item[STATE_START][0], item[STATE_END][0]),
                    worker=(item[WORKER_START][0], item[WORKER_END][0]),
                    # on the state warpgroups (-1: no chunk): the first step's products issued, the
                    # ends of the first and last steps, the last rows stored
                    steps=(
                        item[STATE_LOADED][0],
                        item[STATE_FIRST][0],
                        item[STATE_LAST][0],
                        item[STATE_STORED][0],
                    ),
                    chunks=chunks,
                )
            )
        if items:
            rows.append(dict(program=pid, sm=program[0][SM][0], items=items))
    return rows


def summary(rows: list[dict]) -> dict:
    """The span (µs), the medians over items that ran a chunk (a padding item runs none) of each side's
    time an item and a chunk (µs), and each side's gaps between an item's end and the next one's start
    (µs: median, max; none for one item a program); and, over items of two chunks or more, the state
    warpgroups' item in parts (µs, medians, ``STATE_PARTS``) — where an item's fixed cost goes."""
    if not any(item["chunks"] for row in rows for item in row["items"]):
        raise ValueError("the pass stamped no item that ran a chunk: nothing to summarise")
    t0 = min(item["state"][0] for row in rows for item in row["items"])
    t1 = max(max(item["state"][1], item["worker"][1]) for row in rows for item in row["items"])
    out = dict(programs=len(rows), items=sum(len(row["items"]) for row in rows), span_us=(t1 - t0) / 1e3)
    for side in ("state", "worker"):
        spans = [(item[side][1] - item[side][0], item["chunks"]) for row in rows for item in row["items"]]
        out[f"{side}_item_us"] = statistics.median(ns for ns, c in spans if c > 0) / 1e3
        out[f"{side}_chunk_us"] = statistics.median(ns / c for ns, c in spans if c > 0) / 1e3
        gaps = [
            (b[side][0] - a[side][1]) / 1e3 for row in rows for a, b in zip(row["items"], row["items"][1:])
        ]
        out[f"{side}_gap_us"] = (statistics.median(gaps), max(gaps)) if gaps else None
    long = [item for row in rows for item in row["items"] if item["chunks"] >= 2]
    out["state_parts_us"] = (
        [statistics.median(part(item) for item in long) / 1e3 for _, part in STATE_PARTS] if long else None
    )
    return out


# An item's parts on the state warpgroups (``summary``), as (what, ns of an item of two chunks or more)
STATE_PARTS = (
    (
        "start to the first step's products issued (its initial state in)",
        lambda i: i["steps"][0] - i["state"][0],
    ),
    ("to the first step's end", lambda i: i["steps"][1] - i["steps"][0]),
    ("a step after that", lambda i: (i["steps"][2] - i["steps"][1]) / (i["chunks"] - 1)),
    ("the last step's end to the last rows stored", lambda i: i["steps"][3] - i["steps"][2]),
    ("to the end (the pool row)", lambda i: i["state"][1] - i["steps"][3]),
)


def stamped_call(inputs: dict):
    """The stamp buffer of one eager prefill on ``inputs`` with the fused pass built with ``STAMPS``
    (after one call that compiles that build), sized by the pass (``launch_state``'s ``stamps``); None if
    the fused pass did not run."""
    import torch

    buffers = []

    def buffer(n_programs: int, items: int) -> torch.Tensor:
        shape = (n_programs, items, chunk_gluon_fused.STAMP_FIELDS.value, 2)
        buffers.append(torch.full(shape, -1, dtype=torch.int64, device="cuda"))
        return buffers[-1]

    plain = chunk_gluon_fused.launch_state
    chunk_gluon_fused.launch_state = functools.partial(plain, stamps=buffer)
    try:
        for _ in range(2):
            chunk.prefill(**(inputs | dict(state_pool=inputs["state_pool"].clone())))
        torch.cuda.synchronize()
    finally:
        chunk_gluon_fused.launch_state = plain
    return buffers[-1] if buffers else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="16x2048,4x8192")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    if not cases:
        parser.error("--cases: none given")
    try:
        lengths = {case: seqlens_of(case) for case in cases}
    except ValueError as err:
        parser.error(f"--cases: {err}")
    # (the eager call's own choice: one sequence takes chunk_gluon, not the fused pass)
    unfused = [
        case
        for case, seqlens in lengths.items()
        if not chunk.launch_config(sum(seqlens), len(seqlens), HV, V, interpret=False).gluon_fused
    ]
    if unfused:
        parser.error(f"--cases: {', '.join(unfused)} do not run the fused pass (a batch does)")
    out_dir(parser, args.out, needs="an sm_90 GPU (the fused pass is Gluon for sm_90)", sm90=True)

    from benchmarks.gdn_prefill_probe import make_case

    for case in cases:
        stamps = stamped_call(make_case(lengths[case]))
        rows = [] if stamps is None else programs(stamps.cpu())
        try:  # (none: its supported() refused the inputs, not bf16 on sm_90)
            s = summary(rows)
        except ValueError as err:
            sys.exit(f"{case}: {err}")
        print(
            f"{case}: {s['programs']} programs, {s['items']} items, span {s['span_us']:.1f} µs; "
            f"an item: worker {s['worker_item_us']:.1f} µs ({s['worker_chunk_us']:.2f} a chunk), "
            f"state {s['state_item_us']:.1f} µs ({s['state_chunk_us']:.2f} a chunk)"
        )
        for side in ("worker", "state"):
            gap = s[f"{side}_gap_us"]
            if gap:
                print(f"    {side} between items: median {gap[0]:.2f} µs, max {gap[1]:.2f} µs")
        if s["state_parts_us"]:
            print(
                "    state in an item: "
                + ", ".join(f"{what} {us:.2f} µs" for (what, _), us in zip(STATE_PARTS, s["state_parts_us"]))
            )
        if args.out:
            with open(os.path.join(args.out, "timeline.jsonl"), "a") as out:
                out.write(json.dumps(dict(case=case, summary=s, programs=rows)) + "\n")


if __name__ == "__main__":
    main()
