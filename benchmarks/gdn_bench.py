#!/usr/bin/env python3
"""Linear-attention kernels side by side on one GPU: ours (Triton), fla (Triton) and FlashInfer (CuTe-DSL),
for GDN, KDA and lightning attention (``--op``, default gdn).

Run on a CUDA GPU from the repository root (peers staged as in benchmarks/README.md):

    python3 benchmarks/gdn_bench.py [--op gdn|kda|lightning] [--out DIR] [--only decode,verify,prefill] [--impl ours,fla,fi]

Shapes per op (one tensor-parallel rank of one layer; bf16 q/k/v, fp32 state):

* ``gdn`` (Qwen3-Next: H=16, HV=32, K=V=128): decode B = 1, 8, 64, 256, 1024; verify D = 4 at B = 8, 64,
  256; prefill one sequence of 4096, 16384, 65536 tokens and varlen 16 × 2048;
* ``kda`` (Kimi-Linear: H=HV=32, K=V=128; ``g: [T, HV, K]`` = logsigmoid(randn + 3), q/k L2-normalised):
  decode B = 64, 256, 1024; verify D = 4 at B = 64; prefill 4096, 16384 and varlen 16 × 2048;
* ``lightning`` (MiniMax-Text-01: H=HV=64, K=V=128; ``g: [HV]`` = −(MiniMax slope of layer 0),
  q, k, v = 0.5·SiLU(3·randn), not normalised, no beta, scale 1): decode B = 64, 256; prefill 4096,
  16384 and varlen 16 × 2048 (no verify case).

Method (as for the peers in docs/kernels.md):

* ceiling: a 2 GiB fp32 ``copy_`` in the same run (median of ``triton.testing.do_bench``), bytes read +
  written; decode and verify report their share of it;
* timing: every call of a case goes into one CUDA graph (after a warm-up call on a side stream, which
  compiles and autotunes); the time is the median of ``REPS`` replays divided by the number of calls.
  Each call works on its own input set and state, ``nrot`` sets of at least 256 MB of state in total, so
  decode streams its state from HBM rather than from the 50 MB L2;
* bytes (the unavoidable traffic), with ``io`` = the bytes of one token's q, k, v, o and gates: decode
  2·B·HV·K·V·4 + B·io; verify B·HV·K·V·4 (pool read) + B·D·HV·K·V·4 (intermediate states) + B·D·io;
  prefill T·io + 2·N·HV·K·V·4, reported as Mtok/s. io = 2·H·K·2 + 2·HV·V·2 + gates, the gates being
  2·HV·2 (decode, verify) or 2·HV·4 (prefill) for GDN, HV·K·4 + HV·4 for KDA, none for lightning (its
  ``g`` is per head, not per token);
* correctness: every implementation runs once on the same input set; outputs and new states are compared
  with the first implementation that ran (relative RMSE ‖x − ref‖/‖ref‖).

Implementations (rows):
* ``ours``: ``kernels.<op>`` with backend="triton" (pool updated in place); skipped per phase when our
  kernel is not there yet (NotImplementedError / ImportError / KernelUnavailableError);
* ``fla``: fla-core 0.6's Triton kernels on states ``[N, HV, K, V]`` gathered (and transposed) from the
  pool beforehand, the new states written to a new tensor. GDN: ``fused_recurrent_gated_delta_rule``
  (decode), ``chunk_gated_delta_rule`` (prefill); KDA: ``fused_recurrent_kda``, ``chunk_kda``; lightning:
  ``fused_recurrent_simple_gla``, ``chunk_simple_gla`` with ``g_gamma`` = our ``g`` (the MiniMax slopes,
  not fla's ``chunk_lightning_attn``, which builds another decay). fla 0.6 has no verify with
  intermediate states for any of them;
* ``fi``: two rows (GDN and KDA; FlashInfer has no lightning attention) — ``fi`` is ``kernels.<op>``
  with backend="flashinfer" (our adapter: gate conversion, gather/scatter included), ``fi-kernel`` the
  bare FlashInfer call with its inputs prepared beforehand. GDN: decode
  ``gated_delta_rule_decode_pretranspose`` on the pool, verify ``gated_delta_rule_mtp``, prefill
  ``chunk_gated_delta_rule`` on packed states, use_cp="auto"; KDA: ``flashinfer.recurrent_kda`` on
  gathered states (decode, prefill; its verify is D calls, so ``fi-kernel`` has no verify row);
* ``torch`` (not by default; always in ``--dry-run``): ``kernels.<op>`` with backend="torch", the
  reference, made the first row so that the others are compared with it.
Peers that do not import are skipped. Cases still waiting when ``--budget`` seconds have passed are
skipped ("time budget"), and the output says how many. Writes ``OUT/<op>_bench.jsonl`` (one row per
measurement, plus env and ceiling rows; ``gdn_bench.jsonl`` for GDN), ``OUT/<op>_bench.log`` and
``OUT/<op>_bench.md``; prints the markdown table last.

``--dry-run`` checks the plumbing on the CPU at tiny shapes, fp32 inputs, with our Triton kernels in the
Triton interpreter (it sets ``TRITON_INTERPRET=1`` and restarts itself when that is not set) beside the
torch reference; peers are reported as missing.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
import stampgen.kernels._validation as validation  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from benchmarks.timing import graph_ms  # noqa: E402
from stampgen.kernels import gdn, kda, lightning  # noqa: E402
from stampgen.kernels._validation import KernelUnavailableError  # noqa: E402

DEVICE = "cuda"  # "cpu" under --dry-run
OURS_BACKEND = "triton"
IO_DTYPE = torch.bfloat16  # fp32 under --dry-run (bf16 is broken in the Triton interpreter)
# The module's globals describe the op being measured; they start as GDN's (gdn_prefill_probe.py imports
# them) and configure() switches them to another op's.
OP = "gdn"
API = gdn
H, HV, K, V = 16, 32, 128, 128
SCALE = K**-0.5
STATE_BYTES = HV * K * V * 4  # one request's fp32 state
DECODE_BS = (1, 8, 64, 256, 1024)
VERIFY_BS = (8, 64, 256)
VERIFY_D = 4
PREFILL_CASES = (
    ("T=4096", (4096,)),
    ("T=16384", (16384,)),
    ("T=65536", (65536,)),
    ("varlen 16x2048", (2048,) * 16),
)
REPS = 30
ROTATE_BYTES = 256e6
MAX_ROTATE = 128
PHASES = ("decode", "verify", "prefill")
IMPLS = ("ours", "fla", "fi", "torch")

# op -> what decides its cases: shapes (H, HV, K, V), scale, cases, the default --budget (seconds: one
# 10-minute device call with the first compiles), the peers it has, and the tiny dry-run shapes.
OPS = {
    "gdn": dict(
        title="GDN", api=gdn, shape=(16, 32, 128, 128), scale=None, decode_bs=DECODE_BS, verify_bs=VERIFY_BS,
        prefill=PREFILL_CASES, budget=330.0, peers=("fla", "fi"), dry_shape=(2, 4, 16, 16),
    ),
    "kda": dict(
        title="KDA", api=kda, shape=(32, 32, 128, 128), scale=None, decode_bs=(64, 256, 1024), verify_bs=(64,),
        prefill=(("T=4096", (4096,)), ("T=16384", (16384,)), ("varlen 16x2048", (2048,) * 16)),
        budget=400.0, peers=("fla", "fi"), dry_shape=(2, 2, 16, 16),
    ),
    "lightning": dict(
        title="Lightning", api=lightning, shape=(64, 64, 128, 128), scale=lightning.DEFAULT_SCALE,
        decode_bs=(64, 256), verify_bs=(),
        prefill=(("T=4096", (4096,)), ("T=16384", (16384,)), ("varlen 16x2048", (2048,) * 16)),
        budget=300.0, peers=("fla",), dry_shape=(2, 2, 16, 16),
    ),
}  # fmt: skip


def configure(op: str, dry_run: bool = False) -> None:
    """Point the module's globals at ``op`` (and at tiny CPU shapes under ``dry_run``)."""
    global OP, API, DEVICE, IO_DTYPE, H, HV, K, V, SCALE, STATE_BYTES, DECODE_BS, VERIFY_BS, PREFILL_CASES
    global ROTATE_BYTES
    spec = OPS[op]
    OP, API = op, spec["api"]
    H, HV, K, V = spec["dry_shape"] if dry_run else spec["shape"]
    SCALE = K**-0.5 if spec["scale"] is None else spec["scale"]
    STATE_BYTES = HV * K * V * 4
    DECODE_BS, VERIFY_BS, PREFILL_CASES = spec["decode_bs"], spec["verify_bs"], spec["prefill"]
    if dry_run:
        DEVICE, IO_DTYPE = "cpu", torch.float32
        DECODE_BS = (1, 4)
        VERIFY_BS = (2,) if spec["verify_bs"] else ()
        PREFILL_CASES = (("T=40", (40,)), ("varlen 3x8", (8, 0, 8)))
        ROTATE_BYTES = 3 * STATE_BYTES


