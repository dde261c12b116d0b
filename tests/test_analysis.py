"""The dead-rule analysis (codegen/analysis.py): what `stampgen check` warns about rules that never act.

Three kinds of tests: golden diagnostics, one small rules file per warning kind under
tests/diagnostics/analysis/ (regenerate with STAMPGEN_ACCEPT=1, then review them as code); the analysis
held against the interpreter on random rules files, whose whole input domain is small enough to enumerate;
and the command line (`--strict`, `-W error`, the notes in every format).
"""

from __future__ import annotations

import io
import json
import os
import random
import re
from collections.abc import Iterator
from itertools import product
from pathlib import Path
from typing import Any

import pytest

from stampgen.codegen import analysis, domains, interpreter, ir
from stampgen.codegen.analysis import Finding, analyze
from stampgen.codegen.cli import main
from stampgen.codegen.load import load, load_text
from stampgen.codegen.model import Model

REPO = Path(__file__).resolve().parent.parent
CASES_DIR = REPO / "tests" / "diagnostics" / "analysis"
CASES = sorted(CASES_DIR.glob("*.rules"))
ACCEPT = os.environ.get("STAMPGEN_ACCEPT") == "1"
CODES = {f.value for f in Finding}


def run_check(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-import", *argv], out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def codes_in(stderr: str) -> list[str]:
    return re.findall(r"^\S+:\d+:\d+: warning: .* \[([a-z-]+)\]$", stderr, re.M)


# --------------------------------------------------------------------------------------------- goldens


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_check_prints_exactly_the_golden_warning(case: Path, monkeypatch):
    monkeypatch.chdir(REPO)
    status, stdout, stderr = run_check(case.relative_to(REPO).as_posix())
    golden = case.with_suffix(".expected")
    if ACCEPT:
        golden.write_text(stderr, encoding="utf-8")
    assert golden.exists(), f"no golden for {case.name}: run with STAMPGEN_ACCEPT=1 and review it"
    assert stderr == golden.read_text(encoding="utf-8"), f"stderr of `stampgen check {case.name}` changed"
    assert (status, stdout) == (0, ""), "warnings alone exit 0, on stderr only"


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_each_case_gives_exactly_the_warning_it_is_named_for(case: Path, monkeypatch):
    monkeypatch.chdir(REPO)
    _, _, stderr = run_check(case.relative_to(REPO).as_posix())
    assert codes_in(stderr) == [case.stem.split("--", 1)[0]]


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.stem)
def test_every_note_points_into_the_file_with_its_source_line_and_a_caret(case: Path, monkeypatch):
    monkeypatch.chdir(REPO)
    _, _, stderr = run_check(case.relative_to(REPO).as_posix())
    source = case.read_text(encoding="utf-8").split("\n")
    lines = stderr.splitlines()
    notes = [(i, m) for i, line in enumerate(lines) if (m := re.match(r"^  note: (\S+):(\d+):(\d+): ", line))]
    for i, m in notes:
        assert m[1] == case.relative_to(REPO).as_posix()
        row, col = int(m[2]), int(m[3])
        assert lines[i + 1] == "    " + source[row - 1].expandtabs(1)
        assert re.fullmatch(r"    ( *)\^~*", lines[i + 2]) and lines[i + 2].index("^") == col + 3


def test_every_warning_kind_has_a_golden():
    pinned = {c.stem.split("--", 1)[0] for c in CASES}
    assert sorted(CODES - pinned) == [], "add tests/diagnostics/analysis/<code>.rules for these codes"
    assert sorted(pinned - CODES) == [], "goldens named for codes the analysis does not emit"


# --------------------------------------------------------------------------------------------- the command line


