"""`stampgen diff`: the behaviour diff over every rule kind, pinned by goldens, and held against the interpreter.

Golden cases: tests/diff/base.rules is committed to a temporary git repository, then the same file with one
edit (CASES below), and `stampgen diff HEAD~1 HEAD` must print exactly tests/diff/<case>.expected. To add a
case, add its edit and run with STAMPGEN_ACCEPT=1 to write the golden; then read the golden as carefully as
a code change:

    STAMPGEN_ACCEPT=1 .venv/bin/python -m pytest -q tests/test_diff.py

The truth tests expand every reported row back into the concrete inputs it stands for and hold it against
the interpreter run on both versions over the whole (small) domain: a row must be reported exactly where
the versions differ, and say what each does there.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from stampgen.codegen import diff as diff_mod
from stampgen.codegen import interpreter as interp
from stampgen.codegen import ir
from stampgen.codegen.load import load_text
from stampgen.codegen.model import EnumT, Model, domain

REPO = Path(__file__).resolve().parent.parent
DIFF_DIR = REPO / "tests" / "diff"
BASE = (DIFF_DIR / "base.rules").read_text(encoding="utf-8")
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
ACCEPT = os.environ.get("STAMPGEN_ACCEPT") == "1"
RULES = "rules/engine.rules"


def edit(text: str, *replacements: tuple[str, str]) -> str:
    for old, new in replacements:
        assert text.count(old) == 1, f"the edit must match once: {old!r}"
        text = text.replace(old, new)
    return text


# one edit per rule kind (and one that changes nothing a rule decides)
CASES: dict[str, list[tuple[str, str]]] = {
    "stamp-tier-swap": [
        (
            "prefill = flag mamba.prefill_backend > auto prefill_default >",
            "prefill = auto prefill_default > flag mamba.prefill_backend >",
        )
    ],
    "stamp-added-when": [
        (
            "    decode = flag mamba.decode_backend > base mamba.backend\n    prefill",
            "    decode = flag mamba.decode_backend when not server.deterministic > base mamba.backend\n    prefill",
        )
    ],
    "gate-condition": [("server.chunked_prefill_size <= 32768", "server.chunked_prefill_size <= 8192")],
    "launch-added-forbid": [
        (
            "    forbid decode == cutedsl",
            '    forbid mamba.decode_backend == helion "helion has no GDN decode kernel"\n    forbid decode == cutedsl',
        )
    ],
    "validate-fallback": [
        ("fallback Backends.prefill cutedsl -> triton", "fallback Backends.prefill cutedsl -> flashinfer")
    ],
    "guard": [
        (
            'guard GDNAttnBackend, KDAAttnBackend from "engine.backends"',
            'guard GDNAttnBackend from "engine.consumers"',
        )
    ],
    "parity": [
        ("at_least 2", "at_least 3"),
        (
            "hooks shared_experts_fusion_disable_reason",
            "hooks shared_experts_fusion_disable_reason, load_weights",
        ),
    ],
    "open-enum-member": [("helion custom }", "helion nvidia_gdn custom }")],
    "config-default": [("    backend: Backend = triton", "    backend: Backend = flashinfer")],
    "renamed-fact": [
        ("facts launch { sm:", "facts launch { sm_major:"),
        ("launch.sm == 10", "launch.sm_major == 10"),
        ("launch.sm < 10", "launch.sm_major < 10"),
    ],
    "launch-set": [
        (
            "when mamba.decode_backend is unset and launch.sm == 10",
            "when mamba.decode_backend is unset and launch.sm >= 9",
        )
    ],
    "stamp-added": [
        (
            "\nvalidate GDNAttnBackend",
            "\nstamp Extra on runner.extra {\n    kernel = base mamba.backend\n}\n\nvalidate GDNAttnBackend",
        )
    ],
}
COMMENTS_ONLY = [
    ("enum Backend open(custom)", "# a comment the diff must not see\nenum Backend open(custom)"),
    (
        "    decode = flag mamba.decode_backend > base mamba.backend\n    prefill",
        "    decode  =  flag mamba.decode_backend  >  base mamba.backend  # why\n\n    prefill",
    ),
    (
        'when runner.sm < 10 log "cutedsl prefill needs SM100"',
        'when runner.sm < 10\n        log "cutedsl prefill needs SM100"',
    ),
]


def git(cwd: Path, *argv: str) -> str:
    command = ["git", "-c", "user.email=test@example.com", "-c", "user.name=test", *argv]
    return subprocess.run(command, cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit(root: Path, text: str, path: str = RULES, message: str = "rules") -> str:
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)
    return git(root, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty git repository on `main`, the working directory, with no user or system git config."""
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.delenv(diff_mod.BASE_ENV, raising=False)
    git(root, "init", "-q", "-b", "main")
    monkeypatch.chdir(root)
    return root


