"""One long sequence window by window (``LaunchConfig.gluon_window_first``: ``chunk._gluon_prefill_windows``)
on an sm_90 GPU: the state pass of each window after the one before it, the intra launch of the next
window on a second stream beside it, the pool row carrying the state. The windows end at chunk ends and
the state crosses them in fp32, so the result must be the unwindowed call's bit for bit — a window that
read the next window's Tβ before it was written, or a state pass that started before the one before it
ended, shows as a difference."""

import pytest
import torch
from gdn_inputs import assert_padding_left_alone, assert_prefill_replay_matches_eager, clone_inputs
from test_gdn_chunk_gluon_gpu import FEW_HEADS, QWEN3_NEXT, _inputs

from stampgen.kernels import gdn
from stampgen.kernels.gdn import chunk

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
        reason="the Gluon state pass is written for sm_90 (H100 / H200)",
    ),
]


def _windowed_and_whole(gluon, low, first, growth=1.5, **fields):
    """(windowed output, inputs after it), (unwindowed output, inputs after it), the Gluon intra launch
    (``fields``: other ``LaunchConfig`` fields pinned for both)."""
    whole = clone_inputs(low)
    # (the default windows one sequence of 16k tokens and more)
    gluon.on(intra=True, gluon_window_first=0, **fields)
    o_whole = gdn.prefill(**whole, backend="triton")
    assert gluon.calls == ["gluon"]
    gluon.calls.clear()
    gluon.on(intra=True, gluon_window_first=first, gluon_window_growth=growth, **fields)
    o = gdn.prefill(**low, backend="triton")
    return (o, low), (o_whole, whole)


@pytest.mark.parametrize(
    "T,first,growth",
    [(4096, 4, 1.5), (16384 + 17, 16, 1.5), (5000, 1, 2.0), (8192, 8, 1.0)],
    ids=["4k", "16k-partial-last-chunk", "one-chunk-first", "equal-windows"],
)
def test_windows_give_the_unwindowed_result_bit_for_bit(gluon, T, first, growth):
    low, _ = _inputs([T], seed=T, **QWEN3_NEXT)
    (o, after), (o_whole, whole) = _windowed_and_whole(gluon, low, first, growth)
    windows = chunk.windows(T, 1, chunk.launch_config(T, 1, 32, 128))
    assert len(windows) > 2 and gluon.calls == ["gluon"] * len(windows), "the windows did not run"
    assert torch.equal(o, o_whole)
    assert torch.equal(after["state_pool"], whole["state_pool"])


@pytest.mark.parametrize("p_from_intra", [False, True], ids=["p-made-in-the-pass", "p-from-the-intra-launch"])
def test_windows_give_the_unwindowed_result_bit_for_bit_wherever_p_is_made(gluon, p_from_intra):
    # with P from the intra launch (the default here), each window's intra launch beside the state pass
    # of the one before also writes that window's P: a state pass reading P before its window's launch
    # ended shows here
    T = 8192 + 100
    low, _ = _inputs([T], seed=T, **QWEN3_NEXT)
    (o, after), (o_whole, whole) = _windowed_and_whole(gluon, low, 8, 1.5, gluon_p_from_intra=p_from_intra)
    assert len(gluon.calls) > 2, "the windows did not run"
    assert gluon.p_in == [p_from_intra] * (1 + len(gluon.calls)), "P did not come as asked"
    assert torch.equal(o, o_whole)
    assert torch.equal(after["state_pool"], whole["state_pool"])


def test_a_padding_sequence_in_windows_gets_zero_output_and_no_pool_row(gluon):
    low, _ = _inputs([3000], seed=3, pad=1, **FEW_HEADS)
    assert low["state_indices"].tolist() == [-1], "the case must be one padding sequence"
    before = clone_inputs(low)
    gluon.on(intra=True, gluon_window_first=4)
    o = gdn.prefill(**low, backend="triton")
    assert len(gluon.calls) > 2
    assert_padding_left_alone(before, low["state_pool"], o)


def test_windows_are_captured_and_replayed_in_a_cuda_graph(gluon):
    low, _ = _inputs([6000], seed=21, **FEW_HEADS)
    fresh, _ = _inputs([6000], seed=22, **FEW_HEADS)
    gluon.on(intra=True, gluon_window_first=4)
    assert_prefill_replay_matches_eager(low, fresh)
    assert len(set(gluon.calls)) == 1 and len(gluon.calls) > 2


def test_the_default_runs_windows_in_a_captured_call_only(gluon):
    # The default (no windows pinned) of one 16k sequence: eagerly one state pass, captured into a CUDA
    # graph its windows (``launch_config``'s ``captured``, which ``prefill`` asks the stream for); the
    # replay held bit for bit to the unwindowed eager call
    T = 16384
    low, _ = _inputs([T], seed=5, **FEW_HEADS)
    fresh, _ = _inputs([T], seed=6, **FEW_HEADS)
    gluon.on(intra=True)
    gdn.prefill(**clone_inputs(low), backend="triton")
    assert gluon.calls == ["gluon"], "an eager call ran in windows"
    gluon.calls.clear()
    assert_prefill_replay_matches_eager(low, fresh)
    n = len(chunk.windows(T, 1, chunk.launch_config(T, 1, FEW_HEADS["HV"], FEW_HEADS["V"], captured=True)))
    assert n > 1
    # the side stream's warm-up call and the eager call one each, the captured call its windows
    assert gluon.calls == ["gluon"] * (n + 2)
