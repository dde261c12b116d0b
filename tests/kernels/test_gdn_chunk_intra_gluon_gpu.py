"""The Gluon intra launch (``kernels/gdn/chunk_intra_gluon.py``, ``LaunchConfig.gluon_intra``) on an
sm_90 GPU: its Tβ and gate sums against the Triton intra launch's (the same math, so they agree to the
bf16 rounding of Tβ) and against torch's own inverse in fp64, on every edge the passes after it read:
partial last chunks, empty and one-token sequences, padding slots (nothing written), H < HV, K = 64.
The outputs start as NaN, so a row it should write and does not shows. Its use inside a whole prefill
(with the Gluon state pass, CUDA graphs included) is in ``test_gdn_chunk_gluon_gpu.py``.
"""

import pytest
import torch
from gdn_inputs import make_inputs, rel_rmse

from stampgen.kernels.gdn import chunk, chunk_intra

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0),
        reason="the Gluon intra launch is written for sm_90 (H100 / H200)",
    ),
]

SAME_MATH_BOUND = 1e-3  # Tβ against the Triton launch's (both rounded to bf16)
EXACT_BOUND = 5e-3  # Tβ against the fp64 inverse (bf16 storage alone costs ~1.3–1.8e-3)

CASES = {
    "T4096": ([4096], 0, dict(H=16, HV=32, K=128, V=128)),
    "edges": ([63, 64, 65, 130, 0, 1], 0, dict(H=2, HV=4, K=128, V=32)),
    "padded": ([700, 7, 129, 300], 1, dict(H=2, HV=4, K=128, V=32)),
    "K64": ([100, 37, 64], 0, dict(H=1, HV=2, K=64, V=64)),
}


def _launch_both(inputs):
    """(Triton Tβ, gates), (Gluon Tβ, gates) on the same bf16 keys."""
    from stampgen.kernels.gdn import chunk_intra_gluon

    k = inputs["k"].to(torch.bfloat16)
    args = (k, inputs["g"], inputs["beta"], inputs["state_indices"], inputs["cu_seqlens"])
    T, HV = inputs["g"].shape
    config = chunk.launch_config(T, inputs["state_indices"].shape[0], HV, inputs["v"].shape[2])
    tbeta_t, gates_t, schedule_t = chunk._launch_intra(*args, config._replace(gluon_intra=False))
    tbeta, gates = (x.fill_(float("nan")) for x in chunk_intra._intra_outputs(k, T, HV))
    assert chunk_intra_gluon.supported(k)
    chunk_intra_gluon.launch(*args, tbeta, gates)
    # as the Triton passes get it: the schedule from a launch of the Triton kernel that writes it alone
    _, _, schedule = chunk._launch_intra(*args, config._replace(gluon_intra=True))
    assert torch.equal(schedule[..., :6], schedule_t[..., :6])  # the six fields of a row (8 wide)
    return (tbeta_t, gates_t), (tbeta, gates)


def _exact_tbeta(k, g, beta):
    """Tβ = (I + A)^{-1} diag(β) of one chunk and value head, in fp64 (k: [n, K], g and β: [n])."""
    gam = torch.cumsum(g.double(), 0)
    decay = torch.tril(torch.exp(gam[:, None] - gam[None, :]))
    b = beta.double()
    a = torch.tril(b[:, None] * (k.double() @ k.double().T) * decay, -1)
    return torch.linalg.inv(torch.eye(len(g), dtype=torch.float64, device=k.device) + a) * b[None, :]


