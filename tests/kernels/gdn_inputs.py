"""Random, valid inputs for the linear-attention kernel tests, and the error measure they use.

Shared by every kernel test (GDN reference, Triton and FlashInfer backends; KDA and lightning reuse it
with their own gate shapes). ``make_inputs`` returns keyword arguments ready for the public
functions of ``kernels.gdn`` (everything but ``backend``):

    inputs = make_inputs("decode", N=4, H=2, HV=4, K=32, V=32, pad=1)
    o = gdn.decode(**inputs, backend="torch")

Random numbers are drawn on the CPU from one seeded generator and then moved to ``device``, so the same
seed gives the same values on every device. ``state_pool`` is updated in place by prefill and decode:
call ``clone_inputs`` before running a second backend on the same inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

PHASES = ("prefill", "decode", "verify")


def make_inputs(
    phase: str,
    *,
    N: int,
    H: int,
    HV: int,
    K: int,
    V: int,
    seqlens: list[int] | None = None,
    D: int | None = None,
    slots: int | None = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    pad: int = 0,
    seed: int = 0,
    normalizer: float = 1.0,
) -> dict:
    """Keyword arguments for ``kernels.gdn.<phase>`` (minus ``backend``).

    phase: "prefill", "decode" or "verify".
    N: sequences; H / HV: q-k heads / v heads (HV a multiple of H); K / V: head dims.
    seqlens: prefill only, tokens per sequence (zeros allowed); default: random lengths in [1, 8].
    D: verify only, draft tokens per sequence (default 4).
    slots: rows of the state pool (default 2*N + 1, so some rows are never indexed).
    dtype: dtype of q, k, v (g, beta and the states are always fp32).
    pad: how many of the N sequences are padding (state index -1), at random positions.
    normalizer: g = logsigmoid(randn) / normalizer; 1 gives strong decay, 10 weak decay.

    q and k are L2-normalised per head (in fp32, then cast); beta = sigmoid(randn); the pool is
    random (never zeros, so unwritten or wrongly indexed rows show). Verify's ``intermediate_states``
    is filled with NaN so a test sees what the kernel left unwritten.
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    if not 0 <= pad <= N:
        raise ValueError(f"pad must be in [0, N], got {pad}")
    gen = torch.Generator().manual_seed(seed)
    slots = 2 * N + 1 if slots is None else slots
    if slots < N - pad:
        raise ValueError(f"slots={slots} is fewer than the {N - pad} non-padding sequences")

    if phase == "prefill":
        if seqlens is None:
            seqlens = torch.randint(1, 9, (N,), generator=gen).tolist()
        if len(seqlens) != N:
            raise ValueError(f"len(seqlens) must be N={N}, got {len(seqlens)}")
        T = sum(seqlens)
    elif phase == "decode":
        T = N
    else:
        D = 4 if D is None else D
        T = N * D

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float32)

    def l2norm(x):
        return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)

    q = l2norm(randn(T, H, K))
    k = l2norm(randn(T, H, K))
    v = randn(T, HV, V)
    g = F.logsigmoid(randn(T, HV)) / normalizer
    beta = torch.sigmoid(randn(T, HV))
    state_pool = randn(slots, HV, V, K)

    slot_of_seq = torch.randperm(slots, generator=gen)[:N]
    padded = torch.randperm(N, generator=gen)[:pad]
    slot_of_seq[padded] = -1

    inputs = dict(
        q=q.to(dtype),
        k=k.to(dtype),
        v=v.to(dtype),
        g=g,
        beta=beta,
        state_pool=state_pool,
        state_indices=slot_of_seq.to(torch.int32),
    )
    if phase == "prefill":
        cu = torch.zeros(N + 1, dtype=torch.int32)
        cu[1:] = torch.cumsum(torch.tensor(seqlens, dtype=torch.int64), 0).to(torch.int32)
        inputs["cu_seqlens"] = cu
    elif phase == "verify":
        inputs["intermediate_states"] = torch.full((N, D, HV, V, K), float("nan"))
    return {name: t.to(device) for name, t in inputs.items()}


def low_and_upcast(
    seqlens: list[int], *, dims: dict, seed: int, pad: int = 0, dtype: torch.dtype = torch.bfloat16,
    normalizer: float = 1.0, device: str = "cuda",
) -> tuple[dict, dict]:  # fmt: skip
    """Prefill inputs with q, k, v in ``dtype`` (16-bit), and the same values upcast to fp32 for the
    reference (``make_inputs``'s other arguments)."""
    fp32 = make_inputs(
        "prefill", N=len(seqlens), seqlens=seqlens, **dims, device=device, seed=seed, pad=pad,
        normalizer=normalizer,
    )  # fmt: skip
    return rounded(fp32, dtype)


