"""Our Triton chunked GDN prefill (``kernels/gdn/chunk.py`` and the launch modules it imports) against
the torch reference, on the CPU.

Without a GPU the kernels run under the Triton interpreter (root conftest), so inputs are fp32 or fp16
(bf16 arithmetic is wrong in the interpreter; bf16 is covered by ``test_gdn_chunk_gpu.py``). Every call
goes through the public ``kernels.gdn.prefill`` with ``backend="triton"``. The kernel's output and
scratch buffers are filled with NaN before each call, so an element the kernel forgets to write, or a
scratch element it reads without having written, shows up as NaN.
"""

import pytest
import torch
from gdn_inputs import clone_inputs, make_inputs, rel_rmse

from stampgen.kernels import gdn
from stampgen.kernels.gdn import chunk, chunk_common, chunk_intra, chunk_tma

FP32_BOUND = 1e-5
FP16_BOUND = 2e-3

# Around the 64-token chunk: empty, one token, one short of a chunk, exactly one, one over, two and a bit.
EDGE_LENGTHS = [0, 1, 63, 64, 65, 130]


@pytest.fixture(autouse=True)
def nan_filled_buffers(monkeypatch):
    def nan_empty(shape, dtype, device):
        garbage = float("nan") if dtype.is_floating_point else -7  # what a row never written would hold
        return torch.full(shape, garbage, dtype=dtype, device=device)

    monkeypatch.setattr(chunk_common, "_empty", nan_empty)


def _run_both(inputs):
    """(triton o, torch o, triton inputs, torch inputs); each backend updates its own copy of the pool."""
    ours, ref = clone_inputs(inputs), clone_inputs(inputs)
    o = gdn.prefill(**ours, backend="triton")
    o_ref = gdn.prefill(**ref, backend="torch")
    return o, o_ref, ours, ref


def _assert_matches(o, o_ref, ours, ref, bound):
    assert o.dtype == o_ref.dtype
    assert not torch.isnan(o).any(), "output has unwritten (NaN) elements"
    err_o = rel_rmse(o, o_ref)
    # Final states of the real sequences only (unreferenced rows would dilute the error).
    used = ref["state_indices"][ref["state_indices"] >= 0].long()
    err_s = rel_rmse(ours["state_pool"][used], ref["state_pool"][used])
    assert err_o <= bound, f"output rel RMSE {err_o:.3g} > {bound}"
    assert err_s <= bound, f"final state rel RMSE {err_s:.3g} > {bound}"


@pytest.mark.parametrize("cu_dtype", [torch.int32, torch.int64])
def test_varlen_batch_around_the_chunk_size_matches_the_reference(cu_dtype):
    inputs = make_inputs("prefill", N=6, H=2, HV=4, K=32, V=32, seqlens=EDGE_LENGTHS, seed=1)
    inputs["cu_seqlens"] = inputs["cu_seqlens"].to(cu_dtype)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_padding_sequences_get_zero_output_and_leave_the_pool_untouched():
    seqlens = [70, 5, 64, 0, 33, 129]
    inputs = make_inputs("prefill", N=6, H=2, HV=4, K=32, V=32, seqlens=seqlens, pad=3, seed=2)
    pool_before = inputs["state_pool"].clone()
    o, o_ref, ours, ref = _run_both(inputs)
    _assert_matches(o, o_ref, ours, ref, FP32_BOUND)

    cu = inputs["cu_seqlens"].tolist()
    for n, slot in enumerate(inputs["state_indices"].tolist()):
        if slot < 0:
            assert torch.equal(o[cu[n] : cu[n + 1]], torch.zeros_like(o[cu[n] : cu[n + 1]]))
    used = {s for s in inputs["state_indices"].tolist() if s >= 0}
    for slot in range(pool_before.shape[0]):
        if slot not in used:
            assert torch.equal(ours["state_pool"][slot], pool_before[slot]), (
                f"unreferenced slot {slot} changed"
            )