# ------------------------------------------------------------------------------------------ recording
class Recorder:
    def __init__(self, out: Path, budget_s: float, name: str = "gdn_bench"):
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.name = name
        self.t0 = time.time()
        self.budget_s = budget_s
        self.rows: list[dict] = []
        self.jsonl = open(out / f"{name}.jsonl", "w")
        self.logf = open(out / f"{name}.log", "w")

    def log(self, *parts) -> None:
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.logf.write(line + "\n")
        self.logf.flush()

    def record(self, row: dict) -> None:
        row["t_elapsed_s"] = round(time.time() - self.t0, 1)
        self.rows.append(row)
        self.jsonl.write(json.dumps(row, default=str) + "\n")
        self.jsonl.flush()
        self.log("ROW", json.dumps(row, default=str))

    def left(self) -> float:
        return self.budget_s - (time.time() - self.t0)


# ------------------------------------------------------------------------------------------ timing
def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def do_bench_ms(fn, warmup=50, rep=300) -> float:
    if DEVICE == "cpu":  # --dry-run
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e3

    import triton

    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, quantiles=[0.5, 0.2, 0.8])[0]


def graph_time_ms(calls) -> float:
    """Median ms per call: all ``calls`` captured in one CUDA graph (``benchmarks/timing.py``)."""
    if DEVICE == "cpu":  # --dry-run: plumbing only
        t0 = time.perf_counter()
        for call in calls:
            call()
        return (time.perf_counter() - t0) * 1e3 / len(calls)

    def run_all():
        for call in calls:
            call()

    return graph_ms(run_all, calls=len(calls), replays=REPS)


