"""Time copies of the Gluon intra launch (``kernels/gdn/chunk_intra_gluon.py``) against this tree's, on a CUDA
GPU, under CUDA graphs: the launch alone and the whole prefill with it.

    python3 benchmarks/gdn_intra_probe.py --variants NAME=FILE[,NAME=FILE...] [--cases 16x2048,T=16384] [--out DIR]

Each FILE is a copy of ``chunk_intra_gluon.py`` (placed in the tree, so it travels to the device) loaded
as a module of its own; the prefill takes it through ``chunk_intra_gluon.launch``, which the intra
launcher looks up at each call. Per case and variant it prints (and appends to ``DIR/intra_probe.jsonl``)
the launch's and the prefill's ms (``gdn_prefill_probe``'s inputs and timing: Qwen3-Next shapes, bf16) and
the largest difference of Tβ, of the gate sums and of the prefill's output and final states from this
tree's launch on the same inputs (the same math should give 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.gdn_bench import rel  # noqa: E402
from benchmarks.gdn_prefill_probe import CASES, _load_module, calls_ms, make_case  # noqa: E402
from stampgen.kernels.gdn import chunk, chunk_intra, chunk_intra_gluon  # noqa: E402


def measure(inputs: dict, launch) -> dict:
    """Tβ, gate sums, prefill output and final states with ``launch`` as the intra launch, and the ms of
    the launch alone and of the prefill."""
    k, g = inputs["k"], inputs["g"]
    T, HV = g.shape
    args = (k, g, inputs["beta"], inputs["state_indices"], inputs["cu_seqlens"])
    tbeta, gates = (x.fill_(float("nan")) for x in chunk_intra._intra_outputs(k, T, HV))
    own = chunk_intra_gluon.launch
    chunk_intra_gluon.launch = launch
    try:
        launch(*args, tbeta, gates)
        pool = inputs["state_pool"].clone()
        o = chunk.prefill(**(inputs | dict(state_pool=pool)))
        timed = dict(state_pool=inputs["state_pool"].clone())  # timing updates a pool of its own
        row = dict(
            intra_ms=calls_ms(lambda: launch(*args, tbeta, gates)),
            prefill_ms=calls_ms(lambda: chunk.prefill(**(inputs | timed))),
        )
    finally:
        chunk_intra_gluon.launch = own
    return row | dict(outputs=(tbeta, gates, o, pool))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", required=True, help="NAME=FILE,... copies of chunk_intra_gluon.py")
    parser.add_argument("--cases", default="16x2048,T=16384,T=65536")
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder for intra_probe.jsonl")
    args = parser.parse_args()
    unknown = sorted(set(args.cases.split(",")) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    variants = {}
    for item in args.variants.split(","):
        name, _, path = item.partition("=")
        if not name or not os.path.isfile(path):
            parser.error(f"--variants: expected NAME=FILE with an existing FILE, got {item!r}")
        try:
            variants[name] = _load_module(path).launch
        except Exception as err:  # a copy that does not import: say which, without a traceback
            parser.error(f"--variants {item}: {type(err).__name__}: {err}")
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        parser.error("needs an sm_90 GPU (H100 / H200): the Gluon intra launch is written for it")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    out = open(os.path.join(args.out, "intra_probe.jsonl"), "a") if args.out else None
    try:
        _run_cases(args.cases.split(","), variants, out)
    finally:
        if out:
            out.close()


def _run_cases(cases: list[str], variants: dict, out) -> None:
    """Each case with the tree's launch, then with each variant; a row a variant, printed and appended
    to ``out`` (if any) as it is measured."""
    for case in cases:
        inputs = make_case(CASES[case])
        base = measure(inputs, chunk_intra_gluon.launch)
        ref = base.pop("outputs")
        for name, launch in [("tree", None), *variants.items()]:
            try:
                row = base if launch is None else measure(inputs, launch)
                row |= _differences(row.pop("outputs", ref), ref)
            except Exception as err:  # a copy that does not compile or launch is a result too
                row = dict(error=f"{type(err).__name__}: {err}"[:300])
            row = dict(case=case, variant=name) | row
            print(json.dumps(row), flush=True)
            if out:
                out.write(json.dumps(row) + "\n")
                out.flush()


def _differences(got: tuple, ref: tuple) -> dict:
    """How far a run's (Tβ, gate sums, output, final states) are from this tree's (an unwritten NaN: inf)."""

    def max_diff(x, y):
        return float((x.float() - y.float()).nan_to_num(float("inf")).abs().max())

    return dict(
        tbeta_max_diff=max_diff(got[0], ref[0]),
        gates_max_diff=max_diff(got[1], ref[1]),
        o_rel=rel(got[2], ref[2]),
        state_rel=rel(got[3], ref[3]),
    )


if __name__ == "__main__":
    main()
