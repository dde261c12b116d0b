"""Code generation benchmarks (CPU): what `stampgen generate` costs and how much output it churns, and what
the generated resolver costs per call. Measurements with their targets beside them; nothing is asserted.

Run from the repository root (`make bench` runs the first):

    .venv/bin/python -m benchmarks.codegen_bench [--quick] [--only shipped,churn,scale,resolver]
    .venv/bin/python -m benchmarks.churn_bench    # the churn table alone, a few seconds

It prints markdown tables. Every `stampgen` is the console script beside this Python, run as a fresh child
process in a scratch project (a temporary folder holding `stampgen.toml` and `rules/`), so a number is what
a developer and CI wait for, interpreter start-up included. Peak RSS is the child's `ru_maxrss` from
`wait4`: the largest resident set of the `stampgen` process or of the `ruff` it runs, whichever is larger.

1. shipped: `stampgen generate` / `generate --check` on rules/linear_attn.rules: cold (no generated/ yet:
   parse, check, render, format with ruff, write), fresh (the manifest's hashes and fingerprint match:
   nothing is parsed or rendered) and stale --check (render + format + diff). Targets: generate < 1.5 s,
   generate --check < 0.5 s.
2. churn: generate rules/linear_attn.rules once, then regenerate after (i) one comment line added at the
   top of the rules file and, separately, (ii) one `forbid` added as the first statement of its
   `validate GDNAttnBackend` block, and count the lines of generated/*.py that changed (added + removed
   lines of a `difflib.unified_diff`, MANIFEST.json counted apart). A one-line edit of the rules should
   read as a small change of the output. Targets: top comment <= 12 lines, one forbid <= 60 lines.
3. scale: cold generate of synthetic rules of 10 / 100 / 1,000 / 3,000 stamps (each stamp two config flags,
   a base, a follow tier with a condition and a constant; `--quick` skips 3,000) and of one stamp whose
   field's `when` reads six enum config leaves of six members each (6^6 = 46,656 combinations): wall time,
   peak RSS, total bytes of generated/ and its largest file, and a fresh `generate --check`.
   Target: 1,000 stamps < 5 s and < 500 MB.
4. resolver: the generated `stampgen.generated.linear_attn.resolve_linear_attn_backends` against a
   hand-written equivalent of SGLang's resolver (docs/background.md, "The resolver": `Enum(flag or
   base)` per phase, verify following a FlashInfer decode), timed in the same process on the same inputs,
   interleaved. Target: generated / hand-written <= 1.1.
"""

from __future__ import annotations

import argparse
import difflib
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STAMPGEN = Path(sys.executable).with_name("stampgen")
SHIPPED = REPO / "rules" / "linear_attn.rules"
SECTIONS = ("shipped", "churn", "scale", "resolver")
CPU_LIMIT_S = 300  # a child that runs longer is killed (SIGXCPU) and reported, not waited for

TOP_COMMENT = "# A comment line added by benchmarks/codegen_bench.py.\n"
VALIDATE_BLOCK = "validate GDNAttnBackend {\n"
NEW_FORBID = (
    "    forbid server.two_batch_overlap and LinearAttnBackends.prefill == cutedsl "
    '"two-batch overlap does not support cutedsl prefill"\n'
)
CHURN_TARGETS = {"top comment": 12, "one forbid": 60}  # changed lines of generated/*.py
CHURN_LABELS = {
    "top comment": "one comment line at the top",
    "one forbid": "one `forbid` in `validate GDNAttnBackend`",
}
SCALE_SIZES = (10, 100, 1000, 3000)
QUICK_SKIPS = (3000,)


# --------------------------------------------------------------------------------------------- child processes


@dataclass(frozen=True)
class Run:
    """One finished `stampgen` child process."""

    seconds: float  # wall time, start to exit
    peak_rss_mb: float  # ru_maxrss of the child and its own children (ruff), in 10^6 bytes
    returncode: int  # negative: killed by that signal
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def failure(self) -> str:
        """What a table cell says for a run that did not exit 0."""
        if self.returncode in (-signal.SIGKILL, -signal.SIGXCPU):
            return f"killed after {self.seconds:.0f} s (CPU limit {CPU_LIMIT_S} s)"
        last = self.stderr.strip().splitlines()[-1:] or ["no message"]
        return f"exit {self.returncode}: {last[0]}"


