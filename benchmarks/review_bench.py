"""Behaviour-diff benchmark (CPU): what `stampgen diff` costs between two git revisions, whole process.

    .venv/bin/python -m benchmarks.review_bench [--quick]

Each row is a scratch git repository (stampgen.toml and rules/, as benchmarks/codegen_bench.py makes them)
with two commits, the rules before and after one edit. `stampgen diff HEAD~1 HEAD` runs as a fresh child
process (interpreter start-up, git, parsing and checking both revisions, the diff, the text output): the
median wall time of the repeats after one warm-up run, and the child's peak RSS, measured by
codegen_bench.run_stampgen. Children run with a bytecode cache (PYTHONPYCACHEPREFIX in a temporary
folder, whatever PYTHONDONTWRITEBYTECODE says), as an installed stampgen does. Beside that, in-process
medians of parsing and checking both revisions (`load_text`) and of `diff.diff_models` alone, and the
number of changes reported. Nothing is asserted; the target is beside the numbers.

1. shipped: rules/linear_attn.rules and one edit each (the verify tier, a gate condition, a launch forbid,
   an open-enum member, a config default, comments only). Target: < 1 s whole process.
2. scale: benchmarks/codegen_bench.py's synthetic_rules(n) for n = 10 / 100 / 1,000 stamps and three
   edits: a comment (nothing to search), one stamp's verify condition (one field searched), a new member
   of the open enum every stamp reads (every field of every stamp searched).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchmarks.codegen_bench import REPO, SHIPPED, STAMPGEN, run_stampgen, synthetic_rules

TARGET_S = 1.0
SIZES = (10, 100, 1000)
GIT_ENV = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def _git(root: Path, *argv: str) -> None:
    command = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench", *argv]
    subprocess.run(command, cwd=root, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


@contextmanager
def two_commits(before: str, after: str) -> Iterator[Path]:
    """A scratch repository whose last two commits hold rules/bench.rules before and after the edit."""
    with tempfile.TemporaryDirectory(prefix="stampgen-review-bench-") as tmp:
        root = Path(tmp)
        (root / "stampgen.toml").write_text('rules = "rules"\n', encoding="utf-8")
        (root / "rules").mkdir()
        _git(root, "init", "-q", "-b", "main")
        for text in (before, after):
            (root / "rules" / "bench.rules").write_text(text, encoding="utf-8")
            _git(root, "add", "-A")
            _git(root, "commit", "-q", "-m", "rules")
        yield root


def replace_once(text: str, old: str, new: str) -> str:
    if old not in text:
        raise SystemExit(f"the benchmark's edit no longer applies: {old!r} is not in the rules")
    return text.replace(old, new, 1)


def in_process_seconds(before: str, after: str, repeats: int) -> tuple[float, float, int]:
    """Median seconds of parsing and checking both texts, of diff_models alone, and the changes."""
    from stampgen.codegen.diff import diff_models
    from stampgen.codegen.load import load_text

    loads, diffs, count = [], [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        old, new = load_text(before, "before.rules").model, load_text(after, "after.rules").model
        loads.append(time.perf_counter() - start)
        start = time.perf_counter()
        count = len(diff_models(old, new))
        diffs.append(time.perf_counter() - start)
    return statistics.median(loads), statistics.median(diffs), count


def measure(label: str, before: str, after: str, repeats: int) -> str:
    """One table row: label, whole-process median and peak RSS, in-process parts, changes, exit status."""
    with two_commits(before, after) as root:
        run_stampgen("diff", "HEAD~1", "HEAD", cwd=root)  # warm-up: the bytecode cache, the page cache
        runs = [run_stampgen("diff", "HEAD~1", "HEAD", cwd=root) for _ in range(repeats)]
        shown = subprocess.run(
            [str(STAMPGEN), "diff", "HEAD~1", "HEAD", "--format", "json"],
            cwd=root,
            capture_output=True,
            text=True,
        )
    statuses = sorted({r.returncode for r in runs})
    if statuses not in ([0], [1]):
        return f"| {label} | {runs[0].failure()} | | | | |"
    whole = statistics.median(r.seconds for r in runs)
    rss = max(r.peak_rss_mb for r in runs)
    loads, alone, count = in_process_seconds(before, after, repeats)
    assert count == len(json.loads(shown.stdout)["changes"])
    return (
        f"| {label} | {whole:.2f} s | {rss:.0f} MB | {loads * 1000:.0f} ms | {alone * 1000:.0f} ms "
        f"| {count} | {statuses[0]} |"
    )


HEADER = [
    "| edit | `stampgen diff` (whole process) | peak RSS | parse + check, both | `diff_models` | changes | exit |",
    "|---|---|---|---|---|---|---|",
]


def shipped_section(repeats: int) -> Iterator[str]:
    shipped = SHIPPED.read_text(encoding="utf-8")
    follow = (
        "verify = flag mamba.linear_attn_verify_backend > follow decode when decode == flashinfer > triton"
    )
    at = shipped.rindex(follow)  # the stamp's verify, not the launch block's local of the same text
    edits = {
        "verify is always triton": shipped[:at]
        + "verify = flag mamba.linear_attn_verify_backend > triton"
        + shipped[at + len(follow) :],
        "gate: chunk ≤ 32768 → ≤ 8192": replace_once(
            shipped, "server.chunked_prefill_size <= 32768", "server.chunked_prefill_size <= 8192"
        ),
        "launch: one forbid added": replace_once(
            shipped,
            "    forbid mamba.linear_attn_verify_backend == flashkda\n",
            '    forbid mamba.linear_attn_decode_backend == helion "helion has no GDN decode kernel"\n'
            "    forbid mamba.linear_attn_verify_backend == flashkda\n",
        ),
        "open enum: one member added": replace_once(shipped, "torch custom", "torch nvidia_gdn custom"),
        "config default triton → flashinfer": replace_once(
            shipped,
            "linear_attn_backend: LinearAttnKernelBackend = triton",
            "linear_attn_backend: LinearAttnKernelBackend = flashinfer",
        ),
        "comments only": "# one comment line\n" + shipped.replace("  # --linear-attn-backend:", "  #"),
    }
    yield f"### rules/linear_attn.rules (target: < {TARGET_S:.0f} s whole process)\n"
    yield from HEADER
    for label, after in edits.items():
        yield measure(label, shipped, after, repeats)


def scale_section(repeats: int) -> Iterator[str]:
    yield "### synthetic_rules(n): n stamps of two flags, a base, a follow tier with a condition, a constant\n"
    yield from HEADER
    for n in SIZES:
        rules = synthetic_rules(n)
        edits = {
            "comment": "# one comment line\n" + rules,
            "one stamp's verify": replace_once(
                rules, "when decode == flashinfer", "when decode in {flashinfer, cutedsl}"
            ),
            "enum member (every stamp)": replace_once(rules, "cutedsl custom }", "cutedsl helion custom }"),
        }
        for label, after in edits.items():
            yield measure(f"{n:,} stamps: {label}", rules, after, repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.review_bench", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 7")
    args = parser.parse_args(argv)
    if not STAMPGEN.is_file():
        print(
            f"no console script {STAMPGEN}: run this with the virtualenv's Python (.venv/bin/python)",
            file=sys.stderr,
        )
        return 2
    repeats = 3 if args.quick else 7
    cache = tempfile.TemporaryDirectory(prefix="stampgen-review-bench-pycache-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # children: as installed, with bytecode
    os.environ["PYTHONPYCACHEPREFIX"] = cache.name  # ... kept out of the repository
    print("## Behaviour diff (CPU)\n")
    print(
        f"{time.strftime('%Y-%m-%d')} · {platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · "
        f"Python {platform.python_version()} · load average {os.getloadavg()[0]:.1f}\n"
    )
    python = Path(sys.executable)
    python_shown = python.relative_to(REPO) if python.is_relative_to(REPO) else python
    print(
        f"Command: `{python_shown} -m benchmarks.review_bench{' --quick' if args.quick else ''}`\n",
        flush=True,
    )
    for section in (shipped_section(repeats), scale_section(repeats)):
        for line in section:
            print(line, flush=True)
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