def diff_json(stampgen, *argv: str) -> dict[str, Any]:
    status, out, err = stampgen("diff", *argv, "--format", "json")
    assert status in (0, 1), err
    return json.loads(out)


# --------------------------------------------------------------------------------------------- goldens


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_rule_kind_diffs_as_its_golden_says(case: str, repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(repo, edit(BASE, *CASES[case]))
    status, out, err = stampgen("diff", "HEAD~1", "HEAD")
    golden = DIFF_DIR / f"{case}.expected"
    if ACCEPT:
        golden.write_text(out, encoding="utf-8")
    assert golden.exists(), f"no golden for {case}: run with STAMPGEN_ACCEPT=1 and review it"
    assert (status, err) == (1, "")
    assert out == golden.read_text(encoding="utf-8"), f"`stampgen diff` of {case} changed"


def test_comments_and_layout_change_no_decision(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(repo, edit(BASE, *COMMENTS_ONLY))
    assert stampgen("diff", "HEAD~1", "HEAD") == (0, "no decision changed\n", "")
    for form in ("markdown", "json", "github"):
        status, out, _ = stampgen("diff", "HEAD~1", "HEAD", "--format", form)
        assert status == 0 and ("[]" in out if form == "json" else "no decision changed" in out)


def test_a_rename_of_a_fact_changes_no_decision_that_reads_it(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(repo, edit(BASE, *CASES["renamed-fact"]))
    changes = diff_json(stampgen, "HEAD~1", "HEAD")["changes"]
    assert [(c["kind"], c["subject"], c["old"]["value"], c["new"]["value"]) for c in changes] == [
        ("facts", "renamed", "launch.sm", "launch.sm_major")
    ]


def test_each_changed_row_names_the_deciding_rule_on_both_sides(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(repo, edit(BASE, *CASES["gate-condition"]))
    [change] = diff_json(stampgen, "HEAD~1", "HEAD")["changes"]
    assert change["old"] == {"value": "flashinfer", "rule": "every condition holds", "at": f"{RULES}:35:1"}
    assert change["new"] == {
        "value": "declines",
        "rule": "`server.chunked_prefill_size <= 8192` is false",
        "at": f"{RULES}:37:48",
    }
    assert change["inputs"]["server.chunked_prefill_size"] == "32768"


def test_the_shipped_verify_always_triton_change_reads_as_a_handful_of_rows(tmp_path: Path, stampgen) -> None:
    old, new = tmp_path / "old.rules", tmp_path / "new.rules"
    old.write_text(SHIPPED, encoding="utf-8")
    stamp_verify = (
        "verify = flag mamba.linear_attn_verify_backend > follow decode when decode == flashinfer > triton"
    )
    at = SHIPPED.rindex(stamp_verify)  # the stamp's (the launch block has a local of the same text above)
    changed = (
        SHIPPED[:at]
        + "verify = flag mamba.linear_attn_verify_backend > triton"
        + SHIPPED[at + len(stamp_verify) :]
    )
    new.write_text(changed, encoding="utf-8")
    status, _, _ = stampgen("diff", str(old), str(new))
    assert status == 1
    changes = diff_json(stampgen, str(old), str(new))["changes"]
    stamp = [c for c in changes if c["kind"] == "stamp"]
    assert {c["title"] for c in stamp} == {"LinearAttnBackends.verify"} and len(stamp) <= 6
    assert {c["new"]["value"] for c in stamp} == {"triton"}
    assert all(c["inputs"]["mamba.linear_attn_verify_backend"] == "unset" for c in stamp)
    # the launch block `use`s the stamp's verify: its checks of verify change too, each in a handful of rows
    per_output: dict[str, int] = {}
    for c in changes:
        if c["kind"] == "launch":
            assert "verify" in c["old"]["value"], c
            per_output[c["old"]["value"]] = per_output.get(c["old"]["value"], 0) + 1
    assert all(n <= 6 for n in per_output.values()), per_output
    assert {c["kind"] for c in changes} <= {"stamp", "launch"}


# --------------------------------------------------------------------------------------------- exit codes, forms


def test_exit_zero_prints_the_changes_and_exits_0(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(repo, edit(BASE, *CASES["gate-condition"]))
    status, out, _ = stampgen("diff", "HEAD~1", "HEAD", "--exit-zero")
    assert status == 0 and out.startswith("auto gdn_flashinfer_prefill: value: flashinfer → declines")


def test_exit_zero_keeps_usage_errors_at_2(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    status, out, err = stampgen("diff", "no-such-revision", "--exit-zero")
    assert (status, out) == (2, "")
    assert (
        err
        == "stampgen diff: error: git: no commit 'no-such-revision' in this repository (fetch it, or name a .rules file)\n"
    )


def test_the_base_given_twice_is_a_usage_error(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    status, _, err = stampgen("diff", "HEAD", "--base", "HEAD")
    assert status == 2 and err == "stampgen diff: error: the base is given twice: 'HEAD' and --base 'HEAD'\n"


def test_github_annotations_point_at_the_new_lines_and_removed_rules_at_the_old(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(repo, edit(BASE, *CASES["gate-condition"], *CASES["guard"]))
    status, out, _ = stampgen("diff", "HEAD~1", "HEAD", "--format", "github")
    assert status == 1
    lines = out.splitlines()
    assert lines[0].startswith(
        f"::notice file={RULES},line=37,col=48,title=auto gdn_flashinfer_prefill%3A value::flashinfer → declines when "
    )
    assert f"::notice file={RULES},line=54,col=7,title=guard GDNAttnBackend%3A changed::" in lines[1]
    # KDAAttnBackend is gone from the new side: its notice stands on its old line, the file being still there
    assert lines[2].startswith(
        f"::notice file={RULES},line=54,col=23,title=guard KDAAttnBackend%3A removed::"
    )
    assert len(lines) == 3


def test_markdown_links_positions_to_each_side_on_github(repo: Path, stampgen) -> None:
    old = commit(repo, BASE)
    new = commit(repo, edit(BASE, *CASES["gate-condition"]))
    git(repo, "remote", "add", "origin", "git@github.com:acme/engine.git")
    status, out, _ = stampgen("diff", "HEAD~1", "HEAD", "--format", "markdown")
    assert status == 1
    assert f"[{RULES}:35:1](https://github.com/acme/engine/blob/{old}/{RULES}#L35)" in out
    assert f"[{RULES}:37:48](https://github.com/acme/engine/blob/{new}/{RULES}#L37)" in out


@pytest.mark.parametrize(
    ("remote", "expected"),
    [
        ("git@github.com:acme/engine.git", "https://github.com/acme/engine/blob/C/"),
        ("https://github.com/acme/engine", "https://github.com/acme/engine/blob/C/"),
        (
            "https://x-access-token:SECRET@github.com/acme/engine.git",
            "https://github.com/acme/engine/blob/C/",
        ),
        ("ssh://git@github.com/acme/engine.git", "https://github.com/acme/engine/blob/C/"),
        ("https://gitlab.com/acme/engine.git", None),
        ("", None),
    ],
)
def test_a_github_remote_gives_blob_links_and_never_its_credentials(
    remote: str, expected: str | None
) -> None:
    assert diff_mod.github_blob_base(remote, "C") == expected


def test_markdown_has_no_links_without_a_github_remote_or_for_an_uncommitted_side(
    repo: Path, stampgen
) -> None:
    commit(repo, BASE)
    (repo / RULES).write_text(edit(BASE, *CASES["gate-condition"]), encoding="utf-8")
    _, out, _ = stampgen("diff", "HEAD", "--format", "markdown")
    assert "](" not in out and f"`{RULES}:37:48`" in out
    git(repo, "remote", "add", "origin", "https://github.com/acme/engine.git")
    _, out, _ = stampgen("diff", "HEAD", "--format", "markdown")
    assert "/blob/" in out.split("→", 1)[1]  # the base side links (it is a commit) ...
    assert f"`{RULES}:37:48`" in out  # ... the modified working tree does not


# --------------------------------------------------------------------------------------------- which files


def test_one_file_is_compared_with_the_project_file_of_its_name(repo: Path, stampgen, tmp_path: Path) -> None:
    commit(repo, BASE)
    copy = tmp_path / "engine.rules"
    copy.write_text(BASE, encoding="utf-8")
    assert stampgen("diff", str(copy)) == (0, "no decision changed\n", "")
    assert stampgen("diff", RULES) == (0, "no decision changed\n", "")
    copy.write_text(edit(BASE, *CASES["gate-condition"]), encoding="utf-8")
    status, out, _ = stampgen("diff", str(copy))
    assert status == 1 and out.startswith("auto gdn_flashinfer_prefill: value: declines → flashinfer")


def test_two_files_are_compared_with_each_other(tmp_path: Path, stampgen, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.rules").write_text(BASE, encoding="utf-8")
    Path("b.rules").write_text(edit(BASE, *CASES["validate-fallback"]), encoding="utf-8")
    status, out, _ = stampgen("diff", "a.rules", "b.rules")
    assert status == 1
    assert out.splitlines()[1] == "    rule: fallback a.rules:49:5 → fallback b.rules:49:5"


def test_a_file_added_at_head_reports_its_rules_as_added(repo: Path, stampgen) -> None:
    commit(repo, BASE)
    commit(
        repo,
        "enum E { a b }\nconfig c { x: E = a }\nstamp T on runner.t {\n    v = base c.x\n}\n",
        "rules/more.rules",
    )
    changes = diff_json(stampgen, "HEAD~1", "HEAD")["changes"]
    assert [(c["title"], c["new"]["at"]) for c in changes] == [
        ("enum E: added", "rules/more.rules:1:1"),
        ("config c.x: added", "rules/more.rules:2:12"),
        ("stamp T: added", "rules/more.rules:3:1"),
    ]


def test_a_monorepo_subfolder_diffs_its_own_project_named_from_the_repository_top(
    repo: Path, stampgen, monkeypatch
) -> None:
    project = repo / "services" / "engine"
    (project / "docs").mkdir(parents=True)
    (project / "stampgen.toml").write_text('rules = "rules"\n', encoding="utf-8")
    commit(repo, "enum E { a }\n", "rules/unrelated.rules")  # the repository's own rules: not this project's
    commit(repo, BASE, "services/engine/rules/engine.rules")
    commit(repo, edit(BASE, *CASES["gate-condition"]), "services/engine/rules/engine.rules")
    monkeypatch.chdir(project / "docs")
    status, out, err = stampgen("diff", "HEAD~1")
    assert (status, err) == (1, "")
    assert "rule: every condition holds services/engine/rules/engine.rules:35:1 → " in out
    assert stampgen("diff", "HEAD") == (0, "no decision changed\n", "")


# --------------------------------------------------------------------------------------------- the default base


def base_label(stampgen) -> str:
    return diff_json(stampgen)["base"]


def feature_branch(repo: Path) -> tuple[str, str]:
    """main at the base rules, then `feature` checked out with the gate change; (main, feature) commits."""
    main = commit(repo, BASE)
    git(repo, "checkout", "-q", "-b", "feature")
    return main, commit(repo, edit(BASE, *CASES["gate-condition"]))


def test_the_default_base_is_the_environment_variable_first(repo: Path, stampgen, monkeypatch) -> None:
    feature_branch(repo)
    monkeypatch.setenv(diff_mod.BASE_ENV, "HEAD")
    assert base_label(stampgen) == "HEAD ($STAMPGEN_DIFF_BASE)"
    assert stampgen("diff")[0] == 0  # HEAD against the working tree: no change


def test_the_default_base_is_the_merge_base_with_origin_head_before_main(repo: Path, stampgen) -> None:
    main, _ = feature_branch(repo)
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    git(repo, "update-ref", "refs/remotes/origin/trunk", first)
    git(repo, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/trunk")
    assert base_label(stampgen) == f"{first[:12]} (merge-base of HEAD and origin/trunk)"
    git(repo, "symbolic-ref", "--delete", "refs/remotes/origin/HEAD")
    assert base_label(stampgen) == f"{main[:12]} (merge-base of HEAD and main)"


def test_the_default_base_falls_back_to_origin_main_then_master(repo: Path, stampgen) -> None:
    main, _ = feature_branch(repo)
    git(repo, "update-ref", "refs/remotes/origin/main", main)
    git(repo, "branch", "-q", "-m", "main", "master")
    assert base_label(stampgen) == f"{main[:12]} (merge-base of HEAD and origin/main)"
    git(repo, "update-ref", "-d", "refs/remotes/origin/main")
    assert base_label(stampgen) == f"{main[:12]} (merge-base of HEAD and master)"


def test_without_any_base_the_diff_says_how_to_name_one(repo: Path, stampgen) -> None:
    feature_branch(repo)
    git(repo, "branch", "-q", "-D", "main")
    status, out, err = stampgen("diff")
    assert (status, out) == (2, "")
    assert err == (
        "stampgen diff: error: no base revision: HEAD shares no history with origin/HEAD, main, origin/main, "
        "master, origin/master (a shallow clone needs fetch-depth: 0); name one: stampgen diff REV, --base REV "
        "or STAMPGEN_DIFF_BASE=REV\n"
    )


def test_outside_a_git_repository_the_default_base_is_a_usage_error(
    tmp_path: Path, stampgen, monkeypatch
) -> None:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "engine.rules").write_text(BASE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    status, _, err = stampgen("diff")
    assert (
        status == 2
        and err
        == f"stampgen diff: error: no base to compare with: {tmp_path.resolve()} is not in a git repository\n"
    )


# --------------------------------------------------------------------------------------------- the truth

# Small enough to enumerate concretely; every member of B is named somewhere, so every cell is a value.
TRUTH_BASE = """\
enum B open(c) { a b c }
config m {
    x: B?
    y: B = a
    on: bool = false
}
facts launch { n: int in {0, 1, 2} }
facts runner { n: int in {0, 1, 2} }
launch l {
    set m.x = b when m.x is unset and launch.n == 2
    d = flag m.x > base m.y
    forbid d == c and launch.n < 2 "c needs n 2"
    require not m.on or d != a "on needs not a"
}
auto g: B = b when runner.n >= 1 and m.on
stamp S on runner.s {
    slot s: B from g
    f = flag m.x > auto s > base m.y
    h = follow f when f == a > c
}
validate V {
    forbid S.f == b and runner.n == 0 "b needs n"
    fallback S.h c -> a when runner.n < 2 log "c is replaced"
}
"""
TRUTH_EDITS = {
    "launch forbid": [("launch.n < 2", "launch.n < 1")],
    "launch set": [("launch.n == 2", "launch.n >= 1")],
    "gate": [("runner.n >= 1", "runner.n >= 2")],
    "stamp follow": [("follow f when f == a", "follow f when f != b")],
    "stamp tiers": [("f = flag m.x > auto s > base m.y", "f = auto s when m.on > flag m.x > base m.y")],
    "validate": [("S.h c -> a", "S.h c -> b"), ("runner.n == 0", "runner.n <= 1")],
    "open enum member": [("{ a b c }", "{ a b d c }")],
    "default": [("y: B = a", "y: B = b")],
}


def _reads(model: Model, kind: str, rule: str) -> list[str]:
    """Every input a rule reads in one version (a launch: every launch block together)."""
    if kind == "auto":
        return [r.name for r in ir.expr_refs(model.autos[rule].decl.when)]
    if kind == "stamp":
        stamp = model.stamps[rule]
        return sorted(set().union(*(interp.field_inputs(stamp, f.name) for f in stamp.fields)))
    names: list[str] = []
    stmts = (
        [s for lb in model.launches for s in lb.decl.stmts]
        if kind == "launch"
        else model.validates[0].decl.stmts
    )
    if kind == "validate":
        names += [f"S.{f.name}" for f in model.stamps["S"].fields]
    for stmt in stmts:
        exprs = [getattr(stmt, "when", None), getattr(stmt, "cond", None)]
        exprs += [t.when for t in getattr(stmt, "tiers", ())]
        names += [r.name for e in exprs if e is not None for r in ir.expr_refs(e)]
        names += [t.ref.name for t in getattr(stmt, "tiers", ()) if t.ref is not None]
    return [n for n in dict.fromkeys(names) if n in model.leaves or n.startswith("S.")]


def _values(models: tuple[Model, Model], name: str, types: dict[Any, Any]) -> list[Any]:
    """Every value a caller may pass for an input (both versions'), and DEFAULT where the defaults differ."""
    values: list[Any] = []
    for model in models:
        t, optional = types.get((id(model), name), (None, False))
        for v in ((None,) if optional else ()) + (tuple(domain(t)) if t is not None else ()):
            if v not in values:
                values.append(v)
    leaves = [m.leaves.get(name) for m in models]
    if (
        all(leaf is not None and not leaf.is_fact for leaf in leaves)
        and leaves[0].default != leaves[1].default
    ):
        values.append(diff_mod.DEFAULT)
    return values


def _coerce(model: Model, t: Any, name: str, value: Any) -> Any:
    if value == diff_mod.DEFAULT:
        return model.leaves[name].default
    return interp.coerce(t, value) if value is not None else None


def _matches(cell: str, value: Any) -> bool:
    shown = interp.show_value(value) if value != diff_mod.DEFAULT else diff_mod.DEFAULT
    if cell == "*":
        return True
    if cell == "set":
        return value is not None
    if cell.startswith("≠"):
        return shown not in cell[1:].split("|")
    return shown in cell.split("|")


def _checks(stmts: Any, violations: list[interp.RuleViolation]) -> dict[str, str]:
    fired = {v.message for v in violations}
    return {
        f"{s.kind} {s.message}": "raises" if s.message in fired else "passes"
        for s in stmts
        if isinstance(s, ir.Check)
    }


def _outcomes(model: Model, kind: str, rule: str, env: dict[str, Any]) -> dict[str, str]:
    """What one version does for concrete inputs: subject -> shown value (in the diff's words)."""
    if kind == "auto":
        gate = model.autos[rule].decl
        return {
            "value": interp.show_value(gate.value.value) if interp.eval_expr(gate.when, env) else "declines"
        }
    if kind == "launch":
        _, log, violations = interp.run_launch(model, dict(env))
        stmts = [s for lb in model.launches for s in lb.decl.stmts]
        written: dict[str, str] = {}
        for stmt, entry in zip(stmts, log):
            if isinstance(stmt, ir.SetStmt):
                written.setdefault(f"sets {stmt.target.name}", "(not written)")
                if entry.status == "applied":
                    written[f"sets {stmt.target.name}"] = interp.show_value(stmt.value.value)
        return {**_checks(stmts, violations), **written}
    if kind == "validate":
        stamp = model.stamps["S"]
        values = {f.name: env[f"S.{f.name}"] for f in stamp.fields}
        after, log, violations = interp.run_validate(model, rule, stamp, values, env)
        # a field no fallback replaced is `kept`: a change of the value itself is the stamp's to report
        replaced = {e.text.split()[1] for e in log if e.kind == "fallback" and e.status == "applied"}
        shown = {f"S.{k}": interp.show_value(v) if f"S.{k}" in replaced else "kept" for k, v in after.items()}
        return {**_checks(model.validates[0].decl.stmts, violations), **shown}
    fields = interp.resolve_stamp(model, model.stamps[rule], env, explain=False)
    return {name: f"{interp.show_value(o.value)} {o.tier}" for name, o in fields.items()}


def _reported(kind: str, subject: str, side: diff_mod.Side, env: dict[str, Any]) -> str:
    """A reported side in _outcomes' words."""
    value = side.value
    if subject.startswith(("forbid ", "require ")):
        return "raises" if value.startswith("raises") else "passes"
    if kind == "validate" and side.rule != "fallback":
        return "kept"
    if value.startswith("← "):
        value = interp.show_value(env[value[2:]])
    return f"{value} {side.rule}" if kind == "stamp" else value


@pytest.mark.parametrize("case", sorted(TRUTH_EDITS))
def test_every_reported_row_is_exactly_where_the_versions_differ(case: str) -> None:
    models = (
        load_text(TRUTH_BASE, "a.rules").model,
        load_text(edit(TRUTH_BASE, *TRUTH_EDITS[case]), "b.rules").model,
    )
    assert models[0] is not None and models[1] is not None
    changes = [c for c in diff_mod.diff_models(*models) if c.inputs]
    assert changes, "every truth edit changes some decision"
    types: dict[Any, Any] = {}
    for model in models:
        for name, leaf in model.leaves.items():
            types[(id(model), name)] = (leaf.type, leaf.optional and not leaf.is_fact)
        types[(id(model), "s")] = (model.stamps["S"].slots[0].type, True)
        for f in model.stamps["S"].fields:
            types[(id(model), f"S.{f.name}")] = (f.type, False)
    rules = [("launch", "l"), ("auto", "g"), ("stamp", "S"), ("validate", "V")]
    for kind, rule in rules:
        names = list(dict.fromkeys(n for m in models for n in _reads(m, kind, rule)))
        mine = [c for c in changes if (c.kind.value, c.rule) == (kind, rule)]
        for combo in itertools.product(*(_values(models, n, types) for n in names)):
            raw = dict(zip(names, combo))
            envs = [
                {n: _coerce(m, types[(id(m), n)][0], n, v) for n, v in raw.items() if (id(m), n) in types}
                for m in models
            ]
            outcomes = [_outcomes(m, kind, rule, env) for m, env in zip(models, envs)]
            for subject in sorted(set(outcomes[0]) | set(outcomes[1])):
                a, b = outcomes[0].get(subject, "passes"), outcomes[1].get(subject, "passes")
                head, _, message = subject.partition(" ")
                hits = [
                    c
                    for c in mine
                    if (c.subject == subject or (c.subject == head and message in c.old.value + c.new.value))
                    and all(_matches(cell, raw[n]) for n, cell in c.inputs.items())
                ]
                if a == b:
                    assert not hits, f"{case}: {kind} {rule} {subject} is {a} on both sides for {raw}: {hits}"
                    continue
                assert len(hits) == 1, f"{case}: {kind} {rule} {subject}: {a} → {b} for {raw}; rows: {hits}"
                assert (
                    _reported(kind, subject, hits[0].old, envs[0]),
                    _reported(kind, subject, hits[0].new, envs[1]),
                ) == (a, b), (case, raw, hits[0])


def test_an_open_enum_member_moves_its_inputs_from_the_catch_all() -> None:
    model_a = load_text(TRUTH_BASE, "a.rules").model
    model_b = load_text(edit(TRUTH_BASE, *TRUTH_EDITS["open enum member"]), "b.rules").model
    changes = diff_mod.diff_models(model_a, model_b)
    assert changes[0].title == "enum B: member d" and (changes[0].old.value, changes[0].new.value) == (
        "c (catch-all)",
        "d",
    )
    moved = [c for c in changes if c.kind is diff_mod.Kind.STAMP and c.subject == "f"]
    assert {c.old.value for c in moved} == {"c"} and all("d" in c.inputs.values() for c in moved)
    assert isinstance(model_b.enums["B"], EnumT)
