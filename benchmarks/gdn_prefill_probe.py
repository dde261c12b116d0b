"""Time our Triton chunked GDN prefill (``kernels/gdn/chunk.py``) on a CUDA GPU, under CUDA graphs.

    python3 benchmarks/gdn_prefill_probe.py [--sweep | --variations JSON] [--cases A,B] [--against F,G] [--check fp32|default] [--out DIR]

Qwen3-Next shapes (H=16, HV=32, K=V=128), bf16 q/k/v, fp32 g/beta/state, an initial state read and the
final state written, on ``gdn_bench.py``'s inputs — the method of the peer baseline (``docs/kernels.md``) so the
numbers compare with the peers measured there (fla's Triton chunk path and FlashInfer on the same H200
kind). Each timing captures ``CALLS`` prefill calls in one CUDA graph after a warm-up, replays it, and
reports the median replay divided by ``CALLS``. ``--sweep`` also times every launch configuration in ``SWEEP`` (the V tile, warps
and pipeline stages of the state pass; warps of the intra-chunk launch) and prints the best per case.
``--against`` also times other copies of ``chunk.py`` (a branch's, written into the tree with ``git show``
so it travels to the device) at their own defaults on the same inputs: an A/B in one process. Only
``chunk.py`` is the copy's: the modules it imports are this tree's, so a branch that changes
``chunk_gluon_fused.py`` or ``chunk_intra_gluon.py`` is A/B'd with ``gdn_intra_probe.py --variants``.
Each configuration's output is checked against the fp32-input run (``--check default``: against this
checkout's default configuration's — run in two checkouts, neither's output is compared with the
other's — which skips compiling the fp32 kernels, a minute or two of a fresh machine,
where a change must leave the output as it was; the default's own row then repeats the run it is checked
against, so any difference there is said on stderr as a run that does not repeat: a race). The last
lines printed are a summary table; ``--out`` writes the raw records as JSON lines, each as soon as it
is measured, so a run cut short by a device call's time limit keeps what it measured.

What its variations measured on the H200 is summarised in benchmarks/RESULTS.md ("History"). A correct
configuration's output is within ~3.7e-3 rel RMSE of the fp32-input run; BV=32 at one stage once gave 0.89
(a Triton 3.6 sm_90 miscompile), which is why every record carries that error.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)
from benchmarks.code_copies import load_copy  # noqa: E402
from benchmarks.gdn_bench import HV, SCALE, V, make_set  # noqa: E402
from benchmarks.gdn_bench import rel as rel_rmse  # noqa: E402
from benchmarks.launch_overrides import parse_variations  # noqa: E402
from benchmarks.out_folder import out_dir  # noqa: E402
from benchmarks.timing import graph_ms  # noqa: E402
from stampgen.kernels.gdn import chunk  # noqa: E402

CASES = {  # name -> sequence lengths
    "T=4096": [4096],
    "16x2048": [2048] * 16,
    "T=65536": [65536],
    "T=16384": [16384],
    # batches of other shapes (no peer figures for them: their peer columns are nan)
    "4x8192": [8192] * 4,
    "2x4096": [4096] * 2,
    "8x4096": [4096] * 8,
    "64x512": [512] * 64,
    "16k+15x1k": [16384] + [1024] * 15,  # one long sequence among short ones: split into segments
}
# Peers on the H200, CUDA-graph ms (docs/kernels.md, "Peers on the H200").
FLA_MS = {"T=4096": 0.2531, "T=16384": 0.9670, "T=65536": 3.8833, "16x2048": 2.2223}
FLASHINFER_MS = {"T=4096": 0.1470, "T=16384": 0.4249, "T=65536": 1.5393, "16x2048": 0.4256}
CALLS = 5
REPLAYS = 20
# Variations of the default configuration: overrides of LaunchConfig fields, ``seg_scale`` multiplies
# the segment length, ``segments`` cuts the batch's chunks into that many segments (1: no split).
# BV=32 is in although Triton 3.6 on sm_90 miscompiles it at one stage (89 % rel RMSE, 2026-11-29):
# every configuration's output is checked against the fp32-input run.
SWEEP = [
    dict(segments=3),
    dict(segments=2),
    dict(segments=1),
    dict(block_v=32, segments=1),
    dict(state_stages=1),
    dict(state_stages=2),
    dict(intra_warps=8),
    dict(intra_maxnreg=168),
    dict(intra_warps=8, intra_maxnreg=128),
    dict(state_warps=8),
    dict(state_stages=3),
    dict(seg_scale=0.5),
    dict(seg_scale=2),
    dict(block_v=32),
    dict(block_v=128, state_warps=8),
    dict(carry_stages=2),
    dict(carry_warps=8),
]
# A configuration counts only if its output is this close to the fp32-input run (IEEE dots).
MAX_REL_VS_FP32 = 1e-2


def make_case(seqlens: list[int], seed: int = 0) -> dict:
    """One prefill input set of ``gdn_bench.py`` (the same distributions and shapes), as keyword
    arguments of ``chunk.prefill``."""
    cu = torch.zeros(len(seqlens) + 1, dtype=torch.int32, device="cuda")
    cu[1:] = torch.cumsum(torch.tensor(seqlens, device="cuda"), 0)
    inputs = make_set("prefill", 0, seed, seqlens=seqlens, cu_shared=cu)
    del inputs["seqlens"]
    return inputs | dict(scale=SCALE)


def calls_ms(fn) -> float:
    """Median ms of one ``fn()`` call, from replays of a CUDA graph holding CALLS calls."""

    def run_all():
        for _ in range(CALLS):
            fn()

    return graph_ms(run_all, calls=CALLS, replays=REPLAYS)


_MODULE_CONFIG = chunk.launch_config  # the module's own choice, before any pinning


# The keys a variation may take beside LaunchConfig's fields, which ``pinned`` turns into ``seg_chunks``
PINNED_EXTRA = {
    "seg_scale": (
        "a positive number",
        lambda x: isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0,
    ),
    "segments": ("a positive integer", lambda x: isinstance(x, int) and not isinstance(x, bool) and x > 0),
}


def pinned(variation: dict | None):
    """The launch_config to use for ``variation`` (None: the module's own choice)."""
    if not variation:
        return _MODULE_CONFIG
    variation = dict(variation)
    scale = variation.pop("seg_scale", 1)
    segments = variation.pop("segments", None)

    def config(num_tokens, *args, **kwargs):
        cfg = _MODULE_CONFIG(num_tokens, *args, **kwargs)._replace(**variation)
        if segments is not None:  # cut the whole batch's chunks into this many segments
            return cfg._replace(seg_chunks=math.ceil(math.ceil(num_tokens / chunk.CHUNK) / segments))
        return cfg._replace(seg_chunks=max(1, int(cfg.seg_chunks * scale)))

    return config


def with_config(variation: dict | None, fn):
    """Run ``fn`` with ``chunk.launch_config`` pinned to ``variation``."""
    default = chunk.launch_config
    chunk.launch_config = pinned(variation)
    try:
        return fn()
    finally:
        chunk.launch_config = default


def time_config(inputs: dict, variation: dict | None) -> dict:
    """Whole prefill and its launches alone, under ``variation``."""

    def timed():
        T, N = inputs["q"].shape[0], len(inputs["state_indices"])
        cfg = chunk.launch_config(T, N, HV, V, captured=True)  # as timed: in a CUDA graph
        run = dict(config=cfg._asdict(), ms=calls_ms(lambda: chunk.prefill(**inputs)))
        # The launches alone reach into chunk.py's private launchers: if their signatures moved on,
        # keep the total and say why the breakdown is missing.
        pool0 = inputs["state_pool"].clone()
        try:
            a = [inputs[n] for n in ("k", "g", "beta", "state_indices", "cu_seqlens")]
            # as the prefill launches it (no schedule before the Gluon state pass; before the fused state
            # pass whose worker makes Tβ only the chunks it copies in and the segment pass reads)
            schedule = not cfg.gluon_state
            q, k, v = (inputs[n] for n in ("q", "k", "v"))
            leave_last = chunk._fused_makes_last(chunk._fused_state(q, k, v, cfg), cfg)
            # P too where the prefill's intra launch makes it (before chunk_gluon only)
            p_of = chunk._p_of(q, k, v.shape[1], SCALE, cfg) if cfg.gluon_state else None
            run["intra_ms"] = calls_ms(
                lambda: chunk._launch_intra(
                    *a, cfg, schedule=schedule, fused_makes_last=leave_last, p_of=p_of
                )
            )
            tbeta, gates, schedule = chunk._launch_intra(*a, cfg)
            seg = (inputs["k"], gates, inputs["v"], tbeta, inputs["state_pool"], inputs["state_indices"])
            if cfg.gluon_state:  # one Gluon kernel after the intra launch: no segment pass to time
                run["segment_ms"] = float("nan")
            else:
                run["segment_ms"] = calls_ms(lambda: chunk._launch_segments(*seg, schedule, cfg))
        except (TypeError, ValueError) as err:
            run.setdefault("intra_ms", float("nan"))
            run.setdefault("segment_ms", float("nan"))
            run["launches_error"] = f"{type(err).__name__}: {err}"[:200]
        finally:
            inputs["state_pool"].copy_(pool0)
        return run

    return with_config(variation, timed)


def time_other(module, inputs: dict, pool0: torch.Tensor, o_ref: torch.Tensor, rel_key: str) -> dict:
    """Another copy's whole prefill at its own launch configuration (its launches may differ from ours,
    so only the total is timed), checked against the same run as ours (``rel_key`` names it)."""
    T, N = inputs["q"].shape[0], len(inputs["state_indices"])
    # as timed, in a CUDA graph (as ``time_config`` reports ours), where the copy knows of captured calls
    captured = {"captured": True} if "captured" in inspect.signature(module.launch_config).parameters else {}
    cfg = module.launch_config(T, N, HV, V, **captured)
    try:
        inputs["state_pool"].copy_(pool0)
        rel = rel_rmse(module.prefill(**inputs), o_ref)
        ms = calls_ms(lambda: module.prefill(**inputs))
    except Exception as err:
        return dict(error=f"{type(err).__name__}: {err}"[:300])
    finally:
        inputs["state_pool"].copy_(pool0)
    nan = float("nan")
    return {"config": cfg._asdict(), "ms": ms, "intra_ms": nan, "segment_ms": nan, rel_key: rel}


def _rel(record: dict) -> float:
    """A record's error against the run it was checked against (``--check``)."""
    return record.get("rel_vs_fp32", record.get("rel_vs_default", math.nan))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="store_true", help="time every configuration in SWEEP")
    parser.add_argument(
        "--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES)
    )
    parser.add_argument(
        "--variations",
        help='JSON list of LaunchConfig overrides to time instead of SWEEP, e.g. [{"intra_warps": 2}]; '
        "beside the fields, seg_scale (the segments' chunks scaled) and segments (the batch cut into so "
        "many segments)",
    )
    parser.add_argument(
        "--against",
        default="",
        help="comma-separated other copies of kernels/gdn/chunk.py (e.g. from `git show BRANCH:…`, placed "
        "in the tree so they travel to the device) to time at their own defaults on the same inputs",
    )
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder for probe.jsonl")
    parser.add_argument(
        "--check",
        choices=["fp32", "default"],
        default="fp32",
        help="what each configuration's output is checked against: the fp32-input run (its Triton kernels "
        "compile for fp32 first: a minute or two on a fresh machine) or the default configuration's run",
    )
    args = parser.parse_args()
    unknown = sorted(set(args.cases.split(",")) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(CASES)}")
    if args.variations is not None:
        try:  # checked before anything runs
            args.variations = parse_variations(args.variations, extra=PINNED_EXTRA)
        except ValueError as err:
            parser.error(f"--variations: {err}")
    others = {path: load_copy(parser, "--against", path) for path in args.against.split(",") if path}
    out_dir(parser, args.out, needs="a CUDA GPU (CUDA-graph timing)")
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}", flush=True)
    records = []
    # Emptied here; each row is appended and flushed as soon as it is measured.
    out_file = open(os.path.join(args.out, "probe.jsonl"), "w") if args.out else None

    def emit(run: dict, name: str, T: int) -> None:
        run.update(case=name, T=T)
        if "ms" in run:
            run["mtok_s"] = T / run["ms"] / 1e3
        print(json.dumps(run), flush=True)
        records.append(run)
        if out_file:
            out_file.write(json.dumps(run) + "\n")
            out_file.flush()

    for name in args.cases.split(","):
        seqlens = CASES[name]
        T = sum(seqlens)
        inputs = make_case(seqlens)
        pool0 = inputs["state_pool"].clone()
        # Every configuration's output is checked against the fp32-input run (IEEE fp32 dots), or with
        # ``--check default`` the default configuration's. Said on stderr: on a fresh machine the fp32
        # kernels' first compiles take a minute or two before any row.
        print(f"{name}: the {args.check} run to check against", file=sys.stderr, flush=True)
        if args.check == "fp32":
            fp32 = {**inputs, **{n: inputs[n].float() for n in ("q", "k", "v")}, "state_pool": pool0.clone()}
            o_ref = chunk.prefill(**fp32)
            del fp32
        else:
            o_ref = chunk.prefill(**inputs).clone()
        rel_key = f"rel_vs_{args.check}"
        sweep = args.variations if args.variations is not None else SWEEP if args.sweep else []
        for variation in [None] + sweep:
            try:
                inputs["state_pool"].copy_(pool0)
                o = with_config(variation, lambda inputs=inputs: chunk.prefill(**inputs))
                rel = rel_rmse(o, o_ref)
                inputs["state_pool"].copy_(pool0)
                run = time_config(inputs, variation)
                run.update({"variation": variation or "default", rel_key: rel})
                if variation is None and args.check == "default" and rel != 0:
                    # the same configuration twice on the same inputs: a difference is nondeterminism
                    # (a race between a kernel's threads, as a missing fence once gave: 1.5–2.9e-5)
                    run["repeatable"] = False
                    print(
                        f"{name}: the default's output differs from its own first run (rel {rel:.2e}): "
                        "not repeatable, a race?",
                        file=sys.stderr,
                        flush=True,
                    )
            except Exception as err:  # a configuration that does not compile or fit
                run = dict(variation=variation or "default", error=f"{type(err).__name__}: {err}"[:300])
            emit(run, name, T)
        for path, module in others.items():
            run = time_other(module, inputs, pool0, o_ref, rel_key)
            emit(run | dict(variation=f"against {path}"), name, T)
    if out_file:
        out_file.close()

    print(
        "\ncase      config (BV,warps,stages,intra_warps,seg)  ms   intra ms  seg ms  Mtok/s  fla Mtok/s  x fla  FI Mtok/s"
    )
    for name in args.cases.split(","):
        T = sum(CASES[name])
        timed = [r for r in records if r["case"] == name and "ms" in r]
        ok = [r for r in timed if _rel(r) <= MAX_REL_VS_FP32]
        rows = [("default", timed[0])] if timed else []
        if ok:
            rows.append(("best", min(ok, key=lambda r: r["ms"])))
        for label, r in rows:
            c = tuple(r["config"].values())
            fla_ms, fi_ms = FLA_MS.get(name, math.nan), FLASHINFER_MS.get(name, math.nan)
            fla = T / fla_ms / 1e3
            fi = T / fi_ms / 1e3
            print(
                f"{name:9s} {label:7s} {c!s:28s} {r['ms']:8.4f} {r['intra_ms']:8.4f} {r['segment_ms']:7.4f} "
                f"{r['mtok_s']:8.1f} "
                f"{fla:10.1f} {fla_ms / r['ms']:6.2f} {fi:9.1f}  rel {_rel(r):.2e}  {r['variation']}"
            )


if __name__ == "__main__":
    main()
