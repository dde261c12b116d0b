"""Waivers: `waive CLASS until YYYY-MM-DD "reason"`, a dated and reasoned exception inside a parity or a
validate block.

A waiver that applies lets its offender pass until its date, and the generated code lists it as waived
(parity: `ParityReport.waived`; validate: a logged warning instead of a RuleViolationError); after the date
the offender fails again, `check` reports the waiver as expired, and so do the generated tests. The
checker's own verdicts (missing reason, bad date, expired, stale, duplicate) are pinned by the goldens in
tests/diagnostics/; this file holds the syntax and what the generated code does.
"""

from __future__ import annotations

import ast
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest

from stampgen.codegen import ir
from stampgen.codegen.fmt import format_rules
from stampgen.codegen.generate import run_generate
from stampgen.codegen.load import load_text
from stampgen.codegen.parser import parse
from stampgen.codegen.render import render_files

REPO = Path(__file__).resolve().parents[1]

RULES = """\
enum Backend { triton flashinfer }
config cfg {
    backend: Backend = triton
    strict: bool = false
}
stamp S on runner.s {
    b = base cfg.backend
}
validate Consumer {
    forbid cfg.strict and S.b == flashinfer "strict mode cannot use flashinfer"
    waive Consumer until 2030-06-30 "its deterministic kernel lands in June"
}
guard Consumer from "waiver_registry" reads S
parity p over "waiver_registry:MODELS" {
    draft /MTP$/
    target base
    hooks hook
    waive AMTP until 2030-06-30 "its hook lands with the loader rework"
}
"""

REGISTRY = """\
from waiver_gen.w import require_s, validate_consumer


class Consumer:
    def __init__(self, runner):
        self.s = validate_consumer(require_s(runner), cfg=runner, consumer=type(self))


class A:
    hook = None


class AMTP: ...  # lacks its target's hook: waived until 2030-06-30


class B:
    hook = None


class BMTP(B): ...


MODELS = {cls.__name__: cls for cls in (A, AMTP, B, BMTP)}
"""

