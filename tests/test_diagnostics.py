"""Golden diagnostics: the exact stderr of `stampgen check` for small broken rules files.

Each case is a pair in tests/diagnostics/: `<code>.rules` or `<code>--<case>.rules` (a file that triggers the
diagnostic `code`) and `<same name>.expected` (everything `stampgen check` prints for it: one
`PATH:LINE:COL: error|warning: MESSAGE [code]` per problem, then the source line, a caret under the span,
the hint if any, and the summary line). The CLI runs in-process from the repository root, so paths in the
goldens are `tests/diagnostics/...`.

A case named `clean--<case>.rules` pins the opposite: a file that must check with nothing to report (its
golden is empty). `check` runs with its imports (registries and consumer modules the rules name), and on
STAMPGEN_TODAY=2026-01-15, so that the waiver cases say the same thing on every day.

To add a case, write the .rules file and run the suite with STAMPGEN_ACCEPT=1 to write (or rewrite) the
.expected files; then read the diff of the goldens as carefully as a code change:

    STAMPGEN_ACCEPT=1 .venv/bin/python -m pytest tests/test_diagnostics.py
"""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import pytest

from stampgen.codegen.cli import main

REPO = Path(__file__).resolve().parent.parent
CASES_DIR = REPO / "tests" / "diagnostics"
CASES = sorted(CASES_DIR.glob("*.rules"))
CLEAN = "clean"  # the pinned "code" of the cases that must report nothing
FINDINGS = [c for c in CASES if c.stem.split("--", 1)[0] != CLEAN]
ACCEPT = os.environ.get("STAMPGEN_ACCEPT") == "1"
TODAY = "2026-01-15"
# codes that need more than one file, pinned by the tests named here instead of a golden
ACROSS_FILES = {"duplicate-stamp": "tests/test_vacuous.py"}

HEADER = re.compile(
    r"^(?P<path>\S+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning): .+ \[(?P<code>[a-z-]+)\]$"
)
SUMMARY = re.compile(r"^(\d+) error\(s\), (\d+) warning\(s\) in 1 file\(s\)$")


def pinned_code(case: Path) -> str:
    return case.stem.split("--", 1)[0]


def run_check(case: Path, monkeypatch) -> tuple[int, str, str]:
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("STAMPGEN_TODAY", TODAY)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", case.relative_to(REPO).as_posix()], out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def headers(stderr: str) -> list[re.Match]:
    return [m for m in map(HEADER.match, stderr.splitlines()) if m]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_check_prints_exactly_the_golden_diagnostics(case: Path, monkeypatch):
    status, stdout, stderr = run_check(case, monkeypatch)
    golden = case.with_suffix(".expected")
    if ACCEPT:
        golden.write_text(stderr, encoding="utf-8")
    assert golden.exists(), f"no golden for {case.name}: run with STAMPGEN_ACCEPT=1 and review it"
    assert stderr == golden.read_text(encoding="utf-8"), f"stderr of `stampgen check {case.name}` changed"
    assert stdout == "", "check reports on stderr only"


@pytest.mark.parametrize("case", FINDINGS, ids=lambda p: p.stem)
def test_each_case_reports_the_code_it_is_named_for(case: Path, monkeypatch):
    _, _, stderr = run_check(case, monkeypatch)
    codes = {m["code"] for m in headers(stderr)}
    assert pinned_code(case) in codes, f"{case.name} should report [{pinned_code(case)}], got {sorted(codes)}"


@pytest.mark.parametrize("case", [c for c in CASES if c not in FINDINGS], ids=lambda p: p.stem)
def test_a_clean_case_checks_with_nothing_to_report(case: Path, monkeypatch):
    assert run_check(case, monkeypatch) == (0, "", "")


@pytest.mark.parametrize("case", FINDINGS, ids=lambda p: p.stem)
def test_exit_code_is_1_with_errors_and_0_with_warnings_only(case: Path, monkeypatch):
    status, _, stderr = run_check(case, monkeypatch)
    found = headers(stderr)
    errors = sum(m["sev"] == "error" for m in found)
    warnings = sum(m["sev"] == "warning" for m in found)
    assert found, "a broken file must report something"
    assert status == (1 if errors else 0)
    summary = SUMMARY.match(stderr.splitlines()[-1])
    assert summary and (int(summary[1]), int(summary[2])) == (errors, warnings)


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_every_problem_points_into_the_file_with_its_source_line_and_a_caret(case: Path, monkeypatch):
    _, _, stderr = run_check(case, monkeypatch)
    lines = stderr.splitlines()
    try:
        source = case.read_text(encoding="utf-8").split("\n")  # lines end at \n only, as the parser counts
    except UnicodeDecodeError:
        source = None  # the `unreadable` case: no source line to show
    for i, line in enumerate(lines):
        m = HEADER.match(line)
        if not m:
            continue
        assert m["path"] == case.relative_to(REPO).as_posix()
        if source is None:
            continue
        row, col = int(m["line"]), int(m["col"])
        assert 1 <= row <= len(source)
        assert lines[i + 1] == "  " + source[row - 1].expandtabs(1)
        caret = lines[i + 2]
        assert re.fullmatch(r"  ( *)\^~*", caret), caret
        assert len(caret) - len(caret.lstrip()) == col + 1, "the caret sits under the reported column"


def _codes_the_tool_can_emit() -> set[str]:
    checks = "".join(
        p.read_text(encoding="utf-8") for p in sorted((REPO / "codegen" / "checks").glob("*.py"))
    )
    codes = set(re.findall(r"(?:self\.(?:err|warn)|\berror|\bwarning)\(\s*\"([a-z-]+)\"", checks))
    front = (REPO / "codegen" / "parser.py").read_text(encoding="utf-8")
    front += (REPO / "codegen" / "load.py").read_text(encoding="utf-8")
    # what the emitters refuse, which `check` reports too
    front += "".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "codegen" / "emit").glob("*.py")))
    codes |= set(re.findall(r"\berror\(\s*\"([a-z-]+)\"", front))
    return codes - set(ACROSS_FILES)


def test_every_diagnostic_code_of_the_checker_and_parser_has_a_golden():
    emitted = _codes_the_tool_can_emit()
    pinned = {pinned_code(c) for c in FINDINGS}
    assert {"syntax", "syntax-char", "unreadable", "unknown-name", "not-total"} <= emitted
    assert sorted(emitted - pinned) == [], "add tests/diagnostics/<code>.rules for these codes"
    assert sorted(pinned - emitted) == [], "goldens named for codes nothing emits"


def test_at_least_25_distinct_codes_are_pinned():
    assert len({pinned_code(c) for c in CASES}) >= 25


def test_the_warning_only_cases_exist_so_exit_0_is_exercised(monkeypatch):
    statuses = {run_check(c, monkeypatch)[0] for c in CASES}
    assert statuses == {0, 1}


def test_every_golden_has_its_rules_file():
    orphans = [g.name for g in CASES_DIR.glob("*.expected") if not g.with_suffix(".rules").exists()]
    assert orphans == []


def test_the_codes_that_need_two_files_are_pinned_where_they_say():
    for code, where in ACROSS_FILES.items():
        assert f"[{code}]" in (REPO / where).read_text(encoding="utf-8"), f"{where} does not pin [{code}]"
