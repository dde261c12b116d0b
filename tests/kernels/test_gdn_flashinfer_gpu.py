"""The FlashInfer GDN backend (``kernels.gdn.flashinfer``).

CPU: without FlashInfer the backend raises ``KernelUnavailableError`` (never an ImportError or a
traceback from inside FlashInfer), and the gate conversion for FlashInfer's decode/verify kernels
round-trips through their formula. GPU (SM90+, FlashInfer installed; skipped cleanly otherwise): the
adapters against our torch reference on the same bf16 inputs (relative RMSE ≤ 5e-3 on outputs and
states), padding slots, CUDA-graph capture, and ours (Triton) vs fla vs FlashInfer on the same inputs.
"""

import os
import sys

import pytest
import torch
from gdn_inputs import clone_inputs, make_inputs, rel_rmse

import stampgen.kernels.gdn.flashinfer as fi_backend
from stampgen.kernels import gdn
from stampgen.kernels._validation import KernelUnavailableError

QWEN3_NEXT = dict(H=16, HV=32, K=128, V=128)
BF16_BOUND = 5e-3

# ------------------------------------------------------------------------------------------------ CPU


@pytest.fixture
def without_flashinfer(monkeypatch):
    """Make ``import flashinfer`` fail here, even where it is installed."""
    for name in ("flashinfer", "flashinfer.gdn_prefill", "flashinfer.gdn_decode"):
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setattr(fi_backend, "_modules", {})


@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_the_public_api_raises_kernel_unavailable_without_flashinfer(phase, without_flashinfer):
    inputs = make_inputs(phase, N=2, H=1, HV=2, K=128, V=128)
    with pytest.raises(KernelUnavailableError, match="flashinfer") as caught:
        getattr(gdn, phase)(**inputs, backend="flashinfer")
    assert not isinstance(caught.value, ImportError)


@pytest.mark.parametrize("phase", ["prefill", "decode", "verify"])
def test_the_adapter_says_what_to_install_when_flashinfer_is_missing(phase, without_flashinfer):
    inputs = make_inputs(phase, N=2, H=1, HV=2, K=128, V=128)
    with pytest.raises(KernelUnavailableError, match=r"cannot be imported here .*pip install") as caught:
        getattr(fi_backend, phase)(**inputs, scale=128**-0.5)
    assert "compute capability 9.0" in str(caught.value)
    assert not fi_backend.is_available()


def _flashinfer_gates(a, b, *, branch_free):
    """FlashInfer's in-kernel gate and beta with A_log = dt_bias = 0, in fp32 (gdn_decode_*.py).

    ``branch_free`` mimics the MTP variant that blends both softplus branches as ``m·sp + (1−m)·x``.
    """
    x = a.float()
    softplus = torch.log(1.0 + torch.exp(x))
    if branch_free:
        use = (x <= 20.0).float()
        softplus = use * softplus + (1.0 - use) * x
    else:
        softplus = torch.where(x <= 20.0, softplus, x)
    return torch.exp(-softplus), 1.0 / (1.0 + torch.exp(-b.float()))


CONVERSIONS = {"triton": fi_backend.raw_gate_inputs, "torch": fi_backend.raw_gate_inputs_torch}


def _edge_inputs(test):
    """Edge inputs are the point of the tests so marked: g = 0 and β ∈ {0, 1} take log(0) and x / 0 on
    the way to an exact ±inf, a positive gate the log of a negative number (nan), and under the CPU
    interpreter numpy warns of each such element."""
    test = pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")(test)
    return pytest.mark.filterwarnings("ignore:invalid value encountered in log:RuntimeWarning")(test)


