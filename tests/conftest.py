"""Fixtures shared by the rules-language tests (tests/test_{parser,fmt,cli,explain,table_diff,...}.py)."""

from __future__ import annotations

import io

import pytest

# codegen and msgspec are imported where used: the GPU machine runs `pytest -m gpu tests/kernels` without them


def _run_stampgen(*argv: str) -> tuple[int, str, str]:
    from stampgen.codegen.cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main(list(argv), out=out, err=err)
    return status, out.getvalue(), err.getvalue()


@pytest.fixture(scope="session")
def stampgen():
    """`stampgen(*argv)` runs the CLI in-process and returns (exit status, stdout, stderr)."""
    return _run_stampgen


@pytest.fixture(scope="session")
def meaning():
    """`meaning(ir)`: the IR as plain data without positions or path, to compare what two texts say."""
    from stampgen.codegen.ir import without_positions

    return without_positions


@pytest.fixture(scope="module")
def one_cpu_thread():
    """Torch on one CPU thread for a module's tests (``pytestmark = pytest.mark.usefixtures(...)``): the
    tiny models' ops run fastest so, and do not stall when other processes hold the cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
