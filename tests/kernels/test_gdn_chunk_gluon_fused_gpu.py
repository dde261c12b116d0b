"""The fused state pass on an sm_90 GPU — ``kernels/gdn/chunk_gluon_fused.py`` (``LaunchConfig.gluon_fused``:
the batch pass with P and the gate factors made inside it by a worker warpgroup, Tβ copied in from the
intra launch or made there too) — against ``chunk_gluon_batch``'s pass on the same inputs (the same math:
copied in, the outputs are the batch pass's; made by the worker, Tβ is the Gluon intra launch's solve and
P the batch pass's product, each on its own roundings of the decay) and the fp32 torch reference.

What it adds to the batch pass's edges (``test_gdn_chunk_gluon_gpu.py``): the worker's handshake with the
state warpgroups over many chunks, a sequence's partial last chunk taken by TMA with its rows past the end
held out by β = 0 (and its copied-in Tβ by masked loads), the intra launch cut to the chunks the worker
copies in (none of a sequence's last segment where it makes every chunk's Tβ) while split sequences still
get theirs, and CUDA-graph capture, each for every source of Tβ (``SOURCES``). Each test checks that the fused pass ran, so
a fallback to the batch pass cannot pass for it.
"""

import pytest
import torch
from gdn_inputs import (
    assert_padding_left_alone,
    assert_prefill_replay_matches_eager,
    clone_inputs,
    low_and_upcast,
    rel_rmse,
)

# the shapes and bounds of the batch pass's tests (SAME_MATH_BOUND: here against the batch pass)
from test_gdn_chunk_gluon_gpu import BF16_BOUND, FEW_HEADS, QWEN3_NEXT, SAME_MATH_BOUND

from stampgen.kernels import gdn

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
        reason="the fused state pass is written for sm_90 (H100 / H200)",
    ),
]


# The batch pass and the fused one, each after the Gluon intra launch (``GluonSwitch.on``)
BATCH = dict(intra=True, batch=128)
FUSED = dict(intra=True, batch=128, gluon_fused=True)


# Where the fused pass's Tβ comes from (``LaunchConfig.gluon_fused_tbeta``): its worker warpgroup, or
# the intra launch (copied in by TMA, a partial chunk by masked loads); each with the
# ``fused_makes_last`` the intra launch before the fused pass must be asked for (True: none of a last
# segment; False: every chunk)
SOURCES = {
    "tbeta-by-worker": (dict(gluon_fused_tbeta="worker"), True),
    "tbeta-loaded": (dict(gluon_fused_tbeta="intra"), False),
}


@pytest.fixture(params=list(SOURCES))
def source(request):
    """(the ``LaunchConfig`` fields of one source of the fused pass's Tβ, the intra launch's expected
    ``fused_makes_last``): ``SOURCES``."""
    return SOURCES[request.param]


def _inputs(seqlens, seed, pad=0, dtype=torch.bfloat16, normalizer=1.0, **dims):
    return low_and_upcast(
        seqlens, dims=dims or QWEN3_NEXT, seed=seed, pad=pad, dtype=dtype, normalizer=normalizer
    )


def _run_both(gluon, low, upcast, source, **fields):
    """(fused output, batch-pass output and inputs after it, reference output and inputs after it); the
    fused run's inputs are ``low`` itself, its Tβ from ``source`` (a ``SOURCES`` entry)."""
    batch = clone_inputs(low)
    gluon.on(**BATCH, **fields)
    o_batch = gdn.prefill(**batch, backend="triton")
    assert gluon.calls == ["batch128"], "the batch pass did not run"
    gluon.on(**FUSED, **source[0], **fields)
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == ["batch128", "fused"], "the fused pass did not run"
    o_ref = gdn.prefill(**upcast, backend="torch")
    return o, (o_batch, batch), (o_ref, upcast)