@_edge_inputs
@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
@pytest.mark.parametrize("branch_free", [False, True])
def test_the_gate_conversion_gives_back_exp_g_and_beta_through_flashinfers_formula(branch_free, conversion):
    g = torch.tensor([0.0, -1e-38, -1e-30, -1e-7, -1e-3, -0.5, -3.0, -19.9, -20.0, -20.1, -50.0, -79.0])
    g = torch.cat([g, torch.nn.functional.logsigmoid(torch.randn(1000)) / 10.0])
    beta = torch.cat([torch.tensor([0.0, 1.0, 1e-7, 1 - 1e-7]), torch.rand(g.numel() - 4)])
    a, b = CONVERSIONS[conversion](g, beta)
    alpha, beta_back = _flashinfer_gates(a, b, branch_free=branch_free)
    assert torch.isfinite(a).all()
    assert ((alpha - g.exp()).abs() <= 1e-6 * g.exp()).all()
    assert ((beta_back - beta).abs() <= 1e-6 * beta).all()


@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
def test_gates_below_minus_80_decay_to_practically_zero(conversion):
    a, _ = CONVERSIONS[conversion](torch.tensor([-100.0, -1e4]), torch.tensor([0.5, 0.5]))
    alpha, _ = _flashinfer_gates(a, torch.zeros(2), branch_free=True)
    assert (alpha <= 2e-35).all()


@_edge_inputs
@pytest.mark.parametrize("conversion", sorted(CONVERSIONS))
def test_a_positive_gate_is_not_a_decay_and_comes_out_nan(conversion):
    a, _ = CONVERSIONS[conversion](torch.tensor([0.5]), torch.tensor([0.5]))
    assert a.isnan().all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_padding_sequences_get_zero_output_rows_and_the_others_keep_theirs(dtype):
    inputs = make_inputs("prefill", N=5, H=1, HV=2, K=4, V=8, seqlens=[3, 0, 17, 1, 9], pad=2, seed=4)
    o = torch.randn(30, 2, 8).to(dtype)
    expected = o.clone()
    cu = inputs["cu_seqlens"].tolist()
    for n, slot in enumerate(inputs["state_indices"].tolist()):
        if slot < 0:
            expected[cu[n] : cu[n + 1]] = 0
    assert not torch.equal(o, expected)  # the seed puts padding on a non-empty sequence
    fi_backend.zero_padding_rows(o, inputs["cu_seqlens"], inputs["state_indices"])
    assert torch.equal(o, expected)


# ------------------------------------------------------------------------------------------------ GPU


@pytest.fixture
def flashinfer_gpu():
    pytest.importorskip("flashinfer")
    if not fi_backend.is_available():
        pytest.skip("FlashInfer's GDN kernels need an SM90+ GPU and an importable flashinfer.gdn_*")


def _qwen_inputs(phase, N, seed, **kwargs):
    return make_inputs(phase, N=N, **QWEN3_NEXT, dtype=torch.bfloat16, device="cuda", seed=seed, **kwargs)


def _slots(inputs):
    """Pool rows of the real (non-padding) sequences, and the padding sequences' positions."""
    idx = inputs["state_indices"].long()
    return idx[idx >= 0], (idx < 0).nonzero().flatten()


@pytest.mark.gpu
def test_the_gate_conversion_on_the_gpu_gives_back_exp_g_and_beta():
    g = torch.cat([torch.tensor([0.0, -1e-30, -1e-7, -1e-3, -3.0, -19.9, -20.1]), -torch.rand(10000) * 20])
    beta = torch.cat([torch.tensor([0.0, 1.0, 1e-7, 1 - 1e-7]), torch.rand(g.numel() - 4)])
    a, b = fi_backend.raw_gate_inputs(g.cuda(), beta.cuda())  # one Triton launch, fast-math exp/log
    alpha, beta_back = _flashinfer_gates(a.cpu(), b.cpu(), branch_free=True)
    assert ((alpha - g.exp()).abs() <= 4e-6 * g.exp()).all()
    assert ((beta_back - beta).abs() <= 4e-6 * beta).all()