def eager_time_ms(calls) -> float:
    """Median ms per call of ``calls`` launched from Python one after another (no graph)."""

    def run_all():
        for call in calls:
            call()

    return do_bench_ms(run_all, warmup=3, rep=200) / len(calls)


def copy_bandwidth(R: Recorder, case: str = "copy 2 GiB fp32") -> float:
    n_bytes = 2 * 2**30 if DEVICE == "cuda" else 2**24
    src = torch.randn(n_bytes // 4, device=DEVICE)
    dst = torch.empty_like(src)
    ms = do_bench_ms(lambda: dst.copy_(src))
    gbps = 2 * n_bytes / (ms * 1e-3) / 1e9
    src = dst = None
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
    R.record({"phase": "ceiling", "case": case, "impl": "torch.copy_", "ms": ms, "GBps": gbps})
    return gbps


# ------------------------------------------------------------------------------------------ inputs
def minimax_decay(heads: int, layer: int = 0, layers: int = 80, device=None) -> torch.Tensor:
    """g_h = −s_h, MiniMax's slope for a power-of-two head count (docs/kernels.md), fp32 [heads]; layer 0
    of MiniMax-Text-01's 80 (the strongest decay)."""
    factor = 1 - layer / (layers - 1) + 1e-5
    slopes = [2.0 ** (-8 * (h + 1) / heads) * factor for h in range(heads)]
    return -torch.tensor(slopes, device=device or DEVICE)


def make_set(phase: str, B: int, seed: int, seqlens=None, cu_shared=None) -> dict:
    """One input set in our API's format for the op: GDN and KDA q,k L2-normalised, log-space g
    ([T, HV] resp. [T, HV, K]), post-sigmoid beta; lightning q,k,v = 0.5·SiLU(3·randn), g = the MiniMax
    decay [HV], no beta. q/k/v in IO_DTYPE (bf16 on the GPU)."""
    gen = torch.Generator(device=DEVICE).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, device=DEVICE, generator=gen)

    if phase == "prefill":
        N, T = len(seqlens), sum(seqlens)
    else:
        N, T = B, B * (VERIFY_D if phase == "verify" else 1)
    if OP == "lightning":  # SiLU outputs, as MiniMax feeds the op (scaled to keep the sums moderate)
        s = {name: (0.5 * F.silu(3 * randn(T, heads, D))).to(IO_DTYPE) for name, heads, D in
             (("q", H, K), ("k", H, K), ("v", HV, V))}  # fmt: skip
        s |= {"g": minimax_decay(HV), "beta": None}
    else:
        s = {
            "q": F.normalize(randn(T, H, K), dim=-1).to(IO_DTYPE),
            "k": F.normalize(randn(T, H, K), dim=-1).to(IO_DTYPE),
            "v": randn(T, HV, V).to(IO_DTYPE),
            "g": F.logsigmoid(randn(*((T, HV) if OP == "gdn" else (T, HV, K))) + 3.0),
            "beta": torch.sigmoid(randn(T, HV)),
        }
    s["state_pool"] = randn(N, HV, V, K).mul_(0.1)
    s["state_indices"] = torch.randperm(N, device=DEVICE, generator=gen).to(torch.int32)
    if phase == "prefill":
        s["cu_seqlens"] = cu_shared  # one tensor object for every set (fla caches its chunk indices by it)
        s["seqlens"] = tuple(seqlens)
    if phase == "verify":
        s["intermediate_states"] = torch.empty(N, VERIFY_D, HV, V, K, device=DEVICE)
    return s


def state_copy(s: dict) -> dict:
    """The set with its mutable state buffers cloned (inputs shared)."""
    out = dict(s)
    for name in ("state_pool", "intermediate_states"):
        if name in out:
            out[name] = out[name].clone()
    return out


