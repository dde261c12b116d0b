"""The FlashInfer KDA adapter (``kernels/kda/flashinfer.py``) on a CPU, against a stand-in for
``flashinfer.recurrent_kda`` that keeps the contract FlashInfer 0.7.2 showed on the H200: batch-first
``[B, T, H, K]`` inputs (varlen: ``B = 1`` and ``cu_seqlens``), bf16 gates and β, and on SM90 a bf16 state
only (an fp32 one refused). The stand-in runs the recurrence in float64 on the K-major state, a form of
the math other than the reference's K-last step, so the test checks what the adapter adds: the layouts,
the gathers and scatters of pool rows, padding, verify's token-by-token states, the casts — and that it
refuses the SM90 prefill, whose multi-token calls measured wrong there.
"""

import sys
import types

import pytest
import torch
from gdn_inputs import clone_inputs, padding_rows, rel_rmse
from test_kda_kernels import closed_form, kda_inputs

from stampgen.kernels import kda
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.kda import flashinfer as adapter

HEADS = dict(H=2, HV=4, K=128, V=128)  # FlashInfer's KDA kernels are built for 128-wide heads only
BF16_STATE_BOUND = 1e-2  # the state rounded to bf16 on the way in (bf16 q, k, v on both sides)


def fake_recurrent_kda(q, k, v, g, beta, *, scale, initial_state, output_final_state, cu_seqlens=None,
                       use_qk_l2norm_in_kernel, use_gate_in_kernel):  # fmt: skip
    """(o [B, T, HV, V] bf16, final [N, HV, V, K] bf16): each sequence by ``test_kda_kernels.closed_form``
    (the recurrence in float64 on the K-major S = Mᵀ)."""
    assert g.dtype == beta.dtype == torch.bfloat16
    if initial_state.dtype != torch.bfloat16:
        raise ValueError("Mismatched Tensor on argument #5 ... expected dtype=bfloat16")
    assert not use_qk_l2norm_in_kernel and not use_gate_in_kernel and output_final_state
    B, T = q.shape[:2]
    spans = (
        [(b, 0, T) for b in range(B)]
        if cu_seqlens is None
        else [(0, int(cu_seqlens[n]), int(cu_seqlens[n + 1])) for n in range(len(cu_seqlens) - 1)]
    )
    o = torch.zeros(v.shape, dtype=torch.float64)
    final = torch.empty(initial_state.shape, dtype=torch.float64)
    for n, (b, start, end) in enumerate(spans):
        run = (x[b, start:end] for x in (q, k, v, g, beta))
        o[b, start:end], S = closed_form(*run, initial_state[n].transpose(-1, -2), scale)
        final[n] = S.transpose(-1, -2)
    return o.to(torch.bfloat16), final.to(torch.bfloat16)


@pytest.fixture
def flashinfer_on(monkeypatch):
    """A stand-in ``flashinfer`` module and a GPU of compute capability ``set_capability(major)``."""
    module = types.ModuleType("flashinfer")
    module.recurrent_kda = fake_recurrent_kda
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    capability = [(9, 0)]
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability[0])
    return lambda major: capability.__setitem__(0, (major, 0))


def bf16_inputs(phase, **shape):
    inputs = kda_inputs(phase, **HEADS, device="cpu", seed=31, **shape)
    for name in ("q", "k", "v"):
        inputs[name] = inputs[name].to(torch.bfloat16)
    return inputs


def reference(phase, inputs):
    ref = clone_inputs(inputs)
    for name in ("q", "k", "v"):
        ref[name] = ref[name].float()
    return ref, getattr(kda, phase)(**ref, backend="torch")


def call_adapter(phase, inputs):
    run = dict(inputs)
    return getattr(adapter, phase)(**run, scale=HEADS["K"] ** -0.5)


def test_decode_gathers_pads_and_scatters_the_pool_rows(flashinfer_on):
    inputs = bf16_inputs("decode", N=5, pad=2)
    pool_before = inputs["state_pool"].clone()
    ref, o_ref = reference("decode", inputs)
    o = call_adapter("decode", inputs)
    real = inputs["state_indices"] >= 0
    assert o.dtype == torch.bfloat16 and torch.all(o[~real] == 0)
    assert rel_rmse(o.float(), o_ref) <= BF16_STATE_BOUND
    assert inputs["state_pool"].dtype == torch.float32
    assert rel_rmse(inputs["state_pool"], ref["state_pool"]) <= BF16_STATE_BOUND
    untouched = torch.ones(pool_before.shape[0], dtype=torch.bool)
    untouched[inputs["state_indices"][real].long()] = False
    assert torch.equal(inputs["state_pool"][untouched], pool_before[untouched])


def test_verify_writes_each_draft_tokens_state_and_never_the_pool(flashinfer_on):
    inputs = bf16_inputs("verify", N=3, D=3, pad=1)
    pool_before = inputs["state_pool"].clone()
    ref, o_ref = reference("verify", inputs)
    o = call_adapter("verify", inputs)
    real = inputs["state_indices"] >= 0
    assert rel_rmse(o.float(), o_ref) <= BF16_STATE_BOUND
    assert rel_rmse(inputs["intermediate_states"][real], ref["intermediate_states"][real]) <= BF16_STATE_BOUND
    assert torch.equal(inputs["state_pool"], pool_before)


def test_prefill_is_refused_on_sm90(flashinfer_on):
    inputs = bf16_inputs("prefill", N=2, seqlens=[5, 9])
    pool_before = inputs["state_pool"].clone()
    with pytest.raises(KernelUnavailableError, match="more than one token"):
        call_adapter("prefill", inputs)
    assert torch.equal(inputs["state_pool"], pool_before)


def test_prefill_elsewhere_packs_the_sequences_and_zeroes_padding(flashinfer_on):
    flashinfer_on(10)  # not SM90: the adapter runs FlashInfer's prefill
    inputs = bf16_inputs("prefill", N=4, seqlens=[5, 1, 0, 9], pad=1)
    ref, o_ref = reference("prefill", inputs)
    o = call_adapter("prefill", inputs)
    assert torch.all(o[padding_rows(inputs)] == 0)
    assert rel_rmse(o.float(), o_ref) <= BF16_STATE_BOUND
    assert rel_rmse(inputs["state_pool"], ref["state_pool"]) <= BF16_STATE_BOUND
