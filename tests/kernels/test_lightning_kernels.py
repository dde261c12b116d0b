"""Lightning attention (``kernels.lightning``): the torch reference against an fp64 closed form, our
Triton kernels against the reference (the CPU interpreter when there is no GPU), and argument validation.

Lightning has no delta rule, no q/k normalisation and scale 1.0; its gate is one constant log-decay per
head, ``g: [HV]``: the MiniMax slopes (``g_h = −2^(−8(h+1)/H) · layer factor``), or uniform ones near 0
and near −5 (strong and weak decay). q, k, v here are SiLU outputs (non-negative, not normalised), as in
the model. On a CPU the kernels run in fp32 and fp16 only (bf16 is in test_kda_lightning_gpu.py).
"""

import pytest
import torch
import torch.nn.functional as F
from gdn_inputs import (
    assert_padding_left_alone,
    assert_verify_is_stepwise_decode,
    clone_inputs,
    make_inputs,
    rel_rmse,
    untouched_slots,
)
from gdn_inputs import run_both as shared_run_both

from stampgen.kernels import lightning
from stampgen.kernels._validation import KernelUnavailableError

pytestmark = pytest.mark.usefixtures("poisoned_empty")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FP32_BOUND = 1e-5
FP16_BOUND = 2e-3
SHAPE = dict(H=2, HV=2, K=16, V=8)  # K != V catches a transposed state


def minimax_decay(heads: int, layer: int = 0, layers: int = 8) -> torch.Tensor:
    """g_h = −s_h with MiniMax's slope for a power-of-two head count (docs/kernels.md)."""
    slopes = torch.tensor([2.0 ** (-8 * (h + 1) / heads) for h in range(heads)])
    return -slopes * (1 - layer / (layers - 1) + 1e-5)


def lightning_gate(HV, gate, seed):
    gen = torch.Generator().manual_seed(2000 + seed)
    if gate == "minimax":
        return minimax_decay(HV)
    if gate == "weak":
        return -1e-3 * torch.rand(HV, generator=gen)
    if gate == "strong":
        return -4.5 - torch.rand(HV, generator=gen)
    return torch.zeros(HV)  # "none": g = 0, no decay


def lightning_inputs(phase, *, gate="minimax", seed=0, device=DEVICE, dtype=torch.float32, **shape):
    inputs = make_inputs(phase, seed=seed, **shape)
    for name in ("q", "k", "v"):  # SiLU outputs, as MiniMax feeds the op (scaled to keep sums moderate)
        inputs[name] = (0.5 * F.silu(3 * inputs[name])).to(dtype)
    inputs["g"] = lightning_gate(inputs["v"].shape[1], gate, seed)
    inputs["beta"] = None
    return {name: t.to(device) if isinstance(t, torch.Tensor) else t for name, t in inputs.items()}


def run_both(phase, **kwargs):
    return shared_run_both(lightning, phase, lightning_inputs(phase, **kwargs))


# -- the reference against an fp64 closed form -------------------------------------------------------


