"""The `stampgen` command line: exit codes scripts can trust (0 ok, 1 findings, 2 usage), quiet on success,
and never a Python traceback for bad input. Usage errors go through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CONSOLE_SCRIPT = Path(sys.executable).with_name("stampgen")
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def console(*argv: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    command = (
        [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "stampgen.codegen.cli"]
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([*command, *argv], cwd=cwd, capture_output=True, text=True, env=env, timeout=60)


# --------------------------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "the following arguments are required: command"),
        (["explain"], "the following arguments are required: stamp"),
        (["table"], "the following arguments are required: stamp"),
        (["table", "LinearAttnBackends", "--format", "yaml"], "invalid choice: 'yaml'"),
        (["explain", "LinearAttnBackends", "--format", "markdown"], "invalid choice: 'markdown'"),
        (["diff", "--format", "html"], "invalid choice: 'html'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["check", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
    ids=[
        "no-command",
        "explain-no-stamp",
        "table-no-stamp",
        "table-format",
        "explain-format",
        "diff-format",
        "unknown-command",
        "unknown-option",
    ],
)
def test_usage_errors_exit_2_with_usage_and_no_traceback(argv, message):
    result = console(*argv)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: stampgen")
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_console_script_checks_the_shipped_rules_quietly():
    result = console("check")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_the_console_script_reports_a_broken_file_with_exit_1():
    result = console("check", "tests/diagnostics/not-total.rules")
    assert result.returncode == 1
    assert result.stderr.startswith("tests/diagnostics/not-total.rules:9:5: error: ")


# --------------------------------------------------------------------------------------------- check


def test_check_defaults_to_the_rules_folder(stampgen):
    assert stampgen("check") == (0, "", "")


def test_check_of_a_folder_checks_every_rules_file_in_it(stampgen, tmp_path):
    (tmp_path / "a.rules").write_text(SHIPPED, encoding="utf-8")
    (tmp_path / "b.rules").write_text("enum E { a }\n", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not rules", encoding="utf-8")
    status, out, err = stampgen("check", str(tmp_path))
    assert status == 0 and out == ""
    assert f"{tmp_path / 'b.rules'}:1:6: warning: enum `E` is never used [unused]" in err
    assert err.endswith("0 error(s), 1 warning(s) in 2 file(s)\n")


def test_check_reports_every_file_and_exits_1_if_any_has_errors(stampgen):
    status, _, err = stampgen("check", "rules/linear_attn.rules", "tests/diagnostics/follow-cycle.rules")
    assert status == 1
    assert "[follow-cycle]" in err
    assert err.endswith("1 error(s), 0 warning(s) in 2 file(s)\n")


def test_check_of_a_missing_file_is_a_diagnostic_not_a_traceback(stampgen, tmp_path):
    missing = tmp_path / "missing.rules"
    status, out, err = stampgen("check", str(missing))
    assert status == 1 and out == ""
    assert err.startswith(
        f"{missing}:1:1: error: cannot read the file: No such file or directory [unreadable]"
    )


def test_check_of_a_folder_without_rules_is_a_usage_error(stampgen, tmp_path):
    status, out, err = stampgen("check", str(tmp_path))
    assert status == 2 and out == ""
    assert err.startswith("stampgen check: error: no .rules files found")


def test_check_finds_nothing_to_check_outside_a_project(stampgen, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = stampgen("check")
    assert status == 2 and "no .rules files found" in err


def test_check_of_a_directory_named_like_a_rules_file_is_not_a_crash(stampgen, tmp_path):
    folder = tmp_path / "odd.rules"
    folder.mkdir()
    status, _, err = stampgen("check", str(folder))
    assert status == 2 and "Traceback" not in err


# --------------------------------------------------------------------------------------------- other commands


def test_table_and_explain_exit_0_and_write_to_stdout(stampgen):
    for argv in (["table", "LinearAttnBackends"], ["explain", "LinearAttnBackends"]):
        status, out, err = stampgen(*argv)
        assert (status, err) == (0, "") and out


def test_table_of_rules_with_errors_exits_1_with_the_diagnostics(stampgen):
    status, out, err = stampgen("table", "Backends", "--rules", "tests/diagnostics/unknown-slot.rules")
    assert status == 1 and out == ""
    assert "[unknown-slot]" in err


def test_table_of_rules_with_syntax_errors_exits_1_with_the_diagnostics(stampgen):
    status, out, err = stampgen(
        "table", "Backends", "--rules", "tests/diagnostics/syntax--missing-tier.rules"
    )
    assert status == 1 and out == ""
    assert "[syntax]" in err


def test_fmt_check_passes_on_the_repository(stampgen):
    assert stampgen("fmt", "--check") == (0, "", "")


def test_check_json_lists_every_diagnostic_with_its_position_on_stdout(stampgen):
    status, out, err = stampgen("check", "--format", "json", "tests/diagnostics/follow-cycle.rules")
    assert status == 1 and err == ""
    [row] = json.loads(out)
    assert (row["path"], row["line"], row["col"], row["code"]) == (
        "tests/diagnostics/follow-cycle.rules",
        8,
        5,
        "follow-cycle",
    )
    assert row["severity"] == "error" and "cycle" in row["message"]


def test_check_github_format_prints_one_workflow_annotation_per_diagnostic(stampgen):
    status, out, _ = stampgen("check", "--format", "github", "tests/diagnostics/follow-cycle.rules")
    assert status == 1
    assert out.splitlines() == [
        "::error file=tests/diagnostics/follow-cycle.rules,line=8,col=5,title=follow-cycle::"
        "fields read each other in a cycle: decode -> verify -> decode"
    ]


def test_check_json_on_clean_rules_is_an_empty_list(stampgen):
    assert stampgen("check", "--format", "json", "rules/linear_attn.rules") == (0, "[]\n", "")
