"""Rules-language speed on the CPU: `stampgen check` and `stampgen table`, whole process, and check time as
the rules grow (synthetic files of 10 / 100 / 1000 stamps), with the dead-rule analysis (codegen/analysis.py)
that `check` runs after a clean check timed on its own.

Each synthetic stamp has its own config block and three fields built from flag / auto / base / follow
chains over its own leaves, like the shipped LinearAttnBackends. Times are wall-clock medians of 5 runs of
the console script (interpreter start-up included: that is what a user and `make codegen-check` wait
for); the in-process split (parse vs check vs analysis) says where the time goes. The analysis is also
timed on one validate block of 30 and 300 checks with a fallback every fifth, where its work budget
(analysis.WORK_BASE / WORK_PER_RULE) is what keeps it bounded.

    .venv/bin/python benchmarks/language_bench.py [--runs 5] [--sizes 10 100 1000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from stampgen.codegen.analysis import analyze  # noqa: E402
from stampgen.codegen.checks import check  # noqa: E402
from stampgen.codegen.parser import grammar_parser, parse  # noqa: E402

STAMPGEN = Path(sys.executable).with_name("stampgen")
SHIPPED = "rules/linear_attn.rules"


def synthetic_rules(stamps: int) -> str:
    """A valid, warning-free rules file with `stamps` stamps of 3 fields each."""
    out = ["enum Backend { triton flashinfer cutedsl custom }", ""]
    for i in range(stamps):
        out += [
            f"config s{i} {{",
            "    base: Backend = triton",
            "    decode: Backend?",
            "    prefill: Backend?",
            "    verify: Backend?",
            "}",
            "",
            f"stamp Stamp{i} on runner.stamp{i} {{",
            "    slot prefill_default: Backend",
            f"    decode = flag s{i}.decode > base s{i}.base",
            f"    prefill = flag s{i}.prefill > auto prefill_default > base s{i}.base",
            f"    verify = flag s{i}.verify > follow decode when decode == flashinfer > triton",
            "}",
            "",
        ]
    return "\n".join(out)


def median_wall(argv: list[str], runs: int, expect: int = 0) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if result.returncode != expect:
            raise SystemExit(f"{' '.join(argv)} exited {result.returncode}:\n{result.stderr[-2000:]}")
    return statistics.median(times)


def dead_rule_stress(checks: int) -> str:
    """One validate block of `checks` forbids over two stamp fields, a fact and a leaf each, with a fallback
    on one field every fifth check: the analysis's worst shape (every check shares inputs with the others)."""
    values = ["triton", "flashinfer", "cutedsl", "custom"]
    out = ["enum Backend { triton flashinfer cutedsl custom }", "config cfg {", "    base: Backend = triton"]
    out += [
        "    decode: Backend?",
        "    prefill: Backend?",
        *(f"    opt{i}: bool = false" for i in range(checks)),
    ]
    out += ["}", "facts runner { sm: int in {0, 8, 9, 10, 12} }", "stamp S on runner.s {"]
    out += [
        "    decode = flag cfg.decode > base cfg.base",
        "    prefill = flag cfg.prefill > base cfg.base",
        "}",
    ]
    out.append("validate V {")
    for i in range(checks):
        field, sm = ("decode" if i % 2 else "prefill"), [8, 9, 10, 12][i % 4]
        out.append(f'    forbid cfg.opt{i} and S.{field} == {values[i % 4]} and runner.sm >= {sm} "m{i}"')
        if i % 5 == 0:
            to = values[(i + 1) % 4]
            out.append(
                f'    fallback S.prefill {values[i % 4]} -> {to} when cfg.opt{i} or runner.sm < 9 log "f{i}"'
            )
    return "\n".join([*out, "}"]) + "\n"


