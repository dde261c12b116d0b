"""Precision of our chunked GDN prefill on hard inputs, per launch path, beside fla, against fp64.

    python3 benchmarks/gdn_precision.py [--cases A,B] [--dtypes fp16,bf16] [--against NAME=FILE,...]
                                        [--jobs N] [--out DIR]
    python3 benchmarks/gdn_precision.py --dry-run --out /tmp/dry     # the plumbing on a CPU, tiny shapes

For each case of ``CASES`` (families of ``tests/kernels/gdn_inputs.make_precision_inputs``: correlated
and normal keys, no decay, Qwen3-Next's gate and strong decay, zero and random initial states, long
sequences, scales 0.1 to 1, K = V = 64 and 128, GQA) and each dtype, against the fp64 token recurrence
(``tests/kernels/gdn_emulation.reference_prefill``, on the GPU), the relative RMSE ‖x − ref‖ / ‖ref‖ of
the output and of the final states (the pool rows after the prefill) of:

- ``ours <path>``: our prefill with the launch path forced through ``chunk.LaunchConfig`` (``PATHS``:
  the Triton passes, the Gluon state pass, the Gluon intra launch before either; the Gluon ones only
  where they apply: sm_90, and the Gluon intra launch for bf16 alone); ``default`` names the path
  ``launch_config`` takes for the case;
- ``<NAME> <path>``: the same for another copy of ``kernels/gdn/chunk.py`` (``--against``, e.g. the code
  before a change: ``git show REV:kernels/gdn/chunk.py > ab_before.py`` at the repository root);
- ``fla``: fla-core's ``chunk_gated_delta_rule`` on the same inputs (skipped where fla does not import);

and, to find where the error enters, per stage:

- ``Tβ <intra launch>``: the intra launch's Tβ against the fp64 Tβ of the same 16-bit keys, beside the
  floor that storing the fp64 Tβ in the input dtype costs;
- ``ours <path> on exact Tβ``: the state pass(es) fed the fp64 Tβ rounded to the input dtype: what is
  left when the intra launch is perfect;
- ``emulated ...``: ``tests/kernels/gdn_emulation.emulate_prefill``'s prediction (float64, on the GPU)
  with the kernels' roundings before and after the fix, fla's, and the fix with one rounding more
  switched off at a time.

``--jobs N`` runs the (case, dtype) pairs in N worker processes (the compiles of each head geometry
dominate; the GPU work is small), which append their rows to ``DIR/precision.jsonl.part`` as they go (so
a run cut short keeps them); no pair starts after ``--budget`` seconds. Writes ``DIR/precision.jsonl`` (a row per measurement),
``DIR/precision.md`` and the workers' logs in ``DIR/precision_workers.log``, and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if "--dry-run" in sys.argv:  # the Triton interpreter must be chosen before triton is imported
    os.environ["TRITON_INTERPRET"] = "1"

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.code_copies import load_copy, named_copies  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "kernels"))
import gdn_emulation as emulation  # noqa: E402
from gdn_inputs import make_precision_inputs  # noqa: E402

from stampgen.kernels.gdn import chunk  # noqa: E402

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# Three head geometries (each compiles its own kernels): N sequences, qk heads, v heads, K = V.
G4x4 = dict(N=4, H=4, HV=4, K=128, V=128)
G2x4 = dict(N=2, H=2, HV=4, K=64, V=64)
G4x8 = dict(N=2, H=4, HV=8, K=128, V=128)
# name -> (make_precision_inputs arguments, scale). The first three are the issue's families.
CASES = {
    "corr-g0-4x1024": (dict(keys="correlated", gate="none", L=1024, **G4x4), 0.1),
    "corr-gate-gqa-2x256-k64": (dict(keys="correlated", gate="model", L=256, **G2x4), 1.0),
    "corr-gate-gqa-2x1024": (dict(keys="correlated", gate="model", L=1024, **G4x8), 0.1),
    "corr-strong-gqa-2x1024": (dict(keys="correlated", gate="strong", L=1024, **G4x8), 128**-0.5),
    "normal-g0-4x1024": (dict(keys="normal", gate="none", L=1024, **G4x4), 0.1),
    "normal-gate-gqa-2x1024": (dict(keys="normal", gate="model", L=1024, **G4x8), 128**-0.5),
    "corr-g0-init-2x4096": (dict(keys="correlated", gate="none", L=4096, initial=True, **G4x8), 0.1),
    "corr-gate-2x4096": (dict(keys="correlated", gate="model", L=4096, **G4x8), 1.0),
    "corr-gate-init-2x256-k64": (dict(keys="correlated", gate="model", L=256, initial=True, **G2x4), 0.5),
    "normal-strong-init-2x256-k64": (dict(keys="normal", gate="strong", L=256, initial=True, **G2x4), 0.125),
}
ISSUE_CASES = tuple(CASES)[:3]
# Launch paths, as LaunchConfig overrides.
PATHS = {
    "triton": dict(gluon_state=False, gluon_pdl=False, gluon_intra=False),
    "gluon-state": dict(gluon_state=True, gluon_pdl=True, gluon_intra=False),
    "gluon-intra": dict(gluon_state=False, gluon_pdl=False, gluon_intra=True),
    "gluon-both": dict(gluon_state=True, gluon_pdl=True, gluon_intra=True),
}
DRY_CASES = {"dry-corr-g0": (dict(keys="correlated", gate="none", L=128, N=2, H=1, HV=2, K=16, V=16), 0.5)}


@contextlib.contextmanager
def pinned(module, overrides: dict):
    """``module.launch_config`` with ``overrides`` applied, for the duration."""
    original = module.launch_config
    module.launch_config = lambda *args, **kwargs: original(*args, **kwargs)._replace(**overrides)
    try:
        yield
    finally:
        module.launch_config = original


def applicable_paths(inputs: dict) -> list[str]:
    """The launch paths that run as asked for on these inputs (the Gluon ones: sm_90, supported
    shapes; the Gluon intra launch: bf16 keys)."""
    if not inputs["q"].is_cuda:
        return ["triton"]
    from stampgen.kernels.gdn import chunk_gluon, chunk_intra_gluon

    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    paths = ["triton"]
    if chunk_gluon.supported(q, k, v):
        paths.append("gluon-state")
    if chunk_intra_gluon.supported(k):
        paths.append("gluon-intra")
        if chunk_gluon.supported(q, k, v):
            paths.append("gluon-both")
    return paths


def default_path(module, inputs: dict) -> str:
    """The path ``launch_config`` takes for these inputs."""
    T, HV, V = inputs["v"].shape
    cfg = module.launch_config(T, len(inputs["state_indices"]), HV, V)
    applies = applicable_paths(inputs)
    state = cfg.gluon_state and "gluon-state" in applies
    intra = cfg.gluon_intra and "gluon-intra" in applies
    return {(False, False): "triton", (True, False): "gluon-state", (False, True): "gluon-intra"}.get(
        (state, intra), "gluon-both"
    )


def _fresh(inputs: dict) -> dict:
    return {name: t.clone() for name, t in inputs.items()}


def run_prefill(module, inputs: dict, scale: float, path: str):
    """(o, final states [N, HV, V, K]) of ``module``'s prefill on ``path``."""
    run = _fresh(inputs)
    with pinned(module, PATHS[path]):
        o = module.prefill(**run, scale=scale)
    return o, run["state_pool"][run["state_indices"].long()]