@pytest.mark.gpu
def test_decode_matches_the_torch_reference_and_leaves_padding_alone(flashinfer_gpu):
    fi = _qwen_inputs("decode", N=8, seed=1, pad=2)
    ref = clone_inputs(fi)
    pool_before = fi["state_pool"].clone()
    o = gdn.decode(**fi, backend="flashinfer")
    o_ref = gdn.decode(**ref, backend="torch")
    real_slots, pad_rows = _slots(fi)
    assert o.dtype == torch.bfloat16 and o.shape == o_ref.shape
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(fi["state_pool"][real_slots], ref["state_pool"][real_slots]) <= BF16_BOUND
    assert (o[pad_rows] == 0).all()
    untouched = torch.ones(pool_before.shape[0], dtype=torch.bool, device="cuda")
    untouched[real_slots] = False
    assert torch.equal(fi["state_pool"][untouched], pool_before[untouched])


@pytest.mark.gpu
def test_verify_matches_the_torch_reference_and_never_writes_the_pool(flashinfer_gpu):
    fi = _qwen_inputs("verify", N=8, seed=2, D=4, pad=2)
    ref = clone_inputs(fi)
    pool_before = fi["state_pool"].clone()
    o = gdn.verify(**fi, backend="flashinfer")
    o_ref = gdn.verify(**ref, backend="torch")
    real = fi["state_indices"] >= 0
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(fi["intermediate_states"][real], ref["intermediate_states"][real]) <= BF16_BOUND
    assert torch.equal(fi["state_pool"], pool_before)
    assert (o.unflatten(0, (8, 4))[~real] == 0).all()
    assert fi["intermediate_states"][~real].isnan().all()  # padding rows untouched (make_inputs' NaN)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "seqlens, pad",
    [([100, 0, 37, 130], 1), ([300], 0)],
    ids=["varlen-with-padding-and-empty-sequence", "one-sequence-context-parallel"],
)
def test_prefill_matches_the_torch_reference(flashinfer_gpu, seqlens, pad):
    fi = _qwen_inputs("prefill", N=len(seqlens), seed=3, seqlens=seqlens, pad=pad)
    ref = clone_inputs(fi)
    pool_before = fi["state_pool"].clone()
    o = gdn.prefill(**fi, backend="flashinfer")
    o_ref = gdn.prefill(**ref, backend="torch")
    real_slots, pad_rows = _slots(fi)
    assert rel_rmse(o, o_ref) <= BF16_BOUND
    assert rel_rmse(fi["state_pool"][real_slots], ref["state_pool"][real_slots]) <= BF16_BOUND
    untouched = torch.ones(pool_before.shape[0], dtype=torch.bool, device="cuda")
    untouched[real_slots] = False
    assert torch.equal(fi["state_pool"][untouched], pool_before[untouched])
    cu = fi["cu_seqlens"].tolist()
    for n in pad_rows.tolist():
        assert (o[cu[n] : cu[n + 1]] == 0).all()
    for n, slot in enumerate(fi["state_indices"].tolist()):
        if slot >= 0 and cu[n] == cu[n + 1]:  # an empty sequence keeps its state
            assert torch.equal(fi["state_pool"][slot], pool_before[slot])


@pytest.mark.gpu
def test_decode_and_verify_through_the_ops_capture_in_a_cuda_graph(flashinfer_gpu):
    import stampgen.kernels.gdn.library  # noqa: F401

    decode_in = _qwen_inputs("decode", N=8, seed=4, pad=2)
    verify_in = _qwen_inputs("verify", N=8, seed=5, D=4, pad=2)
    decode_eager, verify_eager = clone_inputs(decode_in), clone_inputs(verify_in)
    names = ("q", "k", "v", "g", "beta", "state_pool", "state_indices")

    def step(d, vi):
        o_d = torch.ops.stampgen.gdn_decode(*(d[n] for n in names), backend="flashinfer")
        o_v = torch.ops.stampgen.gdn_verify(
            *(vi[n] for n in names), vi["intermediate_states"], backend="flashinfer"
        )
        return o_d, o_v

    step(clone_inputs(decode_in), clone_inputs(verify_in))  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        o_d, o_v = step(decode_in, verify_in)
    # capture records without running: the pool is unchanged until replay
    graph.replay()
    torch.cuda.synchronize()
    o_d_eager, o_v_eager = step(decode_eager, verify_eager)
    assert torch.equal(o_d, o_d_eager)
    assert torch.equal(decode_in["state_pool"], decode_eager["state_pool"])
    assert torch.equal(o_v, o_v_eager)
    real = verify_in["state_indices"] >= 0
    assert torch.equal(verify_in["intermediate_states"][real], verify_eager["intermediate_states"][real])


