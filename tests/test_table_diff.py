"""`stampgen table` (a stamp's whole decision table) and `stampgen diff` (only the decisions that changed).

The table abstracts enum inputs into classes (unset, each member the rules name, `other`) and merges rows
with `*` (any class) and `set` (any class but unset). The tests expand those back and hold every
combination against the interpreter, so a merge that hides a decision cannot pass.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stampgen.codegen import interpreter as interp
from stampgen.codegen.load import load

REPO = Path(__file__).resolve().parent.parent
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
FOLLOW = "follow decode when decode == flashinfer"
FOLLOW_CUTEDSL_TOO = "follow decode when decode in {flashinfer, cutedsl}"
_AT = SHIPPED.rindex(FOLLOW)  # the stamp's verify (the launch block has its own copy above it)
CHANGED = SHIPPED[:_AT] + FOLLOW_CUTEDSL_TOO + SHIPPED[_AT + len(FOLLOW) :]
MODEL = load(str(REPO / "rules" / "linear_attn.rules")).model


def table_json(stampgen, *rules: str) -> dict:
    argv = ["table", "LinearAttnBackends", "--format", "json"]
    for path in rules:
        argv += ["--rules", path]
    status, out, err = stampgen(*argv)
    assert status == 0, err
    return json.loads(out)


def expand(row_inputs: dict[str, str], classes: dict[str, list[str]]) -> list[tuple[str, ...]]:
    """Every combination of classes a (merged) row stands for."""
    options = []
    for name, cls in classes.items():
        cell = row_inputs[name]
        if cell == "*":
            options.append(cls)
        elif cell == "set":
            options.append([c for c in cls if c != "unset"])
        else:
            assert cell in cls, (name, cell)
            options.append([cell])
    return list(itertools.product(*options))


def coverage(table: dict) -> dict[tuple[str, ...], list[dict]]:
    classes = {i["name"]: i["classes"] for i in table["inputs"]}
    covered: dict[tuple[str, ...], list[dict]] = {}
    for row in table["rows"]:
        for combo in expand(row["inputs"], classes):
            covered.setdefault(combo, []).append(row)
    return covered


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


# --------------------------------------------------------------------------------------------- table


def test_every_combination_of_input_classes_is_covered_by_exactly_one_row(stampgen):
    table = table_json(stampgen)
    classes = [i["classes"] for i in table["inputs"]]
    covered = coverage(table)
    assert set(covered) == set(itertools.product(*classes))
    assert {combo: len(rows) for combo, rows in covered.items() if len(rows) != 1} == {}


def test_the_table_covers_the_inputs_the_resolver_reads():
    table_inputs = [name for name, _, _ in interp.stamp_inputs(MODEL, MODEL.stamps["LinearAttnBackends"])]
    assert table_inputs == [
        "mamba.linear_attn_backend",
        "mamba.linear_attn_decode_backend",
        "mamba.linear_attn_prefill_backend",
        "mamba.linear_attn_verify_backend",
        "prefill_default",
    ]


def _representative(name: str, cls: str, classes: list[str]) -> Any:
    """A concrete value of a class; for `other`, the last member the rules do not name."""
    if cls == "unset":
        return None
    if cls != "other":
        return cls
    stamp = MODEL.stamps["LinearAttnBackends"]
    t = dict((n, t) for n, t, _ in interp.stamp_inputs(MODEL, stamp))[name]
    return [m for m in t.members if m not in classes][-1]


def test_every_row_agrees_with_the_interpreter_for_every_value_it_stands_for(stampgen):
    table = table_json(stampgen)
    names = [i["name"] for i in table["inputs"]]
    classes = {i["name"]: i["classes"] for i in table["inputs"]}
    stamp = MODEL.stamps["LinearAttnBackends"]
    base_env = interp.config_env(MODEL, {})
    for combo, [row] in coverage(table).items():
        given = {n: _representative(n, c, classes[n]) for n, c in zip(names, combo)}
        fields = interp.resolve_stamp(MODEL, stamp, {**base_env, **given})
        for field, shown in row["fields"].items():
            outcome = fields[field]
            assert shown["tier"] == outcome.tier, (combo, field)
            if shown["value"].startswith("← "):
                assert outcome.value == given[shown["value"][2:]], (combo, field)
            else:
                assert shown["value"] == outcome.value, (combo, field)


def test_the_markdown_table_has_a_row_per_json_row_and_names_every_output(stampgen):
    status, out, _ = stampgen("table", "LinearAttnBackends")
    assert status == 0
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    header, body = rows[0], rows[1:]
    assert header.endswith("| → decode | → prefill | → verify |")
    assert len(body) == len(table_json(stampgen)["rows"])
    assert f"({len(body)} rows;" in out.splitlines()[0]


def test_table_of_an_unknown_stamp_exits_2(stampgen):
    status, out, err = stampgen("table", "Nope")
    assert status == 2 and out == "" and "no stamp 'Nope'" in err


# --------------------------------------------------------------------------------------------- diff of files


@pytest.fixture
def rules_pair(tmp_path: Path) -> tuple[Path, Path]:
    old, new = tmp_path / "old.rules", tmp_path / "new.rules"
    old.write_text(SHIPPED, encoding="utf-8")
    new.write_text(CHANGED, encoding="utf-8")
    return old, new


def test_diff_of_identical_files_exits_0(stampgen, rules_pair):
    old, _ = rules_pair
    assert stampgen("diff", str(old), str(old)) == (0, "no decision changed\n", "")


def test_diff_shows_only_the_rows_whose_verify_changed_and_exits_1(stampgen, rules_pair):
    old, new = rules_pair
    status, out, err = stampgen("diff", str(old), str(new), "--format", "json")
    assert status == 1 and err == ""
    everything = json.loads(out)["changes"]
    changes = [c for c in everything if c["kind"] == "stamp"]
    assert changes and {c["title"] for c in changes} == {"LinearAttnBackends.verify"}
    # the launch block `use`s the stamp's verify: only its checks that read verify may change with it
    assert {c["kind"] for c in everything} <= {"stamp", "launch"}
    assert all("verify" in c["old"]["value"] + c["new"]["value"] for c in everything if c["kind"] == "launch")
    for change in changes:
        assert change["old"]["value"] == "triton"
        assert change["new"]["value"].startswith("← ")
        assert (change["old"]["rule"], change["new"]["rule"]) == ("const", "follow")
        assert change["old"]["at"].startswith(f"{old}:") and change["new"]["at"].startswith(f"{new}:")
        decode_class = change["inputs"]["mamba.linear_attn_decode_backend"]
        base_class = change["inputs"]["mamba.linear_attn_backend"]
        assert "cutedsl" in (decode_class, base_class)
        assert change["inputs"]["mamba.linear_attn_verify_backend"] == "unset"


def _cell_holds(cell: str, value: Any) -> bool:
    """Whether a diff cell (`*`, `set`, `v`, `a|b`, `≠a|b`) stands for a concrete value."""
    shown = interp.show_value(value)
    if cell in ("*", "set"):
        return cell == "*" or value is not None
    if cell.startswith("≠"):
        return shown not in cell[1:].split("|")
    return shown in cell.split("|")


def test_diff_rows_are_exactly_the_combinations_whose_decision_differs(stampgen, rules_pair):
    old, new = rules_pair
    models = [load(str(old)).model, load(str(new)).model]
    stamps = [m.stamps["LinearAttnBackends"] for m in models]
    _, out, _ = stampgen("diff", str(old), str(new), "--format", "json")
    changes = [c for c in json.loads(out)["changes"] if c["kind"] == "stamp"]
    names = list(changes[0]["inputs"])
    assert set(names) == interp.field_inputs(stamps[1], "verify")
    leaves = [models[1].leaves[n] for n in names]
    values = [((None,) if leaf.optional else ()) + tuple(leaf.type.members) for leaf in leaves]
    differ = 0
    for combo in itertools.product(*values):
        env = dict(zip(names, combo))
        a, b = (interp.resolve_stamp(m, s, env, explain=False)["verify"] for m, s in zip(models, stamps))
        rows = [c for c in changes if all(_cell_holds(c["inputs"][n], env[n]) for n in names)]
        if (a.value, a.tier) == (b.value, b.tier):
            assert rows == [], combo
            continue
        differ += 1
        assert len(rows) == 1, combo
        assert (rows[0]["old"]["rule"], rows[0]["new"]["rule"]) == (a.tier, b.tier)
    assert differ, "the change must make a difference somewhere"


def test_diff_text_and_markdown_name_the_old_and_new_rules(stampgen, rules_pair):
    old, new = rules_pair
    status, text, _ = stampgen("diff", str(old), str(new))
    assert status == 1
    assert "\nLinearAttnBackends.verify: triton → " in "\n" + text
    assert f"rule: const {old}:" in text and f"→ follow {new}:" in text
    status, markdown, _ = stampgen("diff", str(old), str(new), "--format", "markdown")
    assert status == 1
    count = len(json.loads(stampgen("diff", str(old), str(new), "--format", "json")[1])["changes"])
    assert markdown.splitlines()[0] == f"**{count} change(s)** in what the rules decide, `{old}` → `{new}`"
    assert "| verify | triton → ← " in markdown


def test_diff_of_a_file_with_errors_exits_1_with_its_diagnostics(stampgen, rules_pair, tmp_path):
    old, _ = rules_pair
    broken = tmp_path / "broken.rules"
    broken.write_text(SHIPPED.replace("> triton\n}", "\n}"), encoding="utf-8")
    status, out, err = stampgen("diff", str(old), str(broken))
    assert status == 1 and out == ""
    assert "[not-total]" in err


# --------------------------------------------------------------------------------------------- diff of revisions


def git(cwd: Path, *argv: str) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo_with_history(tmp_path: Path, monkeypatch) -> Path:
    """A git repo on `main` with the shipped rules, then a `feature` branch that changes verify."""
    monkeypatch.delenv("STAMPGEN_DIFF_BASE", raising=False)  # the default base is the merge-base with main
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "config", "user.email", "test@example.com")
    git(tmp_path, "config", "user.name", "test")
    rules = tmp_path / "rules" / "linear_attn.rules"
    rules.parent.mkdir()
    rules.write_text(SHIPPED, encoding="utf-8")
    git(tmp_path, "add", "rules")
    git(tmp_path, "commit", "-q", "-m", "shipped rules")
    git(tmp_path, "checkout", "-q", "-b", "feature")
    rules.write_text(CHANGED, encoding="utf-8")
    git(tmp_path, "commit", "-q", "-am", "verify follows cutedsl too")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_diff_between_two_revisions_shows_the_change(stampgen, repo_with_history):
    status, out, err = stampgen("diff", "HEAD~1", "HEAD")
    assert status == 1, err
    line = SHIPPED[:_AT].count("\n") + 1  # the stamp's verify
    assert "\nLinearAttnBackends.verify: triton → " in "\n" + out
    assert f"rule: const rules/linear_attn.rules:{line}:" in out
    assert f"→ follow rules/linear_attn.rules:{line}:" in out


def test_diff_of_a_revision_with_itself_exits_0(stampgen, repo_with_history):
    assert stampgen("diff", "HEAD", "HEAD") == (0, "no decision changed\n", "")


def test_diff_without_arguments_compares_the_merge_base_with_main_to_the_working_tree(
    stampgen, repo_with_history
):
    status, out, _ = stampgen("diff")
    assert status == 1 and "LinearAttnBackends.verify" in out
    (repo_with_history / "rules" / "linear_attn.rules").write_text(SHIPPED, encoding="utf-8")
    assert stampgen("diff") == (0, "no decision changed\n", "")


def test_diff_of_a_revision_against_the_working_tree(stampgen, repo_with_history):
    assert stampgen("diff", "HEAD")[0] == 0
    (repo_with_history / "rules" / "linear_attn.rules").write_text(SHIPPED, encoding="utf-8")
    status, out, _ = stampgen("diff", "HEAD")
    assert status == 1 and "← mamba.linear_attn_decode_backend → triton" in out


def test_diff_of_an_unknown_revision_exits_2_with_gits_message(stampgen, repo_with_history):
    status, out, err = stampgen("diff", "no-such-revision")
    assert status == 2 and out == ""
    assert err.startswith("stampgen diff: error: git: no commit 'no-such-revision'")
    assert "Traceback" not in err


WIDE_RULES = "\n".join(
    ["enum B { a b c d e f }", "config m {"]
    + [f"    x{i}: B?" for i in range(16)]
    + ["    base: B = a", "}", "stamp S on runner.s {"]
    + [f"    f{i} = flag m.x{2 * i} when m.x{2 * i + 1} == a > base m.base" for i in range(8)]
    + ["}"]
)


def test_a_stamp_too_wide_for_one_table_gets_one_table_per_field(stampgen, tmp_path):
    path = tmp_path / "wide.rules"
    path.write_text(WIDE_RULES + "\n", encoding="utf-8")
    status, out, _ = stampgen("table", "S", "--rules", str(path), "--format", "json")
    assert status == 0
    body = json.loads(out)
    assert body["per_field"] is True
    assert [t["stamp"] for t in body["tables"]] == [f"S.f{i}" for i in range(8)]
    # each field's table reads only that field's inputs
    assert [i["name"] for i in body["tables"][3]["inputs"]] == ["m.x6", "m.x7", "m.base"]


def test_diff_of_a_stamp_too_wide_for_one_table_reports_the_changed_field_only(stampgen, tmp_path):
    old, new = tmp_path / "old.rules", tmp_path / "new.rules"
    old.write_text(WIDE_RULES + "\n", encoding="utf-8")
    new.write_text(WIDE_RULES.replace("m.x1 == a", "m.x1 == b") + "\n", encoding="utf-8")
    status, out, _ = stampgen("diff", str(old), str(new), "--format", "json")
    assert status == 1
    assert {c["title"] for c in json.loads(out)["changes"]} == {"S.f0"}