def token_io_bytes(phase: str) -> int:
    """Bytes of one token's q, k, v, o (bf16) and gates (module docstring)."""
    if OP == "gdn":
        gates = 2 * HV * (4 if phase == "prefill" else 2)
    elif OP == "kda":
        gates = HV * K * 4 + HV * 4
    else:
        gates = 0  # lightning: one g per head for the whole call
    return 2 * H * K * 2 + 2 * HV * V * 2 + gates


def case_bytes(phase: str, B: int, seqlens=None) -> int:
    io = token_io_bytes(phase)
    if phase == "decode":
        return 2 * B * STATE_BYTES + B * io
    if phase == "verify":
        T = B * VERIFY_D
        return B * STATE_BYTES + T * STATE_BYTES + T * io
    T, N = sum(seqlens), len(seqlens)
    return T * io + 2 * N * STATE_BYTES


def rel(x: torch.Tensor, ref: torch.Tensor) -> float:
    x, ref = x.double(), ref.double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


# ------------------------------------------------------------------------------------------ implementations
# Each maker(phase, set) returns call() -> (o [T,HV,V], states()) for one input set, where states() gives
# the new states [N,HV,V,K] (or verify's intermediate states) for the cross-check. The timed graph only
# runs call(): reading the states back (a gather of the pool rows) stays outside the timing.


POOL_ARGS = ("state_pool", "state_indices", "cu_seqlens", "intermediate_states")


def public_api_maker(backend):
    """A maker calling ``kernels.<op>.<phase>(..., backend=backend)`` (the op of ``configure``)."""

    def maker(phase, s):
        fn = getattr(API, phase)
        kwargs = {n: s[n] for n in POOL_ARGS if n in s}
        slots = s["state_indices"].long()

        def call():
            o = fn(s["q"], s["k"], s["v"], s["g"], s["beta"], **kwargs, backend=backend)
            return o, lambda: s["intermediate_states"] if phase == "verify" else s["state_pool"][slots]

        return call

    return maker


def fi_kernel_maker(phase, s):
    """The bare FlashInfer call of the op (GDN or KDA)."""
    return (fi_kda_kernel_maker if OP == "kda" else fi_gdn_kernel_maker)(phase, s)


def fi_kda_kernel_maker(phase, s):
    """``flashinfer.recurrent_kda`` on states gathered from the pool beforehand ([N, HV, V, K], its layout)."""
    from stampgen.kernels.kda.flashinfer import _recurrent_kda

    recurrent_kda = _recurrent_kda()
    if phase == "verify":
        raise NotImplementedError("recurrent_kda writes no intermediate states (the fi row runs D calls)")
    # on SM90 recurrent_kda takes bf16 gates and a bf16 state (kernels/kda/flashinfer.py)
    initial = s["state_pool"][s["state_indices"].long()].to(torch.bfloat16).contiguous()
    q, k, v = s["q"], s["k"], s["v"]
    g, beta = s["g"].to(torch.bfloat16), s["beta"].to(torch.bfloat16)
    if phase == "decode":
        q, k, v, g, beta, cu = q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], None
    else:
        q, k, v, g, beta = q[None], k[None], v[None], g[None], beta[None]
        cu = fla_varlen(s)[0]

    def call():
        o, final = recurrent_kda(
            q, k, v, g, beta, scale=SCALE, initial_state=initial, output_final_state=True,
            use_qk_l2norm_in_kernel=False, use_gate_in_kernel=False, cu_seqlens=cu,
        )  # fmt: skip
        return (o[:, 0] if phase == "decode" else o[0]), lambda: final

    return call


