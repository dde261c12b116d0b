"""One chunked GDN prefill call for a profiler to read (Nsight Compute), after a warm-up that compiles.

    ncu --clock-control none --set full -k regex:_gdn_chunk_ --launch-skip 4 -o $OUT/prefill \
        python3 benchmarks/gdn_prefill_profile.py --case T=16384

The warm-up call launches the same kernels as the profiled one (up to four: intra, segment, carry,
state), so ``--launch-skip`` with that count skips it. Inputs are the probe's (``gdn_prefill_probe.py``:
Qwen3-Next shapes, bf16 q/k/v). ``--against F`` profiles another copy of ``chunk.py`` instead;
``--config JSON`` pins ``LaunchConfig`` fields for both calls, e.g. ``'{"gluon_fused_tbeta": "worker"}'``
to profile the fused pass's worker making Tβ.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.code_copies import load_copy  # noqa: E402
from benchmarks.gdn_prefill_probe import CASES, HV, V, make_case, with_config  # noqa: E402
from benchmarks.launch_overrides import parse_config  # noqa: E402
from benchmarks.out_folder import require_gpu  # noqa: E402
from stampgen.kernels.gdn import chunk  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="T=16384", choices=sorted(CASES))
    parser.add_argument("--against", help="another copy of kernels/gdn/chunk.py to profile instead")
    parser.add_argument("--config", help='LaunchConfig fields pinned, e.g. {"gluon_fused_tbeta": "worker"}')
    args = parser.parse_args()
    try:  # checked before anything runs
        config = parse_config(args.config)
    except ValueError as err:
        parser.error(f"--config: {err}")
    if config and args.against:
        parser.error("--config pins this tree's launch_config; a copy given by --against takes its own")
    module = load_copy(parser, "--against", args.against) if args.against else chunk
    require_gpu(parser)
    inputs = make_case(CASES[args.case])
    for _ in range(2):  # warm-up (compiles), then the call the profiler is told to keep
        with_config(config, lambda: module.prefill(**inputs))
    torch.cuda.synchronize()
    shown = with_config(
        config, lambda: module.launch_config(inputs["q"].shape[0], len(CASES[args.case]), HV, V)
    )
    print(f"{args.case}: {shown}")


if __name__ == "__main__":
    main()