def _chunks(inputs: dict):
    """Per sequence: its keys [HV, chunks, 64, K], γ and β [HV, chunks, 64] (float64; v-head order)."""
    for n in range(len(inputs["cu_seqlens"]) - 1):
        q, k, v, g, beta, length = emulation._per_head(inputs, n)
        HV, Lp = g.shape
        shape = (HV, Lp // 64, 64)
        yield k.reshape(*shape, -1), torch.cumsum(g.reshape(shape), -1), beta.reshape(shape), length


def exact_tbeta(inputs: dict) -> torch.Tensor:
    """The fp64 Tβ of every token's row, [T, HV, 64] (the intra launch's layout)."""
    rows = []
    for k, gam, beta, length in _chunks(inputs):
        t = emulation.exact_tbeta(k, gam, beta)  # [HV, chunks, 64, 64]
        rows.append(t.reshape(t.shape[0], -1, 64).transpose(0, 1)[:length])
    return torch.cat(rows)


def intra_tbeta(module, inputs: dict, path: str):
    """(Tβ, gate sums, schedule, config) of ``module``'s intra launch on ``path``."""
    T, HV, V = inputs["v"].shape
    with pinned(module, PATHS[path]):
        cfg = module.launch_config(T, len(inputs["state_indices"]), HV, V)
        tbeta, gates, schedule = module._launch_intra(
            inputs["k"], inputs["g"], inputs["beta"], inputs["state_indices"], inputs["cu_seqlens"], cfg
        )
    return tbeta, gates, schedule, cfg


def state_pass_on(inputs: dict, scale: float, path: str, tbeta: torch.Tensor):
    """(o, final states) of our state pass(es) on ``path`` fed ``tbeta`` in place of the intra launch's."""
    run = _fresh(inputs)
    q, k, v, g, beta = (run[n] for n in ("q", "k", "v", "g", "beta"))
    pool, idx, cu = run["state_pool"], run["state_indices"], run["cu_seqlens"]
    _, gates, schedule, cfg = intra_tbeta(chunk, run, path)
    o = torch.empty_like(v)
    if PATHS[path]["gluon_state"]:
        from stampgen.kernels.gdn import chunk_gluon

        chunk_gluon.launch_state(q, k, v, gates, tbeta, o, pool, idx, cu, scale)
    else:
        affine, start = chunk._launch_segments(k, gates, v, tbeta, pool, idx, schedule, cfg)
        carry = chunk._launch_carry(affine, idx, cu, q.dtype, cfg)
        chunk._launch_state(q, k, v, gates, tbeta, o, pool, idx, schedule, start, carry, scale, cfg)
    return o, pool[idx.long()]


def run_fla(inputs: dict, scale: float):
    """(o, final states [N, HV, V, K]) of fla's ``chunk_gated_delta_rule`` (equal-length sequences as a
    batch)."""
    os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")  # fla's own Triton path
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    T, HV, V = inputs["v"].shape
    N = len(inputs["cu_seqlens"]) - 1
    L = T // N
    q, k, v = (inputs[n].reshape(N, L, *inputs[n].shape[1:]) for n in ("q", "k", "v"))
    g, beta = (inputs[n].reshape(N, L, HV) for n in ("g", "beta"))
    h0 = inputs["state_pool"][inputs["state_indices"].long()].transpose(-1, -2).contiguous()
    o, ht = chunk_gated_delta_rule(
        q, k, v, g, beta, scale=scale, initial_state=h0, output_final_state=True
    )  # fmt: skip
    return o.reshape(T, HV, V), ht.transpose(-1, -2)


def emulated_rows(dtype) -> list[tuple[str, emulation.Roundings]]:
    """The emulations to print: the kernels before and after the fix, fla's, and the fix with one more
    rounding switched off at a time (where the rest of the error sits)."""
    before = emulation.kernel_roundings(dtype, fixed=False)
    after = emulation.kernel_roundings(dtype)
    rows = [("emulated before", before)]
    if dtype == torch.bfloat16:
        rows.append(
            ("emulated before, Gluon intra", emulation.kernel_roundings(dtype, gluon_intra=True, fixed=False))
        )
        rows.append(("emulated before, D^-1 refined only", dataclasses.replace(before, diag="tf32+refine")))
    rows.append(("emulated after", after))
    if dtype == torch.bfloat16:
        rows.append(("emulated after, Gluon intra", emulation.kernel_roundings(dtype, gluon_intra=True)))
    rows += [
        ("emulated fla", emulation.FLA_ROUNDINGS),
        ("emulated after, D^-1 exact", dataclasses.replace(after, diag="exact")),
        ("emulated after, D^-1 and solve exact", dataclasses.replace(after, diag="exact", merge="exact")),
        (
            "emulated after, Tβ exact, unrounded",
            dataclasses.replace(after, diag="exact", merge="exact", tbeta_16=False),
        ),
        ("emulated after, state operand unrounded", dataclasses.replace(after, state_operand_16=False)),
        ("emulated after, V − KS unrounded", dataclasses.replace(after, residual_16=False)),
        ("emulated after, v_new and P unrounded", dataclasses.replace(after, v_new_16=False, p_16=False)),
        ("emulated after, β out of Tβ (not in the kernels)", dataclasses.replace(after, beta_in_t=False)),
    ]
    return rows


def measure(case: str, dtype_name: str, others: dict, emit, device: str, cases: dict) -> None:
    """Every row of one (case, dtype)."""
    kwargs, scale = cases[case]
    dtype = DTYPES[dtype_name]
    inputs = make_precision_inputs(**kwargs, dtype=dtype, device=device)
    o_ref, s_ref = emulation.reference_prefill(inputs, scale)

    def row(name, kind, o=None, s=None, **extra):
        record = dict(case=case, dtype=dtype_name, row=name, kind=kind, **extra)
        if o is not None:
            record.update(out=emulation.rel(o, o_ref), state=emulation.rel(s, s_ref))
            record["finite"] = bool(torch.isfinite(o).all() and torch.isfinite(s).all())
        emit(record)

    paths = applicable_paths(inputs)
    modules = {"ours": chunk, **others}
    for name, module in modules.items():
        row(f"{name} default = {default_path(module, inputs)}", "default")
        for path in paths:
            try:
                o, s = run_prefill(module, inputs, scale, path)
                row(f"{name} {path}", "kernel", o, s)
            except Exception as err:  # a copy or a path that does not run here: say why
                row(f"{name} {path}", "error", error=f"{type(err).__name__}: {err}"[:300])
    try:
        o, s = run_fla(inputs, scale)
        row("fla", "peer", o, s)
    except Exception as err:
        row("fla", "error", error=f"{type(err).__name__}: {err}"[:300])

    exact = exact_tbeta(inputs)
    floor = emulation.rel(exact.to(dtype), exact)
    for name, module in modules.items():
        for path in [p for p in paths if p in ("triton", "gluon-intra")]:
            tbeta, *_ = intra_tbeta(module, inputs, path)
            intra = "Gluon" if path == "gluon-intra" else "Triton"
            row(f"Tβ {name} {intra} intra", "stage", tbeta=emulation.rel(tbeta, exact), floor=floor)
    exact16 = exact.to(dtype)
    for path in [p for p in paths if p in ("triton", "gluon-state")]:
        o, s = state_pass_on(inputs, scale, path, exact16)
        row(f"ours {path} on exact Tβ", "stage", o, s)
    for name, roundings in emulated_rows(dtype):
        o, s = emulation.emulate_prefill(inputs, scale, roundings)
        row(name, "emulated", o, s)


def render(records: list[dict]) -> str:
    """The markdown table: every row with its ratio to fla's error on the same inputs."""
    fla = {(r["case"], r["dtype"]): r for r in records if r["kind"] == "peer"}
    lines = [
        "| case | dtype | row | final state | output | state / fla | output / fla |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in records:
        peer = fla.get((r["case"], r["dtype"]))
        if "state" in r:
            ratio = (
                (f"{r['state'] / peer['state']:.2f}", f"{r['out'] / peer['out']:.2f}") if peer else ("", "")
            )
            mark = "" if r.get("finite", True) else " (non-finite)"
            cells = (f"{r['state']:.2e}{mark}", f"{r['out']:.2e}", *ratio)
        elif "tbeta" in r:
            cells = (f"Tβ {r['tbeta']:.2e}", f"floor {r['floor']:.2e}", "", "")
        else:
            cells = (r.get("error", ""), "", "", "")
        lines.append(f"| {r['case']} | {r['dtype']} | {r['row']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of CASES")
    parser.add_argument("--dtypes", default="fp16,bf16")
    parser.add_argument("--against", default="", help="NAME=FILE,... other copies of kernels/gdn/chunk.py")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--out", default=os.environ.get("OUT", "out"), help="folder for the results")
    parser.add_argument("--dry-run", action="store_true", help="a CPU, the interpreter, tiny shapes")
    parser.add_argument("--budget", type=float, default=1e9, help="seconds after which no pair starts")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # case:dtype pairs, rows to --out
    args = parser.parse_args()
    cases = DRY_CASES if args.dry_run else CASES
    device = "cpu" if args.dry_run else "cuda"
    names = list(cases) if args.dry_run else args.cases.split(",")
    unknown = sorted(set(names) - set(cases))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(cases)}")
    others = {
        name: load_copy(parser, "--against", path, f"chunk_{name}")
        for name, path in named_copies(parser, "--against", args.against).items()
    }
    # (once the cases and copies hold: no folder for a refused run)
    out_dir(parser, args.out, needs=None if args.dry_run else "a CUDA GPU (or --dry-run)")
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp64 reference and emulation on the GPU

    if args.worker:  # rows appended to DIR's precision.jsonl.part as measured (one write a row)
        started = time.time()
        with open(f"{args.out}/precision.jsonl.part", "a") as out:
            for pair in args.worker.split(","):
                if time.time() - started > args.budget:
                    print(f"{pair}: skipped, past the budget", flush=True)
                    continue
                case, dtype_name = pair.split(":")
                t0 = time.time()
                measure(
                    case,
                    dtype_name,
                    others,
                    lambda r: (out.write(json.dumps(r) + "\n"), out.flush()),
                    device,
                    cases,
                )
                print(f"{pair}: {time.time() - t0:.0f} s", flush=True)
        return

    part = Path(f"{args.out}/precision.jsonl.part")
    part.unlink(missing_ok=True)
    pairs = [f"{c}:{d}" for c in names for d in args.dtypes.split(",")]
    jobs = max(1, min(args.jobs, len(pairs)))
    # Workers by head geometry: a geometry's kernels compile once, in one process.
    by_geometry: dict[str, list[str]] = {}
    for pair in pairs:
        case, dtype_name = pair.split(":")
        kwargs = cases[case][0]
        key = f"{dtype_name}-{kwargs['N']}-{kwargs['H']}-{kwargs['HV']}-{kwargs['K']}"
        by_geometry.setdefault(key, []).append(pair)
    groups: list[list[str]] = [[] for _ in range(jobs)]
    for members in sorted(by_geometry.values(), key=len, reverse=True):
        min(groups, key=len).extend(members)
    header = dict(
        kind="env",
        device=torch.cuda.get_device_name() if device == "cuda" else "CPU dry run",
        torch=torch.__version__,
        triton=_version("triton"),
        fla=_version("fla-core"),
        date=time.strftime("%Y-%m-%d %H:%M"),
        against=args.against,
    )
    print(json.dumps(header), flush=True)
    started = time.time()
    procs = []
    with open(f"{args.out}/precision_workers.log", "w") as log:  # one file: few come back from a GPU
        for group in (g for g in groups if g):
            cmd = [sys.executable, __file__, "--worker", ",".join(group), "--out", args.out]
            cmd += ["--budget", str(args.budget)] + (["--against", args.against] if args.against else [])
            cmd += ["--dry-run"] if args.dry_run else []
            procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT))
        failed = [i for i, proc in enumerate(procs) if proc.wait()]
    records = [json.loads(line) for line in part.read_text().splitlines()] if part.exists() else []
    order = {pair: n for n, pair in enumerate(pairs)}
    records.sort(key=lambda r: order.get(f"{r['case']}:{r['dtype']}", len(order)))  # stable: rows in order
    with open(f"{args.out}/precision.jsonl", "w") as out:
        for record in [header, *records]:
            out.write(json.dumps(record) + "\n")
    part.unlink(missing_ok=True)
    table = render(records)
    Path(f"{args.out}/precision.md").write_text(table + "\n")
    print(table)
    print(f"\n{len(records)} rows in {time.time() - started:.0f} s; workers failed: {failed or 'none'}")
    if failed:
        sys.exit(1)


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    main()
