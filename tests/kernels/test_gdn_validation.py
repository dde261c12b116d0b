"""Bad arguments to the public GDN API raise ValueError whose message starts with the argument's name."""

import pytest
import torch
from gdn_inputs import make_inputs

import stampgen.kernels._validation as validation
from stampgen.kernels import gdn
from stampgen.kernels._validation import (
    GATE_DIMS_KDA,
    GATE_DIMS_LIGHTNING,
    KernelUnavailableError,
    validate_linear_attn_args,
)

SHAPE = dict(N=3, H=2, HV=4, K=8, V=4)


def inputs_for(phase, **overrides):
    inputs = make_inputs(phase, **SHAPE, D=2, seqlens=[2, 1, 3])
    inputs.update(overrides)
    return inputs


def call(phase, **overrides):
    return getattr(gdn, phase)(**inputs_for(phase, **overrides), backend="torch")


def raises_naming(argument):
    return pytest.raises(ValueError, match=rf"^{argument} ")


@pytest.mark.parametrize("phase", gdn.PHASES)
def test_valid_inputs_pass_in_every_phase(phase):
    assert call(phase).shape == (inputs_for(phase)["v"].shape)


# -- ranks and shapes -------------------------------------------------------------------------------


def test_q_of_the_wrong_rank_is_rejected():
    with raises_naming("q"):
        call("decode", q=torch.zeros(3, 2 * 8))


def test_k_with_a_shape_other_than_q_is_rejected():
    with raises_naming("k"):
        call("decode", k=torch.zeros(3, 2, 16))


def test_v_with_another_token_count_is_rejected():
    with raises_naming("v"):
        call("decode", v=torch.zeros(4, 4, 4))


def test_v_heads_not_a_multiple_of_qk_heads_are_rejected():
    inputs = inputs_for("decode")
    with raises_naming("v"):
        call("decode", q=inputs["q"][:, :1].expand(3, 3, 8).contiguous(), k=inputs["k"].new_zeros(3, 3, 8))


def test_g_of_the_wrong_shape_is_rejected():
    with raises_naming("g"):
        call("decode", g=torch.zeros(3, 2))


def test_beta_of_the_wrong_shape_is_rejected():
    with raises_naming("beta"):
        call("decode", beta=torch.zeros(3, 4, 1))


def test_state_pool_in_k_major_layout_is_rejected():
    pool = inputs_for("decode")["state_pool"]
    with raises_naming("state_pool"):
        call("decode", state_pool=pool.transpose(-1, -2).contiguous())


def test_state_pool_not_contiguous_in_its_inner_dims_is_rejected():
    pool = inputs_for("decode")["state_pool"]
    strided = torch.zeros(*pool.shape[:3], 2 * pool.shape[3])[..., ::2]
    with raises_naming("state_pool"):
        call("decode", state_pool=strided)


def test_state_pool_view_with_a_slot_pitch_is_accepted():
    pool = inputs_for("decode")["state_pool"]
    layers = torch.zeros(pool.shape[0], 3, *pool.shape[1:])  # [slots, layers, HV, V, K]
    call("decode", state_pool=layers[:, 1])


def test_state_indices_of_rank_two_are_rejected():
    with raises_naming("state_indices"):
        call("decode", state_indices=torch.zeros(3, 1, dtype=torch.int32))


def test_intermediate_states_of_the_wrong_shape_are_rejected():
    with raises_naming("intermediate_states"):
        call("verify", intermediate_states=torch.zeros(3, 2, 4, 8, 4))


def test_intermediate_states_for_another_batch_size_are_rejected():
    with raises_naming("intermediate_states"):
        call("verify", intermediate_states=torch.zeros(2, 3, 4, 4, 8))


# -- dtypes ----------------------------------------------------------------------------------------


def test_q_in_float64_is_rejected():
    inputs = inputs_for("decode")
    with raises_naming("q"):
        call("decode", **{name: inputs[name].double() for name in ("q", "k", "v")})


def test_k_with_a_dtype_other_than_q_is_rejected():
    with raises_naming("k"):
        call("decode", k=inputs_for("decode")["k"].half())


def test_v_with_a_dtype_other_than_q_is_rejected():
    with raises_naming("v"):
        call("decode", v=inputs_for("decode")["v"].half())


def test_g_not_in_float32_is_rejected():
    with raises_naming("g"):
        call("decode", g=inputs_for("decode")["g"].half())


def test_beta_not_in_float32_is_rejected():
    with raises_naming("beta"):
        call("decode", beta=inputs_for("decode")["beta"].double())


def test_state_pool_not_in_float32_is_rejected():
    with raises_naming("state_pool"):
        call("decode", state_pool=inputs_for("decode")["state_pool"].bfloat16())


def test_state_indices_in_int64_are_rejected():
    with raises_naming("state_indices"):
        call("decode", state_indices=inputs_for("decode")["state_indices"].long())


def test_intermediate_states_not_in_float32_are_rejected():
    with raises_naming("intermediate_states"):
        call("verify", intermediate_states=inputs_for("verify")["intermediate_states"].half())


def test_cu_seqlens_in_a_float_dtype_are_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=torch.tensor([0.0, 2.0, 3.0, 6.0]))


def test_cu_seqlens_in_int64_are_accepted():
    call("prefill", cu_seqlens=torch.tensor([0, 2, 3, 6]))


# -- devices ---------------------------------------------------------------------------------------


def test_tensors_on_different_devices_are_rejected():
    with pytest.raises(ValueError, match=r"^state_pool is on meta, but q is on cpu"):
        call("decode", state_pool=inputs_for("decode")["state_pool"].to("meta"))


