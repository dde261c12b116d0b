"""The Gluon state passes on an sm_90 GPU — ``kernels/gdn/chunk_gluon.py`` (``LaunchConfig.gluon_state``,
every sequence unsplit) and ``kernels/gdn/chunk_gluon_batch.py`` (``gluon_batch``, launch 3 over the Triton
passes' segments) — against the Triton passes they replace and the fp32 torch reference.

The Gluon kernels do the Triton state pass's math with the same roundings, so they agree far inside the
bf16 bound; what these tests add is every edge of the general form: varlen batches, partial last
chunks, empty and one-token sequences, padding slots, split sequences, H < HV, other head dims, fp16,
CUDA-graph capture — with the intra launch before the state pass, with ``chunk_gluon`` as its
programmatic dependent (``gluon_pdl``), and with the Gluon intra launch before it (``gluon_intra``; that
launch's outputs alone: ``test_gdn_chunk_intra_gluon_gpu.py``). Each test also checks that the Gluon
pass asked for really ran, so a fallback to the Triton passes cannot pass for it.
"""

import pytest
import torch
from gdn_inputs import assert_prefill_replay_matches_eager, clone_inputs, low_and_upcast, rel_rmse

from stampgen.kernels import gdn
from stampgen.kernels.gdn import chunk

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
        reason="the Gluon state pass is written for sm_90 (H100 / H200)",
    ),
]

QWEN3_NEXT = dict(H=16, HV=32, K=128, V=128)
# Few value heads, so a batch's state programs fit on the GPU at once (one wave).
FEW_HEADS = dict(H=2, HV=4, K=128, V=128)
BF16_BOUND = 5e-3  # against the fp32 reference on the same bf16 values (the fla test standard)
SAME_MATH_BOUND = 1e-3  # against the Triton passes on the same inputs


def _inputs(seqlens, seed, pad=0, dtype=torch.bfloat16, **dims):
    """(16-bit inputs, the same values upcast to fp32 for the reference)."""
    return low_and_upcast(seqlens, dims=dims or QWEN3_NEXT, seed=seed, pad=pad, dtype=dtype)


CASES = {
    "T4096": ([4096], 0),
    "edges": ([63, 64, 65, 130, 0, 1], 0),  # partial, full, one past, two chunks + 2, empty, one token
    "padded": ([700, 7, 129, 300], 1),
    "4x2048": ([2048] * 4, 0),
}


# How the intra launch and the state pass run: (gluon_pdl, gluon_intra).
MODES = {
    "intra-before": (False, False),
    "pdl-after-intra": (True, False),
    "pdl-after-gluon-intra": (True, True),
    "gluon-intra-before": (False, True),
}


def _assert_matches(o, inputs, triton_run, reference_run):
    """The output and the used pool rows of a Gluon run against the Triton passes' (``triton_run``:
    output, inputs after the run) within the same-math bound, and the reference's within bf16's."""
    used = inputs["state_indices"][inputs["state_indices"] >= 0].long()
    for (other_o, other), bound in ((triton_run, SAME_MATH_BOUND), (reference_run, BF16_BOUND)):
        assert rel_rmse(o, other_o) <= bound
        assert rel_rmse(inputs["state_pool"][used], other["state_pool"][used]) <= bound


# Which Gluon state pass: chunk_gluon's, or chunk_gluon_batch's (the state transposed) at its V tiles.
PASSES = {"gluon": None, "batch64": 64, "batch128": 128}
# (state pass, mode): chunk_gluon in every mode; chunk_gluon_batch after either intra launch (no PDL)
PASS_MODES = [(p, m) for p in PASSES for m in MODES if not (PASSES[p] and MODES[m][0])]


@pytest.mark.parametrize("state_pass,mode", PASS_MODES)
@pytest.mark.parametrize("case", CASES)
def test_gluon_state_pass_matches_the_triton_passes_and_the_reference(gluon, case, mode, state_pass):
    pdl, intra = MODES[mode]
    seqlens, pad = CASES[case]
    low, upcast = _inputs(seqlens, seed=len(seqlens) + pad, pad=pad)
    pool_before = low["state_pool"].clone()
    triton_passes = clone_inputs(low)
    o_triton = gdn.prefill(**triton_passes, backend="triton")
    assert not gluon.calls, "the Gluon state pass ran while off"
    gluon.on(pdl, intra, batch=PASSES[state_pass])
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == [state_pass], "the Gluon state pass asked for did not run"
    assert gluon.pdl == [pdl], "the state pass was not launched as asked"
    assert len(gluon.gluon_intra) == intra, "the Gluon intra launch ran" if not intra else "it did not"
    o_ref = gdn.prefill(**upcast, backend="torch")

    _assert_matches(o, low, (o_triton, triton_passes), (o_ref, upcast))
    slots = low["state_indices"].tolist()
    cu = low["cu_seqlens"].tolist()
    for n, slot in enumerate(slots):
        if slot < 0:
            assert not o[cu[n] : cu[n + 1]].any(), f"padding sequence {n} got output"
    for slot in set(range(pool_before.shape[0])) - set(slots):
        assert torch.equal(low["state_pool"][slot], pool_before[slot]), f"unused pool row {slot} changed"


