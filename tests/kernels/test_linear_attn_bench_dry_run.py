"""``benchmarks/gdn_bench.py --dry-run`` for every op (gdn, kda, lightning) on the CPU.

The harness's plumbing at tiny shapes: our Triton kernels in the Triton interpreter beside the torch
reference, the peers (fla, FlashInfer) reported as missing rather than crashing, the rows recorded and the
table written. Each op runs in a subprocess of its own (the harness switches module globals per op and
restarts itself under ``TRITON_INTERPRET=1``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "gdn_bench.py"

# phases with a dry-run case, per op (lightning has no verify case)
PHASES = {
    "gdn": {"decode", "verify", "prefill"},
    "kda": {"decode", "verify", "prefill"},
    "lightning": {"decode", "prefill"},
}
PEERS = {"gdn": {"fla", "fi", "fi-kernel"}, "kda": {"fla", "fi", "fi-kernel"}, "lightning": {"fla"}}


def _dry_run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "out"
    # no TRITON_INTERPRET: the harness sets it and restarts itself; fla and flashinfer not importable
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--dry-run", "--out", str(out), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return proc, out


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("op", ["gdn", "kda", "lightning"])
def test_the_dry_run_measures_ours_against_the_reference_and_reports_missing_peers(tmp_path, op):
    proc, out = _dry_run(tmp_path, "--op", op)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    name = f"{op}_bench"
    assert {p.name for p in out.iterdir()} == {f"{name}.jsonl", f"{name}.log", f"{name}.md"}
    rows = _rows(out / f"{name}.jsonl")
    env = rows[0]
    assert env["phase"] == "env" and env["op"] == op
    cases = [r for r in rows if r.get("phase") in PHASES[op]]
    assert {r["phase"] for r in cases} == PHASES[op]
    assert not [r for r in cases if "error" in r], [r for r in cases if "error" in r]
    ours = [r for r in cases if r["impl"] == "ours"]
    reference = [r for r in cases if r["impl"] == "torch"]
    assert ours and len(ours) == len(reference)
    for row in ours:
        assert row["label"] == f"ours (Triton, kernels.{op})"
        assert row["ref"] == "torch" and row["rel_o"] < 1e-4 and row["rel_state"] < 1e-4, row
        assert row["us"] > 0 and row["nonfinite_o"] == 0 and row["nonfinite_state"] == 0
    for row in reference:
        assert row["ref"] == "itself" and row["us"] > 0
    peers = [r for r in cases if r["impl"] not in ("ours", "torch")]
    assert {r["impl"] for r in peers} == PEERS[op]
    # not installed in the CPU venv: a reason per row, never a crash (or measured, where installed)
    for row in peers:
        assert "skipped" in row or "us" in row, row
    table = (out / f"{name}.md").read_text()
    assert "| phase | case | impl |" in table
    assert "fla" in table and "ours" in table and "torch" in table


def test_the_budget_cuts_cases_and_says_so(tmp_path):
    proc, out = _dry_run(
        tmp_path, "--op", "lightning", "--only", "decode", "--impl", "torch", "--budget", "0"
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [r for r in _rows(out / "lightning_bench.jsonl") if r.get("phase") == "decode"]
    assert rows and all(r["skipped"] == "time budget" for r in rows)
    assert "rows cut by --budget" in (out / "lightning_bench.md").read_text()


def test_the_op_settings_are_the_issue_shapes():
    sys.path.insert(0, str(ROOT))
    from benchmarks import gdn_bench

    assert gdn_bench.OP == "gdn" and (gdn_bench.H, gdn_bench.HV, gdn_bench.K, gdn_bench.V) == (
        16,
        32,
        128,
        128,
    )
    kda, lightning = gdn_bench.OPS["kda"], gdn_bench.OPS["lightning"]
    assert kda["shape"] == (32, 32, 128, 128) and lightning["shape"] == (64, 64, 128, 128)
    assert [lens for _, lens in kda["prefill"]] == [(4096,), (16384,), (2048,) * 16]
    assert [lens for _, lens in lightning["prefill"]] == [(4096,), (16384,), (2048,) * 16]
    assert kda["decode_bs"] == (64, 256, 1024) and kda["verify_bs"] == (64,)
    assert lightning["decode_bs"] == (64, 256) and lightning["scale"] == 1.0
    slopes = -gdn_bench.minimax_decay(64, device="cpu")
    assert slopes[0].item() == pytest.approx(2 ** (-8 / 64) * (1 + 1e-5))
    assert slopes[-1].item() == pytest.approx(2**-8 * (1 + 1e-5))