def test_zero_length_sequences_leave_their_slot_bit_identical():
    inputs = make_inputs("prefill", N=3, H=1, HV=2, K=16, V=16, seqlens=[0, 9, 0], seed=3)
    pool_before = inputs["state_pool"].clone()
    o, o_ref, ours, ref = _run_both(inputs)
    _assert_matches(o, o_ref, ours, ref, FP32_BOUND)
    for n in (0, 2):
        slot = inputs["state_indices"][n].item()
        assert torch.equal(ours["state_pool"][slot], pool_before[slot])


def test_a_batch_of_only_empty_sequences_changes_nothing():
    inputs = make_inputs("prefill", N=2, H=1, HV=2, K=16, V=16, seqlens=[0, 0], seed=4)
    pool_before = inputs["state_pool"].clone()
    o = gdn.prefill(**inputs, backend="triton")
    assert o.shape == (0, 2, 16)
    assert torch.equal(inputs["state_pool"], pool_before)


def test_many_short_sequences_find_their_chunks():
    # More sequences than the chunk table's first power of two, several sharing one 64-token span.
    seqlens = torch.randint(0, 40, (37,), generator=torch.Generator().manual_seed(5)).tolist()
    inputs = make_inputs("prefill", N=37, H=1, HV=1, K=16, V=16, seqlens=seqlens, pad=4, seed=5)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