# ----------------------------------------------------------------------- ours vs fla vs FlashInfer


def _fla():
    os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")  # the Triton path, not optional backends
    return pytest.importorskip("fla.ops.gated_delta_rule")


def _ours(phase, inputs):
    """Our Triton backend, or None while the colleague's kernel for this phase is not there yet."""
    try:
        return getattr(gdn, phase)(**inputs, backend="triton")
    except (KernelUnavailableError, NotImplementedError, ImportError):
        return None


def _initial_states_kv(inputs):
    """[N, HV, K, V] fp32 (fla's default layout) for the real sequences."""
    idx = inputs["state_indices"].long()
    return inputs["state_pool"][idx[idx >= 0]].transpose(-1, -2).contiguous()


def _assert_agree(results, what):
    names = [n for n, x in results.items() if x is not None]
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            err = rel_rmse(results[a], results[b])
            assert err <= BF16_BOUND, f"{what}: {a} vs {b} rel RMSE {err:.2e}"


@pytest.mark.gpu
def test_decode_ours_fla_and_flashinfer_agree(flashinfer_gpu):
    fla_gdn = _fla()
    base = _qwen_inputs("decode", N=8, seed=6)  # no padding: fla has no slot indices
    ours_in, fi_in = clone_inputs(base), clone_inputs(base)
    o_fi = gdn.decode(**fi_in, backend="flashinfer")
    o_ours = _ours("decode", ours_in)
    o_fla, ht = fla_gdn.fused_recurrent_gated_delta_rule(
        base["q"][:, None],
        base["k"][:, None],
        base["v"][:, None],
        g=base["g"][:, None],
        beta=base["beta"][:, None],
        scale=128**-0.5,
        initial_state=_initial_states_kv(base),
        output_final_state=True,
    )
    slots = base["state_indices"].long()
    _assert_agree({"ours": o_ours, "fla": o_fla[:, 0], "flashinfer": o_fi}, "decode output")
    _assert_agree(
        {
            "ours": ours_in["state_pool"][slots] if o_ours is not None else None,
            "fla": ht.transpose(-1, -2),
            "flashinfer": fi_in["state_pool"][slots],
        },
        "decode state",
    )


@pytest.mark.gpu
def test_prefill_ours_fla_and_flashinfer_agree(flashinfer_gpu):
    fla_gdn = _fla()
    base = _qwen_inputs("prefill", N=3, seed=7, seqlens=[64, 1, 200])
    ours_in, fi_in = clone_inputs(base), clone_inputs(base)
    o_fi = gdn.prefill(**fi_in, backend="flashinfer")
    o_ours = _ours("prefill", ours_in)
    o_fla, ht = fla_gdn.chunk_gated_delta_rule(
        base["q"][None],
        base["k"][None],
        base["v"][None],
        base["g"][None],
        base["beta"][None],
        scale=128**-0.5,
        initial_state=_initial_states_kv(base),
        output_final_state=True,
        cu_seqlens=base["cu_seqlens"].long(),
    )
    slots = base["state_indices"].long()
    _assert_agree({"ours": o_ours, "fla": o_fla[0], "flashinfer": o_fi}, "prefill output")
    _assert_agree(
        {
            "ours": ours_in["state_pool"][slots] if o_ours is not None else None,
            "fla": ht.transpose(-1, -2),
            "flashinfer": fi_in["state_pool"][slots],
        },
        "prefill state",
    )
