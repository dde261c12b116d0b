"""The CI recipe of docs/ci.md, run as written against a temporary git repository: a clone of an upstream
with a pull-request branch, so `origin/main` exists as it does in a CI checkout.

Every `stampgen ...` line of the recipe's workflow runs (in-process), with `${{ github.base_ref }}`
as `main` and output redirections kept in memory; the exit codes and outputs are what the recipe's notes
promise: a clean pull request passes every step and gets the behaviour diff, a broken one gets `::error`
annotations on its rules lines, a stale one fails `generate --check`.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RECIPE = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
FOLLOWS = "verify = flag mamba.linear_attn_verify_backend > follow decode when decode == flashinfer > triton"


def recipe_commands() -> list[list[str]]:
    """The workflow's stampgen command lines, in order, without shell redirections and comments."""
    workflow = RECIPE[RECIPE.index("```yaml") : RECIPE.index("```", RECIPE.index("```yaml") + 3)]
    commands = []
    for line in workflow.splitlines():
        text = re.sub(r"^\s*(- )?(run: )?", "", line.split(" #", 1)[0]).strip()
        if not text.startswith("stampgen "):
            continue
        text = text.replace("${{ github.base_ref }}", "main").split(">", 1)[0].strip()
        commands.append(shlex.split(text)[1:])
    return commands


def git(cwd: Path, *argv: str) -> None:
    base = ["git", "-c", "user.email=ci@example.com", "-c", "user.name=ci", "-c", "init.defaultBranch=main"]
    subprocess.run([*base, *argv], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pull_request(tmp_path: Path, stampgen, monkeypatch: pytest.MonkeyPatch):
    """A clone with `origin/main` holding the shipped rules and their generated code, on a branch `pr`."""
    upstream = tmp_path / "upstream"
    (upstream / "rules").mkdir(parents=True)
    (upstream / "rules" / "linear_attn.rules").write_text(SHIPPED, encoding="utf-8")
    (upstream / "stampgen.toml").write_text('out = "generated"\n', encoding="utf-8")
    monkeypatch.chdir(upstream)
    assert stampgen("generate", "-q")[0] == 0
    git(upstream, "init", "-q")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "rules")
    work = tmp_path / "work"
    subprocess.run(["git", "clone", "-q", str(upstream), str(work)], check=True, capture_output=True)
    git(work, "checkout", "-q", "-b", "pr")
    monkeypatch.chdir(work)
    return work


def run_recipe(stampgen) -> list[tuple[list[str], int, str, str]]:
    return [(argv, *stampgen(*argv)) for argv in recipe_commands()]


def test_the_recipe_runs_check_generate_fmt_and_the_diff_in_that_order() -> None:
    steps = [argv[0] for argv in recipe_commands()]
    assert steps == ["check", "generate", "fmt", "diff", "diff"], steps


def test_a_clean_pull_request_passes_every_step_and_gets_its_behaviour_diff(pull_request, stampgen):
    rules = pull_request / "rules" / "linear_attn.rules"
    rules.write_text(SHIPPED.replace(FOLLOWS, "verify = flag mamba.linear_attn_verify_backend > triton"))
    assert stampgen("generate", "-q")[0] == 0
    git(pull_request, "commit", "-q", "-am", "verify is always triton")
    results = run_recipe(stampgen)
    assert [status for _, status, _, _ in results] == [0, 0, 0, 0, 0], results
    github, markdown = results[3][2], results[4][2]
    notices = [
        line for line in github.splitlines() if line.startswith("::notice file=rules/linear_attn.rules,")
    ]
    assert notices, github
    assert "LinearAttnBackends" in markdown and "verify" in markdown and "| " in markdown, markdown


def test_an_unchanged_pull_request_says_no_decision_changed(pull_request, stampgen):
    rules = pull_request / "rules" / "linear_attn.rules"
    rules.write_text("# a comment, nothing else\n" + SHIPPED, encoding="utf-8")
    assert stampgen("generate", "-q")[0] == 0
    git(pull_request, "commit", "-q", "-am", "a comment")
    results = run_recipe(stampgen)
    assert [status for _, status, _, _ in results] == [0, 0, 0, 0, 0], results
    assert results[4][2].strip().endswith("no decision changed"), results[4][2]


def test_broken_rules_fail_the_check_step_with_annotations_on_their_lines(pull_request, stampgen):
    rules = pull_request / "rules" / "linear_attn.rules"
    rules.write_text(
        SHIPPED.replace("base mamba.linear_attn_backend\n", "base mamba.linear_attn_backnd\n", 1)
    )
    results = run_recipe(stampgen)
    argv, status, out, _ = results[0]
    assert (argv[0], status) == ("check", 1)
    assert re.search(r"^::error file=rules/linear_attn\.rules,line=\d+,col=\d+,title=", out, re.M), out


def test_rules_edited_without_regenerating_fail_the_generate_step(pull_request, stampgen):
    rules = pull_request / "rules" / "linear_attn.rules"
    rules.write_text(SHIPPED.replace(FOLLOWS, "verify = flag mamba.linear_attn_verify_backend > triton"))
    results = run_recipe(stampgen)
    assert [status for _, status, _, _ in results][:2] == [0, 1], results
    assert "stale" in results[1][3], results[1][3]
