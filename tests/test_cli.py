"""The `stampgen` command line: exit codes scripts can trust (0 ok, 1 findings, 2 usage and environment
errors, 130 interrupted), quiet on success, the same from any subfolder of a project, and never a Python
traceback. Usage errors go through the real console script."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from stampgen.codegen import cli, generate

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
    assert (
        f"{tmp_path / 'b.rules'}:1:1: warning: b.rules declares only vocabulary (enums, config, facts) and no "
        "rules file beside it imports it [unused]"
    ) in err
    assert err.endswith("0 error(s), 1 warning(s) in 2 file(s)\n")


def test_check_reports_every_file_and_exits_1_if_any_has_errors(stampgen):
    status, _, err = stampgen("check", "rules/linear_attn.rules", "tests/diagnostics/follow-cycle.rules")
    assert status == 1
    assert "[follow-cycle]" in err
    assert err.endswith("1 error(s), 0 warning(s) in 2 file(s)\n")


def test_check_of_a_missing_file_is_an_environment_error_not_a_traceback(stampgen, tmp_path):
    missing = tmp_path / "missing.rules"
    status, out, err = stampgen("check", str(missing))
    assert status == 2 and out == ""
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


def test_fmt_says_how_many_files_it_formatted(stampgen, tmp_path):
    for name in ("a", "b"):
        (tmp_path / f"{name}.rules").write_text("enum   E{a}\n", encoding="utf-8")
    (tmp_path / "c.rules").write_text("enum E { a }\n", encoding="utf-8")
    assert stampgen("fmt", str(tmp_path)) == (0, "", "2 file(s) formatted\n")
    assert stampgen("fmt", str(tmp_path)) == (0, "", "")


# --------------------------------------------------------------------------------------------- --version


def test_version_prints_the_installed_version_and_exits_0():
    result = console("--version")
    expected = f"stampgen {importlib.metadata.version('stampgen')}\n"
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")


# --------------------------------------------------------------------------------------------- exit 2


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "{missing}"],
        ["generate", "{missing}"],
        ["fmt", "{missing}"],
        ["fmt", "--check", "{missing}"],
        ["explain", "LinearAttnBackends", "--rules", "{missing}"],
        ["table", "LinearAttnBackends", "--rules", "{missing}"],
        ["diff", "{missing}", "rules/linear_attn.rules"],
    ],
    ids=["check", "generate", "fmt", "fmt-check", "explain", "table", "diff"],
)
def test_a_path_that_cannot_be_read_exits_2_naming_it(stampgen, tmp_path, argv):
    missing = str(tmp_path / "missing.rules")
    status, out, err = stampgen(*(a.replace("{missing}", missing) for a in argv))
    assert (status, out) == (2, "")
    assert err.startswith(f"{missing}:1:1: error: cannot read the file: No such file or directory")
    assert "Traceback" not in err


def test_a_folder_named_like_a_rules_file_exits_2(stampgen, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.rules").mkdir()  # found by the folder's glob, but not a file
    status, _, err = stampgen("check", str(tmp_path / "a"))
    assert status == 2 and "x.rules:1:1: error: cannot read the file: Is a directory" in err


@pytest.mark.parametrize("command", ["table", "explain"])
def test_an_unknown_stamp_exits_2(stampgen, command):
    status, out, err = stampgen(command, "NoSuchStamp")
    assert (status, out) == (2, "") and err.startswith(f"stampgen {command}: error: no stamp 'NoSuchStamp'")


# one field that reads twelve inputs: far more abstract rows than `table` and `diff` enumerate
TOO_WIDE = "\n".join(
    ["enum B { a b c d e f }", "config m {"]
    + [f"    x{i}: B?" for i in range(12)]
    + ["    base: B = a", "}", "stamp S on runner.s {"]
    + ["    f = flag m.x0 when " + " and ".join(f"m.x{i} == a" for i in range(1, 12)) + " > base m.base"]
    + ["}", ""]
)


def test_a_table_too_large_exits_2(stampgen, tmp_path):
    (tmp_path / "wide.rules").write_text(TOO_WIDE, encoding="utf-8")
    status, out, err = stampgen("table", "S", "--rules", str(tmp_path / "wide.rules"))
    assert (status, out) == (2, "")
    assert err.startswith("stampgen table: error: the decision table is too large to enumerate (S f: ")


def test_a_diff_too_large_exits_2(stampgen, tmp_path, monkeypatch):
    from stampgen.codegen import diff

    monkeypatch.setattr(diff, "MAX_NODES", 5)  # the real bound takes a far wider rules file to reach
    (tmp_path / "old.rules").write_text(TOO_WIDE, encoding="utf-8")
    (tmp_path / "new.rules").write_text(TOO_WIDE.replace("m.x1 == a", "m.x1 == b"), encoding="utf-8")
    status, out, err = stampgen("diff", str(tmp_path / "old.rules"), str(tmp_path / "new.rules"))
    assert (status, out) == (2, "")
    assert "(S.f: more than 5 rows)" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["generate"],
        ["generate", "--check"],
        ["fmt"],
        ["table", "S"],
        ["explain", "S"],
        ["diff", "HEAD"],
    ],
)
def test_a_bad_project_config_exits_2_with_one_line(stampgen, tmp_path, monkeypatch, argv):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "x.rules").write_text("enum E { a }\n", encoding="utf-8")
    (tmp_path / "stampgen.toml").write_text('rules = "../outside"\n', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    status, out, err = stampgen(*argv)
    assert (status, out) == (2, "")
    assert err == (
        f"stampgen {argv[0]}: error: {tmp_path.resolve() / 'stampgen.toml'}: "
        "`rules` must be a folder inside the project, got '../outside'\n"
    )


def test_generate_with_no_rules_files_exits_2(stampgen, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, _, err = stampgen("generate")
    assert status == 2 and "no .rules files found" in err


# --------------------------------------------------------------------------------------------- interrupts and bugs


def interrupting(stampgen, *argv: str) -> tuple[int, str, str]:
    try:
        return stampgen(*argv)
    except KeyboardInterrupt:  # not pytest's own: it would end the whole session
        pytest.fail("the KeyboardInterrupt escaped stampgen's main()")


def test_ctrl_c_prints_one_line_and_exits_130(stampgen, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_check", interrupted)
    assert interrupting(stampgen, "check") == (130, "", "stampgen: interrupted\n")


def test_a_real_sigint_through_the_console_script_is_one_line(layout):
    # the "ruff" stampgen asks for its version interrupts stampgen, as a Ctrl-C in the terminal would
    ruff = layout.root / "interrupting-ruff"
    ruff.write_text("#!/bin/sh\nkill -INT $PPID\nsleep 10\n")
    ruff.chmod(0o755)
    command = (
        [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "stampgen.codegen.cli"]
    )
    env = {**os.environ, "STAMPGEN_RUFF": str(ruff)}
    result = subprocess.run(
        [*command, "generate"], cwd=layout.root, capture_output=True, text=True, env=env, timeout=60
    )
    assert (result.returncode, result.stdout, result.stderr) == (130, "", "stampgen: interrupted\n")
    assert not layout.out.exists()


def test_ctrl_c_while_generating_writes_nothing(stampgen, layout, monkeypatch):
    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "render_outputs", interrupted)
    monkeypatch.chdir(layout.root)
    assert interrupting(stampgen, "generate") == (130, "", "stampgen: interrupted\n")
    assert not layout.out.exists()


def test_an_unexpected_exception_is_one_line_naming_it_and_exits_2(stampgen, monkeypatch):
    def broken(*args):
        raise RuntimeError("the table\nfell over")

    monkeypatch.setattr(cli, "cmd_table", broken)
    monkeypatch.delenv("STAMPGEN_DEBUG", raising=False)
    assert stampgen("table", "LinearAttnBackends") == (
        2,
        "",
        "stampgen table: internal error: RuntimeError: the table fell over "
        "(a stampgen bug; set STAMPGEN_DEBUG=1 for the traceback)\n",
    )


def test_stampgen_debug_shows_the_traceback_of_an_unexpected_exception(stampgen, monkeypatch):
    def broken(*args):
        raise RuntimeError("boom")

    monkeypatch.setattr(cli, "cmd_table", broken)
    monkeypatch.setenv("STAMPGEN_DEBUG", "1")
    status, _, err = stampgen("table", "LinearAttnBackends")
    assert status == 2
    assert err.startswith("Traceback (most recent call last):\n") and 'raise RuntimeError("boom")' in err
    assert err.endswith(
        "stampgen table: internal error: RuntimeError: boom (a stampgen bug; set STAMPGEN_DEBUG=1 for the traceback)\n"
    )


def test_a_reader_that_stops_early_gets_no_complaint():
    command = (
        [str(CONSOLE_SCRIPT)] if CONSOLE_SCRIPT.exists() else [sys.executable, "-m", "stampgen.codegen.cli"]
    )
    proc = subprocess.Popen(
        [*command, "table", "LinearAttnBackends"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    proc.stdout.close()  # before stampgen writes a byte: every write meets a closed pipe
    _, err = proc.communicate(timeout=60)
    assert (proc.returncode, err.decode()) == (0, "")


# --------------------------------------------------------------------------------------------- --quiet


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_drops_the_generate_summary(stampgen, layout, monkeypatch, where):
    monkeypatch.chdir(layout.root)
    argv = ["-q", "generate"] if where == "before" else ["generate", "--quiet"]
    assert stampgen(*argv) == (0, "", "")
    assert (layout.out / "x.py").is_file()
    assert stampgen(*argv) == (0, "", "")
    assert stampgen("generate") == (0, f"{layout.out.relative_to(layout.root)}: up to date\n", "")


def test_quiet_drops_the_fmt_summary(stampgen, tmp_path):
    path = tmp_path / "messy.rules"
    path.write_text("enum   E{a}\n", encoding="utf-8")
    assert stampgen("fmt", "-q", str(path)) == (0, "", "")
    assert path.read_text(encoding="utf-8") == "enum E { a }\n"


def test_quiet_keeps_warnings_but_drops_their_count(stampgen, tmp_path):
    (tmp_path / "w.rules").write_text("enum E { a }\n", encoding="utf-8")
    status, out, err = stampgen("-q", "check", str(tmp_path / "w.rules"))
    assert (status, out) == (0, "") and "warning: w.rules declares only vocabulary" in err
    assert "warning(s)" not in err


def test_quiet_never_drops_errors(stampgen):
    status, _, err = stampgen("check", "-q", "tests/diagnostics/follow-cycle.rules")
    assert status == 1 and "[follow-cycle]" in err
    assert err.endswith("1 error(s), 0 warning(s) in 1 file(s)\n")


# --------------------------------------------------------------------------------------------- any subfolder


class Layout(NamedTuple):
    root: Path
    rules: Path  # the rules file
    out: Path  # where the project's outputs go


CONFIGS = {  # config files, then where the project's rules and outputs are
    "none": ({}, "rules", "generated"),
    "pyproject": (
        {"pyproject.toml": '[tool.stampgen]\nrules = "spec"\nout = "src/gen"\n'},
        "spec",
        "src/gen",
    ),
    "stampgen.toml": ({"stampgen.toml": 'out = "out"\n'}, "rules", "out"),
}


@pytest.fixture(params=sorted(CONFIGS))
def layout(request, tmp_path) -> Layout:
    """A project with one rules file (x.rules, from tests/fixtures/minimal.rules) and a subfolder docs/deep."""
    files, rules, out = CONFIGS[request.param]
    root = tmp_path / "project"
    (root / rules).mkdir(parents=True)
    (root / "docs" / "deep").mkdir(parents=True)
    shutil.copy(REPO / "tests" / "fixtures" / "minimal.rules", root / rules / "x.rules")
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return Layout(root, root / rules / "x.rules", root / out)


def contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_generate_from_a_subfolder_writes_what_it_writes_from_the_root(stampgen, layout, monkeypatch):
    monkeypatch.chdir(layout.root)
    assert stampgen("generate") == (0, f"{layout.out.relative_to(layout.root)}: 2 written, 0 removed\n", "")
    from_root = contents(layout.out)
    shutil.rmtree(layout.out)
    monkeypatch.chdir(layout.root / "docs" / "deep")
    shown = f"../../{layout.out.relative_to(layout.root)}"
    assert stampgen("generate") == (0, f"{shown}: 2 written, 0 removed\n", "")
    assert sorted(from_root) == ["MANIFEST.json", "test_x.py", "x.py"]
    assert contents(layout.out) == from_root
    assert stampgen("generate") == (0, f"{shown}: up to date\n", "")


def test_out_overrides_the_projects_output_folder(stampgen, layout, monkeypatch):
    monkeypatch.chdir(layout.root / "docs")
    assert stampgen("generate", "--out", "here") == (0, "here: 2 written, 0 removed\n", "")
    assert sorted(contents(layout.root / "docs" / "here")) == ["MANIFEST.json", "test_x.py", "x.py"]
    assert not layout.out.exists()


def test_check_from_a_subfolder_finds_the_rules_and_names_them_from_there(stampgen, layout, monkeypatch):
    text = layout.rules.read_text(encoding="utf-8")
    layout.rules.write_text(text.replace("base settings.kernel", "base settings.kernal"), encoding="utf-8")
    monkeypatch.chdir(layout.root / "docs" / "deep")
    status, _, err = stampgen("check")
    assert status == 1
    assert err.startswith(f"../../{layout.rules.relative_to(layout.root)}:"), err
    assert f"../../{layout.rules.relative_to(layout.root)}:12:51: error: " in err


@pytest.mark.parametrize("argv", [["check"], ["fmt", "--check"], ["table", "Pick"], ["explain", "Pick"]])
def test_other_commands_find_the_rules_from_a_subfolder(stampgen, layout, monkeypatch, argv):
    monkeypatch.chdir(layout.root / "docs" / "deep")
    status, out, err = stampgen(*argv)
    assert (status, err) == (0, "")
    assert bool(out) == (argv[0] in ("table", "explain"))


def test_diff_from_a_subfolder_compares_the_projects_rules(stampgen, tmp_path, monkeypatch):
    root = tmp_path / "repo"
    (root / "rules").mkdir(parents=True)
    (root / "docs").mkdir()
    rules = root / "rules" / "linear_attn.rules"
    rules.write_text(SHIPPED, encoding="utf-8")
    for argv in (["init", "-q", "-b", "main"], ["add", "rules"], ["commit", "-q", "-m", "rules"]):
        git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *argv]
        subprocess.run(git, cwd=root, check=True, capture_output=True)
    monkeypatch.chdir(root / "docs")
    assert stampgen("diff", "HEAD") == (0, "no decision changed\n", "")
    rules.write_text(SHIPPED.replace("> triton\n}", "> flashinfer\n}", 1), encoding="utf-8")
    status, out, _ = stampgen("diff", "HEAD")
    assert status == 1 and "rules/linear_attn.rules:" in out
