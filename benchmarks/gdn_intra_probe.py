"""Time copies of the Gluon intra launch (``kernels/gdn/chunk_intra_gluon.py``) or of the fused state pass
(``kernels/gdn/chunk_gluon_fused.py``) against this tree's, on a CUDA GPU, under CUDA graphs: the intra
launch alone and the whole prefill with the copy.

    python3 benchmarks/gdn_intra_probe.py --variants NAME=FILE[,NAME=FILE...] [--config JSON] [--cases 16x2048,T=16384] [--rounds N] [--out DIR]

Each FILE is a copy of one of those modules (placed in the tree, so it travels to the device) loaded as a
module of its own: a copy that defines ``launch_state`` stands for the fused pass, one that defines
``launch`` for the intra launch, and the prefill takes it through that module attribute, which its caller
looks up at each call (a fused copy's imports of the intra launch's helpers are this tree's). ``--config``
pins ``LaunchConfig`` fields for every run, this tree's too, e.g. ``'{"gluon_fused_tbeta": "worker"}'``
to time the fused worker making Tβ. Per case and variant it prints (and appends to
``DIR/intra_probe.jsonl``) the intra launch's and the prefill's ms (``gdn_prefill_probe``'s inputs and
timing: Qwen3-Next shapes, bf16) and the largest difference of Tβ, of the gate sums and of the prefill's
output and final states from this tree's on the same inputs (the same math should give 0). ``--rounds N``
runs the tree and every variant in turn N times a case (a row each, numbered by ``round``), so that a
difference of a few percent can be told from the order they ran in. At the end it prints a summary: per
case and variant the mean prefill ms over its rounds, its ratio to the tree's, and whether every round's
output and final states equal the tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.code_copies import load_copy, named_copies  # noqa: E402
from benchmarks.gdn_bench import rel  # noqa: E402
from benchmarks.gdn_prefill_probe import CASES, calls_ms, make_case, with_config  # noqa: E402
from benchmarks.launch_overrides import parse_config  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from stampgen.kernels.gdn import chunk, chunk_gluon_fused, chunk_intra, chunk_intra_gluon  # noqa: E402

# What a copy stands for, by the function it defines: (that function's name, this tree's module holding it)
_ROLES = (("launch_state", chunk_gluon_fused), ("launch", chunk_intra_gluon))


def measure(inputs: dict, swap: tuple | None = None, config: dict | None = None) -> dict:
    """Tβ, gate sums, prefill output and final states with ``swap`` = (this tree's module, the name of
    the function in it, a copy's function) in place (None: this tree's modules) and ``config`` pinned,
    and the ms of the intra launch alone and of the prefill."""
    k, g = inputs["k"], inputs["g"]
    T, HV = g.shape
    args = (k, g, inputs["beta"], inputs["state_indices"], inputs["cu_seqlens"])
    tbeta, gates = (x.fill_(float("nan")) for x in chunk_intra._intra_outputs(k, T, HV))
    module, name, function = swap or (chunk_intra_gluon, "launch", chunk_intra_gluon.launch)
    own = getattr(module, name)
    setattr(module, name, function)
    try:
        launch = chunk_intra_gluon.launch
        launch(*args, tbeta, gates)
        pool = inputs["state_pool"].clone()
        o = with_config(config, lambda: chunk.prefill(**(inputs | dict(state_pool=pool))))
        timed = dict(state_pool=inputs["state_pool"].clone())  # timing updates a pool of its own
        row = dict(
            intra_ms=calls_ms(lambda: launch(*args, tbeta, gates)),
            prefill_ms=with_config(config, lambda: calls_ms(lambda: chunk.prefill(**(inputs | timed)))),
        )
    finally:
        setattr(module, name, own)
    return row | dict(outputs=(tbeta, gates, o, pool))


def _swap(copy) -> tuple | None:
    """(this tree's module, the function's name, the copy's function) for a loaded copy: the first of
    ``_ROLES`` it defines; None if it defines neither."""
    return next(((module, name, getattr(copy, name)) for name, module in _ROLES if hasattr(copy, name)), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--variants",
        required=True,
        help="NAME=FILE,... copies of chunk_intra_gluon.py or chunk_gluon_fused.py",
    )
    parser.add_argument(
        "--config", help='LaunchConfig fields pinned for every run, e.g. {"gluon_fused_tbeta": "worker"}'
    )
    parser.add_argument("--cases", default="16x2048,T=16384,T=65536")
    parser.add_argument(
        "--rounds", type=int, default=1, help="times a case runs the tree and every variant, in turn"
    )
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder for intra_probe.jsonl")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error(f"--rounds must be 1 or more, not {args.rounds}")
    unknown = sorted(set(args.cases.split(",")) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    try:
        config = parse_config(args.config)
    except ValueError as err:
        parser.error(f"--config: {err}")
    variants = {}
    for name, path in named_copies(parser, "--variants", args.variants).items():
        variants[name] = _swap(load_copy(parser, "--variants", path))
        if variants[name] is None:
            parser.error(
                f"--variants {name}={path}: neither a copy of chunk_intra_gluon.py (launch) nor of chunk_gluon_fused.py"
                " (launch_state)"
            )
    out_dir(
        parser,
        args.out,
        needs="an sm_90 GPU (H100 / H200): the Gluon intra launch is written for it",
        sm90=True,
    )
    out = open(os.path.join(args.out, "intra_probe.jsonl"), "a") if args.out else None
    try:
        rows = _run_cases(args.cases.split(","), variants, config, out, args.rounds)
    finally:
        if out:
            out.close()
    print("\n".join(summary(rows)))


def _run_cases(cases: list[str], variants: dict, config: dict | None, out, rounds: int = 1) -> list[dict]:
    """Each case with this tree's modules, then with each variant, ``rounds`` times in turn; a row a
    variant and round, printed and appended to ``out`` (if any) as it is measured, its differences from
    the tree's first run. Where this tree's own run fails (a ``--config`` its kernels refuse), that
    case's one row says so. Returns the rows."""
    rows: list[dict] = []
    for case in cases:
        inputs = make_case(CASES[case])
        head = dict(case=case, variant="tree", config=config or {})
        try:
            base = measure(inputs, None, config)
        except Exception as err:
            rows.append(_emit(head | _error(err), out))
            continue
        ref = base.pop("outputs")
        for r in range(1, rounds + 1):
            for name, swap in [("tree", None), *variants.items()]:
                try:
                    row = base if swap is None and r == 1 else measure(inputs, swap, config)
                    row |= _differences(row.pop("outputs", ref), ref)
                except Exception as err:  # a copy that does not compile or launch is a result too
                    row = _error(err)
                rows.append(_emit(head | dict(variant=name, round=r) | row, out))
    return rows


def _error(err: Exception) -> dict:
    return dict(error=f"{type(err).__name__}: {err}"[:300])


def _emit(row: dict, out) -> dict:
    """One row, printed and appended to ``out`` (if any) as soon as it is measured; returned."""
    print(json.dumps(row), flush=True)
    if out:
        out.write(json.dumps(row) + "\n")
        out.flush()
    return row


def summary(rows: list[dict]) -> list[str]:
    """A line per case and variant, in the order they first ran: the mean prefill ms over its rounds, its
    ratio to the tree's mean on that case, and ``same`` where every round's output and final states equal
    the tree's first run (``differs`` otherwise); a variant with a failed round gives that round's error."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        runs.setdefault((row["case"], row["variant"]), []).append(row)
    lines = []
    for (case, variant), its in runs.items():
        failed = next((row["error"] for row in its if "error" in row), None)
        if failed is not None:
            lines.append(f"{case:10s} {variant:16s} error: {failed}")
            continue
        ms = sum(row["prefill_ms"] for row in its) / len(its)
        tree = runs.get((case, "tree"), [])
        tree_ms = [row["prefill_ms"] for row in tree if "error" not in row]
        ratio = f"{ms / (sum(tree_ms) / len(tree_ms)):.3f}" if tree_ms else "—"
        same = all(row["o_rel"] == 0 and row["state_rel"] == 0 for row in its)
        lines.append(
            f"{case:10s} {variant:16s} {ms:.4f} ms ({len(its)} round{'s' if len(its) > 1 else ''})  {ratio} of the tree  "
            + ("same" if same else "differs")
        )
    return lines


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