def test_strict_and_dash_w_error_turn_warnings_into_exit_1(monkeypatch):
    monkeypatch.chdir(REPO)
    case = (CASES_DIR / "gate-never-yields.rules").relative_to(REPO).as_posix()
    plain = run_check(case)
    assert plain[0] == 0 and codes_in(plain[2]) == ["gate-never-yields"]
    for flags in (["--strict"], ["-W", "error"], ["-Werror"]):
        status, _, stderr = run_check(*flags, case)
        assert status == 1 and stderr == plain[2], flags


def test_strict_keeps_the_summary_line_under_quiet(monkeypatch):
    monkeypatch.chdir(REPO)
    case = (CASES_DIR / "gate-never-yields.rules").relative_to(REPO).as_posix()
    assert "warning(s)" not in run_check("-q", case)[2]
    assert run_check("-q", "--strict", case)[2].endswith("0 error(s), 1 warning(s) in 1 file(s)\n")


def test_strict_exits_0_on_the_shipped_rules(monkeypatch):
    monkeypatch.chdir(REPO)
    assert run_check("--strict", "rules/linear_attn.rules") == (0, "", "")


def test_json_lists_the_notes_with_their_positions(monkeypatch):
    monkeypatch.chdir(REPO)
    case = (CASES_DIR / "tier-never-wins.rules").relative_to(REPO).as_posix()
    status, out, _ = run_check("--format", "json", case)
    [row] = json.loads(out)
    assert (status, row["code"], row["severity"]) == (0, "tier-never-wins", "warning")
    [note] = row["notes"]
    assert note["path"] == case and note["line"] == row["line"] and note["col"] < row["col"]
    assert "shadowed" in note["message"]


def test_github_annotations_carry_the_notes_in_their_text(monkeypatch):
    monkeypatch.chdir(REPO)
    case = (CASES_DIR / "tier-never-wins.rules").relative_to(REPO).as_posix()
    _, out, _ = run_check("--format", "github", case)
    [line] = out.splitlines()
    assert line.startswith(f"::warning file={case},") and f"(note: {case}:" in line


def test_callers_that_only_need_the_model_can_skip_the_analysis():
    source = (CASES_DIR / "gate-never-yields.rules").read_text(encoding="utf-8")
    assert [d.code for d in load_text(source, "x.rules").diagnostics] == ["gate-never-yields"]
    assert load_text(source, "x.rules", analyze=False).diagnostics == []


@pytest.mark.parametrize(
    "bound", [{"MAX_STEPS": 0}, {"MAX_QUESTION_SIZE": 0}, {"WORK_BASE": 0, "WORK_PER_RULE": 0}], ids=str
)
def test_a_question_past_a_bound_is_undecided_and_gives_no_warning(monkeypatch, bound: dict[str, int]):
    loaded = load(str(REPO / "tests" / "diagnostics" / "analysis" / "gates-overlap.rules"), analyze=False)
    assert loaded.model is not None and analyze(loaded.model)
    for name, value in bound.items():
        monkeypatch.setattr(analysis, name, value)
    assert analyze(loaded.model) == []


@pytest.mark.parametrize(
    "path", ["rules/linear_attn.rules", *sorted(p.name for p in (REPO / "tests/fixtures").glob("*.rules"))]
)
def test_the_shipped_rules_and_the_fixtures_have_no_dead_rules(path: str):
    full = REPO / path if "/" in path else REPO / "tests" / "fixtures" / path
    loaded = load(str(full), analyze=False)
    assert loaded.model is not None
    assert [f"{d.loc}: {d.message}" for d in analyze(loaded.model, loaded.diagnostics)] == []


def test_a_tier_the_checker_already_reports_as_shadowed_is_not_reported_again():
    loaded = load(str(REPO / "tests" / "diagnostics" / "shadowed-tier.rules"))
    assert [d.code for d in loaded.diagnostics] == ["shadowed-tier"]


def test_a_rule_holding_a_part_the_checker_already_reports_as_constant_is_not_reported_again():
    loaded = load(str(REPO / "tests" / "diagnostics" / "never-unset.rules"))
    assert [d.code for d in loaded.diagnostics] == ["never-unset"]


