"""Code generation benchmarks (CPU): `stampgen generate` wall time, its scaling, and the resolver's per-call cost.

Run: `make bench` or `.venv/bin/python -m benchmarks.codegen_bench [--quick]`. Prints a markdown table.

1. Whole-process wall time of `stampgen generate` / `stampgen generate --check` on the shipped rules, each
   in a fresh process (what a developer and CI pay), in a scratch copy of the repository:
   cold (no generated/ yet: parse, check, render, format with ruff, write), fresh (the manifest's hashes
   and fingerprint match: nothing is parsed or rendered), and stale --check (render + format + diff).
   Targets: generate < 1.5 s, generate --check < 0.5 s.
2. Scaling: synthetic rules files of 10 / 100 / 1000 stamps (each stamp two config flags, a base, a
   follow tier with a condition and a constant), cold generate and fresh --check.
3. The generated `resolve_linear_attn_backends` against a hand-written equivalent of SGLang's resolver
   (reference/sglang.md §2.5: `Enum(flag or base)` per phase, verify following a FlashInfer decode), timed
   in the same process on the same inputs. Target: generated / hand-written <= 1.2.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

REPO = Path(__file__).resolve().parents[1]
STAMPGEN = Path(sys.executable).with_name("stampgen")


def _stampgen(*args: str, cwd: Path) -> float:
    """Seconds one `stampgen ...` process takes, start to exit (the exit status is not judged here)."""
    cmd = (
        [str(STAMPGEN), *args] if STAMPGEN.exists() else [sys.executable, "-m", "stampgen.codegen.cli", *args]
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _scratch(rules: dict[str, str]) -> Path:
    root = Path(tempfile.mkdtemp(prefix="stampgen-bench-"))
    (root / "rules").mkdir()
    for name, text in rules.items():
        (root / "rules" / f"{name}.rules").write_text(text, encoding="utf-8")
    return root


def _cold_generate(root: Path, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        shutil.rmtree(root / "generated", ignore_errors=True)
        samples.append(_stampgen("generate", cwd=root))
    return _median(samples)


def _repeat(root: Path, repeats: int, *args: str) -> float:
    return _median([_stampgen(*args, cwd=root) for _ in range(repeats)])


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


# --------------------------------------------------------------------------------------------- the resolver


def _hand_written() -> tuple[Any, Any]:
    """SGLang's resolver (§2.5) written by hand against its own frozen struct, as a peer would."""
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

    return resolve, HandStamp


def resolver_rows(number: int) -> list[tuple[str, float, float]]:
    from stampgen.generated.linear_attn import resolve_linear_attn_backends

    hand, _ = _hand_written()
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


# --------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no 1000-stamp file")
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else 7
    sizes = (10, 100) if args.quick else (10, 100, 1000)

    print("## Code generation (CPU)\n")
    print(
        f"{time.strftime('%Y-%m-%d')} · {platform.processor() or platform.machine()} · {os.cpu_count()} CPUs · "
        f"Python {platform.python_version()} · ruff {version('ruff')} · jinja2 {version('jinja2')} · "
        f"msgspec {version('msgspec')} · lark {version('lark')}\n"
    )
    print(
        f"Command: `{Path(sys.executable).name} -m benchmarks.codegen_bench{' --quick' if args.quick else ''}`\n"
    )

    shipped = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
    root = _scratch({"linear_attn": shipped})
    try:
        cold = _cold_generate(root, repeats)
        fresh = _repeat(root, repeats, "generate")
        check_fresh = _repeat(root, repeats, "generate", "--check")
        rules = root / "rules" / "linear_attn.rules"
        rules.write_text(shipped.replace("linear_replayssm_cache_len: int in {0, 1, 16} = 16",
                                         "linear_replayssm_cache_len: int in {0, 1, 16} = 1"))  # fmt: skip
        check_stale = _repeat(root, repeats, "generate", "--check")
    finally:
        shutil.rmtree(root, ignore_errors=True)

    print("| shipped rules (rules/linear_attn.rules), one process each | median wall time | target |")
    print("|---|---:|---:|")
    print(
        f"| `stampgen generate`, cold (parse, check, render, ruff format, write) | {cold:.3f} s | < 1.5 s |"
    )
    print(f"| `stampgen generate`, output fresh (manifest hash + fingerprint) | {fresh:.3f} s | |")
    print(f"| `stampgen generate --check`, output fresh | {check_fresh:.3f} s | < 0.5 s |")
    print(f"| `stampgen generate --check`, output stale (render, format, diff) | {check_stale:.3f} s | |")
    print()

    print("| synthetic rules | generated lines | cold `generate` | fresh `generate --check` |")
    print("|---|---:|---:|---:|")
    for n in sizes:
        root = _scratch({"synthetic": synthetic_rules(n)})
        try:
            cold_n = _cold_generate(root, 1 if n >= 1000 else repeats)
            check_n = _repeat(root, repeats, "generate", "--check")
            lines = sum(
                len(p.read_text(encoding="utf-8").splitlines()) for p in (root / "generated").glob("*.py")
            )
        finally:
            shutil.rmtree(root, ignore_errors=True)
        print(f"| {n} stamps | {lines:,} | {cold_n:.2f} s | {check_n:.3f} s |")
    print()

    sys.path.insert(0, str(REPO))
    number = 20_000 if args.quick else 100_000
    print(
        "| resolve_linear_attn_backends, per call | generated | hand-written (SGLang §2.5) | ratio | target |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, gen_ns, hand_ns in resolver_rows(number):
        print(f"| {label} | {gen_ns:.0f} ns | {hand_ns:.0f} ns | {gen_ns / hand_ns:.2f} | <= 1.2 |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
