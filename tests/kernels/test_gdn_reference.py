"""The torch reference (backend="torch") against formulations written independently here.

* closed form, float64: S_t = α_t (I − β_t k_t k_tᵀ) S_{t−1} + β_t k_t v_tᵀ, o_t = S_tᵀ (scale·q_t),
  on the K-major state S (the pool holds Sᵀ);
* phase consistency: prefill == decode applied token by token; verify == decode applied step by step,
  with the pool untouched.
"""

import pytest
import torch
from gdn_inputs import assert_verify_is_stepwise_decode, clone_inputs, make_inputs, rel_rmse

from stampgen.kernels import gdn

SHAPE = dict(H=2, HV=4, K=16, V=8)  # K != V catches a transposed state
FP32_BOUND = 1e-5


def closed_form(q, k, v, g, beta, state_kv, scale):
    """One sequence, float64, K-major state [HV, K, V]; q, k [T, H, K]; returns (o [T, HV, V], state)."""
    T, HV = v.shape[:2]
    G = HV // q.shape[1]
    S = state_kv.double().clone()
    o = torch.zeros(T, HV, v.shape[2], dtype=torch.float64)
    eye = torch.eye(q.shape[2], dtype=torch.float64)
    for t in range(T):
        for h in range(HV):
            q_t, k_t = q[t, h // G].double(), k[t, h // G].double()
            alpha, b = torch.exp(g[t, h].double()), beta[t, h].double()
            S[h] = alpha * (eye - b * torch.outer(k_t, k_t)) @ S[h] + b * torch.outer(k_t, v[t, h].double())
            o[t, h] = S[h].T @ (scale * q_t)
    return o, S


def expected_prefill(inputs, scale):
    """Per-sequence closed form; returns (o, pool) as the reference should leave them."""
    pool = inputs["state_pool"].clone()
    T, HV, V = inputs["v"].shape
    K = inputs["q"].shape[2]
    o = torch.zeros(T, HV, V, dtype=torch.float64)
    cu = inputs["cu_seqlens"].tolist()
    for n, slot in enumerate(inputs["state_indices"].tolist()):
        tokens = slice(cu[n], cu[n + 1])
        start = pool[slot].transpose(-1, -2) if slot >= 0 else torch.zeros(HV, K, V)
        args = [inputs[name][tokens] for name in ("q", "k", "v", "g", "beta")]
        o_seq, state = closed_form(*args, start, scale)
        if slot >= 0:
            o[tokens] = o_seq
            pool[slot] = state.transpose(-1, -2).float()
    return o, pool


@pytest.mark.parametrize("normalizer", [1.0, 10.0])
def test_prefill_matches_the_closed_form_in_float64(normalizer):
    inputs = make_inputs("prefill", N=3, **SHAPE, seqlens=[5, 1, 7], normalizer=normalizer, seed=1)
    o_expected, pool_expected = expected_prefill(inputs, scale=SHAPE["K"] ** -0.5)
    o = gdn.prefill(**inputs, backend="torch")
    assert rel_rmse(o, o_expected) <= FP32_BOUND
    assert rel_rmse(inputs["state_pool"], pool_expected) <= FP32_BOUND


def test_prefill_uses_the_given_scale():
    inputs = make_inputs("prefill", N=2, **SHAPE, seqlens=[3, 4], seed=2)
    o_expected, _ = expected_prefill(inputs, scale=0.7)
    assert rel_rmse(gdn.prefill(**inputs, scale=0.7, backend="torch"), o_expected) <= FP32_BOUND


def test_prefill_maps_each_v_head_to_qk_head_h_over_group_size():
    inputs = make_inputs("prefill", N=1, H=2, HV=6, K=8, V=8, seqlens=[4], seed=3)
    o_expected, _ = expected_prefill(inputs, scale=8**-0.5)
    assert rel_rmse(gdn.prefill(**inputs, backend="torch"), o_expected) <= FP32_BOUND


def test_prefill_padding_sequence_outputs_zeros_and_writes_no_slot():
    inputs = make_inputs("prefill", N=3, **SHAPE, seqlens=[2, 3, 2], pad=1, seed=4)
    padded = (inputs["state_indices"] == -1).nonzero().item()
    cu = inputs["cu_seqlens"].tolist()
    pool_before = inputs["state_pool"].clone()
    o_expected, pool_expected = expected_prefill(inputs, scale=SHAPE["K"] ** -0.5)
    o = gdn.prefill(**inputs, backend="torch")
    assert torch.all(o[cu[padded] : cu[padded + 1]] == 0)
    assert rel_rmse(o, o_expected) <= FP32_BOUND
    untouched = torch.ones(pool_before.shape[0], dtype=torch.bool)
    untouched[inputs["state_indices"][inputs["state_indices"] >= 0].long()] = False
    assert torch.equal(inputs["state_pool"][untouched], pool_before[untouched])
    assert rel_rmse(inputs["state_pool"], pool_expected) <= FP32_BOUND


def test_prefill_zero_length_sequence_leaves_its_slot_unchanged():
    inputs = make_inputs("prefill", N=3, **SHAPE, seqlens=[3, 0, 2], seed=5)
    slot = inputs["state_indices"][1].item()
    before = inputs["state_pool"][slot].clone()
    o_expected, _ = expected_prefill(inputs, scale=SHAPE["K"] ** -0.5)
    o = gdn.prefill(**inputs, backend="torch")
    assert torch.equal(inputs["state_pool"][slot], before)
    assert rel_rmse(o, o_expected) <= FP32_BOUND


def test_prefill_equals_decode_applied_token_by_token():
    seqlens = [4, 2, 3]
    inputs = make_inputs("prefill", N=3, **SHAPE, seqlens=seqlens, pad=1, seed=6)
    stepped = clone_inputs(inputs)
    o = gdn.prefill(**inputs, backend="torch")

    cu = stepped["cu_seqlens"].tolist()
    o_stepped = torch.zeros_like(o)
    for step in range(max(seqlens)):
        alive = [n for n in range(3) if cu[n] + step < cu[n + 1]]
        tokens = torch.tensor([cu[n] + step for n in alive])
        o_stepped[tokens] = gdn.decode(
            *(stepped[name][tokens] for name in ("q", "k", "v", "g", "beta")),
            state_pool=stepped["state_pool"],
            state_indices=stepped["state_indices"][alive],
            backend="torch",
        )
    assert rel_rmse(o, o_stepped) <= FP32_BOUND
    assert rel_rmse(inputs["state_pool"], stepped["state_pool"]) <= FP32_BOUND


def test_decode_matches_the_closed_form_in_float64():
    inputs = make_inputs("decode", N=4, **SHAPE, pad=1, seed=7)
    as_prefill = clone_inputs(inputs)
    as_prefill["cu_seqlens"] = torch.arange(5, dtype=torch.int32)
    o_expected, pool_expected = expected_prefill(as_prefill, scale=SHAPE["K"] ** -0.5)
    o = gdn.decode(**inputs, backend="torch")
    assert rel_rmse(o, o_expected) <= FP32_BOUND
    assert rel_rmse(inputs["state_pool"], pool_expected) <= FP32_BOUND


def test_decode_output_has_the_dtype_of_v():
    inputs = make_inputs("decode", N=2, **SHAPE, dtype=torch.float16, seed=8)
    assert gdn.decode(**inputs, backend="torch").dtype == torch.float16


def test_verify_equals_decode_applied_step_by_step_and_leaves_the_pool_untouched():
    inputs = make_inputs("verify", N=3, D=4, **SHAPE, pad=1, seed=9)
    assert_verify_is_stepwise_decode(gdn, inputs, D=4, bound=FP32_BOUND)


def test_verify_leaves_padding_rows_of_intermediate_states_untouched():
    inputs = make_inputs("verify", N=3, D=2, **SHAPE, pad=1, seed=10)
    gdn.verify(**inputs, backend="torch")
    real = inputs["state_indices"] >= 0
    assert torch.isnan(inputs["intermediate_states"][~real]).all()
    assert not torch.isnan(inputs["intermediate_states"][real]).any()
    o = gdn.verify(**inputs, backend="torch")
    assert torch.all(o.unflatten(0, (3, 2))[~real] == 0)