def fi_gdn_kernel_maker(phase, s):
    from flashinfer.gdn_decode import gated_delta_rule_decode_pretranspose, gated_delta_rule_mtp
    from flashinfer.gdn_prefill import chunk_gated_delta_rule

    from stampgen.kernels.gdn.flashinfer import raw_gate_inputs

    q, k, v = s["q"], s["k"], s["v"]
    zeros = torch.zeros(HV, device=DEVICE)
    if phase == "decode":
        B = q.shape[0]
        a, b = raw_gate_inputs(s["g"], s["beta"])
        a, b = a[:, None].contiguous(), b[:, None].contiguous()
        out = torch.empty(B, 1, HV, V, dtype=torch.bfloat16, device=DEVICE)
        slots = s["state_indices"].long()

        def call():
            gated_delta_rule_decode_pretranspose(
                q[:, None], k[:, None], v[:, None], None, zeros, a, zeros, b, scale=SCALE, output=out,
                use_qk_l2norm=False, initial_state=s["state_pool"], initial_state_indices=s["state_indices"],
                backend="flashinfer",
            )  # fmt: skip
            return out[:, 0], lambda: s["state_pool"][slots]

        return call
    if phase == "verify":
        B, D = s["intermediate_states"].shape[:2]
        a, b = raw_gate_inputs(s["g"], s["beta"])
        a, b = a.view(B, D, HV).to(torch.bfloat16), b.view(B, D, HV).to(torch.bfloat16)  # what MTP casts to
        out = torch.zeros(B, D, HV, V, dtype=torch.bfloat16, device=DEVICE)
        qv, kv, vv = q.view(B, D, H, K), k.view(B, D, H, K), v.view(B, D, HV, V)

        def call():
            gated_delta_rule_mtp(
                qv, kv, vv, initial_state=s["state_pool"], initial_state_indices=s["state_indices"],
                A_log=zeros, a=a, dt_bias=zeros, b=b, scale=SCALE, output=out,
                intermediate_states_buffer=s["intermediate_states"], disable_state_update=True,
                use_qk_l2norm=False,
            )  # fmt: skip
            return out.view(B * D, HV, V), lambda: s["intermediate_states"]

        return call
    # prefill: packed initial states (gathered beforehand), alpha = exp(g) fp32
    T = q.shape[0]
    initial = s["state_pool"][s["state_indices"].long()].contiguous()
    final = torch.empty_like(initial)
    alpha = torch.exp(s["g"])
    cu = s["cu_seqlens"].to(torch.int64)
    max_len = max(s["seqlens"])
    out = torch.empty(T, HV, V, dtype=torch.bfloat16, device=DEVICE)

    def call():
        chunk_gated_delta_rule(
            q, k, v, g=alpha, beta=s["beta"], scale=SCALE, initial_state=initial, output_final_state=True,
            cu_seqlens=cu, use_qk_l2norm_in_kernel=False, output=out, output_state=final, use_cp="auto",
            backend="flashinfer", max_seqlen=max_len,
        )  # fmt: skip
        return out, lambda: final

    return call


_FLA_CU: dict = {}


def fla_varlen(s) -> tuple:
    """(cu_seqlens int64, the same on the CPU): one pair per shared ``cu_seqlens`` tensor, so that fla's
    caches keyed by tensor identity (chunk indices) hit in every set and in the captured graph."""
    cu = s["cu_seqlens"]
    if _FLA_CU.get("src") is not cu:
        cu64 = cu.to(torch.int64)
        _FLA_CU.clear()
        _FLA_CU.update(src=cu, pair=(cu64, cu64.cpu()))
    return _FLA_CU["pair"]


def fla_maker(phase, s):
    """fla's kernels for the op: states gathered and transposed to fla's [N, HV, K, V] beforehand."""
    return {"gdn": fla_gdn_maker, "kda": fla_kda_maker, "lightning": fla_lightning_maker}[OP](phase, s)


def fla_kda_maker(phase, s):
    from fla.ops.kda import chunk_kda, fused_recurrent_kda

    h0 = s["state_pool"][s["state_indices"].long()].transpose(-1, -2).contiguous()
    q, k, v, g, beta = s["q"], s["k"], s["v"], s["g"], s["beta"]
    if phase == "decode":

        def call():
            o, ht = fused_recurrent_kda(
                q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], scale=SCALE,
                initial_state=h0, output_final_state=True,
            )  # fmt: skip
            return o[:, 0], lambda: ht.transpose(-1, -2)

        return call
    if phase == "verify":
        raise NotImplementedError("fla 0.6 has no KDA verify with intermediate states")
    kwargs = {}
    if len(s["seqlens"]) > 1:
        cu, cu_cpu = fla_varlen(s)
        kwargs = dict(cu_seqlens=cu, cu_seqlens_cpu=cu_cpu)

    def call():
        o, ht = chunk_kda(
            q[None], k[None], v[None], g[None], beta[None], scale=SCALE, initial_state=h0,
            output_final_state=True, **kwargs,
        )  # fmt: skip
        return o[0], lambda: ht.transpose(-1, -2)

    return call


def fla_lightning_maker(phase, s):
    """Simple GLA with ``g_gamma`` = our g (−slope per head), scale 1: lightning attention."""
    from fla.ops.simple_gla import chunk_simple_gla, fused_recurrent_simple_gla

    h0 = s["state_pool"][s["state_indices"].long()].transpose(-1, -2).contiguous()
    q, k, v, g = s["q"], s["k"], s["v"], s["g"]
    if phase == "decode":

        def call():
            o, ht = fused_recurrent_simple_gla(
                q[:, None], k[:, None], v[:, None], g_gamma=g, scale=SCALE, initial_state=h0,
                output_final_state=True,
            )  # fmt: skip
            return o[:, 0], lambda: ht.transpose(-1, -2)

        return call
    if phase == "verify":
        raise NotImplementedError("fla 0.6 has no simple-GLA verify with intermediate states")
    kwargs = {}
    if len(s["seqlens"]) > 1:
        cu, cu_cpu = fla_varlen(s)
        kwargs = dict(cu_seqlens=cu, cu_seqlens_cpu=cu_cpu)

    def call():
        o, ht = chunk_simple_gla(
            q[None], k[None], v[None], g_gamma=g, scale=SCALE, initial_state=h0, output_final_state=True,
            **kwargs,
        )  # fmt: skip
        return o[0], lambda: ht.transpose(-1, -2)

    return call