def _limit_cpu() -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_LIMIT_S, CPU_LIMIT_S + 5))


def run_stampgen(*args: str, cwd: Path) -> Run:
    """Run `stampgen ARGS...` in `cwd` as a fresh process and measure it (the exit status is reported,
    not judged)."""
    with tempfile.TemporaryFile() as stderr:
        start = time.perf_counter()
        proc = subprocess.Popen(
            [str(STAMPGEN), *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr, preexec_fn=_limit_cpu
        )
        _, status, usage = os.wait4(proc.pid, 0)  # wait4, unlike Popen.wait, returns this child's rusage
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        stderr.seek(0)
        message = stderr.read().decode("utf-8", "replace")
    kib = usage.ru_maxrss / (1024 if sys.platform == "darwin" else 1)  # Linux: KiB; macOS: bytes
    return Run(seconds, kib * 1024 / 1e6, proc.returncode, message)


def generate_or_exit(root: Path) -> Run:
    """`stampgen generate` in `root`, which must succeed: a table built on a failed run would mislead."""
    run = run_stampgen("generate", cwd=root)
    if not run.ok:
        raise SystemExit(f"`stampgen generate` failed in {root} (exit {run.returncode}):\n{run.stderr}")
    return run


@contextmanager
def scratch_project(rules: dict[str, str]) -> Iterator[Path]:
    """A temporary project root with `stampgen.toml` (so no config in a parent folder is picked up) and
    rules/NAME.rules for each item of `rules`; removed on exit."""
    with tempfile.TemporaryDirectory(prefix="stampgen-bench-") as tmp:
        root = Path(tmp)
        (root / "stampgen.toml").write_text('rules = "rules"\nout = "generated"\n', encoding="utf-8")
        (root / "rules").mkdir()
        for name, text in rules.items():
            (root / "rules" / f"{name}.rules").write_text(text, encoding="utf-8")
        yield root


def generated_files(root: Path) -> dict[str, str]:
    """Every file of root/generated, by name."""
    out = root / "generated"
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(out.iterdir()) if p.is_file()}


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


# --------------------------------------------------------------------------------------------- 1. shipped


def shipped_section(repeats: int) -> Iterator[str]:
    shipped = SHIPPED.read_text(encoding="utf-8")
    stale_edit = ("linear_replayssm_cache_len: int in {0, 1, 16} = 16", "linear_replayssm_cache_len: int in {0, 1, 16} = 1")  # fmt: skip
    if stale_edit[0] not in shipped:
        raise SystemExit(f"benchmarks/codegen_bench.py: {SHIPPED.name} no longer has `{stale_edit[0]}`")
    with scratch_project({"linear_attn": shipped}) as root:
        cold = []
        for _ in range(repeats):
            shutil.rmtree(root / "generated", ignore_errors=True)
            cold.append(generate_or_exit(root).seconds)
        fresh = _median([run_stampgen("generate", cwd=root).seconds for _ in range(repeats)])
        check_fresh = _median([run_stampgen("generate", "--check", cwd=root).seconds for _ in range(repeats)])
        (root / "rules" / "linear_attn.rules").write_text(shipped.replace(*stale_edit), encoding="utf-8")
        check_stale = _median([run_stampgen("generate", "--check", cwd=root).seconds for _ in range(repeats)])
    yield "| shipped rules (rules/linear_attn.rules), one process each | median wall time | target |"
    yield "|---|---:|---:|"
    yield f"| `stampgen generate`, cold (parse, check, render, ruff format, write) | {_median(cold):.3f} s | < 1.5 s |"
    yield f"| `stampgen generate`, output fresh (manifest hash + fingerprint) | {fresh:.3f} s | |"
    yield f"| `stampgen generate --check`, output fresh | {check_fresh:.3f} s | < 0.5 s |"
    yield f"| `stampgen generate --check`, output stale (render, format, diff) | {check_stale:.3f} s | |"