BEFORE, LAST_DAY, AFTER = "2030-06-29", "2030-06-30", "2030-07-01"
# REGISTRY's classes, for calling the generated check directly: AMTP lacks its target's hook
ARCHS = {"A": type("A", (), {"hook": None}), "AMTP": type("AMTP", (), {}), "B": type("B", (), {"hook": None})}
ARCHS["BMTP"] = type("BMTP", (ARCHS["B"],), {})


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project generated from RULES into waiver_gen/, next to its registry and consumer."""
    root = tmp_path_factory.mktemp("waivers")
    (root / "rules").mkdir()
    (root / "rules" / "w.rules").write_text(RULES, encoding="utf-8")
    (root / "waiver_registry.py").write_text(REGISTRY, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        err = io.StringIO()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("STAMPGEN_TODAY", BEFORE)
            status = run_generate(["rules/w.rules"], "waiver_gen", out=io.StringIO(), err=err)
    finally:
        os.chdir(cwd)
    assert status == 0, err.getvalue()
    return root


@pytest.fixture(scope="module")
def generated(scratch: Path) -> ModuleType:
    sys.path.insert(0, str(scratch))
    try:
        import waiver_gen.w as module  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(scratch))
    return module


def _generated_tests(scratch: Path, today: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(scratch), "PYTHONDONTWRITEBYTECODE": "1", "STAMPGEN_TODAY": today}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "waiver_gen"]
    return subprocess.run(cmd, cwd=scratch, env=env, capture_output=True, text=True)


# --------------------------------------------------------------------------------------------- syntax


def test_a_waiver_parses_into_its_class_date_and_reason_with_positions():
    rules, diags = parse(RULES, "w.rules")
    assert rules is not None and diags == []
    validate = next(d for d in rules.decls if isinstance(d, ir.ValidateDecl))
    parity = next(d for d in rules.decls if isinstance(d, ir.ParityDecl))
    (waiver,) = validate.waivers
    assert (waiver.cls.value, waiver.until, waiver.reason) == (
        "Consumer",
        "2030-06-30",
        "its deterministic kernel lands in June",
    )
    assert (waiver.loc.line, waiver.loc.col, waiver.until_loc.col) == (11, 5, 26)
    assert [s.kind for s in validate.stmts] == ["forbid"], "a waiver is not a statement the block runs"
    assert [w.cls.value for w in parity.waivers] == ["AMTP"]
    assert [kw for kw, _ in parity.clause_locs] == ["draft", "target", "hooks"]


def test_a_waiver_without_a_reason_parses_and_is_left_to_the_checker():
    rules, diags = parse("validate C {\n    waive C until 2030-06-30\n}\n", "w.rules")
    assert diags == [] and rules is not None
    assert rules.decls[0].waivers[0].reason is None


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            'validate C {\n    waive C until tomorrow "r"\n}\n',
            "unexpected `tomorrow`; expected a date (YYYY-MM-DD)",
        ),
        ('validate C {\n    waive C "r"\n}\n', 'unexpected `"r"`; expected `until`'),
    ],
)
def test_a_waiver_without_its_date_is_a_syntax_error(text, expected):
    rules, diags = parse(text, "w.rules")
    assert rules is None and [d.message for d in diags] == [expected]


def test_words_of_the_waiver_syntax_stay_usable_as_names():
    rules, diags = parse("config until { waive: bool = false }\n", "w.rules")
    assert diags == [] and rules is not None


def test_fmt_keeps_waivers_and_lays_them_out_as_statements(meaning):
    messy = RULES.replace("    waive AMTP until", "waive    AMTP   until").replace(
        '30 "its hook', '30    "its hook'
    )
    formatted = format_rules(messy)
    assert formatted == RULES
    assert meaning(parse(formatted, "w.rules")[0]) == meaning(parse(messy, "w.rules")[0])
    assert format_rules(formatted) == formatted


# --------------------------------------------------------------------------------------------- check


@pytest.mark.parametrize("today, ok", [(BEFORE, True), (LAST_DAY, True), (AFTER, False)])
def test_a_waiver_holds_through_its_date_and_expires_the_day_after(monkeypatch, today, ok):
    monkeypatch.setenv("STAMPGEN_TODAY", today)
    loaded = load_text(RULES, "w.rules")
    codes = [d.code for d in loaded.diagnostics]
    assert loaded.ok is ok and codes == ([] if ok else ["expired-waiver", "expired-waiver"])


def test_generate_refuses_an_expired_waiver(tmp_path, monkeypatch):
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "w.rules").write_text(RULES, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STAMPGEN_TODAY", AFTER)
    err = io.StringIO()
    assert run_generate(["rules/w.rules"], "out", out=io.StringIO(), err=err) == 1
    assert "rules/w.rules:11:26: error: the waiver for `Consumer` expired on 2030-06-30" in err.getvalue()
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------- parity


def test_a_waived_parity_offender_is_reported_as_waived_until_its_date(generated):
    report = generated.check_p(ARCHS, today=LAST_DAY)
    assert report.pairs == (("AMTP", "A"), ("BMTP", "B"))
    assert report.offenders == ()
    position = generated.RULE_POSITIONS["parity p waive AMTP"]
    assert position == "rules/w.rules:18:5"
    assert report.waived == (
        f"draft AMTP lacks hook, which its target A has (waived until 2030-06-30 at {position}: its hook lands "
        "with the loader rework)",
    )


def test_after_its_date_a_waived_parity_offender_is_an_offender_again(generated):
    report = generated.check_p(ARCHS, today=AFTER)
    assert report.offenders == ("draft AMTP lacks hook, which its target A has",) and report.waived == ()


@pytest.mark.slow
def test_the_generated_tests_pass_before_the_waivers_date_and_fail_after_it(scratch):
    for today in (BEFORE, LAST_DAY):
        proc = _generated_tests(scratch, today)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        assert "skipped" not in proc.stdout
    proc = _generated_tests(scratch, AFTER)
    assert proc.returncode == 1, proc.stdout[-4000:]
    assert "the waiver for `AMTP` expired on 2030-06-30 (today is 2030-07-01)" in proc.stdout


# --------------------------------------------------------------------------------------------- validate


def test_a_waived_consumer_logs_its_violation_instead_of_raising(generated, caplog):
    stamp = generated.S(b="flashinfer")
    strict = SimpleNamespace(strict=True, backend="flashinfer")
    consumer = type("Consumer", (), {})
    with caplog.at_level(logging.WARNING, logger=generated.__name__):
        assert generated.validate_consumer(stamp, cfg=strict, consumer=consumer, today=LAST_DAY) == stamp
    (record,) = caplog.records
    position = generated.RULE_POSITIONS["validate Consumer waive Consumer"]
    assert record.getMessage() == (
        "strict mode cannot use flashinfer (Consumer, rules/w.rules:10:5) (waived for Consumer until 2030-06-30 "
        f"at {position}: its deterministic kernel lands in June)"
    )


@pytest.mark.parametrize(
    "consumer, today",
    [(None, LAST_DAY), ("Other", LAST_DAY), ("Consumer", AFTER)],
    ids=["no consumer given", "another consumer", "after the date"],
)
def test_a_violation_raises_unless_a_waiver_applies_to_this_consumer_today(generated, consumer, today):
    stamp = generated.S(b="flashinfer")
    cls = type(consumer, (), {}) if consumer else None
    with pytest.raises(generated.RuleViolationError) as excinfo:
        generated.validate_consumer(stamp, cfg=SimpleNamespace(strict=True), consumer=cls, today=today)
    assert excinfo.value.message == "strict mode cannot use flashinfer"


def test_a_waiver_reason_reaches_the_generated_module_as_one_literal(scratch):
    tree = ast.parse((scratch / "waiver_gen" / "w.py").read_text(encoding="utf-8"))
    constants = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert {"its deterministic kernel lands in June", "its hook lands with the loader rework"} <= constants


def test_a_hostile_reason_stays_one_string_literal(monkeypatch):
    hostile = '\\"\\"\\"); import os; os.system(\'echo pwned\') # {x} %s \\\\'
    text = RULES.replace('"its hook lands with the loader rework"', f'"{hostile}"')
    monkeypatch.setenv("STAMPGEN_TODAY", BEFORE)
    loaded = load_text(text, "rules/w.rules")
    assert loaded.ok and loaded.model is not None, loaded.diagnostics
    reason = loaded.model.parities[0].waivers[0].reason
    assert reason is not None and "os.system" in reason
    (_, module), _ = render_files(loaded.model, "rules/w.rules", "w", "gen", "ROOT")
    tree = ast.parse(module)
    constants = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert reason in constants
    assert not [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "system"
    ]


def test_explain_and_table_show_the_waivers_of_the_consumers_that_read_the_stamp(stampgen) -> None:
    fixture = str(REPO / "tests" / "fixtures" / "everything.rules")
    status, out, _ = stampgen("explain", "Choice", "--rules", fixture)
    assert status in (0, 1)
    assert "waived for ConsumerB until 2099-12-31: ConsumerB builds its own kernels" in out, out
    data = json.loads(stampgen("explain", "Choice", "--rules", fixture, "--format", "json")[1])
    assert (
        data["waivers"]["Consumer"][0]["cls"] == "ConsumerB" and not data["waivers"]["Consumer"][0]["expired"]
    )
    status, table, _ = stampgen("table", "Choice", "--rules", fixture)
    assert status == 0 and "- `ConsumerB` until 2099-12-31: ConsumerB builds its own kernels" in table, table
    data = json.loads(stampgen("table", "Choice", "--rules", fixture, "--format", "json")[1])
    assert [w["cls"] for w in data["waivers"]["Consumer"]] == ["ConsumerB"]
