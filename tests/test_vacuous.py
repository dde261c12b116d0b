"""No invariant holds vacuously: what would make a rule check nothing is a `check` error, and the generated
test of such a rule fails, saying why, rather than skip or pass.

Single-file verdicts (an empty file, a registry or consumer module that does not import, a misspelt hook,
a name `generate` refuses) are pinned by the goldens in tests/diagnostics/; this file holds what needs
more than one file, the `--no-import` switch, and the generated tests themselves.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stampgen.codegen.generate import run_generate

HEADER = """\
enum Kernel { naive fused }
config settings {
    kernel: Kernel = naive
}
"""


def stamp(name: str, attribute: str) -> str:
    return f"stamp {name} on runner.{attribute} {{\n    kernel = base settings.kernel\n}}\n"


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------------------------- across files


def test_two_files_declaring_one_stamp_is_an_error_at_the_second(stampgen, tmp_path):
    a = write(tmp_path, "a.rules", HEADER + stamp("Pick", "pick"))
    b = write(tmp_path, "b.rules", HEADER + stamp("Pick", "other_pick"))
    status, _, err = stampgen("check", a, b)
    assert status == 1
    assert f"{b}:5:7: error: stamp `Pick` is also declared in {a} [duplicate-stamp]" in err
    assert f"hint: first declared at {a}:5:7; keep one of them" in err
    assert err.endswith("1 error(s), 0 warning(s) in 2 file(s)\n")


def test_two_files_stamping_one_runner_attribute_is_an_error_at_the_second(stampgen, tmp_path):
    a = write(tmp_path, "a.rules", HEADER + stamp("Pick", "pick"))
    b = write(tmp_path, "b.rules", HEADER + stamp("Choice", "pick"))
    status, _, err = stampgen("check", str(tmp_path))
    assert status == 1
    assert (
        f"{b}:5:17: error: stamps `Pick` ({a}) and `Choice` both live on `runner.pick` [duplicate-stamp-target]"
    ) in err
    assert f"hint: first stamped at {a}:5:15" in err


def test_a_file_checked_alone_has_no_one_to_clash_with(stampgen, tmp_path):
    write(tmp_path, "a.rules", HEADER + stamp("Pick", "pick"))
    b = write(tmp_path, "b.rules", HEADER + stamp("Pick", "pick"))
    assert stampgen("check", b) == (0, "", "")


def test_cross_file_errors_become_github_annotations(stampgen, tmp_path):
    write(tmp_path, "a.rules", HEADER + stamp("Pick", "pick"))
    b = write(tmp_path, "b.rules", HEADER + stamp("Pick", "pick"))
    status, out, _ = stampgen("check", "--format", "github", str(tmp_path))
    assert status == 1
    assert f"::error file={b},line=5,col=7,title=duplicate-stamp::stamp `Pick` is also declared in" in out
    assert f"::error file={b},line=5,col=15,title=duplicate-stamp-target::" in out


def test_a_name_generate_would_refuse_is_a_check_annotation_with_its_position(stampgen, tmp_path):
    path = write(tmp_path, "c.rules", HEADER + stamp("Pick", "pick") + "enum Mapping { a }\n")
    status, out, _ = stampgen("check", "--format", "github", path)
    assert status == 1
    assert (
        f"::error file={path},line=8,col=6,title=generated-name-clash::enum `Mapping` would generate" in out
    )


# --------------------------------------------------------------------------------------------- imports


GUARDED = HEADER + stamp("Pick", "pick") + 'guard Builder from "vacuous_consumers" reads Pick\n'


def test_check_imports_a_consumer_module_from_the_project_root_wherever_it_runs(
    stampgen, tmp_path, monkeypatch
):
    (tmp_path / "rules").mkdir()
    (tmp_path / "docs").mkdir()
    write(tmp_path / "rules", "x.rules", GUARDED)
    write(tmp_path, "vacuous_consumers.py", "class Builder:\n    pass\n")
    monkeypatch.chdir(tmp_path / "docs")
    assert stampgen("check") == (0, "", "")


def test_no_import_skips_what_only_importing_finds(stampgen, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write(tmp_path, "x.rules", GUARDED.replace("vacuous_consumers", "vacuous_missing_consumers"))
    status, _, err = stampgen("check", path)
    assert status == 1 and "[consumer-module-not-importable]" in err
    assert stampgen("check", "--no-import", path) == (0, "", "")


def test_what_an_imported_module_prints_stays_out_of_the_json_report(stampgen, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, "vacuous_noisy.py", 'print("hello")\nimport sys\nprint("noise", file=sys.stderr)\n')
    path = write(tmp_path, "x.rules", GUARDED.replace("vacuous_consumers", "vacuous_noisy"))
    status, out, err = stampgen("check", "--format", "json", path)
    assert status == 1 and err == ""
    assert out.startswith("[") and '"code": "unknown-consumer"' in out


# --------------------------------------------------------------------------------------------- generated tests

MISSING_REGISTRY = (
    HEADER
    + stamp("One", "one")
    + """\
parity drafts over "vacuous_absent_registry:MODELS" {
    draft /MTP$/
    target base
    hooks loader_hook
}
"""
)
MISSING_CONSUMERS = HEADER + stamp("Two", "two") + 'guard Builder from "vacuous_absent_consumers" reads Two\n'
MISSPELT_HOOK = (
    HEADER
    + stamp("Three", "three")
    + """\
parity drafts over "vacuous_registry:MODELS" {
    draft /MTP$/
    target base
    hooks lodaer_hook
}
"""
)
REGISTRY = """\
class A:
    @classmethod
    def loader_hook(cls):
        return None


class AMTP(A): ...


MODELS = {"A": A, "AMTP": AMTP}
"""
CASES = {
    "missing_registry": MISSING_REGISTRY,
    "missing_consumers": MISSING_CONSUMERS,
    "misspelt_hook": MISSPELT_HOOK,
}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Each case generated into vacuous_gen/ (generate does not import: only `check` and the tests do)."""
    root = tmp_path_factory.mktemp("vacuous")
    (root / "rules").mkdir()
    for name, text in CASES.items():
        write(root / "rules", f"{name}.rules", text)
    write(root, "vacuous_registry.py", REGISTRY)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        err = io.StringIO()
        rules = [f"rules/{name}.rules" for name in CASES]
        assert run_generate(rules, "vacuous_gen", out=io.StringIO(), err=err) == 0, err.getvalue()
    finally:
        os.chdir(cwd)
    return root


def _generated_test(scratch: Path, name: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:randomly"]
    return subprocess.run(
        [*cmd, f"vacuous_gen/test_{name}.py"], cwd=scratch, env=env, capture_output=True, text=True
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, says",
    [
        ("missing_registry", "the module vacuous_absent_registry does not import (ModuleNotFoundError"),
        ("missing_consumers", "the module vacuous_absent_consumers does not import (ModuleNotFoundError"),
        ("misspelt_hook", "no class of vacuous_registry:MODELS has lodaer_hook: is it misspelt?"),
    ],
)
def test_a_generated_test_fails_rather_than_skips_when_its_rule_would_hold_nothing(scratch, name, says):
    proc = _generated_test(scratch, name)
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "1 failed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-4000:]
    assert says in proc.stdout, proc.stdout[-4000:]


def test_check_says_the_same_before_the_tests_run(stampgen, scratch, monkeypatch):
    monkeypatch.chdir(scratch)
    status, _, err = stampgen("check")
    assert status == 1
    for code in ("registry-not-importable", "consumer-module-not-importable", "unknown-hook"):
        assert f"[{code}]" in err
    assert "hint: did you mean `loader_hook`?" in err