# --------------------------------------------------------------------------------------------- 2. churn


def changed_lines(before: str, after: str) -> tuple[int, int]:
    """(added, removed) lines of the unified diff from `before` to `after`."""
    diff = list(difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0))
    body = [line for line in diff[2:] if not line.startswith("@@")]  # diff[:2]: the ---/+++ header
    return sum(line.startswith("+") for line in body), sum(line.startswith("-") for line in body)


def churn_edits(shipped: str) -> dict[str, str]:
    """The edited rules text of each churn case."""
    if shipped.count(VALIDATE_BLOCK) != 1:
        raise SystemExit(
            f"benchmarks/codegen_bench.py: {SHIPPED.name} has no single `{VALIDATE_BLOCK.strip()}`"
        )
    return {
        "top comment": TOP_COMMENT + shipped,
        "one forbid": shipped.replace(VALIDATE_BLOCK, VALIDATE_BLOCK + NEW_FORBID),
    }


def churn_rows(shipped: str) -> tuple[dict[str, str], list[tuple[str, dict[str, tuple[int, int]]]]]:
    """The baseline output, and per edit the (added, removed) lines of every generated file that changed."""
    with scratch_project({"linear_attn": shipped}) as base_root:
        generate_or_exit(base_root)
        baseline = generated_files(base_root)
        rows = []
        for label, edited in churn_edits(shipped).items():
            with tempfile.TemporaryDirectory(prefix="stampgen-churn-") as tmp:
                root = Path(tmp) / "project"
                # generated/ comes along: the edit is regenerated over the old output, as a developer does
                shutil.copytree(base_root, root)
                (root / "rules" / "linear_attn.rules").write_text(edited, encoding="utf-8")
                generate_or_exit(root)
                after = generated_files(root)
            per_file = {}
            for name in sorted(baseline.keys() | after.keys()):
                added, removed = changed_lines(baseline.get(name, ""), after.get(name, ""))
                if added or removed:
                    per_file[name] = (added, removed)
            rows.append((label, per_file))
    return baseline, rows


def churn_section() -> Iterator[str]:
    shipped = SHIPPED.read_text(encoding="utf-8")
    baseline, rows = churn_rows(shipped)
    python = [name for name in baseline if name.endswith(".py")]
    total = sum(len(baseline[name].splitlines()) for name in python)
    yield f"Baseline: rules/linear_attn.rules generates {total:,} lines of Python in {', '.join(python)}."
    yield ""
    yield (
        "| edit of rules/linear_attn.rules, regenerated | generated/*.py lines changed | per file (+added −removed)"
        " | MANIFEST.json lines changed | target | within |"
    )
    yield "|---|---:|---|---:|---:|---|"
    for label, per_file in rows:
        py = {name: counts for name, counts in per_file.items() if name.endswith(".py")}
        changed = sum(a + r for a, r in py.values())
        detail = ", ".join(f"{name} +{a} −{r}" for name, (a, r) in py.items()) or "none"
        manifest = sum(per_file.get("MANIFEST.json", (0, 0)))
        others = sorted(set(per_file) - set(py) - {"MANIFEST.json"})
        if others:
            detail += f" (other files: {', '.join(others)})"
        target = CHURN_TARGETS[label]
        yield (
            f"| {CHURN_LABELS[label]} | {changed:,} | {detail} | {manifest} | <= {target}"
            f" | {'yes' if changed <= target else 'no'} |"
        )


# --------------------------------------------------------------------------------------------- 3. scale


def synthetic_rules(stamps: int) -> str:
    lines = ["enum Backend open(custom) { triton flashinfer cutedsl custom }", "", "config cfg {"]
    lines.append("    base: Backend = triton")
    for i in range(stamps):
        lines.append(f"    decode_{i}: Backend?")
        lines.append(f"    verify_{i}: Backend?")
    lines.append("}")
    for i in range(stamps):
        lines += [
            "",
            f"stamp Choice{i} on runner.choice_{i} {{",
            f"    decode = flag cfg.decode_{i} > base cfg.base",
            f"    verify = flag cfg.verify_{i} > follow decode when decode == flashinfer > triton",
            "}",
        ]
    return "\n".join(lines) + "\n"


