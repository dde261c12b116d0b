"""The GPU probes of ``benchmarks/`` refuse bad arguments with a usage error (exit 2, one line naming
what is wrong and what is allowed), never a traceback, and say so before they need a GPU."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TILES = str(ROOT / "benchmarks" / "recurrent_tile_probe.py")
CHUNKED = str(ROOT / "benchmarks" / "chunked_prefill_probe.py")
INTRA = str(ROOT / "benchmarks" / "gdn_intra_probe.py")
KERNEL_TIMES = str(ROOT / "benchmarks" / "gdn_kernel_times.py")
TIMELINE = str(ROOT / "benchmarks" / "gdn_windows_timeline.py")
FUSED_TIMELINE = str(ROOT / "benchmarks" / "gdn_fused_timeline.py")
PREFILL = str(ROOT / "benchmarks" / "gdn_prefill_probe.py")
PROFILE = str(ROOT / "benchmarks" / "gdn_prefill_profile.py")
BENCH = str(ROOT / "benchmarks" / "gdn_bench.py")
PRECISION = str(ROOT / "benchmarks" / "gdn_precision.py")
RECURRENT = str(ROOT / "benchmarks" / "gdn_recurrent_probe.py")
MEMCHECK = str(ROOT / "benchmarks" / "gdn_memcheck.py")
FUSED_COPY = "kernels/gdn/chunk_gluon_fused.py"  # the tree's own module serves as a copy of itself
BROKEN_COPY = "{tmp}/broken_copy.py"  # written by the test: a copy that does not import (a syntax error)


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env
    )


def _assert_usage_error(done: subprocess.CompletedProcess, names: list[str]) -> None:
    """Exit 2, no traceback, and a last line of argparse's ``error:`` naming each of ``names``."""
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "Traceback" not in done.stderr and "error:" in last
    for name in names:
        assert name in last, last


def _usage(probe: str, tool: str, cases: dict[str, tuple[list[str], list[str]]], before=()) -> list:
    """One probe's bad arguments: case id → (its arguments after ``before``, the names its error must
    carry), as parameters of ``test_a_probe_names_what_is_wrong``."""
    return [
        pytest.param(tool, [*before, *args], names, id=f"{probe}-{case}")
        for case, (args, names) in cases.items()
    ]