def fla_gdn_maker(phase, s):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

    slots = s["state_indices"].long()
    h0 = s["state_pool"][slots].transpose(-1, -2).contiguous()  # fla's [N, HV, K, V]
    q, k, v, g, beta = s["q"], s["k"], s["v"], s["g"], s["beta"]
    if phase == "decode":

        def call():
            o, ht = fused_recurrent_gated_delta_rule(
                q[:, None], k[:, None], v[:, None], g=g[:, None], beta=beta[:, None], scale=SCALE,
                initial_state=h0, output_final_state=True,
            )  # fmt: skip
            return o[:, 0], lambda: ht.transpose(-1, -2)

        return call
    if phase == "verify":
        raise NotImplementedError("fla 0.6 has no GDN verify with intermediate states")
    kwargs = {}
    if len(s["seqlens"]) > 1:
        from fla.ops.utils import prepare_chunk_indices

        cu = s["cu_seqlens"].to(torch.int64)
        cu_cpu = cu.cpu()
        kwargs = dict(
            cu_seqlens=cu, cu_seqlens_cpu=cu_cpu, chunk_indices=prepare_chunk_indices(cu, 64, cu_cpu)
        )

    def call():
        o, ht = chunk_gated_delta_rule(
            q[None], k[None], v[None], g[None], beta[None], scale=SCALE, initial_state=h0,
            output_final_state=True, **kwargs,
        )  # fmt: skip
        return o[0], lambda: ht.transpose(-1, -2)

    return call


# ------------------------------------------------------------------------------------------ availability
FLA_MODULES = {"gdn": "fla.ops.gated_delta_rule", "kda": "fla.ops.kda", "lightning": "fla.ops.simple_gla"}


def peer_status(impls) -> dict[str, str | None]:
    """impl -> None when usable, else the reason it is skipped."""
    import importlib

    status: dict[str, str | None] = {}
    for impl in ("ours", "torch"):
        if impl in impls:
            status[impl] = None
    if "fla" in impls:
        os.environ.setdefault("FLA_DISABLE_BACKEND_DISPATCH", "1")  # fla's own Triton path, pinned
        try:
            importlib.import_module(FLA_MODULES[OP])
            status["fla"] = None
        except Exception as err:
            status["fla"] = f"fla not importable: {type(err).__name__}: {err}"[:300]
    if "fi" in impls:
        if OP == "lightning":
            reason = "FlashInfer has no lightning attention"
        elif OP == "kda":
            from stampgen.kernels.kda import flashinfer as fi_kda

            try:
                fi_kda._recurrent_kda()
                reason = None if fi_kda.is_available() else "needs an SM90+ CUDA GPU"
            except KernelUnavailableError as err:
                reason = str(err)
        else:
            from stampgen.kernels.gdn import flashinfer as fi_backend

            reason = None
            if not fi_backend.is_available():
                reason = fi_backend._import_error() or "needs compute capability >= 9.0"
        status["fi"] = status["fi-kernel"] = (
            None if reason is None else f"flashinfer unavailable: {reason}"[:300]
        )
    return status


MAKERS = {
    "ours": lambda phase, s: public_api_maker(OURS_BACKEND)(phase, s),
    "torch": public_api_maker("torch"),
    "fla": fla_maker,
    "fi": public_api_maker("flashinfer"),
    "fi-kernel": fi_kernel_maker,
}


def label(impl: str) -> str:
    fla_kernels = {"gdn": "", "kda": ", chunk_kda / fused_recurrent_kda",
                   "lightning": ", simple_gla with g_gamma = -slope"}[OP]  # fmt: skip
    return {
        "ours": f"ours ({'Triton' if OURS_BACKEND == 'triton' else OURS_BACKEND}, kernels.{OP})",
        "torch": f"reference (torch, kernels.{OP})",
        "fla": f"fla 0.6 (Triton{fla_kernels})",
        "fi": f"FlashInfer via kernels.{OP} adapter",
        "fi-kernel": "FlashInfer kernel only",
    }[impl]