def wide_domain_rules() -> str:
    """One stamp whose field's `when` reads six enum config leaves of six members each."""
    return """\
enum Backend open(custom) { triton flashinfer cutedsl custom }
enum Mode { m0 m1 m2 m3 m4 m5 }

config cfg {
    base: Backend = triton
    decode: Backend?
    mode_a: Mode = m0
    mode_b: Mode = m0
    mode_c: Mode = m0
    mode_d: Mode = m0
    mode_e: Mode = m0
    mode_f: Mode = m0
}

stamp Wide on runner.wide {
    decode = flag cfg.decode
        > flashinfer when cfg.mode_a == m1 and cfg.mode_b != m2 and cfg.mode_c in {m3, m4}
            and cfg.mode_d == m5 and cfg.mode_e != m0 and cfg.mode_f not in {m1, m2}
        > base cfg.base
}
"""


def _size(n: float) -> str:
    for unit, scale in (("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def scale_row(label: str, module: str, rules: str, repeats: int, target: str) -> str:
    """One row of the scale table: `rules` generated cold `repeats` times as rules/MODULE.rules."""
    with scratch_project({module: rules}) as root:
        runs = []
        for _ in range(repeats):
            shutil.rmtree(root / "generated", ignore_errors=True)
            runs.append(run_stampgen("generate", cwd=root))
            if not runs[-1].ok:
                return (
                    f"| {label} | {len(rules.splitlines()):,} | {runs[-1].failure()} | | | | | | {target} |"
                )
        check = _median([run_stampgen("generate", "--check", cwd=root).seconds for _ in range(repeats)])
        files = {p.name: p.stat().st_size for p in (root / "generated").iterdir() if p.is_file()}
        lines = sum(
            len(p.read_text(encoding="utf-8").splitlines()) for p in (root / "generated").glob("*.py")
        )
    largest = max(files, key=files.__getitem__)
    return (
        f"| {label} | {len(rules.splitlines()):,} | {_median([r.seconds for r in runs]):.2f} s"
        f" | {max(r.peak_rss_mb for r in runs):.0f} MB | {_size(sum(files.values()))}"
        f" | {largest} ({_size(files[largest])}) | {lines:,} | {check:.3f} s | {target} |"
    )


def scale_section(repeats: int, quick: bool) -> Iterator[str]:
    yield (
        "| rules | rules lines | cold `generate` (median) | peak RSS | generated/ | largest file"
        " | generated lines | fresh `generate --check` | target |"
    )
    yield "|---|---:|---:|---:|---:|---|---:|---:|---|"
    for n in SCALE_SIZES:
        label = f"{n:,} stamps"
        if quick and n in QUICK_SKIPS:
            yield f"| {label} | | skipped (--quick) | | | | | | |"
            continue
        target = "< 5 s, < 500 MB" if n == 1000 else ""
        yield scale_row(label, "synthetic", synthetic_rules(n), 1 if n >= 1000 else repeats, target)
    label = "1 stamp, a `when` over six enum leaves of 6 members (6^6 = 46,656 combinations)"
    yield scale_row(label, "wide", wide_domain_rules(), repeats, "")


# --------------------------------------------------------------------------------------------- 4. resolver


def _hand_written() -> Any:
    """SGLang's resolver (docs/background.md) written by hand against its own frozen struct, as a peer would."""
    import msgspec

    from stampgen.generated.linear_attn import LinearAttnKernelBackend

    class HandStamp(msgspec.Struct, frozen=True):
        decode: LinearAttnKernelBackend
        prefill: LinearAttnKernelBackend
        verify: LinearAttnKernelBackend

    def resolve(mamba: Any, prefill_default: Any = None) -> HandStamp:
        base = mamba.linear_attn_backend
        decode = LinearAttnKernelBackend(mamba.linear_attn_decode_backend or base)
        prefill = LinearAttnKernelBackend(mamba.linear_attn_prefill_backend or prefill_default or base)
        verify = mamba.linear_attn_verify_backend
        if verify is None:
            verify = decode.value if decode.is_flashinfer() else "triton"
        return HandStamp(decode=decode, prefill=prefill, verify=LinearAttnKernelBackend(verify))

    return resolve


def resolver_rows(number: int) -> list[tuple[str, float, float]]:
    """(case, generated ns per call, hand-written ns per call), best of 7 interleaved rounds."""
    from stampgen.generated.linear_attn import resolve_linear_attn_backends

    hand = _hand_written()
    cases = {
        "all unset (defaults)": (dict(linear_attn_backend="triton"), None),
        "flags as names + auto-default": (
            dict(linear_attn_backend="triton", linear_attn_decode_backend="flashinfer"),
            "flashinfer",
        ),
        "explicit verify flag": (
            dict(linear_attn_backend="cutedsl", linear_attn_verify_backend="triton"),
            None,
        ),
    }
    rows = []
    for label, (leaves, default) in cases.items():
        mamba = SimpleNamespace(
            linear_attn_backend=None,
            linear_attn_decode_backend=None,
            linear_attn_prefill_backend=None,
            linear_attn_verify_backend=None,
        )
        vars(mamba).update(leaves)
        generated = resolve_linear_attn_backends(mamba, prefill_default=default)
        expected = hand(mamba, default)
        assert (generated.decode, generated.prefill, generated.verify) == (
            expected.decode,
            expected.prefill,
            expected.verify,
        ), label

        def gen_call(m: Any = mamba, d: Any = default) -> Any:
            return resolve_linear_attn_backends(m, prefill_default=d)

        def hand_call(m: Any = mamba, d: Any = default) -> Any:
            return hand(m, d)

        gen_ns: list[float] = []
        hand_ns: list[float] = []
        for _ in range(7):  # interleaved, so drift hits both alike
            gen_ns.append(timeit.timeit(gen_call, number=number) / number * 1e9)
            hand_ns.append(timeit.timeit(hand_call, number=number) / number * 1e9)
        rows.append((label, min(gen_ns), min(hand_ns)))
    return rows


def resolver_section(number: int) -> Iterator[str]:
    yield "| resolve_linear_attn_backends, per call | generated | hand-written (SGLang's resolver) | ratio | target |"
    yield "|---|---:|---:|---:|---:|"
    for label, gen_ns, hand_ns in resolver_rows(number):
        yield f"| {label} | {gen_ns:.0f} ns | {hand_ns:.0f} ns | {gen_ns / hand_ns:.2f} | <= 1.1 |"


# --------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None, module: str = "benchmarks.codegen_bench") -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no 3,000-stamp file")
    parser.add_argument(
        "--only",
        default=",".join(SECTIONS),
        help=f"comma-separated sections (default: all of {','.join(SECTIONS)})",
    )
    args = parser.parse_args(argv)
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    if not STAMPGEN.is_file():
        print(
            f"no console script {STAMPGEN}: run this with the virtualenv's Python (.venv/bin/python)",
            file=sys.stderr,
        )
        return 2
    repeats = 3 if args.quick else 7

    print("## Code generation (CPU)\n")
    print(
        f"{time.strftime('%Y-%m-%d')} · {platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · "
        f"Python {platform.python_version()} · ruff {version('ruff')} · jinja2 {version('jinja2')} · "
        f"msgspec {version('msgspec')} · lark {version('lark')}\n"
    )
    shown = " ".join(sys.argv[1:])  # as typed, also when an entry point such as churn_bench passes argv
    python = Path(sys.executable)
    python_shown = python.relative_to(REPO) if python.is_relative_to(REPO) else python
    print(f"Command: `{python_shown} -m {module}{' ' + shown if shown else ''}`\n", flush=True)
    tables = {
        "shipped": lambda: shipped_section(repeats),
        "churn": churn_section,
        "scale": lambda: scale_section(repeats, args.quick),
        "resolver": lambda: resolver_section(20_000 if args.quick else 100_000),
    }
    for section in SECTIONS:
        if section in sections:
            for line in tables[section]():
                print(line, flush=True)  # row by row: the big scale rows take a while
            print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
