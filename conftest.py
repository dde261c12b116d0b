"""Test-session set-up shared by every test directory.

Without a CUDA device the Triton kernels run under the Triton CPU interpreter. The variable must be set
before any module decorates a kernel with ``@triton.jit``, hence here, at the root, before collection.
"""

import importlib.util
import os
import sys
import types
from pathlib import Path

# The checkout's folders import as stampgen.codegen / stampgen.kernels / stampgen.generated once the
# package is installed (`pip install -e .`). Where it is not (the GPU machine runs `pytest -m gpu
# tests/kernels` with its own packages), the checkout itself stands in for the `stampgen` namespace.
if importlib.util.find_spec("stampgen") is None:
    _namespace = types.ModuleType("stampgen")
    _namespace.__path__ = [str(Path(__file__).resolve().parent)]
    sys.modules["stampgen"] = _namespace

try:
    import torch

    _has_cuda = torch.cuda.is_available()
except ImportError:  # the generator's tests need no torch
    _has_cuda = False

if not _has_cuda:
    os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


def pytest_collection_modifyitems(config, items):
    if _has_cuda:
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