# -- token layout per phase ---------------------------------------------------------------------------


def test_decode_with_more_tokens_than_sequences_is_rejected():
    with raises_naming("q"):
        call("decode", state_indices=torch.tensor([0, 1], dtype=torch.int32))


def test_verify_with_tokens_other_than_n_times_d_is_rejected():
    inputs = inputs_for("verify")
    with raises_naming("q"):
        call("verify", intermediate_states=inputs["intermediate_states"][:, :1])


def test_prefill_without_cu_seqlens_is_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=None)


def test_verify_without_intermediate_states_is_rejected():
    with raises_naming("intermediate_states"):
        call("verify", intermediate_states=None)


# -- cu_seqlens ------------------------------------------------------------------------------------


def test_cu_seqlens_of_rank_two_are_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=torch.tensor([[0, 2, 3, 6]], dtype=torch.int32))


def test_cu_seqlens_with_another_sequence_count_than_state_indices_are_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=torch.tensor([0, 3, 6], dtype=torch.int32))


def test_cu_seqlens_not_starting_at_zero_are_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=torch.tensor([1, 2, 3, 6], dtype=torch.int32))


def test_decreasing_cu_seqlens_are_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=torch.tensor([0, 4, 3, 6], dtype=torch.int32))


def test_cu_seqlens_not_ending_at_the_token_count_are_rejected():
    with raises_naming("cu_seqlens"):
        call("prefill", cu_seqlens=torch.tensor([0, 2, 3, 5], dtype=torch.int32))


def test_cu_seqlens_with_repeated_offsets_are_accepted():
    inputs = make_inputs("prefill", **SHAPE, seqlens=[2, 0, 3])
    gdn.prefill(**inputs, backend="torch")


# -- state_indices values -----------------------------------------------------------------------------


def test_state_index_past_the_last_slot_is_rejected():
    slots = inputs_for("decode")["state_pool"].shape[0]
    with raises_naming("state_indices"):
        call("decode", state_indices=torch.tensor([0, slots, 1], dtype=torch.int32))


def test_state_index_below_minus_one_is_rejected():
    with raises_naming("state_indices"):
        call("decode", state_indices=torch.tensor([0, -2, 1], dtype=torch.int32))


def test_duplicate_slots_are_rejected():
    with raises_naming("state_indices"):
        call("decode", state_indices=torch.tensor([2, 0, 2], dtype=torch.int32))


def test_several_padding_indices_are_accepted():
    call("decode", state_indices=torch.tensor([-1, 0, -1], dtype=torch.int32))


def test_value_checks_can_be_turned_off_by_argument():
    inputs = inputs_for("decode", state_indices=torch.tensor([2, 0, 2], dtype=torch.int32))
    args = (inputs.pop(name) for name in ("q", "k", "v", "g", "beta"))
    validate_linear_attn_args("decode", *args, **inputs, check_values=False)


def test_value_checks_can_be_turned_off_by_the_module_flag(monkeypatch):
    monkeypatch.setattr(validation, "CHECK_VALUES", False)
    call("decode", state_indices=torch.tensor([2, 0, 2], dtype=torch.int32))


# -- other ops' gate shapes -----------------------------------------------------------------------------


def test_kda_gate_has_a_key_dim():
    inputs = inputs_for("decode")
    args = [inputs.pop(name) for name in ("q", "k", "v", "g", "beta")]
    args[3] = torch.zeros(3, 4, 8)
    dims = validate_linear_attn_args("decode", *args, **inputs, gate_dims=GATE_DIMS_KDA)
    assert (dims.T, dims.HV, dims.K) == (3, 4, 8)
    args[3] = torch.zeros(3, 4)
    with raises_naming("g"):
        validate_linear_attn_args("decode", *args, **inputs, gate_dims=GATE_DIMS_KDA)


def test_lightning_gate_is_per_head_and_beta_may_be_omitted():
    inputs = inputs_for("decode")
    args = [inputs.pop(name) for name in ("q", "k", "v", "g", "beta")]
    args[3], args[4] = torch.zeros(4), None
    validate_linear_attn_args("decode", *args, **inputs, gate_dims=GATE_DIMS_LIGHTNING, beta_required=False)
    with raises_naming("beta"):
        validate_linear_attn_args("decode", *args, **inputs, gate_dims=GATE_DIMS_LIGHTNING)


# -- backends ------------------------------------------------------------------------------------------


def test_unknown_backend_error_lists_the_choices():
    with pytest.raises(ValueError, match=r"^backend .*torch.*triton.*flashinfer"):
        gdn.decode(**inputs_for("decode"), backend="cuda")


def test_every_phase_and_backend_has_a_kernel_entry():
    assert set(gdn.KERNELS) == {(phase, backend) for phase in gdn.PHASES for backend in gdn.BACKENDS}


def test_triton_on_cpu_tensors_without_the_interpreter_is_unavailable(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(KernelUnavailableError, match="CUDA"):
        gdn.decode(**inputs_for("decode"), backend="triton")


def test_flashinfer_on_cpu_tensors_is_unavailable():
    with pytest.raises(KernelUnavailableError, match="flashinfer"):
        gdn.decode(**inputs_for("decode"), backend="flashinfer")


def test_kernel_unavailable_is_a_runtime_error():
    assert issubclass(KernelUnavailableError, RuntimeError)


def test_available_backends_always_include_the_torch_reference():
    assert gdn.available_backends()[0] == "torch"
    assert set(gdn.available_backends()) <= set(gdn.BACKENDS)
