"""The rules language cannot inject code into the generated Python.

Names: the checker refuses keywords and `_` names, and the generator refuses names that would clash with
its own. Strings (messages, logs, registries, patterns, suffixes): emitted as Python literals, whole, never
in a comment or docstring, and reach the user exactly as written. Importing a generated module defines
things and does nothing else.
"""

from __future__ import annotations

import ast
import io
import os
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

from stampgen.codegen import ir
from stampgen.codegen.generate import run_generate
from stampgen.codegen.load import load

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "tests" / "fixtures" / "injection.rules"


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("injection-repo")
    (root / "rules").mkdir()
    shutil.copy(FIXTURE, root / "rules" / "injection.rules")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        err = io.StringIO()
        assert run_generate(["rules/injection.rules"], "gen", out=io.StringIO(), err=err) == 0, err.getvalue()
    finally:
        os.chdir(cwd)
    return root


def rules_strings() -> list[str]:
    """Every string the fixture's rules hold: messages, logs, the registry, the pattern, the suffixes."""
    loaded = load(str(FIXTURE))
    assert loaded.ok and loaded.model is not None
    found: list[str] = []
    for decl in loaded.model.file.decls:
        stmts = getattr(decl, "stmts", ())
        for stmt in stmts:
            for attr in ("message", "log"):
                value = getattr(stmt, attr, None)
                if isinstance(value, str):
                    found.append(value)
        if isinstance(decl, ir.AutoDecl) and decl.log:
            found.append(decl.log)
        if isinstance(decl, ir.ParityDecl):
            found += [decl.registry, decl.draft or ""] + [t for t in decl.targets if t]
        if isinstance(decl, ir.GuardDecl):
            found.append(decl.module)
    return found


def test_the_fixture_really_is_hostile() -> None:
    text = "\n".join(rules_strings())
    for needle in ('"""', "'''", "\\", "{", "%s", "import os", "\u2028", "\t"):
        assert needle in text, needle


def test_every_rules_string_is_one_whole_literal_of_the_module(scratch: Path) -> None:
    tree = ast.parse((scratch / "gen" / "injection.py").read_text(encoding="utf-8"))
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    for text in rules_strings():
        if text in ("fixture_missing_module",):  # guards are checked by the generated tests only
            continue
        assert text in constants, text
    hostile = [c for c in constants if "pwned" in c or "SystemExit" in c or "__import__" in c]
    assert sorted(hostile) == sorted(
        t for t in rules_strings() if "pwned" in t or "SystemExit" in t or "__import__" in t
    )


def test_comments_and_names_carry_no_rules_text(scratch: Path) -> None:
    for name in ("injection.py", "test_injection.py"):
        with open(scratch / "gen" / name, "rb") as f:
            tokens = list(tokenize.tokenize(f.readline))
        names = {t.string for t in tokens if t.type == tokenize.NAME}
        assert not names & {"os", "system", "pwned", "echo", "__import__", "eval", "exec", "SystemExit"}, name
        for t in tokens:
            if t.type == tokenize.COMMENT:
                assert not set(t.string) & set("\"'\\{}%"), t.string


def test_messages_and_logs_reach_the_user_exactly(scratch: Path, caplog: pytest.LogCaptureFixture) -> None:
    sys.path.insert(0, str(scratch))
    try:
        from gen import injection  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(scratch))
    from types import SimpleNamespace

    strings = rules_strings()
    forbid = next(s for s in strings if s.startswith("quote"))
    with pytest.raises(injection.RuleViolationError) as excinfo:
        injection.boot(
            SimpleNamespace(debug=True, backend="triton", override=None), injection.LaunchFacts(sm=10)
        )
    assert excinfo.value.message == forbid
    with caplog.at_level("INFO", logger=injection.__name__):
        changes = injection.boot(SimpleNamespace(debug=False, backend="triton", override=None),
                                 injection.LaunchFacts(sm=10))  # fmt: skip
        stamp = injection.S(b="flashinfer")
        injection.validate_consumer(
            injection.S(b="flashinfer"), cfg=SimpleNamespace(debug=False, backend="flashinfer")
        )
    assert changes == {"cfg": {"override": injection.Backend.FLASHINFER}}
    messages = [r.getMessage() for r in caplog.records]
    set_log = next(s for s in strings if s.startswith('"""'))
    fallback_log = next(s for s in strings if s.startswith("f-string"))
    assert any(m.startswith(set_log + " [") for m in messages), messages
    assert any(m.startswith(fallback_log + " [") for m in messages), messages
    assert stamp.b is injection.Backend.FLASHINFER
    with pytest.raises(injection.RuleViolationError) as excinfo:
        injection.validate_consumer(
            injection.S(b="flashinfer"), cfg=SimpleNamespace(debug=True, backend=None)
        )
    assert excinfo.value.message == next(s for s in strings if s.startswith("LSEP"))


