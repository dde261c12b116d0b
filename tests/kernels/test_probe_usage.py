"""The GPU probes of ``benchmarks/`` refuse bad arguments with a usage error (exit 2, one line naming
what is wrong and what is allowed), never a traceback, and say so before they need a GPU."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHUNKED = str(ROOT / "benchmarks" / "chunked_prefill_probe.py")
TILES = str(ROOT / "benchmarks" / "recurrent_tile_probe.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def _assert_usage_error(done: subprocess.CompletedProcess, names: list[str]) -> None:
    """Exit 2, no traceback, and a last line of argparse's ``error:`` naming each of ``names``."""
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and "error:" in last
    for name in names:
        assert name in last, last


@pytest.mark.parametrize(
    "args,names",
    [
        (["--op", "kda", "--variations", '[{"bogus": 1}]'], ["bogus", "key_block", "levels_only"]),
        (["--op", "lightning", "--variations", '[{"key_block": 64}]'], ["key_block", "segments", "gluon"]),
        (["--op", "kda", "--variations", '[{"segments": 2}]'], ["segments"]),  # lightning's alone
        (["--op", "kda", "--variations", "[1]"], ["not an object"]),
        (["--op", "lightning", "--variations", '[{"segments": 0}]'], ["segments", "positive", "0"]),
        (["--op", "lightning", "--variations", '[{"segments": "2"}]'], ["segments", "'2'"]),
        (["--op", "kda", "--variations", "{"], ["not a JSON list"]),
        (["--op", "kda", "--cases", "T=4096,T=5"], ["T=5", "16x2048"]),
        (["--variations", "[]"], ["--op"]),
        (["--op", "gdn"], ["kda", "lightning"]),
    ],
    ids=[
        "unknown-field",
        "other-ops-field",
        "segments-on-kda",
        "not-an-object",
        "zero-segments",
        "segments-not-a-number",
        "bad-json",
        "bad-case",
        "no-op",
        "bad-op",
    ],  # fmt: skip
)
def test_the_chunked_prefill_probe_names_what_is_wrong(args, names):
    _assert_usage_error(_run(CHUNKED, *args), names)


def test_the_recurrent_tile_probe_names_a_bad_tile():
    done = _run(TILES, "--op", "kda", "--tiles", "auto,x")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "x" in done.stderr.strip().splitlines()[-1]


INTRA = str(ROOT / "benchmarks" / "gdn_intra_probe.py")
FUSED_COPY = "kernels/gdn/chunk_gluon_fused.py"  # the tree's own module serves as a copy of itself


@pytest.mark.parametrize(
    "args,names",
    [
        (["--variants", f"a={FUSED_COPY}", "--config", '{"gluon_fused_tbta": "worker"}'], ["gluon_fused_tbta", "gluon_fused_tbeta"]),
        (["--variants", f"a={FUSED_COPY}", "--config", "[1]"], ["--config", "not a JSON object"]),
        (["--variants", f"a={FUSED_COPY}", "--config", "{"], ["--config", "not a JSON object"]),
        (["--variants", f"a={FUSED_COPY}", "--config", '{"gluon_fused_tbeta": "wroker"}'], ["gluon_fused_tbeta", "'wroker'"]),
        (["--variants", f"a={FUSED_COPY}", "--config", '{"seg_chunks": "8"}'], ["seg_chunks", "'8'"]),
        (["--variants", f"a={FUSED_COPY}", "--config", '{"gluon_fused": 1}'], ["gluon_fused", "1"]),
        (["--variants", "a=kernels/gdn/chunk_config.py"], ["chunk_config.py", "launch_state"]),
        (["--variants", "a=no_such_copy.py"], ["no_such_copy.py"]),
    ],
    ids=[
        "unknown-config-field", "config-not-an-object", "config-bad-json", "config-value-not-allowed",
        "config-value-not-a-number", "config-int-for-bool", "copy-of-neither", "missing-copy",
    ],
)  # fmt: skip
def test_the_intra_probe_names_what_is_wrong(args, names):
    _assert_usage_error(_run(INTRA, *args), names)


KERNEL_TIMES = str(ROOT / "benchmarks" / "gdn_kernel_times.py")


@pytest.mark.parametrize(
    "args,names",
    [
        (["--cases", "4x2048,4by2048"], ["4by2048", "NxL"]),
        (["--cases", "0x2048"], ["0x2048", "NxL"]),
        (["--cases", ","], ["--cases", "none"]),
        (["--variations", '[{"seg_chunk": 32}]'], ["seg_chunk", "seg_chunks"]),
        (["--variations", '[{"seg_chunks": "32"}]'], ["seg_chunks", "'32'"]),
        (["--variations", "[1]"], ["not a JSON object"]),
        (["--variations", '{"seg_chunks": 32}'], ["not a JSON list"]),
        (["--variations", "["], ["not a JSON list"]),
    ],
    ids=[
        "bad-case", "empty-batch", "no-case", "unknown-field", "field-not-a-number", "item-not-an-object",
        "not-a-list", "bad-json",
    ],
)  # fmt: skip
def test_the_kernel_times_probe_names_what_is_wrong(args, names):
    _assert_usage_error(_run(KERNEL_TIMES, *args), names)