# ------------------------------------------------------------------------------------------ one case
def run_case(R, phase, case, B, seqlens, impls, status, copy_gbps):
    if seqlens is not None:
        cu_list = [0]
        for n in seqlens:
            cu_list.append(cu_list[-1] + n)
        cu = torch.tensor(cu_list, dtype=torch.int32, device=DEVICE)
        T, N = cu_list[-1], len(seqlens)
    else:
        cu, N = None, B
        T = B * (VERIFY_D if phase == "verify" else 1)
    nbytes = case_bytes(phase, B, seqlens)
    state_traffic = N * STATE_BYTES * (1 + (VERIFY_D if phase == "verify" else 1))
    nrot = int(max(1, min(MAX_ROTATE, math.ceil(ROTATE_BYTES / nbytes))))
    sets = [make_set(phase, B, seed=100 + i, seqlens=seqlens, cu_shared=cu) for i in range(nrot)]

    # Every implementation's check starts from the same pool: the timed replays below update the pools of
    # the sets in place, so the check copies this snapshot, taken before any of them.
    pristine = state_copy(sets[0])
    ref_name, ref_o, ref_state = None, None, None
    for impl in impls:
        if impl not in status:
            continue
        row = {"phase": phase, "case": case, "impl": impl, "label": label(impl), "B": B if seqlens is None else None,
               "T": T, "N": N, "D": VERIFY_D if phase == "verify" else None, "bytes": nbytes, "nrot": nrot}  # fmt: skip
        if status[impl] is not None:
            row["skipped"] = status[impl]
            R.record(row)
            continue
        if R.left() < 20:
            row["skipped"] = "time budget"
            R.record(row)
            continue
        try:
            # correctness on set 0 (own state copy); the first call compiles
            check_set = state_copy(pristine)
            t1 = time.time()
            o, states = MAKERS[impl](phase, check_set)()
            st = states()
            sync()
            row["first_call_s"] = round(time.time() - t1, 2)
            row["nonfinite_o"] = int((~torch.isfinite(o)).sum().item())
            row["nonfinite_state"] = int((~torch.isfinite(st)).sum().item())
            finite = row["nonfinite_o"] == 0 and row["nonfinite_state"] == 0
            if ref_name is None and finite:
                ref_name, ref_o, ref_state = impl, o.float().clone(), st.float().clone()
                row["ref"] = "itself"
            elif ref_name is not None:
                row["ref"] = ref_name
                row["rel_o"] = rel(o, ref_o)
                row["rel_state"] = rel(st, ref_state)
            del check_set, o, st, states
            calls = [MAKERS[impl](phase, s) for s in sets]
            try:
                ms = graph_time_ms(calls)
            except RuntimeError as err:  # torch.AcceleratorError is one
                if impl == "ours":
                    raise  # ours must capture: the serving engines replay prefill in graphs too
                # A peer whose Python wrapper syncs with the host (fla's varlen chunk indices) cannot
                # be captured: time it eagerly, launch gaps included, and say so in the row.
                sync()
                ms = eager_time_ms(calls)
                row["timing"] = f"eager (graph capture failed: {type(err).__name__})"
            row.update({"us": ms * 1e3, "GBps": nbytes / (ms * 1e-3) / 1e9})
            row["pct_copy"] = 100 * row["GBps"] / copy_gbps
            row["state_GBps"] = state_traffic / (ms * 1e-3) / 1e9
            if phase == "prefill":
                row["Mtok_s"] = T / (ms * 1e-3) / 1e6
        except (NotImplementedError, ImportError, KernelUnavailableError) as err:
            row["skipped"] = f"{type(err).__name__}: {err}"[:300]
            if impl == "ours":
                status["ours"] = row["skipped"]  # skip our kernel for the rest of this phase
        except Exception as err:
            row["error"] = f"{type(err).__name__}: {err}"[:400]
            R.log(traceback.format_exc())
            try:
                sync()
            except Exception:
                pass
        R.record(row)
    del sets
    if DEVICE == "cuda":
        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------ env + table
