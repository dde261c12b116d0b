"""Time the KDA / lightning decode (``kernels/chunked/recurrent.py``) at pinned V tiles against the copy
bandwidth measured in the same run, with ``gdn_bench.py``'s cases, inputs and timing.

    python3 benchmarks/recurrent_tile_probe.py --op kda|lightning [--tiles 4,8,16,32] [--out DIR]

For each tile it pins ``recurrent_tile`` (the automatic choice, which ``auto`` keeps) and runs the
harness's decode rows for our kernel alone; the records (``gdn_bench.py``'s rows plus ``tile``) go to
``DIR/<op>_tile_probe.jsonl`` and a summary table is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
import stampgen.kernels._validation as validation  # noqa: E402
from benchmarks import gdn_bench  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from stampgen.kernels.chunked import recurrent  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=["kda", "lightning"], required=True)
    parser.add_argument("--tiles", default="auto,4,8,16,32")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = parser.parse_args()
    bad = [t for t in args.tiles.split(",") if t != "auto" and not (t.isdigit() and int(t) > 0)]
    if bad:
        parser.error(f"--tiles: {', '.join(bad)} is not auto or a positive tile width")
    # (once every other argument holds: no folder for a refused run)
    out_dir(parser, args.out, needs="a CUDA GPU")
    gdn_bench.configure(args.op)
    validation.CHECK_VALUES = False
    auto = recurrent.recurrent_tile
    records = []
    with tempfile.TemporaryDirectory() as tmp, open(args.out / f"{args.op}_tile_probe.jsonl", "w") as out:
        R = gdn_bench.Recorder(Path(tmp), budget_s=1e9, name="probe")
        copy_gbps = gdn_bench.copy_bandwidth(R)
        for tile in args.tiles.split(","):
            recurrent.recurrent_tile = auto if tile == "auto" else (lambda *a, _bv=int(tile), **k: _bv)
            for B in gdn_bench.DECODE_BS:
                first = len(R.rows)
                gdn_bench.run_case(R, "decode", f"B={B}", B, None, ["ours"], {"ours": None}, copy_gbps)
                for row in R.rows[first:]:
                    row["tile"] = tile
                    records.append(row)
                    out.write(json.dumps(row, default=str) + "\n")
        recurrent.recurrent_tile = auto
    print(f"\n{args.op} decode, copy {copy_gbps:.0f} GB/s")
    print(f"{'tile':>5s} {'case':>7s} {'us':>9s} {'% copy':>7s}")
    for row in records:
        print(
            f"{row['tile']:>5s} {row['case']:>7s} {row.get('us', float('nan')):9.1f} {row.get('pct_copy', float('nan')):7.1f}"
        )


if __name__ == "__main__":
    main()
