"""GDN Triton decode/verify on a CUDA GPU: bf16 inputs at Qwen3-Next shapes, and CUDA-graph capture.

The reference is the torch backend on the fp32 inputs the bf16 ones were rounded from, so the bound
(relative RMSE ≤ 5e-3) covers bf16 input rounding plus the kernel's own error.
"""

import pytest
import torch
from gdn_inputs import capture_cuda_graph, clone_inputs, make_inputs, rel_rmse

from stampgen.kernels import gdn

pytestmark = pytest.mark.gpu

QWEN3_NEXT = dict(H=16, HV=32, K=128, V=128)
BF16_BOUND = 5e-3


def _bf16_and_fp32_inputs(phase, N, **kwargs):
    fp32 = make_inputs(phase, N=N, **QWEN3_NEXT, device="cuda", seed=N, **kwargs)
    bf16 = clone_inputs(fp32)
    for name in ("q", "k", "v"):
        bf16[name] = fp32[name].to(torch.bfloat16)
    return bf16, fp32


@pytest.mark.parametrize("N", [1, 64, 256])
def test_decode_with_bf16_inputs_matches_the_fp32_reference_at_qwen3_next_shapes(N):
    bf16, fp32 = _bf16_and_fp32_inputs("decode", N, pad=N // 8)
    o = gdn.decode(**bf16, backend="triton")
    o_ref = gdn.decode(**fp32, backend="torch")
    assert o.dtype == torch.bfloat16
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["state_pool"], fp32["state_pool"]) <= BF16_BOUND


@pytest.mark.parametrize("N", [1, 64, 256])
def test_verify_with_bf16_inputs_matches_the_fp32_reference_at_qwen3_next_shapes(N):
    bf16, fp32 = _bf16_and_fp32_inputs("verify", N, D=4, pad=N // 8)
    pool_before = bf16["state_pool"].clone()
    o = gdn.verify(**bf16, backend="triton")
    o_ref = gdn.verify(**fp32, backend="torch")
    real = fp32["state_indices"] >= 0
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["intermediate_states"][real], fp32["intermediate_states"][real]) <= BF16_BOUND
    assert torch.equal(bf16["state_pool"], pool_before)


def _refill(static: dict, fresh: dict) -> None:
    for name, t in fresh.items():
        static[name].copy_(t)


@pytest.mark.parametrize("phase", ["decode", "verify"])
def test_phase_captured_in_a_cuda_graph_replays_with_new_inputs(phase):
    shape = dict(N=8, H=4, HV=8, K=128, V=128, D=3 if phase == "verify" else None, pad=2)
    static = make_inputs(phase, **shape, dtype=torch.bfloat16, device="cuda", seed=1)
    run = getattr(gdn, phase)
    graph, o_static = capture_cuda_graph(lambda: run(**static, backend="triton"))

    for seed in (2, 3):  # two replays, each on new q/k/v/g/beta, slots and pool contents
        fresh = make_inputs(phase, **shape, dtype=torch.bfloat16, device="cuda", seed=seed)
        _refill(static, fresh)
        expected = clone_inputs(fresh)
        o_ref = run(**expected, backend="torch")
        graph.replay()
        torch.cuda.synchronize()
        assert rel_rmse(o_static, o_ref) <= BF16_BOUND  # bf16 outputs: last-bit rounding differences
        assert torch.allclose(static["state_pool"], expected["state_pool"], rtol=1e-5, atol=1e-5)
        if phase == "verify":
            real = expected["state_indices"] >= 0
            got, want = static["intermediate_states"][real], expected["intermediate_states"][real]
            assert rel_rmse(got, want) <= 1e-5


def test_decode_addresses_pool_slots_past_2_to_the_31_elements():
    small = make_inputs("decode", N=3, **QWEN3_NEXT, slots=3, device="cuda", seed=5)
    small["state_indices"] = torch.tensor([0, 1, 2], dtype=torch.int32, device="cuda")
    big_slots = (4200, 0, 4150)  # 4200 slots of 32*128*128 fp32 = 2.2e9 elements > 2^31
    big = clone_inputs(small)
    big["state_pool"] = torch.empty(4201, *small["state_pool"].shape[1:], device="cuda")
    for row, slot in enumerate(big_slots):
        big["state_pool"][slot] = small["state_pool"][row]
    big["state_indices"] = torch.tensor(big_slots, dtype=torch.int32, device="cuda")
    o = gdn.decode(**big, backend="triton")
    o_ref = gdn.decode(**small, backend="torch")
    assert rel_rmse(o, o_ref) <= 1e-5
    assert rel_rmse(big["state_pool"][list(big_slots)], small["state_pool"]) <= 1e-5


def test_verify_addresses_intermediate_states_past_2_to_the_31_elements():
    D, N = 4, 1100  # intermediate_states: 1100*4*32*128*128 = 2.3e9 elements > 2^31
    small = make_inputs("verify", N=2, D=D, **QWEN3_NEXT, slots=2, device="cuda", seed=6)
    small["state_indices"] = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
    big = {name: small[name] for name in ("state_pool",)}
    real = (0, N - 1)
    for name in ("q", "k", "v", "g", "beta"):
        t = small[name].unflatten(0, (2, D))
        full = t.new_zeros(N, *t.shape[1:])
        full[list(real)] = t
        big[name] = full.flatten(0, 1)
    big["state_indices"] = torch.full((N,), -1, dtype=torch.int32, device="cuda")
    big["state_indices"][list(real)] = torch.tensor([0, 1], dtype=torch.int32, device="cuda")
    big["intermediate_states"] = torch.empty(N, D, *small["state_pool"].shape[1:], device="cuda")
    o = gdn.verify(**big, backend="triton").unflatten(0, (N, D))
    o_ref = gdn.verify(**small, backend="torch").unflatten(0, (2, D))
    assert rel_rmse(o[list(real)], o_ref) <= 1e-5
    assert rel_rmse(big["intermediate_states"][list(real)], small["intermediate_states"]) <= 1e-5