def rounded(fp32: dict, dtype: torch.dtype = torch.bfloat16) -> tuple[dict, dict]:
    """(``fp32``'s inputs with q, k, v rounded to ``dtype``, the same rounded values upcast to fp32 for
    the reference); each a copy of its own."""
    low, upcast = clone_inputs(fp32), clone_inputs(fp32)
    for name in ("q", "k", "v"):
        low[name] = fp32[name].to(dtype)
        upcast[name] = low[name].float()
    return low, upcast


def clone_inputs(inputs: dict) -> dict:
    """A deep copy (tensors cloned), so two backends can each update their own state pool."""
    return {name: t.clone() if isinstance(t, torch.Tensor) else t for name, t in inputs.items()}


def run_both(op, phase: str, inputs: dict) -> tuple:
    """One phase of ``op`` (``kernels.gdn``, ``.kda``, ``.lightning``) on copies of ``inputs`` with the torch
    reference and with Triton: (inputs before, after the reference, after Triton, o_ref, o_triton)."""
    ref, tri = clone_inputs(inputs), clone_inputs(inputs)
    o_ref = getattr(op, phase)(**ref, backend="torch")
    o_tri = getattr(op, phase)(**tri, backend="triton")
    return inputs, ref, tri, o_ref, o_tri


def untouched_slots(inputs: dict) -> torch.Tensor:
    """The pool slots no sequence of ``inputs`` names (padding included): a kernel must leave them as they
    were."""
    pool, indices = inputs["state_pool"], inputs["state_indices"]
    mask = torch.ones(pool.shape[0], dtype=torch.bool, device=pool.device)
    mask[indices[indices >= 0].long()] = False
    return mask


def assert_verify_is_stepwise_decode(api, inputs: dict, D: int, bound: float, backend: str = "torch") -> None:
    """``api.verify`` on ``inputs`` (D draft tokens per sequence) equals ``api.decode`` applied token by
    token: the same outputs, and each draft token's intermediate state is the pool row decode leaves; the
    pool itself is never written. A gate or β that is not per token (lightning's ``g: [HV]``, its β
    None) goes to every decode call as it is."""
    N = inputs["state_indices"].shape[0]
    pool_before = inputs["state_pool"].clone()
    o = api.verify(**inputs, backend=backend)
    assert torch.equal(inputs["state_pool"], pool_before)
    stepped = pool_before.clone()
    real = inputs["state_indices"] >= 0
    slots = inputs["state_indices"][real].long()
    for d in range(D):
        tokens = torch.arange(N, device=o.device) * D + d
        per_token = [
            t[tokens] if t is not None and t.dim() >= 2 else t
            for t in (inputs[name] for name in ("q", "k", "v", "g", "beta"))
        ]
        o_step = api.decode(
            *per_token, state_pool=stepped, state_indices=inputs["state_indices"], backend=backend
        )
        assert rel_rmse(o[tokens], o_step) <= bound
        assert rel_rmse(inputs["intermediate_states"][real, d], stepped[slots]) <= bound


def padding_rows(inputs: dict) -> torch.Tensor:
    """The token rows of a prefill's padding sequences (index −1), as a bool mask over the tokens."""
    lengths = (inputs["cu_seqlens"][1:] - inputs["cu_seqlens"][:-1]).long()
    return torch.repeat_interleave(inputs["state_indices"] < 0, lengths)


def assert_padding_left_alone(before: dict, pool_after: torch.Tensor, o: torch.Tensor) -> None:
    """A prefill's padding sequences got zero output rows, and every slot no sequence names (padding's
    included) kept its bytes."""
    assert torch.all(o[padding_rows(before)] == 0)
    untouched = untouched_slots(before)
    assert torch.equal(pool_after[untouched], before["state_pool"][untouched])


def rel_rmse(x: torch.Tensor, ref: torch.Tensor) -> float:
    """‖x − ref‖ / ‖ref‖ in float64 (NaN anywhere gives NaN, which fails every ``<=`` bound).

    When ref is all zeros the absolute norm ‖x‖ is returned instead, so zeros match zeros exactly.
    """
    x64 = x.detach().to(device="cpu", dtype=torch.float64)
    ref64 = ref.detach().to(device="cpu", dtype=torch.float64)
    if x64.shape != ref64.shape:
        raise ValueError(f"shapes differ: {tuple(x64.shape)} vs {tuple(ref64.shape)}")
    err = torch.linalg.vector_norm(x64 - ref64).item()
    scale = torch.linalg.vector_norm(ref64).item()
    if torch.isnan(x64).any():
        return float("nan")
    return err / scale if scale > 0 else err