TIMELINE = str(ROOT / "benchmarks" / "gdn_windows_timeline.py")


@pytest.mark.parametrize(
    "args,names",
    [
        (["--variations", '[{"gluon_window_frist": 8}]'], ["--variations", "gluon_window_frist", "gluon_window_first"]),
        (["--variations", '[{"gluon_window_first": "8"}]'], ["gluon_window_first", "'8'"]),
        (["--variations", "{"], ["--variations", "not a JSON list"]),
        (["--tokens", "0"], ["--tokens", "0"]),
    ],
    ids=["unknown-field", "field-not-a-number", "bad-json", "no-tokens"],
)  # fmt: skip
def test_the_windows_timeline_names_what_is_wrong(args, names):
    _assert_usage_error(_run(TIMELINE, *args), names)


PREFILL = str(ROOT / "benchmarks" / "gdn_prefill_probe.py")


@pytest.mark.parametrize(
    "args,names",
    [
        (["--variations", '[{"seg_chunk": 32}]'], ["--variations", "seg_chunk", "seg_chunks", "segments"]),
        (["--variations", '[{"gluon_fused": "yes"}]'], ["gluon_fused", "'yes'"]),
        (["--variations", '[{"segments": 0}]'], ["segments", "positive", "0"]),
        (["--variations", '[{"segments": 1.5}]'], ["segments", "integer", "1.5"]),
        (["--variations", '[{"seg_scale": -1}]'], ["seg_scale", "positive", "-1"]),
        (["--variations", '[{"seg_scale": true}]'], ["seg_scale", "True"]),
        (["--variations", '{"segments": 2}'], ["--variations", "not a JSON list"]),
        (["--variations", "["], ["--variations", "not a JSON list"]),
    ],
    ids=[
        "unknown-field", "field-of-another-type", "zero-segments", "fractional-segments", "negative-scale",
        "bool-scale", "not-a-list", "bad-json",
    ],
)  # fmt: skip
def test_the_prefill_probe_names_what_is_wrong_in_its_variations(args, names):
    _assert_usage_error(_run(PREFILL, "--cases", "16x2048", *args), names)


def test_every_configuration_of_the_prefill_probes_sweep_is_one_it_accepts():
    """The sweep's configurations are checked as ``--variations`` are: a LaunchConfig field renamed or
    retyped fails here, not minutes into a GPU run."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.gdn_prefill_probe import PINNED_EXTRA, SWEEP
    from benchmarks.launch_overrides import checked_overrides

    assert SWEEP, "an empty sweep checks nothing"
    for variation in SWEEP:
        checked_overrides(dict(variation), PINNED_EXTRA)  # raises, naming the field, where one is wrong


PROFILE = str(ROOT / "benchmarks" / "gdn_prefill_profile.py")


@pytest.mark.parametrize(
    "args,names",
    [
        (["--config", '{"gluon_fused_tbta": "worker"}'], ["--config", "gluon_fused_tbta", "gluon_fused_tbeta"]),
        (["--config", '{"gluon_fused_tbeta": "wroker"}'], ["gluon_fused_tbeta", "'wroker'"]),
        (["--config", "[]"], ["--config", "not a JSON object"]),
        (["--config", '{"gluon_fused": true}', "--against", "kernels/gdn/chunk.py"], ["--config", "--against"]),
    ],
    ids=["unknown-field", "value-not-allowed", "not-an-object", "config-with-a-copy"],
)  # fmt: skip
def test_the_profile_driver_names_what_is_wrong_in_its_config(args, names):
    _assert_usage_error(_run(PROFILE, *args), names)


@pytest.mark.parametrize(
    "tool,args",
    [
        (PREFILL, ["--cases", "16x2048"]),
        (INTRA, ["--variants", f"a={FUSED_COPY}"]),
        (KERNEL_TIMES, []),
        (TIMELINE, []),
    ],
    ids=["prefill-probe", "intra-probe", "kernel-times", "windows-timeline"],
)
def test_an_out_folder_that_cannot_be_made_is_a_usage_error_before_any_gpu_work(tmp_path, tool, args):
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    _assert_usage_error(_run(tool, *args, "--out", str(blocker / "out")), ["--out"])