def expected_prefill(inputs, scale=1.0):
    """(o, pool), sequence by sequence in float64, from the closed form
    S_t = exp(g)^(t+1) S_0 + Σ_{j≤t} exp(g)^(t−j) k_j v_jᵀ,  o_t = S_tᵀ (scale q_t)."""
    inp = {name: t.cpu() for name, t in inputs.items() if isinstance(t, torch.Tensor)}
    pool = inp["state_pool"].clone()
    T, HV, V = inp["v"].shape
    G = HV // inp["q"].shape[1]
    o = torch.zeros(T, HV, V, dtype=torch.float64)
    cu = inp["cu_seqlens"].tolist()
    alpha = torch.exp(inp["g"].double())
    for n, slot in enumerate(inp["state_indices"].tolist()):
        b, e = cu[n], cu[n + 1]
        for h in range(HV):
            S0 = (
                pool[slot, h].double().T
                if slot >= 0
                else torch.zeros(inp["q"].shape[2], V, dtype=torch.float64)
            )
            k, v, q = (
                inp["k"][b:e, h // G].double(),
                inp["v"][b:e, h].double(),
                inp["q"][b:e, h // G].double(),
            )
            L = e - b
            steps = torch.arange(L, dtype=torch.float64)
            W = torch.tril(alpha[h] ** (steps[:, None] - steps[None, :]).clamp(min=0))  # [t, j]
            o_h = scale * ((q * (alpha[h] ** (steps + 1))[:, None]) @ S0 + (W * (q @ k.T)) @ v)
            S = alpha[h] ** L * S0 + (k * (alpha[h] ** (L - 1 - steps))[:, None]).T @ v
            if slot >= 0:
                o[b:e, h] = o_h
                pool[slot, h] = S.T.float()
    return o, pool


@pytest.mark.parametrize("gate", ["minimax", "weak", "strong", "none"])
def test_reference_prefill_matches_the_fp64_closed_form(gate):
    inputs = lightning_inputs("prefill", N=3, H=1, HV=4, K=16, V=8, seqlens=[5, 1, 9], pad=1, gate=gate)
    o_expected, pool_expected = expected_prefill(inputs)
    o = lightning.prefill(**inputs, backend="torch")
    assert rel_rmse(o, o_expected) <= FP32_BOUND
    assert rel_rmse(inputs["state_pool"], pool_expected) <= FP32_BOUND


def test_reference_scale_defaults_to_one_and_can_be_given():
    inputs = lightning_inputs("prefill", N=1, **SHAPE, seqlens=[6], seed=2)
    o_expected, _ = expected_prefill(inputs, scale=0.3)
    assert (
        rel_rmse(lightning.prefill(**clone_inputs(inputs), scale=0.3, backend="torch"), o_expected)
        <= FP32_BOUND
    )
    o_default, _ = expected_prefill(inputs, scale=1.0)
    assert rel_rmse(lightning.prefill(**inputs, backend="torch"), o_default) <= FP32_BOUND


def test_reference_verify_equals_decode_step_by_step_and_leaves_the_pool_untouched():
    inputs = lightning_inputs("verify", N=3, D=3, **SHAPE, pad=1, seed=3)
    assert_verify_is_stepwise_decode(lightning, inputs, D=3, bound=FP32_BOUND)
    assert torch.isnan(inputs["intermediate_states"][inputs["state_indices"] < 0]).all()


# -- Triton prefill ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seqlens", [[0, 1, 63], [64, 65], [130], [1, 0, 2]], ids=["0-1-63", "64-65", "130", "with-empty"]
)
def test_triton_prefill_matches_the_reference_at_chunk_edges(seqlens):
    before, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=len(seqlens), H=1, HV=2, K=32, V=32, seqlens=seqlens, seed=5
    )
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND
    untouched = untouched_slots(before)
    assert torch.equal(tri["state_pool"][untouched], before["state_pool"][untouched])


def test_triton_prefill_with_padding_and_gqa_heads():
    before, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=4, H=2, HV=4, K=16, V=8, seqlens=[70, 3, 17, 9], pad=2, seed=6
    )
    assert_padding_left_alone(before, tri["state_pool"], o_tri)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


@pytest.mark.parametrize(
    "seqlens,pad",
    [([64], 0), ([200, 1, 0, 64, 129], 1), ([0, 0, 3], 0), ([65, 63, 0, 130], 2)],
    ids=["one-chunk", "many-chunks-padded", "leading-empties", "varlen-two-pads"],
)
def test_triton_prefill_with_state_tiles_and_the_chunk_map(seqlens, pad):
    # V = 48 makes ragged V tiles (16 wide under the interpreter); empty and padded sequences leave gaps
    # and repeats in the segment offsets, and the grid's upper bound on the segment count leaves
    # programs past the last segment.
    before, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=len(seqlens), H=1, HV=2, K=64, V=48, seqlens=seqlens, pad=pad, gate="strong", seed=17
    )
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND
    assert_padding_left_alone(before, tri["state_pool"], o_tri)