def _assert_matches(o, inputs, batch_run, reference_run):
    used = inputs["state_indices"][inputs["state_indices"] >= 0].long()
    for (other_o, other), bound in ((batch_run, SAME_MATH_BOUND), (reference_run, BF16_BOUND)):
        assert rel_rmse(o, other_o) <= bound
        assert rel_rmse(inputs["state_pool"][used], other["state_pool"][used]) <= bound


CASES = {
    "T4096": ([4096], 0, QWEN3_NEXT),
    # partial, full, one past, two chunks + 2, empty, one token
    "edges": ([63, 64, 65, 130, 0, 1], 0, FEW_HEADS),
    "padded": ([700, 7, 129, 300], 1, FEW_HEADS),
    "16x512": ([512] * 16, 0, QWEN3_NEXT),
    "K64": ([100, 37, 64, 257], 0, dict(H=1, HV=2, K=64, V=128)),
    "V256": ([300, 64, 5], 0, dict(H=2, HV=4, K=128, V=256)),
}


PERSISTENT_CASES = {"16x512"}


@pytest.mark.parametrize("case", CASES)
def test_fused_pass_matches_the_batch_pass_and_the_reference(gluon, case, source, monkeypatch):
    seqlens, pad, dims = CASES[case]
    from stampgen.kernels.gdn import chunk_gluon_fused

    forms = []  # whether each fused launch ran persistent (``chunk_gluon_fused._grid``)
    grid = chunk_gluon_fused._grid
    monkeypatch.setattr(chunk_gluon_fused, "_grid", lambda *a: forms.append(grid(*a)[1]) or grid(*a))
    # weak decay (normalizer 20): a chunk's early rows still matter at its end, as they do in Tβ
    low, upcast = _inputs(seqlens, seed=len(seqlens) + pad, pad=pad, normalizer=20, **dims)
    before = clone_inputs(low)
    o, batch_run, reference_run = _run_both(gluon, low, upcast, source)
    _assert_matches(o, low, batch_run, reference_run)
    # the fused run's intra launch left out the chunks whose Tβ the worker makes, and wrote every chunk
    # for the batch pass
    assert gluon.intra_fused_makes_last == [False, source[1]]
    assert_padding_left_alone(before, low["state_pool"], o)
    # 16×512 at Qwen3-Next's heads has more than two items an SM: the persistent form, checked here
    # against the batch pass and the reference; the few-head cases the one-item form
    assert forms == [case in PERSISTENT_CASES]


def test_fused_pass_takes_split_sequences_and_their_tbeta_from_the_intra_launch(gluon, source):
    # Four chunks a segment: the segment pass reads Tβ and the gate sums of every segment but a
    # sequence's last, which the intra launch still writes; the fused pass makes its own for the
    # chunks it runs and takes the segments' initial states from the segment and carry launches.
    seqlens = [700, 300, 1, 520, 64]
    low, upcast = _inputs(seqlens, seed=5, pad=1, **FEW_HEADS)
    o, batch_run, reference_run = _run_both(gluon, low, upcast, source, seg_chunks=4)
    _assert_matches(o, low, batch_run, reference_run)
    assert gluon.intra_fused_makes_last == [False, source[1]] and gluon.intra_seg_chunks[-1] == 4


@pytest.mark.parametrize("programs", [1, 2, 3])
def test_each_program_runs_many_items_as_one_program_an_item_would(gluon, programs, source):
    # The pass's programs run its (V tile, value head, segment) items in turn, an item's last steps
    # copying in the next one's first tiles where both have two chunks or more. With one, two or three
    # programs each runs items of every kind one after another — a chunk or a partial one, empty ones,
    # a padding sequence's, split sequences' segments with their initial states from the carry launch,
    # items past the last segment — and must give what a program an item gives, bit for bit.
    seqlens = [63, 64, 1, 130, 0, 700, 7, 300, 65]
    low, _ = _inputs(seqlens, seed=programs, pad=1, normalizer=20, **FEW_HEADS)
    wide = clone_inputs(low)
    gluon.on(**FUSED, **source[0], seg_chunks=4)
    o_wide = gdn.prefill(**wide, backend="triton")
    gluon.on(**FUSED, **source[0], seg_chunks=4, gluon_fused_programs=programs)
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == ["fused", "fused"], "the fused pass did not run"
    assert torch.equal(o, o_wide)
    assert torch.equal(low["state_pool"], wide["state_pool"])


