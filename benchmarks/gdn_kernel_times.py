"""Each GPU kernel of one eager prefill call, for several batch shapes: how a launch's time grows with its
programs (CUPTI through ``torch.profiler``, on a CUDA GPU).

    python3 benchmarks/gdn_kernel_times.py [--cases 2x2048,4x2048,16x2048] [--variations JSON] [--out DIR]

A case is ``NxL`` (N sequences of L tokens) or a name of ``gdn_prefill_probe.CASES``. For each case and
configuration (the default, then each override in ``--variations``) it prints every kernel's length in µs
on the GPU, in start order; the host's gaps between launches do not count, so the lengths are what a
CUDA graph would replay. Its question: whether a launch's step slows as more of its programs run at once
(the batch state pass's programs share the DRAM bandwidth) — the per-step time of a launch whose programs
run in one wave is its length over its chunks a program.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.gdn_prefill_probe import CASES, make_case, with_config  # noqa: E402
from benchmarks.gdn_windows_timeline import kernels_of_one_call  # noqa: E402
from benchmarks.launch_overrides import parse_variations  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402


def seqlens_of(case: str) -> list[int]:
    """``NxL`` as N lengths of L (both positive), or a named case of ``gdn_prefill_probe`` (a
    ``ValueError`` naming what is wrong)."""
    if case in CASES:
        return CASES[case]
    n, sep, length = case.partition("x")
    if not sep or not n.isdigit() or not length.isdigit() or int(n) == 0 or int(length) == 0:
        raise ValueError(f"{case!r} is not NxL (e.g. 4x2048) nor one of {', '.join(CASES)}")
    return [int(length)] * int(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="2x2048,4x2048,8x2048,16x2048")
    parser.add_argument("--variations", default="[]", help="JSON list of LaunchConfig overrides")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    # every case and variation checked before anything runs
    try:
        lengths = {case: seqlens_of(case) for case in cases}
    except ValueError as err:
        parser.error(f"--cases: {err}")
    if not cases:
        parser.error("--cases: none given")
    try:
        variations = parse_variations(args.variations)
    except ValueError as err:
        parser.error(f"--variations: {err}")
    out_dir(parser, args.out, needs="a CUDA GPU (CUPTI kernel times)")
    for case in cases:
        inputs = make_case(lengths[case])
        for variation in [None, *variations]:
            rows = with_config(variation, lambda inputs=inputs: kernels_of_one_call(inputs))
            span = max(r["end"] for r in rows)
            print(f"\n== {case}, {variation or 'default'}: span {span:.1f} µs")
            for r in rows:
                print(f"{r['dur']:9.1f} µs  (from {r['start']:8.1f})  {r['name']}")
            if args.out:  # each record as it is made: a run cut short keeps what it measured
                with open(os.path.join(args.out, "kernel_times.jsonl"), "a") as out:
                    out.write(json.dumps(dict(case=case, variation=variation, rows=rows)) + "\n")


if __name__ == "__main__":
    main()