# P from the intra launch against P made in the pass: the same formula on the same Q Kᵀ product and gate
# sums, but the intra launch may round γ·log2 e + log2 scale once (a fused multiply-add) where the pass
# rounds twice: measured 4e-5 rel RMSE on the output at Qwen3-Next shapes. A P read before it was written,
# from another chunk's rows or the wrong head, or a buffer refilled while the output rows' product still
# read it is off by far more than this (and than bf16's rounding, ~4e-3). P enters the output rows only,
# so the final states must not move by a bit.
P_FROM_INTRA_REL = 2e-4


@pytest.mark.parametrize("pdl", [False, True], ids=["intra-before", "pdl-after-intra"])
@pytest.mark.parametrize("case", CASES)
def test_p_made_by_the_intra_launch_gives_the_state_pass_its_own_result(gluon, case, pdl):
    seqlens, pad = CASES[case]
    low, _ = _inputs(seqlens, seed=len(seqlens) + pad, pad=pad)
    made_here = clone_inputs(low)
    gluon.on(pdl, intra=True, gluon_p_from_intra=False)
    o_here = gdn.prefill(**made_here, backend="triton")
    gluon.on(pdl, intra=True, gluon_p_from_intra=True)
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == ["gluon"] * 2 and gluon.p_in == [False, True], "P did not come as asked"
    assert rel_rmse(o, o_here) <= P_FROM_INTRA_REL
    assert torch.equal(low["state_pool"], made_here["state_pool"])


@pytest.mark.parametrize(
    "dims,dtype,state_pass",
    [
        (dict(H=1, HV=2, K=64, V=64), torch.bfloat16, "gluon"),
        (dict(H=2, HV=4, K=128, V=32), torch.bfloat16, "gluon"),
        (QWEN3_NEXT, torch.float16, "gluon"),
        (dict(H=1, HV=2, K=64, V=64), torch.bfloat16, "batch64"),
        (dict(H=2, HV=4, K=128, V=192), torch.bfloat16, "batch64"),
        (QWEN3_NEXT, torch.float16, "batch64"),
        (dict(H=1, HV=2, K=64, V=128), torch.bfloat16, "batch128"),
        (QWEN3_NEXT, torch.float16, "batch128"),
    ],
    ids=[
        "K64-V64",
        "K128-V32",
        "fp16",
        "batch64-K64-V64",
        "batch64-K128-V192",
        "batch64-fp16",
        "batch128-K64-V128",
        "batch128-fp16",
    ],  # fmt: skip
)
def test_gluon_state_pass_at_other_head_dims_and_fp16(gluon, dims, dtype, state_pass):
    low, upcast = _inputs([100, 37, 64], seed=dims["K"] + dims["V"], dtype=dtype, **dims)
    gluon.on(batch=PASSES[state_pass])
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == [state_pass], "the Gluon state pass asked for did not run"
    o_ref = gdn.prefill(**upcast, backend="torch")
    used = low["state_indices"].long()
    assert o.dtype == dtype
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(low["state_pool"][used], upcast["state_pool"][used]) <= BF16_BOUND


@pytest.mark.parametrize("state_pass,mode", PASS_MODES)
def test_gluon_state_pass_is_captured_and_replayed_in_a_cuda_graph(gluon, mode, state_pass):
    pdl, intra = MODES[mode]
    low, _ = _inputs([100, 156, 64, 1], seed=11, **FEW_HEADS)
    fresh, _ = _inputs([100, 156, 64, 1], seed=12, **FEW_HEADS)
    gluon.on(pdl, intra, batch=PASSES[state_pass])
    assert_prefill_replay_matches_eager(low, fresh)
    assert set(gluon.calls) == {state_pass}, "the Gluon state pass asked for did not run"
    assert set(gluon.pdl) == {pdl}
    assert bool(gluon.gluon_intra) == intra


def test_batch_pass_takes_split_sequences_from_the_segment_and_carry_launches(gluon, monkeypatch):
    # Four chunks a segment: the 700-token sequence (10 full chunks and a partial one) is cut in three,
    # the 520-token one in three, the 300-token one in two; the first segment of each reads the segment
    # pass's copy of the pool row, the later ones the carry launch's states. One padding slot.
    carried = []  # (segment states made, chunks a segment) of each carry launch
    launch_carry = chunk._launch_carry

    def counted_carry(affine, *args):
        carried.append((affine is not None, args[-1].seg_chunks))
        return launch_carry(affine, *args)

    monkeypatch.setattr(chunk, "_launch_carry", counted_carry)
    seqlens = [700, 300, 1, 520, 64]
    low, upcast = _inputs(seqlens, seed=5, pad=1)
    triton_passes = clone_inputs(low)
    gluon._pin(seg_chunks=4, gluon_state=False, gluon_pdl=False, gluon_intra=True, gluon_batch=False)
    o_triton = gdn.prefill(**triton_passes, backend="triton")
    gluon.on(intra=True, batch=128, seg_chunks=4)
    o = gdn.prefill(**low, backend="triton")
    assert gluon.calls == ["batch128"], "the batch pass did not run"
    assert carried == [(True, 4), (True, 4)], "the sequences were not cut into segments of four chunks"
    o_ref = gdn.prefill(**upcast, backend="torch")
    _assert_matches(o, low, (o_triton, triton_passes), (o_ref, upcast))