def test_a_pool_whose_rows_are_not_16_byte_aligned_runs_as_an_aligned_one(gluon, source):
    # The persistent pass fetches a next item's pool row into L2 with a bulk prefetch, which needs a
    # 16-byte aligned address. A pool view with a slot pitch of 2 mod 4 fp32 elements has its odd rows
    # 8 bytes off: the pass must leave the prefetch out there, run without a fault, and give what the
    # contiguous pool gives, bit for bit, the rows written in place.
    low, _ = _inputs([130, 64, 300, 65, 7, 200, 129], seed=3, **FEW_HEADS)
    assert (low["state_indices"] % 2 == 1).any(), "no sequence's row is an odd (misaligned) one"
    aligned = clone_inputs(low)
    pool = low["state_pool"]
    pitch = pool[0].numel() + 2
    storage = torch.full((pool.shape[0] * pitch,), float("nan"), device=pool.device)
    low["state_pool"] = storage.as_strided(pool.shape, (pitch, *pool.stride()[1:]))
    low["state_pool"].copy_(pool)
    gluon.on(**FUSED, **source[0], gluon_fused_programs=2)
    o = gdn.prefill(**low, backend="triton")
    o_aligned = gdn.prefill(**aligned, backend="triton")
    assert gluon.calls == ["fused", "fused"], "the fused pass did not run"
    torch.cuda.synchronize()
    assert torch.equal(o, o_aligned)
    assert torch.equal(low["state_pool"], aligned["state_pool"])


@pytest.mark.parametrize("normalizer", [1, 100], ids=["strong-decay", "weak-decay"])
def test_fused_pass_on_long_sequences_and_both_ends_of_the_decay(gluon, normalizer, source):
    # many chunks a program: the two slots of Tβ / P (and their copy barriers) cycled hundreds of times
    low, upcast = _inputs([8192, 3000, 2048], seed=normalizer, normalizer=normalizer, **FEW_HEADS)
    o, batch_run, reference_run = _run_both(gluon, low, upcast, source)
    _assert_matches(o, low, batch_run, reference_run)


def test_fused_pass_holds_partial_last_chunks_out_under_strong_decay(gluon, source):
    # gates near −8 a token: over a partial last chunk γ falls to about −300, so a row past the end
    # whose γ were taken as 0 would overflow its decay (2^(−γ log2 e)), and 0 · inf is NaN where β = 0
    # must hold that row out of Tβ, v_new and the state
    low, upcast = _inputs([100, 37, 64, 130, 1], seed=21, normalizer=0.125, **FEW_HEADS)
    o, batch_run, reference_run = _run_both(gluon, low, upcast, source)
    assert torch.isfinite(o).all() and torch.isfinite(low["state_pool"]).all()
    _assert_matches(o, low, batch_run, reference_run)


def test_fused_pass_is_captured_and_replayed_in_a_cuda_graph(gluon, source):
    low, _ = _inputs([100, 156, 64, 1], seed=11, **FEW_HEADS)
    fresh, _ = _inputs([100, 156, 64, 1], seed=12, **FEW_HEADS)
    gluon.on(**FUSED, **source[0])
    assert_prefill_replay_matches_eager(low, fresh)
    assert set(gluon.calls) == {"fused"}, "the fused pass did not run"


def test_fp16_inputs_keep_the_batch_pass(gluon):
    # the worker's Tβ is the Gluon intra launch's, which is for bf16 keys
    low, upcast = _inputs([100, 37, 64], seed=3, dtype=torch.float16, **FEW_HEADS)
    gluon.on(**FUSED)
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == ["batch128"]
    assert rel_rmse(o, gdn.prefill(**upcast, backend="torch")) <= BF16_BOUND