USAGE_ERRORS = [
    *_usage("chunked", CHUNKED, {
        "unknown-field": (["--op", "kda", "--variations", '[{"bogus": 1}]'], ["bogus", "key_block", "levels_only"]),
        "other-ops-field": (["--op", "lightning", "--variations", '[{"key_block": 64}]'], ["key_block", "segments", "gluon"]),
        "segments-on-kda": (["--op", "kda", "--variations", '[{"segments": 2}]'], ["segments"]),  # lightning's alone
        "not-an-object": (["--op", "kda", "--variations", "[1]"], ["not an object"]),
        "zero-segments": (["--op", "lightning", "--variations", '[{"segments": 0}]'], ["segments", "positive", "0"]),
        "segments-not-a-number": (["--op", "lightning", "--variations", '[{"segments": "2"}]'], ["segments", "'2'"]),
        "bad-json": (["--op", "kda", "--variations", "{"], ["not a JSON list"]),
        "bad-case": (["--op", "kda", "--cases", "T=4096,T=5"], ["T=5", "16x2048"]),
        "no-op": (["--variations", "[]"], ["--op"]),
        "bad-op": (["--op", "gdn"], ["kda", "lightning"]),
    }),
    *_usage("intra", INTRA, {
        "unknown-config-field": (["--config", '{"gluon_fused_tbta": "worker"}'], ["gluon_fused_tbta", "gluon_fused_tbeta"]),
        "config-not-an-object": (["--config", "[1]"], ["--config", "not a JSON object"]),
        "config-bad-json": (["--config", "{"], ["--config", "not a JSON object"]),
        "config-value-not-allowed": (["--config", '{"gluon_fused_tbeta": "wroker"}'], ["gluon_fused_tbeta", "'wroker'"]),
        "config-value-not-a-number": (["--config", '{"seg_chunks": "8"}'], ["seg_chunks", "'8'"]),
        "config-int-for-bool": (["--config", '{"gluon_fused": 1}'], ["gluon_fused", "1"]),
        "no-rounds": (["--rounds", "0"], ["--rounds", "1 or more", "0"]),
        "rounds-not-a-number": (["--rounds", "two"], ["--rounds", "'two'"]),
    }, before=("--variants", f"a={FUSED_COPY}")),
    *_usage("intra", INTRA, {
        "copy-of-neither": (["--variants", "a=kernels/gdn/chunk_config.py"], ["chunk_config.py", "launch_state"]),
        "missing-copy": (["--variants", "a=no_such_copy.py"], ["no_such_copy.py"]),
        "copy-without-a-name": (["--variants", FUSED_COPY], ["--variants", "NAME=FILE", "chunk_gluon_fused.py"]),
        "a-name-twice": (["--variants", f"a={FUSED_COPY},a={FUSED_COPY}"], ["--variants", "'a'", "twice"]),
        "copy-that-does-not-import": (["--variants", f"a={BROKEN_COPY}"], ["--variants", "broken_copy.py", "SyntaxError"]),
    }),
    *_usage("kernel-times", KERNEL_TIMES, {
        "bad-case": (["--cases", "4x2048,4by2048"], ["--cases", "4by2048", "NxL"]),
        "empty-batch": (["--cases", "0x2048"], ["--cases", "0x2048", "NxL"]),
        "no-case": (["--cases", ","], ["--cases", "none"]),
        "unknown-field": (["--variations", '[{"seg_chunk": 32}]'], ["--variations", "seg_chunk", "seg_chunks"]),
        "field-not-a-number": (["--variations", '[{"seg_chunks": "32"}]'], ["--variations", "seg_chunks", "'32'"]),
        "item-not-an-object": (["--variations", "[1]"], ["--variations", "not a JSON object"]),
        "not-a-list": (["--variations", '{"seg_chunks": 32}'], ["--variations", "not a JSON list"]),
        "bad-json": (["--variations", "["], ["--variations", "not a JSON list"]),
    }),
    *_usage("timeline", TIMELINE, {
        "unknown-field": (["--variations", '[{"gluon_window_frist": 8}]'], ["--variations", "gluon_window_frist", "gluon_window_first"]),
        "field-not-a-number": (["--variations", '[{"gluon_window_first": "8"}]'], ["gluon_window_first", "'8'"]),
        "bad-json": (["--variations", "{"], ["--variations", "not a JSON list"]),
        "no-tokens": (["--tokens", "0"], ["--tokens", "0"]),
    }),
    *_usage("prefill", PREFILL, {
        "unknown-field": (["--variations", '[{"seg_chunk": 32}]'], ["--variations", "seg_chunk", "seg_chunks", "segments"]),
        "field-of-another-type": (["--variations", '[{"gluon_fused": "yes"}]'], ["gluon_fused", "'yes'"]),
        "zero-segments": (["--variations", '[{"segments": 0}]'], ["segments", "positive", "0"]),
        "fractional-segments": (["--variations", '[{"segments": 1.5}]'], ["segments", "integer", "1.5"]),
        "negative-scale": (["--variations", '[{"seg_scale": -1}]'], ["seg_scale", "positive", "-1"]),
        "bool-scale": (["--variations", '[{"seg_scale": true}]'], ["seg_scale", "True"]),
        "not-a-list": (["--variations", '{"segments": 2}'], ["--variations", "not a JSON list"]),
        "bad-json": (["--variations", "["], ["--variations", "not a JSON list"]),
    }, before=("--cases", "16x2048")),
    *_usage("profile", PROFILE, {
        "unknown-field": (["--config", '{"gluon_fused_tbta": "worker"}'], ["--config", "gluon_fused_tbta", "gluon_fused_tbeta"]),
        "value-not-allowed": (["--config", '{"gluon_fused_tbeta": "wroker"}'], ["gluon_fused_tbeta", "'wroker'"]),
        "not-an-object": (["--config", "[]"], ["--config", "not a JSON object"]),
        "config-with-a-copy": (["--config", '{"gluon_fused": true}', "--against", "kernels/gdn/chunk.py"], ["--config", "--against"]),
        "missing-copy": (["--against", "no_such_copy.py"], ["--against", "no_such_copy.py"]),
        "copy-that-does-not-import": (["--against", BROKEN_COPY], ["--against", "broken_copy.py", "SyntaxError"]),
    }),
    *_usage("prefill", PREFILL, {
        "missing-copy": (["--against", "kernels/gdn/chunk.py,no_such_copy.py"], ["--against", "no_such_copy.py"]),
        "copy-that-does-not-import": (["--against", BROKEN_COPY], ["--against", "broken_copy.py", "SyntaxError"]),
    }),
    *_usage("precision", PRECISION, {
        "copy-without-a-name": (["--against", "kernels/gdn/chunk.py"], ["--against", "NAME=FILE", "chunk.py"]),
        "copy-without-a-file": (["--against", "before="], ["--against", "NAME=FILE", "before="]),
        "missing-copy": (["--against", "before=no_such_copy.py"], ["--against", "no_such_copy.py"]),
        "copy-that-does-not-import": (["--against", f"before={BROKEN_COPY}"], ["--against", "broken_copy.py", "SyntaxError"]),
    }),
]  # fmt: skip


