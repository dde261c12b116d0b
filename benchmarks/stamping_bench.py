"""Per-runner stamping cost (CPU): what stamping one runner and reading its stamp back costs.

Run from the repository root:

    .venv/bin/python -m benchmarks.stamping_bench [--runners N] [--repeats R]

Each row times one step over N fresh runners (built beforehand, outside the timing), R times, and reports
the median per runner in µs; nothing is asserted. The machine is the Hopper GDN target of the seed (the
FlashInfer-prefill gate yields, so every gate condition is evaluated), logging at WARNING (the stamp's
INFO lines are not formatted, as in a production process).

1. `stamp_linear_attn_backends` on a plain object: both gates, the resolver with provenance, the
   compare-and-set under the module's lock.
2. `require_linear_attn_backends`: the fail-closed guard on a stamped runner (every field checked).
3. `ensure_linear_attn_backends_agree` without a process group (the check the stamp site runs on every
   runner; with a group it is one `all_gather_object`, which costs what the group costs).
4. stamp + guard + agree on a `ModelRunner` (its own locked check of the attribute included): the
   per-runner cost of stamping. Target: < 50 µs.
5. `attn_backend_wrapper` end to end, for context: the facts check, 4., and building `GDNAttnBackend`
   (its guard, family check, validation and kernel binding).
6. The loader's stamp of the same runner (`rules/loader.rules`): ask the entry class's hook, stamp its
   `SharedExpertsFusionDecision`, check the ranks agree, read it through the `ExpertsLayout` guard.

The target is for 4.; 4. + 6. is printed too, both stamps a runner holds.
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from stampgen.generated import linear_attn as la  # noqa: E402
from stampgen.kernels.runtime import (  # noqa: E402
    ARCHS,
    ModelRunner,
    ProcessConfig,
    ServerConfig,
    attn_backend_wrapper,
    launch,
    runner_facts_for,
)
from tests.machines import SM90  # noqa: E402  (the machine the runtime tests stamp on)

TARGET_US = 50.0


def per_runner_us(step: Callable[[Any], Any], make: Callable[[], Any], runners: int, repeats: int) -> float:
    """Median over `repeats` of the time `step` takes per runner, over `runners` fresh ones, in µs."""
    times = []
    for _ in range(repeats):
        batch = [make() for _ in range(runners)]
        start = time.perf_counter()
        for runner in batch:
            step(runner)
        times.append((time.perf_counter() - start) / runners * 1e6)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runners", type=int, default=2000, help="fresh runners per repeat")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    # the loader imports torch: here, so that `--help` stays quick
    from stampgen.kernels.runtime.layers import ExpertsLayout, tiny_qwen3_next_config
    from stampgen.kernels.runtime.loader import LoaderConfig, LoaderStamps, decide_shared_experts_fusion

    config = ProcessConfig(server=ServerConfig(chunked_prefill_size=8192))
    launch(config, la.LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    cls = ARCHS["Qwen3NextForCausalLM"]
    facts = runner_facts_for(cls, **SM90)
    keywords = dict(mamba=config.mamba, server=config.server, runner_facts=facts)
    stamp = la.stamp_linear_attn_backends(SimpleNamespace(), **keywords)
    assert stamp.prefill is la.LinearAttnKernelBackend.FLASHINFER  # the gate yields: the full path is timed

    def model_runner() -> ModelRunner:
        return ModelRunner("target", model_cls=cls, runner_facts=facts, process_config=config)

    def stamped() -> SimpleNamespace:
        return SimpleNamespace(linear_attn_backends=stamp)

    def stamp_guard_agree(runner: ModelRunner) -> None:
        la.stamp_linear_attn_backends(runner, **keywords)
        la.require_linear_attn_backends(runner)
        la.ensure_linear_attn_backends_agree(runner)

    hf_config, loader_config = tiny_qwen3_next_config(), LoaderConfig()

    def loader_stamps() -> LoaderStamps:
        return LoaderStamps(SimpleNamespace(name="target"))

    def fusion_stamp_guard(stamps: LoaderStamps) -> None:
        decide_shared_experts_fusion(stamps, model_cls=cls, hf_config=hf_config, loader_config=loader_config)
        ExpertsLayout(stamps)

    rows = [
        (
            "stamp_linear_attn_backends (plain object)",
            per_runner_us(
                lambda r: la.stamp_linear_attn_backends(r, **keywords),
                SimpleNamespace,
                args.runners,
                args.repeats,
            ),
        ),
        (
            "require_linear_attn_backends (guard)",
            per_runner_us(la.require_linear_attn_backends, stamped, args.runners, args.repeats),
        ),
        (
            "ensure_linear_attn_backends_agree (no process group)",
            per_runner_us(la.ensure_linear_attn_backends_agree, stamped, args.runners, args.repeats),
        ),
        (
            "stamp + guard + agree on a ModelRunner",
            per_runner_us(stamp_guard_agree, model_runner, args.runners, args.repeats),
        ),
        (
            "attn_backend_wrapper (GDNAttnBackend built)",
            per_runner_us(attn_backend_wrapper, model_runner, args.runners, args.repeats),
        ),
        (
            "loader: hook, fusion stamp, agree, ExpertsLayout guard",
            per_runner_us(fusion_stamp_guard, loader_stamps, args.runners, args.repeats),
        ),
    ]
    print(
        f"Python {platform.python_version()} on {platform.machine()}, {args.runners} runners x {args.repeats} "
        f"repeats, median per runner\n"
    )
    print("| step | µs per runner |")
    print("| --- | ---: |")
    for name, us in rows:
        print(f"| {name} | {us:.2f} |")
    per_runner = rows[3][1]
    verdict = "meets" if per_runner < TARGET_US else "MISSES"
    print(f"\nper-runner stamping + guard: {per_runner:.1f} µs ({verdict} the {TARGET_US:.0f} µs target)")
    print(f"with the loader's fusion stamp too: {per_runner + rows[5][1]:.1f} µs")


if __name__ == "__main__":
    sys.exit(main())
