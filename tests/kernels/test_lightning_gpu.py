"""Lightning attention on a CUDA GPU: our Triton kernels with bf16 inputs at MiniMax-Text-01 shapes
(64 heads of 128, the MiniMax slopes), CUDA-graph capture of the custom ops, 64-bit pool addressing.

Bounds: relative RMSE ≤ 5e-3 against the fp32 torch reference on the bf16 values upcast (the kernel's
own error) and, for decode and verify, on the fp32 values the bf16 inputs were rounded from.
"""

import pytest
import torch
from gdn_inputs import capture_cuda_graph, clone_inputs, rel_rmse
from test_lightning_kernels import lightning_inputs

import stampgen.kernels.lightning.library  # noqa: F401  (registers torch.ops.stampgen.lightning_*)
from stampgen.kernels import lightning

pytestmark = pytest.mark.gpu

MINIMAX = dict(H=64, HV=64, K=128, V=128)
BF16_BOUND = 5e-3
BF16_INPUT_ROUNDING_BOUND = 1e-2
EXTRA = {"prefill": ("cu_seqlens",), "decode": (), "verify": ("intermediate_states",)}


def bf16_inputs(phase, gate="minimax", **shape):
    fp32 = lightning_inputs(phase, gate=gate, device="cuda", **shape)
    bf16, upcast = clone_inputs(fp32), clone_inputs(fp32)
    for name in ("q", "k", "v"):
        bf16[name] = fp32[name].to(torch.bfloat16)
        upcast[name] = bf16[name].float()
    return bf16, upcast, fp32


@pytest.mark.parametrize("gate", ["minimax", "strong"])
@pytest.mark.parametrize("seqlens", [[100, 156, 64, 1], [1024]], ids=["varlen", "T1024"])
def test_bf16_prefill_matches_the_fp32_reference(seqlens, gate):
    bf16, upcast, fp32 = bf16_inputs("prefill", N=len(seqlens), seqlens=seqlens, gate=gate, **MINIMAX, seed=1)
    o = lightning.prefill(**bf16, backend="triton")
    o_ref = lightning.prefill(**upcast, backend="torch")
    o_fp32 = lightning.prefill(**fp32, backend="torch")
    used = bf16["state_indices"].long()
    assert o.dtype == torch.bfloat16 and torch.isfinite(o).all()
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["state_pool"][used], upcast["state_pool"][used]) <= BF16_BOUND
    assert rel_rmse(o, o_fp32) <= BF16_INPUT_ROUNDING_BOUND


@pytest.mark.parametrize(
    "shape", [dict(H=2, HV=4, K=64, V=32), dict(H=4, HV=4, K=128, V=48)], ids=["V32", "V48"]
)
def test_bf16_prefill_with_narrow_and_ragged_value_heads(shape):
    # V narrower than the 64-wide tile (masked, pointer loads): the GPU builds of the output pass at a
    # 32-wide tile gave wrong final states, so narrow heads keep the 64-wide one
    seqlens = [300, 5, 1100]
    bf16, upcast, _ = bf16_inputs("prefill", N=3, seqlens=seqlens, **shape, seed=4)
    o = lightning.prefill(**bf16, backend="triton")
    o_ref = lightning.prefill(**upcast, backend="torch")
    used = bf16["state_indices"].long()
    assert torch.isfinite(o).all()
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["state_pool"][used], upcast["state_pool"][used]) <= BF16_BOUND


@pytest.mark.parametrize("N", [1, 64, 256])
def test_bf16_decode_matches_the_fp32_reference(N):
    bf16, _, fp32 = bf16_inputs("decode", N=N, pad=N // 8, **MINIMAX, seed=N)
    o = lightning.decode(**bf16, backend="triton")
    o_ref = lightning.decode(**fp32, backend="torch")
    assert o.dtype == torch.bfloat16
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["state_pool"], fp32["state_pool"]) <= BF16_BOUND


@pytest.mark.parametrize("N", [1, 64])
def test_bf16_verify_matches_the_fp32_reference_and_keeps_the_pool(N):
    bf16, _, fp32 = bf16_inputs("verify", N=N, D=4, pad=N // 8, **MINIMAX, seed=N + 1)
    pool_before = bf16["state_pool"].clone()
    o = lightning.verify(**bf16, backend="triton")
    o_ref = lightning.verify(**fp32, backend="torch")
    real = fp32["state_indices"] >= 0
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["intermediate_states"][real], fp32["intermediate_states"][real]) <= BF16_BOUND
    assert torch.equal(bf16["state_pool"], pool_before)


def _op_args(phase, inputs):
    names = ("q", "k", "v", "g", "beta", "state_pool", "state_indices", *EXTRA[phase])
    return tuple(inputs[name] for name in names)


@pytest.mark.parametrize("phase", ["decode", "verify", "prefill"])
def test_the_op_captured_in_a_cuda_graph_replays_like_eager_calls(phase):
    shape = dict(N=8, H=8, HV=8, K=128, V=128, pad=2)
    shape.update(D=3) if phase == "verify" else None
    shape.update(seqlens=[40, 1, 100, 17, 0, 64, 65, 3]) if phase == "prefill" else None
    op = getattr(torch.ops.stampgen, f"lightning_{phase}")
    static = bf16_inputs(phase, **shape, seed=10)[0]
    graph, o_static = capture_cuda_graph(lambda: op(*_op_args(phase, static), backend="triton"))
    for seed in (11, 12):
        fresh = bf16_inputs(phase, **shape, seed=seed)[0]
        for name, t in fresh.items():
            if isinstance(t, torch.Tensor):
                static[name].copy_(t)
        expected = clone_inputs(fresh)
        o_eager = op(*_op_args(phase, expected), backend="triton")
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(o_static, o_eager)
        assert torch.equal(static["state_pool"], expected["state_pool"])
        if phase == "verify":
            real = expected["state_indices"] >= 0
            assert torch.equal(static["intermediate_states"][real], expected["intermediate_states"][real])


@pytest.mark.parametrize("phase", ["decode", "prefill"])
def test_decode_and_prefill_address_pool_slots_past_2_to_the_31_elements(phase):
    extra = dict(seqlens=[5, 200, 1]) if phase == "prefill" else {}
    small = lightning_inputs(phase, N=3, **MINIMAX, slots=3, device="cuda", seed=5, **extra)
    small["state_indices"] = torch.tensor([0, 1, 2], dtype=torch.int32, device="cuda")
    big_slots = (2100, 0, 2050)  # 2101 slots of 64·128·128 fp32 = 2.2e9 elements > 2^31
    big = clone_inputs(small)
    big["state_pool"] = torch.zeros(2101, *small["state_pool"].shape[1:], device="cuda")
    for row, slot in enumerate(big_slots):
        big["state_pool"][slot] = small["state_pool"][row]
    big["state_indices"] = torch.tensor(big_slots, dtype=torch.int32, device="cuda")
    ref = clone_inputs(small)
    o = getattr(lightning, phase)(**big, backend="triton")
    o_small = getattr(lightning, phase)(**small, backend="triton")
    o_ref = getattr(lightning, phase)(**ref, backend="torch")
    # the same kernel on the same values: only the slot addresses differ, so the results must too
    assert torch.equal(o, o_small)
    assert torch.equal(big["state_pool"][list(big_slots)], small["state_pool"])
    # and right: fp32 inputs take tf32 products in the prefill
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(small["state_pool"], ref["state_pool"]) <= BF16_BOUND