def env_info() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    import triton

    info = {
        "phase": "env",
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
    }
    if DEVICE == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
        info["cc"] = list(torch.cuda.get_device_capability(0))
        info["sms"] = torch.cuda.get_device_properties(0).multi_processor_count
    for dist in ("fla-core", "flashinfer-python", "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-cu13"):
        try:
            info[dist] = version(dist)
        except PackageNotFoundError:
            info[dist] = None
    try:
        info["nvidia_smi"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip()  # fmt: skip
    except Exception as err:
        info["nvidia_smi"] = repr(err)
    return info


def markdown_table(rows: list[dict], copy_gbps: float) -> str:
    lines = [
        f"copy bandwidth (2 GiB fp32 copy_, read+write): {copy_gbps:.0f} GB/s",
        "",
        "| phase | case | impl | time µs | GB/s | % copy | Mtok/s | rel diff o / state (vs) | note |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | --- | --- |",
    ]
    for r in rows:
        if r.get("phase") not in PHASES:
            continue

        def fmt(key, spec, r=r):
            return spec.format(r[key]) if r.get(key) is not None else ""

        if "rel_o" in r:
            check = f"{r['rel_o']:.1e} / {r['rel_state']:.1e} ({r['ref']})"
        else:
            check = "ref" if r.get("ref") == "itself" else ""
        if r.get("nonfinite_o") or r.get("nonfinite_state"):
            check += f" NON-FINITE o:{r['nonfinite_o']} state:{r['nonfinite_state']}"
        note = r.get("skipped") or r.get("error") or r.get("timing") or ""
        pct = fmt("pct_copy", "{:.1f}") if r["phase"] != "prefill" else fmt("pct_copy", "({:.1f})")
        lines.append(
            f"| {r['phase']} | {r['case']} | {r['impl']} | {fmt('us', '{:.1f}')} | {fmt('GBps', '{:.0f}')} | "
            f"{pct} | {fmt('Mtok_s', '{:.1f}')} | {check} | {note[:80]} |"
        )
    return "\n".join(lines)


def budget_note(rows: list[dict]) -> str:
    """One line naming the rows that the time budget cut ("" when none)."""
    cut = [f"{r['phase']} {r['case']} {r['impl']}" for r in rows if r.get("skipped") == "time budget"]
    if not cut:
        return ""
    return f"{len(cut)} rows cut by --budget (raise it or narrow --only / --impl): " + "; ".join(cut)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--op", default="gdn", choices=tuple(OPS), help="which op's kernels (default gdn)")
    ap.add_argument(
        "--out", default=os.environ.get("OUT", "out"), help="output folder (default $OUT or ./out)"
    )
    ap.add_argument("--only", default=",".join(PHASES), help="phases, comma-separated: decode,verify,prefill")
    ap.add_argument(
        "--impl",
        default=None,
        help="implementations, comma-separated: ours,fla,fi,torch (default: ours and the op's peers; "
        "--dry-run adds torch)",
    )
    ap.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds; later cases are skipped past it (default per op: "
        + ", ".join(f"{op} {spec['budget']:.0f}" for op, spec in OPS.items())
        + ")",
    )
    ap.add_argument(
        "--dry-run",
        action="store_true",
        help="check the plumbing on the CPU: tiny shapes, our Triton kernels in the interpreter and the "
        "torch reference",
    )
    args = ap.parse_args(argv)
    spec = OPS[args.op]
    phases = [p for p in args.only.split(",") if p]
    if args.impl is None:
        impls = ["ours", *spec["peers"]] + (["torch"] if args.dry_run else [])
    else:
        impls = [i for i in args.impl.split(",") if i]
    for p in phases:
        if p not in PHASES:
            ap.error(f"--only: unknown phase {p!r} (choose from {PHASES})")
    for i in impls:
        if i not in IMPLS:
            ap.error(f"--impl: unknown implementation {i!r} (choose from {IMPLS})")
    out_dir(ap, args.out, needs=None if args.dry_run else "a CUDA GPU (or --dry-run)")
    if args.dry_run and os.environ.get("TRITON_INTERPRET") != "1" and argv is None:
        # Triton reads the switch when it starts: run again with it set (our Triton kernels on the CPU)
        os.environ["TRITON_INTERPRET"] = "1"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    configure(args.op, dry_run=args.dry_run)
    budget = spec["budget"] if args.budget is None else args.budget

    validation.CHECK_VALUES = False  # no host sync per call; the inputs are valid by construction
    name = f"{args.op}_bench"
    R = Recorder(Path(args.out), budget, name)
    R.record(env_info() | {"op": args.op, "shape": dict(H=H, HV=HV, K=K, V=V), "budget_s": budget})
    copy_gbps = copy_bandwidth(R)
    order = [
        i
        for i in ("torch", "ours", "fi", "fi-kernel", "fla")
        if i in impls or (i == "fi-kernel" and "fi" in impls)
    ]
    for phase in phases:
        status = peer_status(impls)
        if phase == "decode":
            cases = [(f"B={B}", B, None) for B in DECODE_BS]
        elif phase == "verify":
            cases = [(f"B={B} D={VERIFY_D}", B, None) for B in VERIFY_BS]
        else:
            cases = [(name, None, lens) for name, lens in PREFILL_CASES]
        if not cases:
            R.log(f"--- {phase}: no {args.op} case")
        for case, B, seqlens in cases:
            R.log(f"--- {args.op} {phase} {case} ({R.left():.0f} s of budget left)")
            run_case(R, phase, case, B, seqlens, order, status, copy_gbps)
    try:
        copy_bandwidth(R, "copy 2 GiB fp32, again at the end")
    except Exception as err:
        R.log("end copy failed:", repr(err))
    table = markdown_table(R.rows, copy_gbps)
    note = budget_note(R.rows)
    if note:
        table += "\n\n" + note
    (R.out / f"{name}.md").write_text(table + "\n")
    gpu = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "CPU dry run"
    shape = f"H={H} HV={HV} K={K} V={V}"
    R.log(f"\n==== {spec['title']} kernels ({shape}), {gpu}, elapsed {time.time() - R.t0:.0f} s ====")
    R.log(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