def in_process_split(text: str, runs: int, clean: bool = True) -> tuple[float, float, float]:
    """Median seconds to parse, to check and to analyse `text` (grammar already loaded)."""
    grammar_parser()
    parse_times, check_times, analysis_times = [], [], []
    for _ in range(runs):
        start = time.perf_counter()
        rules, diags = parse(text, "synthetic.rules")
        mid = time.perf_counter()
        model, check_diags = check(rules)
        end = time.perf_counter()
        assert rules is not None and model is not None and not diags
        assert not check_diags or not clean
        found = analyze(model, check_diags)
        analysis_times.append(time.perf_counter() - end)
        assert not found or not clean, found
        parse_times.append(mid - start)
        check_times.append(end - mid)
    return statistics.median(parse_times), statistics.median(check_times), statistics.median(analysis_times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    args = ap.parse_args()
    cmd = [str(STAMPGEN)] if STAMPGEN.exists() else [sys.executable, "-m", "stampgen.codegen.cli"]

    startup = median_wall([sys.executable, "-c", "import stampgen.codegen.cli"], args.runs)
    rows = [
        ("`python -c 'import stampgen.codegen.cli'` (start-up floor)", "-", startup),
        (f"`stampgen check {SHIPPED}`", "-", median_wall([*cmd, "check", SHIPPED], args.runs)),
        (
            "`stampgen table LinearAttnBackends`",
            "-",
            median_wall([*cmd, "table", "LinearAttnBackends"], args.runs),
        ),
    ]
    scaling = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"synthetic_{n}.rules"
            text = synthetic_rules(n)
            path.write_text(text, encoding="utf-8")
            wall = median_wall([*cmd, "check", str(path)], args.runs)
            parse_s, check_s, analysis_s = in_process_split(text, args.runs)
            rows.append((f"`stampgen check` synthetic, {n} stamps", f"{len(text.splitlines())}", wall))
            scaling.append((f"{n} stamps", n, wall, parse_s, check_s, analysis_s))
        # one syntax error near the top: error recovery re-parses every declaration on its own
        n = max(args.sizes)
        broken = Path(tmp) / f"synthetic_{n}_broken.rules"
        broken.write_text(
            synthetic_rules(n).replace("> base s0.base", "> > base s0.base", 1), encoding="utf-8"
        )
        wall = median_wall([*cmd, "check", str(broken)], args.runs, expect=1)
        rows.append((f"`stampgen check` synthetic, {n} stamps, one syntax error (exit 1)", "-", wall))
        shipped = (REPO / SHIPPED).read_text(encoding="utf-8")
        scaling.insert(0, (SHIPPED, 1, float("nan"), *in_process_split(shipped, args.runs, clean=False)))
        for checks in (30, 300):
            path = Path(tmp) / f"dead_rule_stress_{checks}.rules"
            path.write_text(dead_rule_stress(checks), encoding="utf-8")
            wall = median_wall([*cmd, "check", str(path)], args.runs)
            split = in_process_split(dead_rule_stress(checks), args.runs, clean=False)
            scaling.append((f"one validate block, {checks} checks", 1, wall, *split))

    print("| command | lines | wall time (median of %d) |" % args.runs)
    print("|---|---:|---:|")
    for name, lines, seconds in rows:
        print(f"| {name} | {lines} | {seconds * 1000:.0f} ms |")
    print()
    print(
        "| rules | check, whole process | parse (in-process) | check (in-process) | dead-rule analysis "
        "(in-process) | per stamp (parse+check+analysis) |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for label, n, wall, parse_s, check_s, analysis_s in scaling:
        per = f"{(parse_s + check_s + analysis_s) / n * 1e6:.0f} µs" if "stamps" in label else "-"
        shown = "-" if wall != wall else f"{wall * 1000:.0f} ms"  # NaN: not run as its own command here
        print(
            f"| {label} | {shown} | {parse_s * 1000:.1f} ms | {check_s * 1000:.1f} ms "
            f"| {analysis_s * 1000:.1f} ms | {per} |"
        )
    largest = [row for row in scaling if "stamps" in row[0]]
    if largest and largest[-1][1] >= 1000:
        verdict = "within" if largest[-1][2] < 2.0 else "OVER"
        print(f"\n{largest[-1][1]} stamps checked in {largest[-1][2]:.2f} s: {verdict} the 2 s target.")


if __name__ == "__main__":
    main()
