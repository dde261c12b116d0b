"""``benchmarks/timing.py``: what the shared CUDA-graph timer runs, and how often (GPU only)."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.timing import UNTIMED_REPLAYS, graph_ms  # noqa: E402

pytestmark = pytest.mark.gpu


def test_the_work_runs_once_eagerly_then_once_per_replay():
    counter = torch.zeros(1, device="cuda")

    def two_calls():
        counter.add_(1)
        counter.add_(1)

    ms = graph_ms(two_calls, calls=2, replays=5)
    torch.cuda.synchronize()
    # One eager warm-up, nothing during capture, then the untimed and the timed replays.
    assert counter.item() == 2 * (1 + UNTIMED_REPLAYS + 5)
    assert ms > 0