@pytest.mark.parametrize("gate", ["strong", "none"])
@pytest.mark.parametrize("seg_chunks", [1, 2, 3, 100])
def test_triton_prefill_cut_into_segments_matches_the_reference(seg_chunks, gate):
    # A sequence longer than seg_chunks chunks runs as segments side by side: each later segment starts
    # from the first's copy of the pool state carried through the segments before it. Lengths: exact
    # multiples of a segment (128, 192), one token past (193), shorter than one (5), and padding.
    from stampgen.kernels.lightning import chunk

    inputs = lightning_inputs(
        "prefill", N=5, H=1, HV=2, K=32, V=16, seqlens=[193, 5, 128, 192, 70], pad=1, gate=gate, seed=19
    )
    ref, tri = clone_inputs(inputs), clone_inputs(inputs)
    o_ref = lightning.prefill(**ref, backend="torch")
    del tri["beta"]
    config = chunk.LaunchConfig(block_v=16, warps=4, stages=1, seg_chunks=seg_chunks)
    o_tri = chunk.prefill(**tri, beta=None, scale=1.0, config=config)
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND
    assert_padding_left_alone(inputs, tri["state_pool"], o_tri)


def test_a_single_sequence_is_cut_for_the_output_pass_waves_and_never_below_four_chunks():
    from stampgen.kernels.lightning.chunk import launch_config

    # MiniMax heads, V tiles of 64: 128 programs a segment. The Triton pass: two waves of 2 · 132 slots
    assert launch_config(4096, 64, 128, 128, interpret=False).seg_chunks == 16  # 64 chunks, 4 segments
    assert launch_config(16 * 2048, 64, 128, 128, interpret=False).seg_chunks == 128
    assert launch_config(100, 64, 128, 128, interpret=False).seg_chunks == 4
    # the Gluon pass: one wave of 132 slots, so MiniMax's heads fill it unsplit; 8 heads take 8 segments
    assert launch_config(4096, 64, 128, 128, gluon=True, interpret=False).seg_chunks == 64
    assert launch_config(16384, 8, 128, 128, gluon=True, interpret=False).seg_chunks == 32


def test_a_zero_length_sequence_leaves_its_slot_bit_identical():
    before, _, tri, _, _ = run_both("prefill", N=3, **SHAPE, seqlens=[4, 0, 5], seed=7)
    slot = before["state_indices"][1].item()
    assert torch.equal(tri["state_pool"][slot], before["state_pool"][slot])


@pytest.mark.parametrize("gate", ["strong", "weak", "none", "minimax"])
def test_triton_prefill_under_strong_weak_and_no_decay(gate):
    _, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=2, H=1, HV=2, K=32, V=16, seqlens=[100, 30], gate=gate, seed=8
    )
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def test_triton_prefill_survives_a_partial_chunk_under_a_decay_whose_inverse_overflows():
    # g = −3: masked rows past a 1-token chunk end would get exp(+3·62) = e^186 (inf in fp32) unmasked.
    inputs = lightning_inputs("prefill", N=2, H=1, HV=2, K=16, V=16, seqlens=[65, 1], seed=9)
    inputs["g"] = torch.full_like(inputs["g"], -3.0)
    ref, tri = clone_inputs(inputs), clone_inputs(inputs)
    o_ref, o_tri = lightning.prefill(**ref, backend="torch"), lightning.prefill(**tri, backend="triton")
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def test_triton_prefill_with_ragged_head_dims_and_fp16_inputs():
    _, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=2, H=1, HV=2, K=24, V=40, seqlens=[70, 5], dtype=torch.float16, seed=10
    )
    assert o_tri.dtype == torch.float16
    assert rel_rmse(o_tri, o_ref) <= FP16_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP16_BOUND


# -- Triton decode and verify ------------------------------------------------------------------------


@pytest.mark.parametrize("gate", ["minimax", "strong", "none"])
def test_triton_decode_matches_the_reference(gate):
    before, ref, tri, o_ref, o_tri = run_both("decode", N=5, H=2, HV=4, K=16, V=8, pad=2, gate=gate, seed=12)
    assert torch.all(o_tri[before["state_indices"] < 0] == 0)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND
    untouched = untouched_slots(before)
    assert torch.equal(tri["state_pool"][untouched], before["state_pool"][untouched])


def test_triton_decode_with_fp16_inputs():
    _, ref, tri, o_ref, o_tri = run_both("decode", N=3, H=1, HV=2, K=24, V=40, dtype=torch.float16, seed=13)
    assert o_tri.dtype == torch.float16
    assert rel_rmse(o_tri, o_ref) <= FP16_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP16_BOUND