@pytest.mark.parametrize("tool,args,names", USAGE_ERRORS)
def test_a_probe_names_what_is_wrong(tmp_path, tool, args, names):
    (tmp_path / "broken_copy.py").write_text("def launch(:\n")
    _assert_usage_error(_run(tool, *[arg.replace("{tmp}", str(tmp_path)) for arg in args]), names)


def test_the_recurrent_tile_probe_names_a_bad_tile():
    done = _run(TILES, "--op", "kda", "--tiles", "auto,x")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "x" in done.stderr.strip().splitlines()[-1]


def test_every_configuration_of_the_prefill_probes_sweep_is_one_it_accepts():
    """The sweep's configurations are checked as ``--variations`` are: a LaunchConfig field renamed or
    retyped fails here, not minutes into a GPU run."""
    sys.path.insert(0, str(ROOT))
    from benchmarks.gdn_prefill_probe import PINNED_EXTRA, SWEEP
    from benchmarks.launch_overrides import checked_overrides

    assert SWEEP, "an empty sweep checks nothing"
    for variation in SWEEP:
        checked_overrides(dict(variation), PINNED_EXTRA)  # raises, naming the field, where one is wrong


@pytest.mark.parametrize(
    "tool,args,option",
    [
        (PREFILL, ["--cases", "16x2048"], "--out"),
        (INTRA, ["--variants", f"a={FUSED_COPY}"], "--out"),
        (KERNEL_TIMES, [], "--out"),
        (TIMELINE, [], "--out"),
        (FUSED_TIMELINE, [], "--out"),
        (CHUNKED, ["--op", "kda"], "--out"),
        (TILES, ["--op", "kda"], "--out"),
        (BENCH, ["--only", "prefill"], "--out"),
        (PRECISION, [], "--out"),
        (RECURRENT, [], "--out"),
    ],
    ids=[
        "prefill-probe", "intra-probe", "kernel-times", "windows-timeline", "fused-timeline", "chunked-probe",
        "tile-probe", "bench", "precision", "recurrent-probe",
    ],
)  # fmt: skip
def test_an_out_folder_that_cannot_be_made_is_a_usage_error_before_any_gpu_work(tmp_path, tool, args, option):
    # (the resources tool's --sass and --listing: test_kernel_resources_tool.py)
    blocker = tmp_path / "a-file"
    blocker.write_text("in the way")
    _assert_usage_error(_run(tool, *args, option, str(blocker / "out")), [option])


