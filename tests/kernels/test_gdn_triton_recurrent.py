"""Our Triton GDN decode and verify (kernels/gdn/fused_recurrent.py) against the torch reference.

On a machine without CUDA these run under the Triton interpreter, in fp32 and fp16 only (bf16 math is
wrong in the interpreter; bf16 is covered by test_gdn_recurrent_gpu.py). Outputs the kernels allocate
are poisoned with NaN (``torch.empty`` patched) and ``intermediate_states`` starts as NaN, so anything
left unwritten shows.
"""

import pytest
import torch
from gdn_inputs import clone_inputs, make_inputs, rel_rmse, untouched_slots
from gdn_inputs import run_both as shared_run_both

from stampgen.kernels import gdn

pytestmark = pytest.mark.usefixtures("poisoned_empty")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FP32_BOUND = 1e-5
FP16_BOUND = 2e-3  # fp16 output rounding (the reference sees the same fp16 inputs)


def run_both(phase, **shape):
    return shared_run_both(gdn, phase, make_inputs(phase, device=DEVICE, **shape))


def real_rows(inputs):
    return inputs["state_indices"] >= 0


# -- decode ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [
        dict(N=5, H=2, HV=4, K=32, V=32),  # H < HV
        dict(N=3, H=2, HV=2, K=16, V=32),  # H == HV, K != V
        dict(N=2, H=1, HV=2, K=24, V=40),  # dims that are not powers of two: masked tiles
        dict(N=2, H=1, HV=2, K=64, V=64),
    ],
    ids=["gqa", "mha", "ragged-dims", "k64"],
)
def test_decode_matches_the_reference_in_fp32(shape):
    _, ref, tri, o_ref, o_tri = run_both("decode", **shape, seed=11)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


@pytest.mark.parametrize("normalizer", [1.0, 10.0])
def test_decode_matches_the_reference_with_strong_and_weak_decay(normalizer):
    _, ref, tri, o_ref, o_tri = run_both("decode", N=3, H=2, HV=4, K=16, V=16, normalizer=normalizer, seed=12)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def test_decode_matches_the_reference_with_fp16_inputs():
    _, ref, tri, o_ref, o_tri = run_both("decode", N=4, H=2, HV=4, K=32, V=32, dtype=torch.float16, seed=13)
    assert o_tri.dtype == torch.float16
    assert rel_rmse(o_tri, o_ref) <= FP16_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP16_BOUND


def test_decode_padding_outputs_zeros_and_writes_no_slot():
    before, ref, tri, o_ref, o_tri = run_both("decode", N=5, H=2, HV=4, K=16, V=16, pad=2, seed=14)
    padded = ~real_rows(before)
    assert torch.all(o_tri[padded] == 0)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def test_decode_leaves_pool_rows_not_indexed_bit_identical():
    before, _, tri, _, _ = run_both("decode", N=4, H=2, HV=4, K=16, V=16, pad=1, slots=11, seed=15)
    untouched = untouched_slots(before)
    assert untouched.sum() == 11 - 3
    assert torch.equal(tri["state_pool"][untouched], before["state_pool"][untouched])


def test_decode_reads_q_k_v_through_their_strides():
    inputs = make_inputs("decode", N=3, H=2, HV=4, K=16, V=16, device=DEVICE, seed=16)
    T = 3
    packed = torch.cat([inputs["q"].flatten(1), inputs["k"].flatten(1), inputs["v"].flatten(1)], dim=1)
    strided = clone_inputs(inputs)
    strided["q"] = packed[:, :32].unflatten(1, (2, 16))
    strided["k"] = packed[:, 32:64].unflatten(1, (2, 16))
    strided["v"] = packed[:, 64:].unflatten(1, (4, 16))
    assert not strided["q"].is_contiguous() and strided["q"].shape == (T, 2, 16)
    o_ref = gdn.decode(**inputs, backend="torch")
    o_tri = gdn.decode(**strided, backend="triton")
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(strided["state_pool"], inputs["state_pool"]) <= FP32_BOUND


def test_decode_updates_only_its_layer_of_a_pool_view():
    inputs = make_inputs("decode", N=3, H=2, HV=4, K=16, V=16, device=DEVICE, seed=17)
    layers = torch.stack([inputs["state_pool"]] * 3, dim=1)  # [slots, layers, HV, V, K]
    before = layers.clone()
    view = clone_inputs(inputs)
    view["state_pool"] = layers[:, 1]
    gdn.decode(**view, backend="triton")
    gdn.decode(**inputs, backend="torch")
    assert rel_rmse(layers[:, 1], inputs["state_pool"]) <= FP32_BOUND
    assert torch.equal(layers[:, 0], before[:, 0]) and torch.equal(layers[:, 2], before[:, 2])


def test_decode_of_an_empty_batch_returns_an_empty_output():
    inputs = make_inputs("decode", N=0, H=2, HV=4, K=16, V=16, slots=3, device=DEVICE)
    before = inputs["state_pool"].clone()
    assert gdn.decode(**inputs, backend="triton").shape == (0, 4, 16)
    assert torch.equal(inputs["state_pool"], before)


# -- verify ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape",
    [
        dict(N=3, D=4, H=2, HV=4, K=32, V=32),
        dict(N=2, D=1, H=1, HV=2, K=24, V=40),
    ],
    ids=["gqa-d4", "ragged-dims-d1"],
)
def test_verify_matches_the_reference_in_fp32(shape):
    before, ref, tri, o_ref, o_tri = run_both("verify", **shape, seed=21)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["intermediate_states"], ref["intermediate_states"]) <= FP32_BOUND


def test_verify_matches_the_reference_with_fp16_inputs():
    _, ref, tri, o_ref, o_tri = run_both(
        "verify", N=2, D=3, H=2, HV=4, K=16, V=16, dtype=torch.float16, normalizer=10.0, seed=22
    )
    assert o_tri.dtype == torch.float16
    assert rel_rmse(o_tri, o_ref) <= FP16_BOUND
    assert rel_rmse(tri["intermediate_states"], ref["intermediate_states"]) <= FP16_BOUND


def test_verify_never_writes_the_pool():
    before, _, tri, _, _ = run_both("verify", N=3, D=2, H=2, HV=4, K=16, V=16, pad=1, seed=23)
    assert torch.equal(tri["state_pool"], before["state_pool"])


def test_verify_writes_every_intermediate_state_of_real_sequences_and_no_padding_row():
    before, ref, tri, o_ref, o_tri = run_both("verify", N=4, D=3, H=2, HV=4, K=16, V=16, pad=2, seed=24)
    real = real_rows(before)
    assert not torch.isnan(tri["intermediate_states"][real]).any()
    assert torch.isnan(tri["intermediate_states"][~real]).all()  # padding rows left untouched
    assert rel_rmse(tri["intermediate_states"][real], ref["intermediate_states"][real]) <= FP32_BOUND


def test_verify_padding_outputs_zeros():
    before, _, _, o_ref, o_tri = run_both("verify", N=4, D=2, H=2, HV=4, K=16, V=16, pad=2, seed=25)
    padded = ~real_rows(before)
    assert torch.all(o_tri.unflatten(0, (4, 2))[padded] == 0)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
