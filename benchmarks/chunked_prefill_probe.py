"""Time our Triton chunked KDA or lightning prefill (``kernels/{kda,lightning}/chunk.py``) on a CUDA GPU,
under CUDA graphs, at its default launch configuration and at variations of it.

    python3 benchmarks/chunked_prefill_probe.py --op kda|lightning [--variations JSON] [--cases A,B]
                                                [--per-kernel] [--out DIR]

The op's shapes in ``gdn_bench.py`` (KDA: Kimi-Linear's H = HV = 32, K = V = 128; lightning: MiniMax's
H = HV = 64), bf16 q/k/v, an initial state read and the final state written, on ``gdn_bench.py --op``'s
inputs, so the numbers compare with that harness's side-by-side rows (fla on the same H200 kind:
benchmarks/RESULTS.md). Each timing captures ``CALLS`` prefill calls in one CUDA graph and reports the
median replay divided by ``CALLS``. ``--variations`` is a JSON list of the op's ``chunk.LaunchConfig``
field overrides (``{"block_v": 32, "warps": 8}``; lightning also takes ``segments``: cut one sequence into
that many segments). Every record carries the output's and the final states' relative RMSE against the
torch reference on the same bf16 inputs upcast to fp32, so a fast wrong variant shows. ``--out`` writes
the records as JSON lines, each as soon as it is measured. ``--per-kernel`` adds each record's CUDA
time per kernel (torch.profiler over ``CALLS`` eager calls, µs a call): which launch the time goes to.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks import gdn_bench  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from benchmarks.timing import graph_ms  # noqa: E402
from stampgen.kernels.chunked.common import CHUNK_SIZE  # noqa: E402

CASES = {"T=4096": [4096], "T=16384": [16384], "16x2048": [2048] * 16}
CALLS = 5
OPS = ("kda", "lightning")


def make_case(seqlens: list[int]) -> dict:
    cu = torch.tensor([0, *torch.tensor(seqlens).cumsum(0).tolist()], dtype=torch.int32, device="cuda")
    s = gdn_bench.make_set("prefill", len(seqlens), 0, seqlens=seqlens, cu_shared=cu)
    s.pop("seqlens")
    return s


def default_config(op: str, chunk, inputs: dict):
    """The op's own launch configuration for these inputs (what ``chunk.prefill`` picks)."""
    if op == "lightning":
        return chunk.default_config(inputs["q"], inputs["k"], inputs["v"])
    _, HV, V = inputs["v"].shape
    return chunk.launch_config(len(inputs["state_indices"]), HV, V)


def config_for(op: str, chunk, inputs: dict, variation: dict):
    """The default configuration with the variation's overrides (lightning's ``segments``: the segment
    length that cuts one sequence into that many)."""
    overrides = dict(variation)
    segments = overrides.pop("segments", None)
    config = default_config(op, chunk, inputs)._replace(**overrides)
    if segments is not None:
        T = inputs["v"].shape[0]
        config = config._replace(seg_chunks=max(1, -(-T // CHUNK_SIZE // segments)))
    return config


def run(chunk, inputs: dict, config):
    s = gdn_bench.state_copy(inputs)
    o = chunk.prefill(**s, scale=gdn_bench.SCALE, config=config)
    return o, s["state_pool"]


def per_kernel_us(call) -> dict[str, float]:
    """CUDA time per kernel name of one ``call()``, µs, averaged over CALLS calls (after one warm call)."""
    call()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(CALLS):
            call()
        torch.cuda.synchronize()
    totals: dict[str, float] = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name] = totals.get(event.name, 0.0) + event.device_time / CALLS
    return {name: round(us, 1) for name, us in sorted(totals.items(), key=lambda item: -item[1])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=OPS, required=True)
    parser.add_argument("--variations", default="[]", help="JSON list of LaunchConfig overrides")
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--out", help="folder for <op>_probe.jsonl")
    parser.add_argument("--per-kernel", action="store_true", help="add CUDA time per kernel to each record")
    args = parser.parse_args()
    chunk = importlib.import_module(f"stampgen.kernels.{args.op}.chunk")
    try:
        variations = [{}] + list(json.loads(args.variations))
    except (json.JSONDecodeError, TypeError) as err:
        parser.error(f"--variations: not a JSON list of LaunchConfig overrides ({err})")
    fields = set(chunk.LaunchConfig._fields) | ({"segments"} if args.op == "lightning" else set())
    for variation in variations:
        unknown = sorted(set(variation) - fields) if isinstance(variation, dict) else ["(not an object)"]
        if unknown:
            parser.error(
                f"--variations: {', '.join(unknown)} in {variation!r}; fields: {', '.join(sorted(fields))}"
            )
        segments = variation.get("segments", 1)
        if isinstance(segments, bool) or not isinstance(segments, int) or segments < 1:
            parser.error(f"--variations: segments must be a positive whole number, got {segments!r}")
    unknown_cases = sorted(set(args.cases.split(",")) - set(CASES))
    if unknown_cases:
        parser.error(f"--cases: unknown {', '.join(unknown_cases)}; choose from {', '.join(CASES)}")
    # (once every other argument holds: no folder for a refused run)
    out_dir(parser, args.out, needs="a CUDA GPU")
    gdn_bench.configure(args.op)
    out = open(os.path.join(args.out, f"{args.op}_probe.jsonl"), "a") if args.out else None
    for name in args.cases.split(","):
        inputs = make_case(CASES[name])
        ref = gdn_bench.state_copy(inputs)
        for key in ("q", "k", "v"):
            ref[key] = ref[key].float()
        o_ref = gdn_bench.API.prefill(**ref, backend="torch")
        for variation in variations:
            config = config_for(args.op, chunk, inputs, variation)
            try:
                o, pool = run(chunk, inputs, config)
                record = dict(
                    case=name,
                    variation=variation,
                    config=config._asdict(),
                    ms=graph_ms(
                        lambda i=inputs, c=config: [run(chunk, i, c) for _ in range(CALLS)], calls=CALLS
                    ),
                    o_err=gdn_bench.rel(o.float(), o_ref.float()),
                    state_err=gdn_bench.rel(pool, ref["state_pool"]),
                )
                if args.per_kernel:
                    record["kernels_us"] = per_kernel_us(lambda i=inputs, c=config: run(chunk, i, c))
            except Exception as err:  # a variant that does not compile or launch is a result too
                record = dict(case=name, variation=variation, error=f"{type(err).__name__}: {err}"[:300])
            print(json.dumps(record), flush=True)
            if out:
                out.write(json.dumps(record) + "\n")
                out.flush()


if __name__ == "__main__":
    main()
