"""Probe: how close our Triton GDN decode/verify come to the H200's copy bandwidth.

Run on a CUDA GPU from the repository root:  python3 benchmarks/gdn_recurrent_probe.py [--out DIR]

* copy bandwidth: a 2 GiB device-to-device ``copy_``, bytes read + written;
* decode at B = 1/64/256/1024 and verify at B = 64, D = 4 (Qwen3-Next: H=16, HV=32, K=V=128, bf16
  q/k/v, fp32 state), for the automatic tile choice and a few explicit (BV, num_warps) variants;
* each timing replays a CUDA graph that calls the kernel once per state pool over ``ROTATE`` distinct
  pools, so the state comes from HBM rather than L2; the time per call is the median replay / ROTATE;
* every variant's output and states are checked against the automatic choice first.

Bytes counted per call: decode = state read + write + q, k, v, o, g, beta, index; verify = one state read
+ D state writes + the same io for N*D tokens.

Measured on an H200 (2026-11-29, triton 3.6, torch 2.11; eager copy_ 4.25 TB/s): decode B=1 3.2 µs,
B=64 68.7 µs (92.4% of copy bandwidth), B=256 270.8 µs (93.8%), B=1024 1.093 ms (93.0%); verify B=64
D=4 170 µs = 1.07x its bytes bound. A copy_ captured in a graph ran at only ~2.75 TB/s (a memcpy
node), hence the eager copy measurement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
import stampgen.kernels._validation as validation  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from benchmarks.timing import graph_ms  # noqa: E402
from stampgen.kernels.gdn import fused_recurrent  # noqa: E402

H, HV, K, V = 16, 32, 128, 128
QKV_DTYPE = torch.bfloat16
REPS = 20
DECODE_VARIANTS = [None, (4, 1), (8, 1), (16, 1), (8, 2), (32, 4)]
VERIFY_VARIANTS = [None, (2, 1), (4, 1), (8, 1), (4, 2), (32, 4)]


def copy_bandwidth() -> float:
    """Bytes read + written per second by an eager 2 GiB ``copy_`` (median of 20, after 200 warm-ups).

    Eager, not a graph: a memcpy node in a CUDA graph may run on the copy engines (~2.75 TB/s measured
    here), an eager device-to-device copy_ runs on the SMs like our kernels.
    """
    n = 2 * 1024**3 // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(200):
        dst.copy_(src)
    times = []
    for _ in range(REPS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * src.numel() * 4 / statistics.median(times)


def make_batch(B: int, T: int, seed: int):
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", generator=gen)

    q = torch.nn.functional.normalize(randn(T, H, K), dim=-1).to(QKV_DTYPE)
    k = torch.nn.functional.normalize(randn(T, H, K), dim=-1).to(QKV_DTYPE)
    v = randn(T, HV, V).to(QKV_DTYPE)
    g = torch.nn.functional.logsigmoid(randn(T, HV))
    beta = torch.sigmoid(randn(T, HV))
    indices = torch.randperm(B, device="cuda", generator=gen).to(torch.int32)
    return q, k, v, g, beta, indices


def io_bytes(T: int, B: int) -> int:
    e = QKV_DTYPE.itemsize
    return T * (2 * H * K * e + 2 * HV * V * e + 2 * HV * 4) + B * 4


def bench_decode(B: int, bandwidth: float, rows: list, log: dict) -> None:
    state_bytes = B * HV * V * K * 4
    rotate = max(2, min(64, (8 * 1024**3) // (2 * state_bytes) + 1))  # >= 100 MB of states: past L2
    pools = [torch.randn(B, HV, V, K, device="cuda") for _ in range(rotate)]
    q, k, v, g, beta, idx = make_batch(B, B, seed=B)
    scale = K**-0.5
    initial = pools[0].clone()  # the timing runs below update pools[0] in place
    ref_pool = initial.clone()
    o_ref = fused_recurrent.decode(q, k, v, g, beta, state_pool=ref_pool, state_indices=idx, scale=scale)
    bytes_per_call = 2 * state_bytes + io_bytes(B, B)
    for variant in DECODE_VARIANTS:
        BV, nw = variant or (None, None)
        check_pool = initial.clone()
        o = fused_recurrent.decode(
            q, k, v, g, beta, state_pool=check_pool, state_indices=idx, scale=scale, BV=BV, num_warps=nw
        )
        ok = torch.allclose(o, o_ref, rtol=1e-2, atol=1e-2) and torch.allclose(
            check_pool, ref_pool, rtol=1e-5, atol=1e-5
        )

        def run(BV=BV, nw=nw):
            for pool in pools:
                fused_recurrent.decode(
                    q, k, v, g, beta, state_pool=pool, state_indices=idx, scale=scale, BV=BV, num_warps=nw
                )

        seconds = graph_ms(run, calls=rotate, replays=REPS) / 1e3
        name = "auto" + str(fused_recurrent._decode_config(B * HV, V, K)) if variant is None else str(variant)
        pct = 100 * bytes_per_call / seconds / bandwidth
        rows.append(f"decode B={B:<5} {name:<16} {seconds * 1e6:9.1f} us  {pct:5.1f}% of copy BW  ok={ok}")
        log[f"decode_B{B}_{name}"] = dict(us=seconds * 1e6, pct_copy_bw=pct, ok=ok)


def bench_verify(B: int, D: int, bandwidth: float, rows: list, log: dict) -> None:
    state_bytes = B * HV * V * K * 4
    rotate = 8
    pools = [torch.randn(B, HV, V, K, device="cuda") for _ in range(rotate)]
    inter = [torch.empty(B, D, HV, V, K, device="cuda") for _ in range(rotate)]
    q, k, v, g, beta, idx = make_batch(B, B * D, seed=B + D)
    scale = K**-0.5
    args = dict(state_indices=idx, scale=scale)
    ref_inter = torch.full_like(inter[0], float("nan"))
    o_ref = fused_recurrent.verify(
        q, k, v, g, beta, state_pool=pools[0], intermediate_states=ref_inter, **args
    )
    bytes_per_call = (1 + D) * state_bytes + io_bytes(B * D, B)
    for variant in VERIFY_VARIANTS:
        BV, nw = variant or (None, None)
        check = torch.full_like(inter[0], float("nan"))
        o = fused_recurrent.verify(
            q, k, v, g, beta, state_pool=pools[0], intermediate_states=check, BV=BV, num_warps=nw, **args
        )
        ok = torch.allclose(o, o_ref, rtol=1e-2, atol=1e-2) and torch.allclose(
            check, ref_inter, rtol=1e-5, atol=1e-5
        )

        def run(BV=BV, nw=nw):
            for pool, buf in zip(pools, inter, strict=True):
                fused_recurrent.verify(
                    q, k, v, g, beta, state_pool=pool, intermediate_states=buf, BV=BV, num_warps=nw, **args
                )

        seconds = graph_ms(run, calls=rotate, replays=REPS) / 1e3
        name = "auto" + str(fused_recurrent._verify_config(B * HV, V, K)) if variant is None else str(variant)
        pct = 100 * bytes_per_call / seconds / bandwidth
        bound_ratio = seconds / (bytes_per_call / bandwidth)
        rows.append(
            f"verify B={B} D={D} {name:<16} {seconds * 1e6:9.1f} us  {pct:5.1f}% of copy BW  "
            f"{bound_ratio:.2f}x bytes bound  ok={ok}"
        )
        log[f"verify_B{B}_D{D}_{name}"] = dict(us=seconds * 1e6, pct_copy_bw=pct, x_bound=bound_ratio, ok=ok)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="write a JSON log here")
    args = parser.parse_args()
    out_dir(parser, args.out, needs="a CUDA GPU")
    validation.CHECK_VALUES = False  # the kernels are called directly anyway; keep syncs out

    props = torch.cuda.get_device_properties(0)
    bandwidth = copy_bandwidth()
    rows = [f"{props.name}, {props.multi_processor_count} SMs; copy bandwidth {bandwidth / 1e12:.3f} TB/s"]
    log = {"device": props.name, "copy_bw_TBps": bandwidth / 1e12}
    for B in (1, 64, 256, 1024):
        bench_decode(B, bandwidth, rows, log)
        torch.cuda.empty_cache()
    bench_verify(64, 4, bandwidth, rows, log)
    again = copy_bandwidth()  # the clocks are warm by now; the rows above used the first reading
    rows.append(f"copy bandwidth measured again at the end: {again / 1e12:.3f} TB/s")
    log["copy_bw_again_TBps"] = again / 1e12
    if args.out:
        (args.out / "gdn_recurrent_probe.json").write_text(json.dumps(log, indent=2))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
