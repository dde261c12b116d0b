"""Fixtures shared by the rules-language tests (tests/test_{parser,fmt,cli,explain,table_diff,...}.py)."""

from __future__ import annotations

import io
from typing import Any

import pytest

# codegen and msgspec are imported where used: the GPU machine runs `pytest -m gpu tests/kernels` without them


def _run_stampgen(*argv: str) -> tuple[int, str, str]:
    from codegen.cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def _without_positions(node: Any) -> Any:
    import msgspec

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            kept = {k: strip(v) for k, v in value.items() if not k.endswith("loc") and k != "path"}
            if "clause_locs" in value:
                kept["clauses"] = [keyword for keyword, _ in value["clause_locs"]]
            return kept
        if isinstance(value, (list, tuple)):
            return [strip(v) for v in value]
        return value

    return strip(msgspec.to_builtins(node))


@pytest.fixture(scope="session")
def stampgen():
    """`stampgen(*argv)` runs the CLI in-process and returns (exit status, stdout, stderr)."""
    return _run_stampgen


@pytest.fixture(scope="session")
def meaning():
    """`meaning(ir)`: the IR as plain data without positions or path, to compare what two texts say."""
    return _without_positions