def test_triton_verify_matches_the_reference_and_never_writes_the_pool():
    before, ref, tri, o_ref, o_tri = run_both("verify", N=4, D=3, H=2, HV=4, K=16, V=8, pad=2, seed=14)
    real = before["state_indices"] >= 0
    assert torch.equal(tri["state_pool"], before["state_pool"])
    assert torch.all(o_tri.unflatten(0, (4, 3))[~real] == 0)
    assert torch.isnan(tri["intermediate_states"][~real]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["intermediate_states"][real], ref["intermediate_states"][real]) <= FP32_BOUND


def test_triton_prefill_equals_triton_decode_token_by_token():
    inputs = lightning_inputs("prefill", N=1, H=1, HV=2, K=16, V=16, seqlens=[70], seed=15)
    stepped = clone_inputs(inputs)
    o = lightning.prefill(**inputs, backend="triton")
    for t in range(70):
        o_t = lightning.decode(
            stepped["q"][t : t + 1], stepped["k"][t : t + 1], stepped["v"][t : t + 1], stepped["g"],
            state_pool=stepped["state_pool"], state_indices=stepped["state_indices"], backend="triton",
        )  # fmt: skip
        assert rel_rmse(o_t, o[t : t + 1]) <= FP32_BOUND
    assert rel_rmse(stepped["state_pool"], inputs["state_pool"]) <= FP32_BOUND


# -- validation and availability ---------------------------------------------------------------------


def call(phase, **overrides):
    inputs = lightning_inputs(phase, N=3, **SHAPE, D=2, seqlens=[2, 1, 3])
    inputs.update(overrides)
    return getattr(lightning, phase)(**inputs, backend="torch")


@pytest.mark.parametrize("phase", lightning.PHASES)
def test_a_per_token_gate_is_rejected_naming_g(phase):
    T = {"prefill": 6, "decode": 3, "verify": 6}[phase]
    with pytest.raises(ValueError, match=r"^g .*\[HV\]"):
        call(phase, g=torch.zeros(T, 2, device=DEVICE))


def test_a_given_beta_is_validated_and_then_ignored():
    inputs = lightning_inputs("decode", N=3, **SHAPE, seed=16)
    with_beta = clone_inputs(inputs)
    with_beta["beta"] = torch.rand(3, 2, device=DEVICE)
    o = lightning.decode(**inputs, backend="torch")
    assert torch.equal(lightning.decode(**with_beta, backend="torch"), o)
    with pytest.raises(ValueError, match="^beta "):
        call("decode", beta=torch.rand(3, 5, device=DEVICE))


@pytest.mark.parametrize(
    "argument,bad",
    [
        ("g", lambda i: i["g"].double()),
        ("state_pool", lambda i: i["state_pool"].transpose(-1, -2).contiguous()),
        ("state_indices", lambda i: i["state_indices"].long()),
        ("q", lambda i: i["q"].flatten(1)),
        ("v", lambda i: i["v"][:2]),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(argument, bad):
    inputs = lightning_inputs("decode", N=3, **SHAPE)
    with pytest.raises(ValueError, match=rf"^{argument} "):
        call("decode", **{argument: bad(inputs)})


def test_cu_seqlens_not_ending_at_T_is_rejected():
    with pytest.raises(ValueError, match="^cu_seqlens "):
        call("prefill", cu_seqlens=torch.tensor([0, 2, 3, 5], dtype=torch.int32, device=DEVICE))


def test_there_is_no_flashinfer_backend():
    inputs = lightning_inputs("decode", N=2, **SHAPE)
    assert "flashinfer" not in lightning.BACKENDS
    with pytest.raises(ValueError, match="^backend "):
        lightning.decode(**inputs, backend="flashinfer")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on CPU tensors")
def test_triton_on_cpu_without_the_interpreter_raises_kernel_unavailable(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    inputs = lightning_inputs("decode", N=2, **SHAPE, device="cpu")
    with pytest.raises(KernelUnavailableError, match="triton"):
        lightning.decode(**inputs, backend="triton")
