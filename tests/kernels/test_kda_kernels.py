"""KDA (``kernels.kda``): the torch reference against an fp64 closed form, our Triton kernels against the
reference (the CPU interpreter when there is no GPU), and argument validation.

Gates are per key channel (``g: [T, HV, K]``): ``logsigmoid(randn) / normalizer`` (strong and weak
decay), or a per-channel mix of g ≈ 0 and g ≈ −5 (the safe gate's lower bound). On a CPU the kernels run
in fp32 and fp16 only (the interpreter's bf16 math is wrong; bf16 is in test_kda_lightning_gpu.py).
Outputs the kernels allocate are poisoned with NaN and verify's ``intermediate_states`` starts as NaN,
so anything left unwritten shows.
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

from stampgen.kernels import kda
from stampgen.kernels._validation import KernelUnavailableError

pytestmark = pytest.mark.usefixtures("poisoned_empty")

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
FP32_BOUND = 1e-5
FP16_BOUND = 2e-3  # fp16 output rounding (the reference sees the same fp16 inputs)
SHAPE = dict(H=2, HV=4, K=16, V=8)  # GQA, K != V catches a transposed state


def kda_gate(T, HV, K, *, gate="normal", normalizer=1.0, seed=0):
    """[T, HV, K] fp32 log-decays: "normal" = logsigmoid(randn) / normalizer; "mixed" = per channel
    either ≈ 0 (−1e-3 … 0) or ≈ −5 (−5.5 … −4.5), the two ends of a safe gate."""
    gen = torch.Generator().manual_seed(1000 + seed)
    if gate == "normal":
        return F.logsigmoid(torch.randn(T, HV, K, generator=gen)) / normalizer
    strong = torch.rand(HV, K, generator=gen) < 0.5
    weak_g = -1e-3 * torch.rand(T, HV, K, generator=gen)
    strong_g = -4.5 - torch.rand(T, HV, K, generator=gen)
    return torch.where(strong, strong_g, weak_g)


def kda_inputs(phase, *, gate="normal", normalizer=1.0, seed=0, device=DEVICE, **shape):
    inputs = make_inputs(phase, seed=seed, **shape)
    T, HV, K = inputs["q"].shape[0], inputs["v"].shape[1], inputs["q"].shape[2]
    inputs["g"] = kda_gate(T, HV, K, gate=gate, normalizer=normalizer, seed=seed)
    return {name: t.to(device) for name, t in inputs.items()}


def run_both(phase, **kwargs):
    return shared_run_both(kda, phase, kda_inputs(phase, **kwargs))


# -- the reference against an fp64 closed form ---------------------------------------------------------


def closed_form(q, k, v, g, beta, state_kv, scale):
    """One sequence in float64 on the K-major state [HV, K, V]:
    S_t = (I − β_t k_t k_tᵀ) diag(exp g_t) S_{t−1} + β_t k_t v_tᵀ,  o_t = S_tᵀ (scale q_t)."""
    T, HV = v.shape[:2]
    G = HV // q.shape[1]
    S = state_kv.double().clone()
    o = torch.zeros(T, HV, v.shape[2], dtype=torch.float64)
    eye = torch.eye(q.shape[2], dtype=torch.float64)
    for t in range(T):
        for h in range(HV):
            q_t, k_t, b = q[t, h // G].double(), k[t, h // G].double(), beta[t, h].double()
            decay = torch.diag(torch.exp(g[t, h].double()))
            S[h] = (eye - b * torch.outer(k_t, k_t)) @ decay @ S[h] + b * torch.outer(k_t, v[t, h].double())
            o[t, h] = S[h].T @ (scale * q_t)
    return o, S


def expected_prefill(inputs, scale):
    """(o, pool) as the contract says prefill leaves them, sequence by sequence in float64."""
    inputs = {name: t.cpu() for name, t in inputs.items()}
    pool = inputs["state_pool"].clone()
    T, HV, V = inputs["v"].shape
    K = inputs["q"].shape[2]
    o = torch.zeros(T, HV, V, dtype=torch.float64)
    cu = inputs["cu_seqlens"].tolist()
    for n, slot in enumerate(inputs["state_indices"].tolist()):
        tokens = slice(cu[n], cu[n + 1])
        start = pool[slot].transpose(-1, -2) if slot >= 0 else torch.zeros(HV, K, V)
        o_seq, state = closed_form(*(inputs[x][tokens] for x in ("q", "k", "v", "g", "beta")), start, scale)
        if slot >= 0:
            o[tokens] = o_seq
            pool[slot] = state.transpose(-1, -2).float()
    return o, pool


@pytest.mark.parametrize("gate,normalizer", [("normal", 1.0), ("normal", 10.0), ("mixed", 1.0)])
def test_reference_prefill_matches_the_fp64_closed_form(gate, normalizer):
    inputs = kda_inputs("prefill", N=3, **SHAPE, seqlens=[5, 1, 7], pad=1, gate=gate, normalizer=normalizer)
    o_expected, pool_expected = expected_prefill(inputs, scale=16**-0.5)
    o = kda.prefill(**inputs, backend="torch")
    assert rel_rmse(o, o_expected) <= FP32_BOUND
    assert rel_rmse(inputs["state_pool"], pool_expected) <= FP32_BOUND


def test_reference_decode_matches_the_fp64_closed_form_with_a_given_scale():
    inputs = kda_inputs("decode", N=4, **SHAPE, pad=1, seed=2)
    as_prefill = clone_inputs(inputs)
    as_prefill["cu_seqlens"] = torch.arange(5, dtype=torch.int32)
    o_expected, pool_expected = expected_prefill(as_prefill, scale=0.7)
    o = kda.decode(**inputs, scale=0.7, backend="torch")
    assert rel_rmse(o, o_expected) <= FP32_BOUND
    assert rel_rmse(inputs["state_pool"], pool_expected) <= FP32_BOUND


def test_reference_verify_equals_decode_step_by_step_and_leaves_the_pool_untouched():
    inputs = kda_inputs("verify", N=3, D=4, **SHAPE, pad=1, seed=3)
    assert_verify_is_stepwise_decode(kda, inputs, D=4, bound=FP32_BOUND)
    assert torch.isnan(inputs["intermediate_states"][inputs["state_indices"] < 0]).all()


def test_a_per_channel_gate_is_not_a_per_head_gate():
    # The same gate averaged over channels must give another answer: the kernels read every channel.
    inputs = kda_inputs("decode", N=2, **SHAPE, gate="mixed", seed=4)
    averaged = clone_inputs(inputs)
    averaged["g"] = inputs["g"].mean(-1, keepdim=True).expand_as(inputs["g"]).contiguous()
    o = kda.decode(**inputs, backend="triton")
    assert rel_rmse(kda.decode(**averaged, backend="triton"), o) > 1e-2


# -- Triton prefill ------------------------------------------------------------------------------------


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


def test_triton_prefill_with_padding_outputs_zeros_and_writes_no_slot():
    before, ref, tri, o_ref, o_tri = run_both("prefill", N=4, **SHAPE, seqlens=[20, 3, 17, 9], pad=2, seed=6)
    assert_padding_left_alone(before, tri["state_pool"], o_tri)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


@pytest.mark.parametrize(
    "seqlens,pad",
    [([64], 0), ([16, 17, 31, 33, 65], 0), ([97, 0, 1, 128], 1), ([0, 0, 5, 40], 2)],
    ids=["one-chunk", "half-and-chunk-edges", "many-chunks-padded", "leading-empties-two-pads"],
)
def test_triton_prefill_at_chunk_and_sub_chunk_edges_with_the_chunk_map(seqlens, pad):
    pytest.importorskip("stampgen.kernels.kda.chunk")  # needs triton
    # Chunks of 64, whose A and P split at rows 16 and 32 (the middle row, the halving levels): lengths
    # around 16, 32 and 64 leave those parts empty or partial; V = 48 ragged V tiles; empty and padded
    # sequences leave repeats in the chunk offsets, and the intra grid's upper bound leaves programs past
    # the last chunk.
    before, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=len(seqlens), H=1, HV=2, K=64, V=48, seqlens=seqlens, pad=pad, seed=18
    )
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND
    assert_padding_left_alone(before, tri["state_pool"], o_tri)


@pytest.mark.parametrize("g", [-60.0, -5.0, -1e-4])
def test_the_prefill_under_extreme_uniform_gates(g):
    # g = −60 and −5: a chunk decays past the middle row's span and goes to the halving levels, whose
    # factors exp(γ_i − γ_m) and exp(γ_m − γ_j) must underflow to 0, never overflow; −1e-4: the middle row.
    pytest.importorskip("stampgen.kernels.kda.chunk")  # needs triton
    inputs = kda_inputs("prefill", N=2, H=1, HV=2, K=32, V=16, seqlens=[45, 16], seed=19)
    inputs["g"] = torch.full_like(inputs["g"], g)
    ref, tri = clone_inputs(inputs), clone_inputs(inputs)
    o_ref, o_tri = kda.prefill(**ref, backend="torch"), kda.prefill(**tri, backend="triton")
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def chunked_against_reference(inputs, **config):
    """(output, pool) rel RMSE of ``kda.chunk.prefill`` with these LaunchConfig fields against the
    reference."""
    from stampgen.kernels.kda import chunk

    ref, tri = clone_inputs(inputs), clone_inputs(inputs)
    o_ref = kda.prefill(**ref, backend="torch")
    o_tri = chunk.prefill(**tri, scale=inputs["q"].shape[-1] ** -0.5, config=chunk.LaunchConfig(**config))
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    return rel_rmse(o_tri, o_ref), rel_rmse(tri["state_pool"], ref["state_pool"])


@pytest.mark.parametrize("levels_only", [False, True], ids=["middle-row", "levels-only"])
def test_both_ways_to_the_chunk_products_match_the_reference_on_ordinary_decay(levels_only):
    # Ordinary decay: every chunk goes through its middle row by default; levels_only takes the same
    # chunks by the halving levels. Both must be right (a broken path fails its own run).
    pytest.importorskip("stampgen.kernels.kda.chunk")  # needs triton
    inputs = kda_inputs("prefill", N=2, H=1, HV=2, K=32, V=16, seqlens=[130, 64], seed=21)
    errors = chunked_against_reference(inputs, block_v=16, levels_only=levels_only)
    assert max(errors) <= FP32_BOUND


def test_chunks_and_key_blocks_too_fast_for_the_middle_row_take_the_levels():
    # K = 128 in two key blocks of 64: the second block's channels decay by e^-3 a token (past the
    # middle row's span within one chunk), the first block's barely; and the second sequence's middle
    # chunk decays fast in every channel. Mixed chunks and key blocks must still match the reference.
    pytest.importorskip("stampgen.kernels.kda.chunk")  # needs triton
    inputs = kda_inputs("prefill", N=2, H=1, HV=2, K=128, V=16, seqlens=[70, 192], seed=22)
    g = inputs["g"]
    g[:70, :, 64:] = -3.0
    g[:70, :, :64] = -1e-3
    g[70 + 64 : 70 + 128] = -2.0
    assert max(chunked_against_reference(inputs, block_v=16)) <= FP32_BOUND


def test_a_zero_length_sequence_leaves_its_slot_bit_identical():
    before, _, tri, _, _ = run_both("prefill", N=3, **SHAPE, seqlens=[4, 0, 5], seed=7)
    slot = before["state_indices"][1].item()
    assert torch.equal(tri["state_pool"][slot], before["state_pool"][slot])


@pytest.mark.parametrize(
    "gate,normalizer", [("normal", 0.1), ("normal", 10.0), ("mixed", 1.0)], ids=["strong", "weak", "mixed"]
)
def test_triton_prefill_under_strong_and_weak_per_channel_decay(gate, normalizer):
    _, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=2, H=1, HV=2, K=32, V=16, seqlens=[70, 33], gate=gate, normalizer=normalizer, seed=8
    )
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def test_triton_prefill_survives_a_gate_far_below_the_fp32_exponent_range():
    # g = −60 per token: a 64-token chunk decays by e^−3840, whose inverse would overflow fp32 (> e^88).
    inputs = kda_inputs("prefill", N=1, H=1, HV=2, K=16, V=16, seqlens=[40], seed=9)
    inputs["g"] = torch.full_like(inputs["g"], -60.0)
    ref, tri = clone_inputs(inputs), clone_inputs(inputs)
    o_ref, o_tri = kda.prefill(**ref, backend="torch"), kda.prefill(**tri, backend="triton")
    assert torch.isfinite(o_tri).all() and torch.isfinite(tri["state_pool"]).all()
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND


def test_triton_prefill_with_ragged_head_dims_and_v_tiles():
    _, ref, tri, o_ref, o_tri = run_both("prefill", N=2, H=1, HV=2, K=24, V=40, seqlens=[19, 5], seed=10)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND


def test_triton_prefill_with_fp16_inputs():
    _, ref, tri, o_ref, o_tri = run_both(
        "prefill", N=2, **SHAPE, seqlens=[30, 12], dtype=torch.float16, seed=11
    )
    assert o_tri.dtype == torch.float16
    assert rel_rmse(o_tri, o_ref) <= FP16_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP16_BOUND


# -- Triton decode and verify ------------------------------------------------------------------------


@pytest.mark.parametrize("gate,normalizer", [("normal", 1.0), ("normal", 10.0), ("mixed", 1.0)])
def test_triton_decode_matches_the_reference(gate, normalizer):
    before, ref, tri, o_ref, o_tri = run_both(
        "decode", N=5, **SHAPE, pad=2, gate=gate, normalizer=normalizer, seed=12
    )
    assert torch.all(o_tri[before["state_indices"] < 0] == 0)
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP32_BOUND
    untouched = untouched_slots(before)
    assert torch.equal(tri["state_pool"][untouched], before["state_pool"][untouched])


def test_triton_decode_with_fp16_inputs_and_ragged_dims():
    _, ref, tri, o_ref, o_tri = run_both("decode", N=3, H=1, HV=2, K=24, V=40, dtype=torch.float16, seed=13)
    assert o_tri.dtype == torch.float16
    assert rel_rmse(o_tri, o_ref) <= FP16_BOUND
    assert rel_rmse(tri["state_pool"], ref["state_pool"]) <= FP16_BOUND


def test_triton_verify_matches_the_reference_and_never_writes_the_pool():
    before, ref, tri, o_ref, o_tri = run_both("verify", N=4, D=3, **SHAPE, pad=2, gate="mixed", seed=14)
    real = before["state_indices"] >= 0
    assert torch.equal(tri["state_pool"], before["state_pool"])
    assert torch.all(o_tri.unflatten(0, (4, 3))[~real] == 0)
    assert torch.isnan(tri["intermediate_states"][~real]).all()  # padding rows left untouched
    assert rel_rmse(o_tri, o_ref) <= FP32_BOUND
    assert rel_rmse(tri["intermediate_states"][real], ref["intermediate_states"][real]) <= FP32_BOUND


def test_triton_prefill_equals_triton_decode_token_by_token():
    # Two kernels written differently (chunked, token-serial) must agree on the same sequence.
    inputs = kda_inputs("prefill", N=1, H=1, HV=2, K=16, V=16, seqlens=[20], seed=15)
    stepped = clone_inputs(inputs)
    o = kda.prefill(**inputs, backend="triton")
    for t in range(20):
        o_t = kda.decode(
            *(stepped[name][t : t + 1] for name in ("q", "k", "v", "g", "beta")),
            state_pool=stepped["state_pool"],
            state_indices=stepped["state_indices"],
            backend="triton",
        )
        assert rel_rmse(o_t, o[t : t + 1]) <= FP32_BOUND
    assert rel_rmse(stepped["state_pool"], inputs["state_pool"]) <= FP32_BOUND


# -- validation and availability ---------------------------------------------------------------------


def call(phase, **overrides):
    inputs = kda_inputs(phase, N=3, **SHAPE, D=2, seqlens=[2, 1, 3])
    inputs.update(overrides)
    return getattr(kda, phase)(**inputs, backend="torch")


@pytest.mark.parametrize("phase", kda.PHASES)
def test_a_per_head_gate_is_rejected_naming_g(phase):
    T = {"prefill": 6, "decode": 3, "verify": 6}[phase]
    with pytest.raises(ValueError, match=r"^g .*\[T, HV, K\]"):
        call(phase, g=torch.zeros(T, 4, device=DEVICE))


@pytest.mark.parametrize(
    "argument,bad",
    [
        ("g", lambda i: i["g"].double()),
        ("beta", lambda i: i["beta"][:, :2]),
        ("state_pool", lambda i: i["state_pool"].transpose(-1, -2).contiguous()),
        ("state_indices", lambda i: i["state_indices"].long()),
        ("k", lambda i: i["k"][..., :8]),
        ("v", lambda i: i["v"][:2]),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_argument(argument, bad):
    inputs = kda_inputs("decode", N=3, **SHAPE)
    with pytest.raises(ValueError, match=rf"^{argument} "):
        call("decode", **{argument: bad(inputs)})


def test_a_repeated_slot_is_rejected():
    with pytest.raises(ValueError, match=r"^state_indices .*repeat"):
        call("decode", state_indices=torch.tensor([1, 1, -1], dtype=torch.int32, device=DEVICE))


def test_an_unknown_backend_is_rejected():
    inputs = kda_inputs("decode", N=2, **SHAPE)
    with pytest.raises(ValueError, match="^backend "):
        kda.decode(**inputs, backend="cutedsl")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_flashinfer_on_cpu_tensors_raises_kernel_unavailable():
    inputs = kda_inputs("decode", N=2, **SHAPE, device="cpu")
    with pytest.raises(KernelUnavailableError, match="flashinfer"):
        kda.decode(**inputs, backend="flashinfer")
    assert "flashinfer" not in kda.available_backends()


def test_the_state_pass_takes_wide_v_tiles_only_where_two_programs_an_sm_remain(monkeypatch):
    chunk = pytest.importorskip("stampgen.kernels.kda.chunk")  # needs triton
    monkeypatch.setattr(chunk, "triton_interpreted", lambda: False)
    assert chunk.launch_config(1, 32, 128).block_v == 32  # one sequence: 128 programs of 32 columns
    assert chunk.launch_config(16, 32, 128).block_v == 64  # a batch: 1024 programs of 64
    assert chunk.launch_config(4, 2, 16).block_v == 16  # narrow heads: the whole head


def test_the_state_pass_takes_tma_tiles_only_where_k_by_chunk_at_most_doubles_its_rows(monkeypatch):
    # K̃ by chunk (for TMA tiles) takes 64 rows a chunk, by token T rows: a batch of many short sequences
    # keeps the pointer path rather than hold 64 rows for each one-token sequence. The decision prefill
    # makes, on a stand-in for a CUDA bf16 tensor at Kimi-Linear's heads.
    from types import SimpleNamespace

    from stampgen.kernels.chunked.chunk_map import max_chunks

    chunk = pytest.importorskip("stampgen.kernels.kda.chunk")
    monkeypatch.setattr(chunk, "triton_interpreted", lambda: False)
    cuda_bf16 = SimpleNamespace(is_cuda=True, dtype=torch.bfloat16)

    def tma(seqlens, K=128, V=128, BV=64):
        T = sum(seqlens)
        return chunk._tma_applies(cuda_bf16, K, 128, V, BV, T, max_chunks(T, len(seqlens), chunk.CHUNK_SIZE))

    assert tma([2048] * 16)  # serving's batch
    assert tma([4096])
    assert tma([100] * 8)
    assert tma([40])  # 64 rows for 40 tokens
    assert not tma([20])  # 64 rows for 20
    assert not tma([1] * 1024)  # a thousand one-token sequences
    assert not tma([4096], K=96)  # a tile past its head
    assert not tma([4096], V=96)
    cuda_fp32 = SimpleNamespace(is_cuda=True, dtype=torch.float32)
    assert not chunk._tma_applies(cuda_fp32, 128, 128, 128, 64, 4096, max_chunks(4096, 1, 64))
