"""Our Triton chunked GDN prefill on a CUDA GPU: bf16 inputs at Qwen3-Next head geometry, CUDA graphs.

The kernel's error is measured against the fp32 torch reference run on the same bf16 values (upcast), so
the 5e-3 bound is for the kernel alone (bf16 tensor-core operands, bf16 w/u/P scratch, bf16 output);
a looser check against the fp32 values the bf16 inputs were rounded from adds the input rounding.
"""

import pytest
import torch
from gdn_inputs import assert_prefill_replay_matches_eager, make_inputs, rel_rmse, rounded

from stampgen.kernels import gdn
from stampgen.kernels.gdn import chunk

pytestmark = pytest.mark.gpu

QWEN3_NEXT = dict(H=16, HV=32, K=128, V=128)
BF16_BOUND = 5e-3
# Input rounding to bf16 (~2^-9 per element) on top of the kernel's own error.
BF16_INPUT_ROUNDING_BOUND = 1e-2


def _bf16_and_reference_inputs(seqlens, seed, pad=0):
    fp32 = make_inputs(
        "prefill", N=len(seqlens), seqlens=seqlens, **QWEN3_NEXT, device="cuda", seed=seed, pad=pad
    )
    return (*rounded(fp32), fp32)


@pytest.mark.parametrize("seqlens", [[100, 156, 64, 1], [4096]], ids=["varlen", "T4096"])
def test_bf16_prefill_matches_the_fp32_reference_at_qwen3_next_shapes(seqlens):
    bf16, upcast, fp32 = _bf16_and_reference_inputs(seqlens, seed=len(seqlens))
    o = gdn.prefill(**bf16, backend="triton")
    o_ref = gdn.prefill(**upcast, backend="torch")
    o_fp32 = gdn.prefill(**fp32, backend="torch")
    assert o.dtype == torch.bfloat16
    assert not torch.isnan(o).any()
    used = bf16["state_indices"].long()
    err_o, err_s = rel_rmse(o, o_ref), rel_rmse(bf16["state_pool"][used], upcast["state_pool"][used])
    assert err_o <= BF16_BOUND, f"output rel RMSE {err_o:.3g}"
    assert err_s <= BF16_BOUND, f"final state rel RMSE {err_s:.3g}"
    assert rel_rmse(o, o_fp32) <= BF16_INPUT_ROUNDING_BOUND
    assert rel_rmse(bf16["state_pool"][used], fp32["state_pool"][used]) <= BF16_INPUT_ROUNDING_BOUND


@pytest.mark.parametrize("K,V", [(64, 64), (128, 32), (32, 128), (128, 128)])
def test_bf16_prefill_matches_the_reference_at_other_head_dims(K, V):
    # Each (K, V) pair compiles its own tile shapes; sm_90 dot lowering differs with them.
    fp32 = make_inputs("prefill", N=2, seqlens=[100, 37], H=1, HV=2, K=K, V=V, device="cuda", seed=K + V)
    bf16, upcast = rounded(fp32)
    o = gdn.prefill(**bf16, backend="triton")
    o_ref = gdn.prefill(**upcast, backend="torch")
    used = bf16["state_indices"].long()
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["state_pool"][used], upcast["state_pool"][used]) <= BF16_BOUND


def test_padding_sequences_get_zero_output_and_keep_the_pool_at_qwen3_next_shapes():
    seqlens = [70, 200, 5, 64]
    bf16, upcast, _ = _bf16_and_reference_inputs(seqlens, seed=7, pad=2)
    pool_before = bf16["state_pool"].clone()
    o = gdn.prefill(**bf16, backend="triton")
    o_ref = gdn.prefill(**upcast, backend="torch")
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    cu = bf16["cu_seqlens"].tolist()
    used = set()
    for n, slot in enumerate(bf16["state_indices"].tolist()):
        if slot < 0:
            assert not o[cu[n] : cu[n + 1]].any()
        else:
            used.add(slot)
    for slot in range(pool_before.shape[0]):
        if slot not in used:
            assert torch.equal(bf16["state_pool"][slot], pool_before[slot])


@pytest.mark.parametrize("seg_chunks", [1, 3])
def test_split_sequences_match_the_reference_at_qwen3_next_shapes(monkeypatch, seg_chunks):
    # Context parallelism on short inputs: segments of 1 or 3 chunks, a padded sequence among them.
    default = chunk.launch_config
    monkeypatch.setattr(
        chunk, "launch_config", lambda *a, **kw: default(*a, **kw)._replace(seg_chunks=seg_chunks)
    )
    bf16, upcast, _ = _bf16_and_reference_inputs([700, 64, 129, 300], seed=13, pad=1)
    o = gdn.prefill(**bf16, backend="triton")
    o_ref = gdn.prefill(**upcast, backend="torch")
    used = bf16["state_indices"][bf16["state_indices"] >= 0].long()
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(bf16["state_pool"][used], upcast["state_pool"][used]) <= BF16_BOUND


def test_a_fixed_varlen_batch_is_captured_and_replayed_in_a_cuda_graph():
    bf16, _, _ = _bf16_and_reference_inputs([100, 156, 64, 1], seed=11)
    fresh, _, _ = _bf16_and_reference_inputs([100, 156, 64, 1], seed=12)
    assert_prefill_replay_matches_eager(bf16, fresh)
