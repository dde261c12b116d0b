"""Snapshots of what the generator emits: each fixture's module and tests, and the shipped stamp's table.

One plain-text file per output (tests/snapshot.py): `tests/snapshots/generated/<fixture>/<file>.snap` holds
the generated file itself and `tests/snapshots/decision_tables/<table>.txt.snap` a decision table, so a
change to a template, to rendering or to the shipped rules' behaviour reads, in review, as an ordinary diff
of each output it changes. Record or re-record every snapshot with one command (and review the diff):

    .venv/bin/python -m pytest -q -p no:cacheprovider tests/test_generate_snapshots.py --snapshot-update

Without the flag a missing, differing or stale snapshot fails the test.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from stampgen.codegen.emit.suite import TABLE_ROWS_EMBEDDED
from stampgen.codegen.generate import render_outputs
from stampgen.codegen.load import load
from stampgen.codegen.project import find_project
from stampgen.codegen.testing import table_text
from tests.snapshot import assert_match_files, assert_only_groups

REPO = Path(__file__).resolve().parents[1]
FIXTURES = ("edges", "everything", "injection", "minimal")


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # outputs name their rules relative to the working directory


@pytest.mark.parametrize("name", FIXTURES)
def test_generated_output_of_fixture(snapshot: object, in_repo: None, name: str) -> None:
    err = io.StringIO()
    outputs = render_outputs(
        find_project(REPO),
        [f"tests/fixtures/{name}.rules"],
        [name],
        "generated",
        "Path(__file__).resolve().parents[1]",
        err,
    )
    assert outputs is not None, err.getvalue()
    assert_match_files(snapshot, f"generated/{name}", {output.name: output.content for output in outputs})


def test_no_snapshots_are_kept_for_a_fixture_that_is_gone(snapshot: object) -> None:
    assert_only_groups(snapshot, "generated", FIXTURES)


def test_decision_table_of_the_shipped_stamp(snapshot: object, in_repo: None) -> None:
    loaded = load("rules/linear_attn.rules")
    assert loaded.model is not None
    text = table_text(loaded.model, "LinearAttnBackends", TABLE_ROWS_EMBEDDED)
    assert text is not None
    assert_match_files(snapshot, "decision_tables", {"linear_attn_backends.txt": text})
