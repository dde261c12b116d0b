"""Fixtures of the kernel tests."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def poisoned_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every floating-point ``torch.empty`` during a test comes back filled with NaN, so a kernel that
    reads an output or scratch buffer it never wrote fails its comparison instead of passing on zeros."""
    real_empty = torch.empty

    def empty(*args, **kwargs):
        t = real_empty(*args, **kwargs)
        return t.fill_(float("nan")) if t.is_floating_point() else t

    monkeypatch.setattr(torch, "empty", empty)


@pytest.fixture
def gluon(monkeypatch: pytest.MonkeyPatch):
    """A ``gluon_switch.GluonSwitch``: the Gluon launch paths of ``gdn.prefill`` switched for this test
    (the Triton passes until ``on()``), each launch counted."""
    from gluon_switch import GluonSwitch  # imported here: only the Gluon GPU tests use it

    return GluonSwitch(monkeypatch)