def test_importing_a_generated_module_only_defines_things(scratch: Path) -> None:
    code = """
import logging, os, sys
import msgspec  # and whatever it imports
before_modules = set(sys.modules)
before_files = sorted(os.listdir("."))
before_handlers = list(logging.getLogger().handlers)
import gen.injection as m
new = sorted(n.split(".")[0] for n in set(sys.modules) - before_modules)
allowed = set(sys.stdlib_module_names) | {"gen"}
assert set(new) <= allowed, set(new) - allowed
assert sorted(os.listdir(".")) == before_files
assert logging.getLogger().handlers == before_handlers
assert not logging.getLogger(m.__name__).handlers
print("clean")
"""
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env, capture_output=True, text=True)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "clean\n", "")


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("enum class { a }", "keyword"),
        ("enum E { a _b }", "starts with `_`"),
        ("enum E { import }", "keyword"),
        ("config _private { x: bool = false }", "starts with `_`"),
    ],
)
def test_the_checker_refuses_names_python_would_misread(tmp_path: Path, rules: str, expected: str) -> None:
    path = tmp_path / "bad.rules"
    path.write_text(rules + "\n")
    err = io.StringIO()
    assert run_generate([str(path)], str(tmp_path / "out"), out=io.StringIO(), err=err) == 1
    assert "error" in err.getvalue() and not (tmp_path / "out").exists()


CLASHES = {
    "a gate named like the module's logger": (
        "enum K { a b }\nconfig c { k: K = a }\nfacts runner { big: bool }\n"
        "auto logger: K = b when runner.big\nstamp S on runner.s { slot d: K from logger\n x = auto d > base c.k }\n",
        "`logger`",
    ),
    "a gate named like a generated resolver": (
        "enum K { a b }\nconfig c { k: K = a }\nfacts runner { big: bool }\n"
        "auto resolve_s: K = b when runner.big\nstamp S on runner.s { slot d: K from resolve_s\n x = auto d > base c.k }\n",
        "`resolve_s`",
    ),
    "two enum members that differ in case": (
        "enum K { a A }\nconfig c { k: K = a }\nstamp S on runner.s { x = base c.k }\n",
        "K.A",
    ),
    "a caller-given slot named like the runner parameter": (
        "enum K { a b }\nconfig c { k: K = a }\nstamp S on runner.s { slot runner: K\n x = auto runner > base c.k }\n",
        "`runner`",
    ),
    "a config namespace named like the validated stamp's parameter": (
        "enum K { a b }\nconfig stamp { k: K = a }\nstamp S on runner.s { x = base stamp.k }\n"
        'validate V { forbid S.x == b and stamp.k == a "no" }\n',
        "`stamp`",
    ),
}


@pytest.mark.parametrize("case", sorted(CLASHES))
def test_a_name_that_clashes_with_a_generated_one_is_refused(tmp_path: Path, case: str) -> None:
    rules, expected = CLASHES[case]
    path = tmp_path / "clash.rules"
    path.write_text(rules)
    err = io.StringIO()
    status = run_generate([str(path)], str(tmp_path / "out"), out=io.StringIO(), err=err)
    text = err.getvalue()
    assert status == 1, text
    assert "generated-name-clash" in text and expected in text, text
    assert f"{path.as_posix()}:" in text and "Traceback" not in text
    assert not (tmp_path / "out").exists()


def test_a_path_that_cannot_be_named_safely_is_refused(tmp_path: Path) -> None:
    weird = tmp_path / "rules\nimport os"
    weird.mkdir()
    shutil.copy(FIXTURE, weird / "x.rules")
    err = io.StringIO()
    assert run_generate([str(weird / "x.rules")], str(tmp_path / "out"), out=io.StringIO(), err=err) == 2
    assert "stampgen names this path in generated code" in err.getvalue()