def capture_cuda_graph(fn):
    """Warm up ``fn`` on a side stream (compiles its kernels), then capture it into a CUDA graph.

    Returns (graph, the tensors the captured call returned); ``graph.replay()`` refills them.
    """
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def assert_prefill_replay_matches_eager(inputs: dict, fresh: dict) -> None:
    """Capture ``gdn.prefill(**inputs, backend="triton")`` in a CUDA graph, put ``fresh``'s q, k, v, g and
    beta into the captured buffers and the pool back as it was, replay: the replay's output and pool
    must equal an eager call's on the same values, bit for bit."""
    from stampgen.kernels import gdn

    pool0 = inputs["state_pool"].clone()
    graph, o_graph = capture_cuda_graph(lambda: gdn.prefill(**inputs, backend="triton"))
    for name in ("q", "k", "v", "g", "beta"):
        inputs[name].copy_(fresh[name])
    inputs["state_pool"].copy_(pool0)
    graph.replay()
    torch.cuda.synchronize()
    eager = clone_inputs(inputs)
    eager["state_pool"].copy_(pool0)
    o_eager = gdn.prefill(**eager, backend="triton")
    assert torch.equal(o_graph, o_eager)
    assert torch.equal(inputs["state_pool"], eager["state_pool"])


# The input families of the precision checks (benchmarks/gdn_precision.py, the GPU tests): harder than
# make_inputs' normal keys. "correlated": q, k, v uniform in [0, 1) (q and k then L2-normalised), so every
# key lies in one orthant and two keys have a cosine near 0.75: A = β (k_i·k_j) E is then far from small,
# and the powers of its diagonal blocks grow (up to ~10 at β ≈ 0.6) before they cancel in the inverse.
KEYS = ("correlated", "normal")
# "none": g = 0; "model": Qwen3-Next's gate g = −exp(A_log)·softplus(a + dt_bias) with A = exp(A_log)
# uniform in [1, 16], dt_bias the inverse softplus of a dt log-uniform in [1e-3, 0.1], a ~ N(0, 1):
# mostly weak decay (g ≈ −0.001 to −1); "strong": g uniform in [−6, −4].
GATES = ("none", "model", "strong")


def make_precision_inputs(
    *,
    keys: str,
    gate: str,
    N: int,
    L: int,
    H: int,
    HV: int,
    K: int,
    V: int,
    dtype: torch.dtype,
    initial: bool = False,
    device: str | torch.device = "cpu",
    seed: int = 0,
) -> dict:
    """``gdn.prefill``'s keyword arguments (minus ``backend`` and ``scale``) for N sequences of L tokens
    of one family (``KEYS`` × ``GATES``), β = sigmoid(uniform [0, 1)), one pool slot per sequence in order,
    zero initial states unless ``initial`` (then N(0, 1) ones)."""
    if keys not in KEYS or gate not in GATES:
        raise ValueError(f"keys must be one of {KEYS} and gate one of {GATES}, got {keys!r}, {gate!r}")
    gen = torch.Generator().manual_seed(seed)
    T = N * L
    draw = torch.rand if keys == "correlated" else torch.randn

    def l2norm(x):
        return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)

    q = l2norm(draw(T, H, K, generator=gen))
    k = l2norm(draw(T, H, K, generator=gen))
    v = draw(T, HV, V, generator=gen)
    beta = torch.sigmoid(torch.rand(T, HV, generator=gen))
    if gate == "none":
        g = torch.zeros(T, HV)
    elif gate == "model":
        a_log = torch.log(1 + 15 * torch.rand(HV, generator=gen))
        dt = torch.exp(math.log(1e-3) + math.log(100) * torch.rand(HV, generator=gen))
        dt_bias = dt + torch.log(-torch.expm1(-dt))  # softplus(dt_bias) = dt
        g = -torch.exp(a_log) * F.softplus(torch.randn(T, HV, generator=gen) + dt_bias)
    else:
        g = -4 - 2 * torch.rand(T, HV, generator=gen)
    pool = torch.randn(N, HV, V, K, generator=gen) if initial else torch.zeros(N, HV, V, K)
    inputs = dict(
        q=q.to(dtype),
        k=k.to(dtype),
        v=v.to(dtype),
        g=g,
        beta=beta,
        state_pool=pool,
        state_indices=torch.arange(N, dtype=torch.int32),
        cu_seqlens=torch.arange(0, T + 1, L, dtype=torch.int32),
    )
    return {name: t.to(device) for name, t in inputs.items()}