# --------------------------------------------------------------------------------------------- against the interpreter

HEADER = """\
enum E { a b c }
config cfg {
    x: E?
    y: E = a
    z: E?
    on: bool = false
    n: int in {0, 1, 2}?
}
facts runner {
    s: int in {0, 9, 10}
    f: E
}
facts launch {
    s: int in {0, 9, 10}
}
"""


class RandomRules:
    """A random, small rules file: every kind of rule, over inputs few enough to enumerate entirely."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def atom(self, names: list[str]) -> str:
        name = self.rng.choice(names)
        r = self.rng.random
        if name in ("cfg.on",):
            return name if r() < 0.6 else f"not {name}"
        if name in ("cfg.n",):
            return self.rng.choice(
                [f"{name} >= 1", f"{name} == 2", f"{name} < 1", f"{name} is set", f"{name} is unset"]
            )
        if name in ("runner.s", "launch.s"):
            return self.rng.choice([f"{name} >= 9", f"{name} == 10", f"{name} < 9", f"{name} in {{0, 10}}"])
        if name == "S":
            return f"{self.rng.choice('abc')} in S"
        v, w = self.rng.sample("abc", 2)
        forms = [f"{name} == {v}", f"{name} != {v}", f"{name} in {{{v}, {w}}}", f"{name} not in {{{v}}}"]
        if name in ("cfg.x", "cfg.z", "p"):
            forms += [f"{name} is set", f"{name} is unset"]
        return self.rng.choice(forms)

    def expr(self, names: list[str], depth: int = 2) -> str:
        if depth == 0 or self.rng.random() < 0.35:
            return self.atom(names)
        op = self.rng.choice(["and", "and", "or", "implies", "not"])
        if op == "not":
            return f"not ({self.expr(names, depth - 1)})"
        return f"({self.expr(names, depth - 1)} {op} {self.expr(names, depth - 1)})"

    def when(self, names: list[str], p: float = 0.6) -> str:
        return f" when {self.expr(names)}" if self.rng.random() < p else ""

    def chain(self, sources: list[str], names: list[str]) -> str:
        tiers = []
        for _ in range(self.rng.randint(1, 4)):
            tiers.append(self.rng.choice(sources) + self.when(names))
        return " > ".join([*tiers, self.rng.choice("abc")])  # a constant last: the chain is total

    def text(self) -> str:
        rng = self.rng
        gate_names = ["cfg.x", "cfg.on", "runner.s", "runner.f"]
        out = [HEADER]
        for g, value in (("g1", "b"), ("g2", "c"), ("g3", "a")):
            out.append(f"auto {g}: E = {value} when {self.expr(gate_names)}")
        sources = ", ".join(rng.sample(["g1", "g2", "g3"], rng.randint(1, 3)))
        stamp_names = ["cfg.x", "cfg.z", "cfg.y", "cfg.on", "p"]
        flags = ["flag cfg.x", "flag cfg.z", "auto p", "base cfg.y"]
        out += [
            "stamp S on runner.s_stamp {",
            f"    slot p: E from {sources}",
            f"    d = {self.chain(flags, stamp_names)}",
            f"    v = {self.chain([*flags, 'follow d'], [*stamp_names, 'd'])}",
            "}",
        ]
        for block in range(rng.randint(1, 2)):
            launch_names = ["cfg.x", "cfg.z", "cfg.on", "cfg.n", "launch.s"]
            out.append(f"launch l{block} {{")
            for i in range(rng.randint(2, 6)):
                kind = rng.choice(["set", "set", "forbid", "require", "local"])
                if kind == "set":
                    target, value = rng.choice(
                        [("cfg.x", "b"), ("cfg.z", "c"), ("cfg.on", "true"), ("cfg.n", "2")]
                    )
                    out.append(f"    set {target} = {value}{self.when(launch_names, 0.8)}")
                elif kind == "local":
                    out.append(f"    k{i} = {self.chain(['flag cfg.x', 'flag cfg.z'], launch_names)}")
                    launch_names = [*launch_names, f"k{i}"]  # later statements of the block may read it
                else:
                    out.append(f'    {kind} {self.expr(launch_names)} "m{i}"')
            out.append("}")
        validate_names = ["S.d", "S.v", "cfg.on", "runner.s", "S"]
        out.append("validate V {")
        for i in range(rng.randint(2, 6)):
            kind = rng.choice(["fallback", "forbid", "require"])
            if kind == "fallback":
                old, new = rng.sample("abc", 2)
                field = rng.choice(["S.d", "S.v"])
                out.append(f'    fallback {field} {old} -> {new} when {self.expr(validate_names)} log "f{i}"')
            else:
                out.append(f'    {kind} {self.expr(validate_names)} "m{i}"')
        out.append("}")
        return "\n".join(out) + "\n"


def rows(d: domains.InputDomain) -> Iterator[dict[str, Any]]:
    assert d.mode == "exhaustive", "keep the random rules small enough to enumerate"
    for values in product(*(i.values for i in d.inputs)):
        yield dict(zip((i.name for i in d.inputs), values))


def expected_findings(model: Model, shadowed: set[str]) -> set[tuple[str, str]]:
    """(code, position) of every dead rule, found by running the interpreter on every input."""
    found: set[tuple[str, str]] = set()
    for info in model.stamps.values():
        won = {
            o.source
            for env in rows(domains.stamp_domain(model, info))
            for o in interpreter.resolve_stamp(model, info, env, explain=False).values()
        }
        tiers = {str(t.loc) for f in info.fields for t in f.decl.tiers}
        found |= {(Finding.TIER_NEVER_WINS.value, t) for t in tiers - won - shadowed}
    found |= _gate_findings(model)
    found |= _statement_findings(model, _launch_runs(model), shadowed)
    for info in model.validates:
        found |= _statement_findings(model, _validate_runs(model, info), shadowed)
    return found


def _gate_findings(model: Model) -> set[tuple[str, str]]:
    found = set()
    yields: dict[str, list[bool]] = {}
    names = sorted({r.name for a in model.autos.values() for r in ir.expr_refs(a.decl.when)})
    inputs = [
        interpreter.input_domain(
            model.leaves[n].type, model.leaves[n].optional and not model.leaves[n].is_fact
        )
        for n in names
    ]
    envs = [dict(zip(names, values)) for values in product(*inputs)]
    for name, info in model.autos.items():
        yields[name] = [interpreter.run_gate(model, name, env).status == "yields" for env in envs]
        where = str(info.decl.name.loc)
        if not any(yields[name]):
            found.add((Finding.GATE_NEVER_YIELDS.value, where))
        elif all(yields[name]) and not isinstance(info.decl.when, ir.Const):
            found.add((Finding.GATE_ALWAYS_YIELDS.value, where))
    for stamp in model.stamps.values():
        for slot in stamp.slots:
            gates = list(dict.fromkeys(slot.sources))
            for j, later in enumerate(gates[1:], 1):
                if not any(yields[later]):
                    continue
                where = (Finding.GATES_OVERLAP.value, str(model.autos[later].decl.name.loc))
                fills = any(
                    y and not any(yields[g][k] for g in gates[:j]) for k, y in enumerate(yields[later])
                )
                both = any(any(a and b for a, b in zip(yields[g], yields[later])) for g in gates[:j])
                if not fills or both:
                    found.add(where)
    return found


def _launch_runs(model: Model):
    """Per input: the launch statements' statuses when every check runs, and when the first failure stops."""
    runs = []
    for env in rows(domains.launch_domain(model)):
        _, every, _ = interpreter.run_launch(model, env)
        _, first, _ = interpreter.run_launch(model, env, stop_at_violation=True)
        runs.append((every, first, _local_winners(model, env)))
    stmts = [s for launch in model.launches for s in launch.decl.stmts]
    return stmts, runs