@pytest.mark.parametrize(
    "tool,args",
    [
        (TILES, ["--op", "kda", "--tiles", "x"]),
        (CHUNKED, ["--op", "kda", "--cases", "T=5"]),
        (PRECISION, ["--cases", "nope"]),
        (KERNEL_TIMES, ["--cases", "4by2048"]),
        (FUSED_TIMELINE, ["--cases", "4by2048"]),
        (PREFILL, ["--variations", '[{"segments": 0}]']),
        (PRECISION, ["--against", "before=no_such_copy.py"]),
        (PREFILL, ["--against", "no_such_copy.py"]),
    ],
    ids=[
        "tile-probe",
        "chunked-probe",
        "precision",
        "kernel-times",
        "fused-timeline",
        "prefill-probe",
        "precision-copy",
        "prefill-copy",
    ],
)
def test_a_refused_run_makes_no_out_folder(tmp_path, tool, args):
    # the folder is made once every other argument holds: a usage error leaves nothing behind
    out = tmp_path / "out"
    done = _run(tool, *args, "--out", str(out))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists()


NO_GPU = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # no GPU seen, on a GPU machine too


@pytest.mark.parametrize(
    "tool,args,out",
    [
        (PREFILL, ["--cases", "16x2048"], True),
        (INTRA, ["--variants", f"a={FUSED_COPY}"], True),
        (KERNEL_TIMES, [], True),
        (TIMELINE, [], True),
        (FUSED_TIMELINE, [], True),
        (CHUNKED, ["--op", "kda"], True),
        (TILES, ["--op", "kda"], True),
        (BENCH, ["--only", "prefill"], True),
        (PRECISION, [], True),
        (RECURRENT, [], True),
        (MEMCHECK, ["--rows", "gluon-windows"], False),
        (PROFILE, [], False),
    ],
    ids=[
        "prefill-probe", "intra-probe", "kernel-times", "windows-timeline", "fused-timeline", "chunked-probe",
        "tile-probe", "bench", "precision", "recurrent-probe", "memcheck", "profile",
    ],
)  # fmt: skip
def test_a_tool_without_its_gpu_says_so_as_a_usage_error_and_makes_no_out_folder(tmp_path, tool, args, out):
    """Every GPU tool refuses a machine without one alike: exit 2, argparse's one line naming what it
    needs, and (where it takes ``--out``) no folder left behind."""
    folder = tmp_path / "out"
    done = _run(tool, *args, *(["--out", str(folder)] if out else []), env=NO_GPU)
    _assert_usage_error(done, ["needs", "GPU"])
    assert not folder.exists()


def test_the_fused_timeline_refuses_a_case_that_does_not_run_the_fused_pass_before_any_gpu_work():
    # one sequence runs chunk_gluon, not the fused pass: said by name, before the GPU check (so here too)
    done = _run(FUSED_TIMELINE, "--cases", "16x2048,T=16384")
    _assert_usage_error(done, ["T=16384", "fused pass"])
    assert "16x2048" not in done.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("needs", [None, "a CUDA GPU"], ids=["cpu-tool", "gpu-tool"])
def test_an_out_folder_that_is_there_but_not_writable_is_a_usage_error(tmp_path, monkeypatch, capsys, needs):
    # (this machine runs as root, for whom every folder is writable: os.access says no for this one)
    import argparse

    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import out_folder

    locked, open_ = tmp_path / "locked", tmp_path / "open"
    locked.mkdir()
    open_.mkdir()
    real = os.access
    monkeypatch.setattr(out_folder.os, "access", lambda p, mode: Path(p) != locked and real(p, mode))
    parser = argparse.ArgumentParser(prog="tool")
    with pytest.raises(SystemExit) as refused:
        out_folder.out_dir(parser, str(locked), needs=needs)
    assert refused.value.code == 2
    assert f"--out: {locked}: cannot write into it" in capsys.readouterr().err
    if needs is None:  # the same folder writable passes (a GPU tool would go on to ask for its GPU)
        assert out_folder.out_dir(parser, str(open_)) == str(open_)
