"""Snapshots of what the generator emits: each fixture's module and tests, and the shipped stamp's table.

A change to a template, to rendering or to the shipped rules' behaviour shows up here as a snapshot diff
to review. Update with `pytest tests/test_generate_snapshots.py --snapshot-update` (tests/snapshot.py).
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from stampgen.codegen import render
from stampgen.codegen.generate import render_outputs
from stampgen.codegen.load import load
from stampgen.codegen.project import find_project
from tests.snapshot import assert_match

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
    for output in outputs:
        assert_match(snapshot, output.content, output.name)


def test_decision_table_of_the_shipped_stamp(snapshot: object, in_repo: None) -> None:
    loaded = load("rules/linear_attn.rules")
    assert loaded.model is not None
    for table in render.decision_tables(loaded.model, loaded.model.stamps["LinearAttnBackends"]):
        assert_match(snapshot, table.text(), table.name)