def _local_winners(model: Model, env: dict[str, Any]) -> set[str]:
    env = dict(env)
    won = set()
    for launch in model.launches:
        local = []
        for stmt in launch.decl.stmts:
            if isinstance(stmt, ir.SetStmt) and (
                stmt.when is None or interpreter.eval_expr(stmt.when, env) is True
            ):
                env[stmt.target.name] = stmt.value.value
            elif isinstance(stmt, ir.FieldDecl):
                outcome = interpreter.resolve_chain(stmt, env, explain=False)
                env[stmt.name.value] = outcome.value
                local.append(stmt.name.value)
                won.add(outcome.source)
        for name in local:
            env.pop(name)
    return won


def _validate_runs(model: Model, info):
    stamp = model.stamps["S"] if info.stamps else None  # a block may read no stamp at all
    runs = []
    for env in rows(domains.validate_domain(model, info)):
        values = {f.name: env.pop(f"S.{f.name}") for f in stamp.fields} if stamp else {}
        _, every, _ = interpreter.run_validate(model, info.name, stamp, values, env)
        _, first, _ = interpreter.run_validate(model, info.name, stamp, values, env, stop_at_violation=True)
        runs.append((every, first, set()))
    return list(info.decl.stmts), runs


def _statement_findings(model: Model, statements, shadowed: set[str]) -> set[tuple[str, str]]:
    stmts, runs = statements
    found = set()
    won = set().union(*(r[2] for r in runs))
    for k, stmt in enumerate(stmts):
        where = str(stmt.loc)
        every = [r[0][k].status for r in runs]
        first = [r[1][k].status for r in runs]
        if isinstance(stmt, ir.FieldDecl):
            found |= {
                (Finding.TIER_NEVER_WINS.value, str(t.loc))
                for t in stmt.tiers
                if str(t.loc) not in won | shadowed
            }
        elif isinstance(stmt, ir.SetStmt):
            if "applied" not in first:
                found.add((Finding.SET_NEVER_APPLIES.value, where))
        elif isinstance(stmt, ir.Fallback):
            if "applied" not in every:
                found.add((Finding.FALLBACK_NEVER_APPLIES.value, where))
            elif "applied" not in first:
                found.add((Finding.FALLBACK_PRE_EMPTED.value, where))
        elif "violated" not in every:
            found.add((Finding.CHECK_NEVER_FIRES.value, where))
        elif "violated" not in first:
            found.add((Finding.CHECK_PRE_EMPTED.value, where))
        elif "ok" not in first:
            found.add((Finding.CHECK_ALWAYS_FIRES.value, where))
    return found


@pytest.mark.parametrize("seed", range(120))
def test_the_analysis_agrees_with_the_interpreter_on_every_input(seed: int):
    text = RandomRules(seed).text()
    loaded = load_text(text, f"random{seed}.rules", analyze=False)
    if loaded.model is None:
        pytest.skip(
            "this random file does not check: "
            + "; ".join(d.message for d in loaded.diagnostics if d.is_error)
        )
    shadowed = {str(d.loc) for d in loaded.diagnostics if d.code == "shadowed-tier"}
    got = {(d.code, str(d.loc)) for d in analyze(loaded.model, loaded.diagnostics)}
    assert got == expected_findings(loaded.model, shadowed), text


def test_the_random_rules_check_and_find_every_kind_of_dead_rule():
    """The random files above are worth their time: nearly all of them check, and together they exercise
    every warning kind."""
    kinds: set[str] = set()
    checked = 0
    for seed in range(120):
        loaded = load_text(RandomRules(seed).text(), "r.rules", analyze=False)
        if loaded.model is not None:
            checked += 1
            kinds |= {d.code for d in analyze(loaded.model, loaded.diagnostics)}
    assert checked >= 100
    assert kinds == CODES
