"""Test-session set-up shared by every test directory.

Without a CUDA device the Triton kernels run under the Triton CPU interpreter. The variable must be set
before any module decorates a kernel with ``@triton.jit``, hence here, at the root, before collection.
"""

import os

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