@pytest.mark.parametrize("normalizer", [0.05, 10.0], ids=["strong-decay", "weak-decay"])
def test_strong_and_weak_decay_match_the_reference(normalizer):
    # normalizer 0.05: g down to about -100 per token, so exp(γ) underflows inside a chunk.
    inputs = make_inputs(
        "prefill", N=2, H=2, HV=4, K=32, V=32, seqlens=[100, 64], normalizer=normalizer, seed=6
    )
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_as_many_v_heads_as_qk_heads():
    inputs = make_inputs("prefill", N=2, H=3, HV=3, K=32, V=32, seqlens=[80, 17], seed=7)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_several_v_tiles_and_k_different_from_v():
    inputs = make_inputs("prefill", N=2, H=1, HV=2, K=32, V=96, seqlens=[70, 3], seed=8)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_head_dim_64():
    inputs = make_inputs("prefill", N=2, H=1, HV=2, K=64, V=64, seqlens=[150, 20], seed=9)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_head_dim_not_a_power_of_two():
    inputs = make_inputs("prefill", N=1, H=1, HV=2, K=24, V=40, seqlens=[90], seed=10)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_the_intra_launch_writes_the_ut_inverse_and_the_gate_sums():
    # The intra launch alone against torch's own inverse: per chunk and value head, Tβ = (I + A)^{-1} diag(β)
    # with A = strictly lower β_i (k_i·k_j) E_ij, and the gate sums (γ_i, γ_C − γ_i) the passes read;
    # columns past a partial chunk's end are zero. Checks the block inverse where the end-to-end tests
    # see only its effect. Weak decay (normalizer 20), so the blocks far below the diagonal matter: under
    # strong decay they fall below any tolerance, and a wrong merge of them would pass.
    inputs = make_inputs("prefill", N=3, H=1, HV=2, K=32, V=32, seqlens=[70, 64, 5], seed=21, normalizer=20)
    k, g, beta = (inputs[n].double() for n in ("k", "g", "beta"))
    cfg = chunk.launch_config(k.shape[0], 3, 2, 32)
    args = [inputs[n] for n in ("k", "g", "beta", "state_indices", "cu_seqlens")]
    tbeta, gates, _ = chunk._launch_intra(*args, cfg)
    bounds = inputs["cu_seqlens"].tolist()
    for bos, eos in zip(bounds[:-1], bounds[1:]):
        for start in range(bos, eos, chunk.CHUNK):
            rows = slice(start, min(start + chunk.CHUNK, eos))
            n = rows.stop - rows.start
            for hv in range(2):
                gam = torch.cumsum(g[rows, hv], 0)
                decay = torch.tril(torch.exp(gam[:, None] - gam[None, :]))
                kc, b = k[rows, 0], beta[rows, hv]
                a = torch.tril(b[:, None] * (kc @ kc.T) * decay, -1)
                t_beta = torch.linalg.inv(torch.eye(n, dtype=a.dtype) + a) * b[None, :]
                assert torch.allclose(tbeta[rows, hv, :n].double(), t_beta, rtol=1e-5, atol=1e-6)
                assert not tbeta[rows, hv, n:].any()
                assert torch.allclose(gates[0, hv, rows].double(), gam, rtol=1e-6, atol=1e-6)
                assert torch.allclose(gates[1, hv, rows].double(), gam[-1] - gam, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("HV", [3, 4])
def test_the_fused_pass_gate_sums_launch_writes_every_chunk_for_any_head_count(HV):
    # ``chunk_gluon_fused._gate_sums_kernel`` (run before the fused pass where its worker makes Tβ), one
    # program a chunk found from cu_seqlens, against fp64 sums per chunk: γ as the fp32 pair (hi, lo) and
    # γ_C − γ, for every token of every sequence (partial chunks, a padding sequence), with a head count
    # that is not a power of two as well; and the persistent pass's claim counter zeroed (the schedule it
    # writes too: test_the_intra_launch_writes_the_segment_schedule_the_passes_read).
    from stampgen.kernels.gdn import chunk_gluon_fused

    seqlens = [70, 300, 1, 64]
    inputs = make_inputs("prefill", N=4, H=1, HV=HV, K=16, V=16, seqlens=seqlens, seed=23, pad=1)
    g, cu_seqlens = inputs["g"], inputs["cu_seqlens"]
    T, N = g.shape[0], inputs["state_indices"].shape[0]
    cfg = chunk.launch_config(T, N, HV, 16)._replace(seg_chunks=2)
    args = [inputs[n] for n in ("k", "g", "beta", "state_indices", "cu_seqlens")]
    schedule = chunk._launch_intra(*args, cfg, schedule=False)[2]  # (allocated, left for this launch)
    # (its buffers are the prefill's, poisoned here: NaN sums and a counter of -7 unless written)
    sums, counter = chunk_gluon_fused.launch_gate_sums(g, cu_seqlens, schedule, N, cfg.seg_chunks)
    assert counter.tolist() == [0]
    bounds = inputs["cu_seqlens"].tolist()
    written = torch.zeros(T, dtype=torch.bool)
    for bos, eos in zip(bounds[:-1], bounds[1:]):
        for start in range(bos, eos, chunk.CHUNK):
            rows = slice(start, min(start + chunk.CHUNK, eos))
            written[rows] = True
            gam = torch.cumsum(g[rows].double(), 0).T  # [HV, rows]
            hi, lo, after = (sums[i, :, rows].double() for i in range(3))
            assert torch.equal(hi, gam.float().double())
            assert torch.allclose(hi + lo, gam, rtol=0, atol=1e-12)
            assert torch.allclose(after, gam[:, -1:] - gam, rtol=1e-6, atol=1e-6)
    assert written.all() and not sums.isnan().any()


def test_the_fused_pass_takes_the_gate_sums_exactly_where_its_worker_makes_tbeta():
    # launch_state refuses, before any launch, gate sums it would not read or their absence where its
    # worker would load them (chunk.prefill launches them where, and only where, the worker makes Tβ)
    from stampgen.kernels.gdn import chunk_gluon_fused

    worker = chunk.launch_config(16 * 2048, 16, 32, 128, interpret=False)
    intra = worker._replace(gluon_fused_tbeta="intra")
    x = torch.zeros(64, 1, 128)
    made = chunk_gluon_fused.GateSums(torch.zeros(3, 1, 64), torch.zeros(1, dtype=torch.int32))
    args = (x, x, x, x, x, x, x, x, x, x, None, None, 1.0)
    for config, given in ((worker, None), (intra, made)):
        with pytest.raises(ValueError, match="go with a worker that makes Tβ, and only there"):
            chunk_gluon_fused.launch_state(*args, config, given)


def test_a_pool_view_is_16_byte_addressable_only_where_every_row_is():
    # the fused pass's bulk L2 prefetch of a pool row (PREFETCH = tma_addressable(pool)) faults on an
    # address that is not a multiple of 16 bytes: a slot pitch of 2 mod 4 fp32 elements puts every odd
    # row 8 bytes off, as does a view starting 8 bytes into its storage; 4 mod 4 and a contiguous pool
    # keep every row aligned
    storage = torch.zeros(4 * (2 * 16 * 16 + 4))
    row = 2 * 16 * 16
    for pitch, offset, aligned in ((row, 0, True), (row + 4, 0, True), (row + 2, 0, False), (row, 2, False)):
        pool = storage[offset:].as_strided((3, 2, 16, 16), (pitch, 256, 16, 1))
        assert chunk.tma_addressable(pool) is aligned, (pitch, offset)


def test_fp16_inputs_match_the_reference_within_fp16_rounding():
    inputs = make_inputs("prefill", N=4, H=2, HV=4, K=32, V=32, seqlens=[1, 64, 130, 40], dtype=torch.float16)
    o, o_ref, ours, ref = _run_both(inputs)
    assert o.dtype == torch.float16
    _assert_matches(o, o_ref, ours, ref, FP16_BOUND)


def test_a_pool_view_with_a_slot_pitch_is_read_and_written_in_place():
    inputs = make_inputs("prefill", N=2, H=1, HV=2, K=16, V=16, seqlens=[65, 7], slots=5, seed=11)
    ref = clone_inputs(inputs)
    # The pool as one layer of a bigger [slots, layers, HV, V, K] buffer.
    big = torch.randn(5, 3, 2, 16, 16)
    big[:, 1] = inputs["state_pool"]
    other_layers = big[:, [0, 2]].clone()
    inputs["state_pool"] = big[:, 1]
    o = gdn.prefill(**inputs, backend="triton")
    o_ref = gdn.prefill(**ref, backend="torch")
    _assert_matches(o, o_ref, {"state_pool": big[:, 1]}, ref, FP32_BOUND)
    assert torch.equal(big[:, [0, 2]], other_layers)


# Context parallelism: a sequence longer than one segment is split, and each segment's initial state is
# carried through the (M, B) of the segments before it. The GPU default only splits long sequences;
# here the segment length is pinned small so every path runs on short inputs.
@pytest.fixture
def segments_of(monkeypatch):
    def pin(seg_chunks):
        default = chunk.launch_config
        monkeypatch.setattr(
            chunk, "launch_config", lambda *a, **kw: default(*a, **kw)._replace(seg_chunks=seg_chunks)
        )

    return pin


@pytest.mark.parametrize("seg_chunks", [1, 2])
def test_split_sequences_around_the_chunk_size_match_the_reference(segments_of, seg_chunks):
    segments_of(seg_chunks)
    inputs = make_inputs("prefill", N=6, H=2, HV=4, K=32, V=32, seqlens=EDGE_LENGTHS, seed=12)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


@pytest.mark.parametrize(
    "K,V", [(32, 32), (32, 96), (24, 40)], ids=["square", "k-less-than-v", "not-powers-of-two"]
)
def test_a_sequence_of_many_segments_with_padding_beside_it(segments_of, K, V):
    # 330 tokens = 6 chunks = 6 segments: the last segment carries the first one's state through four
    # (M, B) pairs. The padded and the short sequences share the launch.
    segments_of(1)
    inputs = make_inputs("prefill", N=4, H=1, HV=2, K=K, V=V, seqlens=[330, 200, 7, 129], pad=1, seed=13)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def test_split_sequences_under_strong_decay(segments_of):
    segments_of(1)
    inputs = make_inputs("prefill", N=2, H=1, HV=2, K=32, V=32, seqlens=[260, 70], normalizer=0.05, seed=14)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


@pytest.mark.parametrize("T", [256, 4096, 16384, 65536, 1 << 20])
def test_the_gpu_default_splits_one_long_sequence_to_fill_the_gpu_in_one_wave(T):
    # What launch_config promises, as properties rather than its numbers: segments of at least four
    # chunks; a single long sequence cut so the state pass fills the SMs at two programs each, in one
    # wave; its loads pipelined (two stages: two programs per SM still fit, gdn_kernel_resources.py).
    cfg = chunk.launch_config(T, 1, 32, 128, interpret=False)
    chunks = T // chunk.CHUNK
    segments = -(-chunks // cfg.seg_chunks)
    programs = segments * 32 * -(-128 // cfg.block_v)
    assert cfg.seg_chunks >= 4
    assert chunk_common._SM_COUNT_HINT < programs <= 2 * chunk_common._SM_COUNT_HINT or cfg.seg_chunks == 4
    assert cfg.state_stages == 2


@pytest.mark.parametrize(
    "seqlens,heads,gluon",
    [
        ([65536], 32, True),
        ([4096], 32, True),
        ([2048] * 16, 32, False),
        ([4096] * 2, 32, False),
        ([700] * 8, 4, True),
    ],
)
def test_the_gpu_default_takes_the_gluon_state_pass_where_its_programs_fit_at_once(seqlens, heads, gluon):
    # One program per (V tile of 32, value head, sequence), one per SM: where they number fewer than the
    # SMs they all run in one wave, unsplit; else the Triton passes, which split long sequences.
    cfg = chunk.launch_config(sum(seqlens), len(seqlens), heads, 128, interpret=False)
    assert cfg.gluon_state == gluon
    assert cfg.gluon_pdl == gluon  # the state pass as the intra launch's programmatic dependent
    assert cfg.gluon_intra  # the intra launch in Gluon, before either state pass (where it applies)
    # uncapped (four programs an SM): capped, the merged solve spills and its wgmma serialize
    assert cfg.gluon_intra_maxnreg is None
    # P made once a chunk by the intra launch where chunk_gluon reads it (its V-tile programs each made it)
    assert cfg.gluon_p_from_intra == gluon
    # the intra launch's programs a chunk's value heads together on a long sequence only (64k gained
    # from L2; 4k was slower, 16×2048 before the fused pass level)
    assert cfg.gluon_intra_heads_inner == (seqlens == [65536])
    assert cfg.gluon_batch == (not gluon)  # else the Triton passes, their state pass chunk_gluon_batch's
    assert not chunk.launch_config(sum(seqlens), len(seqlens), heads, 128, interpret=True).gluon_state


def test_a_batch_takes_the_gluon_batch_state_pass_only_where_it_applies(monkeypatch):
    # Launch 3 as prefill picks it for 16×2048: chunk_gluon_batch's where its ``supported`` holds at the
    # configuration's V tile, else the Triton pass (a CPU tensor, the option off, the interpreter).
    from stampgen.kernels.gdn import chunk_gluon_batch, chunk_state

    cfg = chunk.launch_config(16 * 2048, 16, 32, 128, interpret=False)
    x = torch.zeros(64, 1, 128)
    assert not chunk_gluon_batch.supported(x, x, x, cfg.gluon_batch_block_v)  # not on a CUDA GPU
    assert chunk._state_pass(x, x, x, cfg) is chunk_state._launch_state
    asked = []
    monkeypatch.setattr(chunk, "_INTERPRET", False)
    monkeypatch.setattr(
        chunk_gluon_batch, "supported", lambda q, k, v, block_v: asked.append(block_v) or block_v == 128
    )
    assert chunk._state_pass(x, x, x, cfg) is chunk_gluon_batch.launch_state
    assert chunk._state_pass(x, x, x, cfg._replace(gluon_batch_block_v=64)) is chunk_state._launch_state
    assert chunk._state_pass(x, x, x, cfg._replace(gluon_batch=False)) is chunk_state._launch_state
    assert asked == [128, 64]
    monkeypatch.setattr(chunk, "_INTERPRET", True)
    assert chunk._state_pass(x, x, x, cfg) is chunk_state._launch_state


def test_the_fused_state_pass_runs_only_where_asked_and_applicable(monkeypatch):
    # ``gluon_fused`` (the default for batches, Tβ made by its worker; not for one sequence, which
    # takes chunk_gluon) with the batch pass and the Gluon intra launch; with Tβ made by its worker the
    # intra launch writes only what the segment pass reads (its ``seg_chunks``)
    from stampgen.kernels.gdn import chunk_gluon_fused, chunk_intra, chunk_intra_gluon

    on = chunk.launch_config(16 * 2048, 16, 32, 128, interpret=False)
    assert on.gluon_fused and on.gluon_batch and on.gluon_fused_tbeta == "worker"
    one = chunk.launch_config(16384, 1, 32, 128, interpret=False)
    assert one.gluon_state and not one.gluon_fused
    x = torch.zeros(64, 1, 128)
    monkeypatch.setattr(chunk, "_INTERPRET", False)
    assert not chunk._fused_state(x, x, x, on)  # not on a CUDA GPU
    with pytest.raises(ValueError, match="gluon_fused_tbeta must be 'intra' or 'worker', not 'intr'"):
        chunk._fused_state(x, x, x, on._replace(gluon_fused_tbeta="intr"))
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(
            ValueError, match=f"gluon_fused_programs must be an int of at least 0, not {bad!r}"
        ):
            chunk._fused_state(x, x, x, on._replace(gluon_fused_programs=bad))
    monkeypatch.setattr(chunk_gluon_fused, "supported", lambda q, k, v: True)
    monkeypatch.setattr(chunk_intra_gluon, "supported", lambda k: True)
    assert chunk._fused_state(x, x, x, on)
    for off in (
        on._replace(gluon_fused=False),
        on._replace(gluon_batch=False),
        on._replace(gluon_intra=False),
    ):
        assert not chunk._fused_state(x, x, x, off)
    monkeypatch.setattr(chunk, "_INTERPRET", True)
    assert not chunk._fused_state(x, x, x, on)

    asked = []
    monkeypatch.setattr(chunk_intra, "_INTERPRET", False)

    class NoLaunch:  # the schedule's launch of the Triton kernel, not run here
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(chunk_intra, "_gdn_chunk_intra_kernel", NoLaunch())
    monkeypatch.setattr(
        chunk_intra_gluon,
        "launch",
        lambda *a, **kw: asked.append((kw["seg_chunks"], kw["fused_makes_last"], kw["maxnreg"])),
    )
    g, idx, cu = (
        torch.zeros(64, 2),
        torch.zeros(1, dtype=torch.int32),
        torch.tensor([0, 64], dtype=torch.int32),
    )
    for leave_last, cap in ((False, None), (True, 96), (False, 80)):
        config = on._replace(seg_chunks=7, gluon_intra_maxnreg=cap)
        chunk_intra._launch_intra(x, g, g, idx, cu, config, fused_makes_last=leave_last)
    # the config's register cap reaches the Gluon launch as it is (None: uncapped)
    assert asked == [(7, False, None), (7, True, 96), (7, False, 80)]
    # and the prefill asks for that only where the fused pass's worker makes Tβ, for the chunks it makes
    worker, intra = on, on._replace(gluon_fused_tbeta="intra")
    assert chunk._fused_makes_last(True, worker) is True and chunk._fused_makes_last(False, worker) is False
    assert chunk._fused_makes_last(True, intra) is False  # Tβ from the intra launch: every chunk written


def test_the_gpu_default_leaves_batches_of_short_sequences_whole():
    # 16×2048 (measured in benchmarks/RESULTS.md): 16 sequences already give 1024 programs.
    cfg = chunk.launch_config(16 * 2048, 16, 32, 128, interpret=False)
    assert cfg.seg_chunks >= 2048 // chunk.CHUNK


@pytest.mark.parametrize("seed", range(4))
def test_random_batches_of_split_and_unsplit_sequences(segments_of, seed):
    # Random lengths (zeros included), segment sizes and padding: every way a program can find its
    # sequence and segment, against the reference.
    gen = torch.Generator().manual_seed(100 + seed)
    N = int(torch.randint(1, 8, (1,), generator=gen))
    seqlens = torch.randint(0, 320, (N,), generator=gen).tolist()
    seqlens[int(torch.randint(0, N, (1,), generator=gen))] = 0 if N > 1 else seqlens[0]
    segments_of(int(torch.randint(1, 4, (1,), generator=gen)))
    pad = int(torch.randint(0, N, (1,), generator=gen)) if N > 1 else 0
    inputs = make_inputs("prefill", N=N, H=1, HV=2, K=16, V=32, seqlens=seqlens, pad=pad, seed=seed)
    _assert_matches(*_run_both(inputs), FP32_BOUND)


def _schedule_rows(seqlens, seg_chunks, non_last):
    """The segment schedule by plain counting: (n, j, bos, eos, segments of n, first non-last index)
    for every segment (or only the non-last ones) in order."""
    rows, bos, first = [], 0, 0
    for n, length in enumerate(seqlens):
        segments = -(-length // (chunk.CHUNK * seg_chunks))
        for j in range(max(segments - 1, 0) if non_last else segments):
            rows.append((n, j, bos, bos + length, segments, first))
        bos += length
        first += max(segments - 1, 0)
    return rows


@pytest.mark.parametrize(
    "seqlens, seg_chunks",
    [([70, 64, 5], 1), ([0, 300, 1, 129, 0], 2), ([600, 0, 7, 256], 4), ([0], 1), ([64 * 9], 4)],
)
@pytest.mark.parametrize("writer", ["triton-intra", "schedule-only", "gate-sums"])
def test_the_intra_launch_writes_the_segment_schedule_the_passes_read(
    seqlens, seg_chunks, writer, monkeypatch
):
    # The segment and state passes read where each of their programs works from this table instead of
    # scanning cu_seqlens: every row against a plain count, idle rows past the last segment marked
    # n >= N. Padding slots still get rows (the passes skip them by their slot). With the Gluon intra
    # launch (a GPU's; stood in for here, it writes no schedule) a launch of the Triton kernel that
    # writes the schedule alone comes first, or (before the fused pass whose worker makes Tβ) none, and
    # the gate sums launch writes it (``chunk_gluon_fused.launch_gate_sums``).
    from stampgen.kernels.gdn import chunk_gluon_fused, chunk_intra_gluon

    gluon_intra = writer != "triton-intra"
    gluon_launches = []
    monkeypatch.setattr(chunk_intra, "_gluon_intra", lambda k, config: gluon_intra)
    monkeypatch.setattr(chunk_intra_gluon, "launch", lambda *a, **kw: gluon_launches.append(a))
    N = len(seqlens)
    inputs = make_inputs("prefill", N=N, H=1, HV=2, K=16, V=16, seqlens=seqlens, seed=3)
    inputs["state_indices"][0] = -1
    cfg = chunk.launch_config(sum(seqlens), N, 2, 16)._replace(seg_chunks=seg_chunks)
    args = [inputs[n] for n in ("k", "g", "beta", "state_indices", "cu_seqlens")]
    schedule = chunk._launch_intra(*args, cfg, schedule=writer != "gate-sums")[2]
    if writer == "gate-sums":
        schedule.fill_(-7)  # (any row it leaves unwritten fails below)
        chunk_gluon_fused.launch_gate_sums(inputs["g"], inputs["cu_seqlens"], schedule, N, seg_chunks)
    assert len(gluon_launches) == gluon_intra
    assert schedule.shape[1] == sum(seqlens) // (chunk.CHUNK * seg_chunks) + N
    for table, non_last in enumerate((False, True)):
        expected = _schedule_rows(seqlens, seg_chunks, non_last)
        got = [tuple(row[:6]) for row in schedule[table].tolist()]
        assert got[: len(expected)] == expected
        assert all(row[0] >= N for row in got[len(expected) :])


def test_tensor_descriptor_and_pointer_tiles_give_the_same_prefill(monkeypatch):
    # The state pass loads a whole chunk's tiles through TMA descriptors where the shapes allow and
    # through pointers otherwise: both paths on the same inputs (split sequences, a partial last
    # chunk, padding) agree, and the descriptors were really taken.
    inputs = make_inputs("prefill", N=4, H=2, HV=4, K=32, V=32, seqlens=[300, 64, 0, 130], pad=2, seed=9)
    cfg = chunk.launch_config(494, 4, 4, 32)._replace(seg_chunks=2)
    monkeypatch.setattr(chunk, "launch_config", lambda *args, **kwargs: cfg)
    made = []
    real = chunk_tma.tile_descriptors

    def counting(*args):
        made.append(real(*args))
        return made[-1]

    monkeypatch.setattr(chunk_tma, "tile_descriptors", counting)
    via_tma = clone_inputs(inputs)
    o_tma = gdn.prefill(**via_tma, backend="triton")
    assert made and made[0] is not None
    monkeypatch.setattr(chunk_tma, "tile_descriptors", lambda *args: None)
    via_ptr = clone_inputs(inputs)
    o_ptr = gdn.prefill(**via_ptr, backend="triton")
    assert rel_rmse(o_tma, o_ptr) <= 1e-6
    assert rel_rmse(via_tma["state_pool"], via_ptr["state_pool"]) <= 1e-6


def test_tma_takes_only_views_whose_base_and_row_pitch_are_16_byte_aligned():
    # Both the Triton state pass's descriptors and the Gluon pass's supported() ask this one question.
    rows = torch.zeros(8, 64, dtype=torch.bfloat16)
    assert chunk.tma_addressable(rows)
    assert not chunk.tma_addressable(rows[:, 1:])  # base 2 bytes in
    assert not chunk.tma_addressable(torch.zeros(8, 60, dtype=torch.bfloat16)[:, :56])  # pitch 120 bytes


@pytest.mark.parametrize("first,growth", [(4, 1.5), (16, 1.5), (8, 2.0), (1, 1.0)])
def test_windows_tile_one_sequence_in_whole_chunks_each_no_shorter_than_half_the_last(first, growth):
    config = chunk.LaunchConfig(64, 4, 2, 4, 8, gluon_window_first=first, gluon_window_growth=growth)
    for num_tokens in [1, 63, 64, 65, 64 * first, 64 * first + 1, 4096, 16384 + 17, 65536]:
        bounds = chunk.windows(num_tokens, 1, config)
        assert bounds[0][0] == 0 and bounds[-1][1] == num_tokens
        assert all(b == a2 for (_, b), (a2, _) in zip(bounds, bounds[1:])), "windows not contiguous"
        assert all(b % chunk.CHUNK == 0 for _, b in bounds[:-1]), "a window ends inside a chunk"
        sizes = [-(-(b - a) // chunk.CHUNK) for a, b in bounds]
        if len(bounds) > 1:
            assert sizes[0] == first
            assert all(later * 2 >= earlier for earlier, later in zip(sizes, sizes[1:]))
        else:  # the first window is the whole sequence, or what is left after it joined it
            assert 2 * sizes[0] < 3 * first


def test_windows_are_one_unless_asked_for_and_the_call_is_one_sequence():
    asked = chunk.LaunchConfig(64, 4, 2, 4, 8, gluon_window_first=4)
    assert chunk.windows(65536, 1, chunk.LaunchConfig(64, 4, 2, 4, 8)) == [(0, 65536)]
    assert chunk.windows(65536, 2, asked) == [(0, 65536)]
    assert len(chunk.windows(65536, 1, asked)) > 1


@pytest.mark.parametrize(
    "seqlens,windowed",
    [([16384], True), ([65536], True), ([16383], False), ([4096], False), ([8192] * 2, False)],
)
def test_the_gpu_default_windows_one_long_sequence_on_the_gluon_state_pass(seqlens, windowed):
    # in a call captured into a CUDA graph; an eager one never (its windows' launches cost the host more
    # than they save on the GPU)
    eager = chunk.launch_config(sum(seqlens), len(seqlens), 32, 128, interpret=False)
    assert chunk.windows(sum(seqlens), len(seqlens), eager) == [(0, sum(seqlens))]
    cfg = chunk.launch_config(sum(seqlens), len(seqlens), 32, 128, interpret=False, captured=True)
    assert cfg._replace(gluon_window_first=0) == eager._replace(gluon_window_first=0), (
        "only the windows differ"
    )
    bounds = chunk.windows(sum(seqlens), len(seqlens), cfg)
    assert (len(bounds) > 1) == windowed
    assert not windowed or cfg.gluon_state, "windows are the Gluon state pass's"