@pytest.mark.parametrize("case", CASES)
def test_gluon_intra_launch_matches_the_triton_launch_and_the_exact_inverse(case):
    seqlens, pad, dims = CASES[case]
    # weak decay (normalizer 20): the blocks far below the diagonal matter (see test_gdn_chunk.py)
    inputs = make_inputs(
        "prefill", N=len(seqlens), seqlens=seqlens, **dims, device="cuda", seed=31, pad=pad, normalizer=20
    )
    (tbeta_t, gates_t), (tbeta, gates) = _launch_both(inputs)
    H, HV = dims["H"], dims["HV"]
    k = inputs["k"].to(torch.bfloat16)
    cu = inputs["cu_seqlens"].tolist()
    rows = torch.cat(
        [
            torch.arange(cu[n], cu[n + 1])
            for n, slot in enumerate(inputs["state_indices"].tolist())
            if slot >= 0
        ]
    ).cuda()
    assert torch.isfinite(tbeta[rows].float()).all() and torch.isfinite(gates[:, :, rows]).all()
    assert rel_rmse(tbeta[rows], tbeta_t[rows]) <= SAME_MATH_BOUND
    torch.testing.assert_close(gates[:, :, rows], gates_t[:, :, rows], rtol=1e-6, atol=1e-6)
    for n, slot in enumerate(inputs["state_indices"].tolist()):
        if slot < 0:
            assert tbeta[cu[n] : cu[n + 1]].isnan().all(), f"padding sequence {n} got Tβ rows"
            continue
        for start in range(cu[n], cu[n + 1], chunk.CHUNK)[:4]:  # the first chunks of each sequence
            end = min(start + chunk.CHUNK, cu[n + 1])
            for hv in (0, HV - 1):
                exact = _exact_tbeta(
                    k[start:end, hv // (HV // H)], inputs["g"][start:end, hv], inputs["beta"][start:end, hv]
                )
                got = tbeta[start:end, hv, : end - start]
                assert rel_rmse(got, exact) <= EXACT_BOUND, (n, start, hv)
                assert not tbeta[start:end, hv, end - start :].any(), "columns past the chunk's end"


def test_gluon_intra_launch_before_the_fused_pass_writes_only_what_the_segment_pass_reads():
    # ``seg_chunks`` and ``fused_makes_last`` (before chunk_gluon_fused, whose worker makes the Tβ of a
    # sequence's last segment): the chunks of every segment of that many chunks but a sequence's last
    # get the same Tβ and gate sums as the whole launch writes; the last segments' chunks are left as
    # they were (NaN here)
    from stampgen.kernels.gdn import chunk_intra_gluon

    seqlens, seg = [700, 300, 1, 520, 64, 0], 4
    inputs = make_inputs(
        "prefill", N=len(seqlens), seqlens=seqlens, H=2, HV=4, K=128, V=32, device="cuda", seed=9
    )
    k = inputs["k"].to(torch.bfloat16)
    args = (k, inputs["g"], inputs["beta"], inputs["state_indices"], inputs["cu_seqlens"])
    T, HV = inputs["g"].shape
    whole = [x.fill_(float("nan")) for x in chunk_intra._intra_outputs(k, T, HV)]
    chunk_intra_gluon.launch(*args, *whole)
    part = [x.fill_(float("nan")) for x in chunk_intra._intra_outputs(k, T, HV)]
    chunk_intra_gluon.launch(*args, *part, seg_chunks=seg, fused_makes_last=True)
    cu = inputs["cu_seqlens"].tolist()
    read = torch.zeros(T, dtype=torch.bool, device="cuda")
    for n in range(len(seqlens)):
        chunks = -(-seqlens[n] // 64)
        last = (chunks - 1) // seg  # the sequence's last segment
        for j in range(chunks):
            if j // seg != last:
                read[cu[n] + j * 64 : min(cu[n] + (j + 1) * 64, cu[n + 1])] = True
    assert read.any() and not read.all()
    assert torch.equal(part[0][read], whole[0][read])
    assert torch.equal(part[1][:, :, read], whole[1][:, :, read])
    assert part[0][~read].isnan().all() and part[1][:, :, ~read].isnan().all()


@pytest.mark.parametrize("store_p", [False, True])
@pytest.mark.parametrize("case", ["edges", "padded"])
def test_gluon_intra_launch_in_heads_inner_order_writes_what_the_default_order_does(case, store_p):
    # ``heads_inner`` (``LaunchConfig.gluon_intra_heads_inner``) only renumbers the programs: every
    # output (Tβ, gate sums, P) bit for bit the default order's, padding rows left as they were (NaN)
    from stampgen.kernels.gdn import chunk_intra_gluon

    seqlens, pad, dims = CASES[case]
    inputs = make_inputs("prefill", N=len(seqlens), seqlens=seqlens, **dims, device="cuda", seed=5, pad=pad)
    k = inputs["k"].to(torch.bfloat16)
    q = inputs["q"].to(torch.bfloat16)
    args = (k, inputs["g"], inputs["beta"], inputs["state_indices"], inputs["cu_seqlens"])
    T, HV = inputs["g"].shape
    outs = []
    for heads_inner in (False, True):
        tbeta, gates = (x.fill_(float("nan")) for x in chunk_intra._intra_outputs(k, T, HV))
        p = torch.full((T, HV, chunk.CHUNK), float("nan"), dtype=q.dtype, device="cuda")
        p_of = chunk_intra.PFromIntra(q, p, 0.125) if store_p else None
        chunk_intra_gluon.launch(*args, tbeta, gates, p_of=p_of, heads_inner=heads_inner)
        outs.append((tbeta, gates, p))
    for a, b in zip(*outs):
        assert torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num())
    assert outs[0][0].isnan().any() == bool(pad)  # the padding's rows unwritten in both
    assert not outs[0][0].isnan().all() and outs[0][2].isnan().all() != store_p
