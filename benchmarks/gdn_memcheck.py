"""Small cases of every GDN, KDA and lightning kernel, to run under `compute-sanitizer --tool memcheck` on a GPU.

    compute-sanitizer --tool memcheck --error-exitcode 9 python3 benchmarks/gdn_memcheck.py [--op gdn|kda|lightning|all] [--rows A,B]

Covers our Triton prefill / decode / verify (on sm_90 the prefill's intra launch is the Gluon one;
``triton-intra``: the Triton one), the prefill with the Gluon state pass (``triton+gluon``, on sm_90;
``-pdl``: the state pass launched as the intra launch's programmatic dependent), the Triton passes'
state pass in Triton or in Gluon (``chunk_gluon_batch``; for bf16 batches on sm_90 the default is
``chunk_gluon_fused`` in its place, Tβ copied in: ``gluon-batch128`` runs the batch pass itself,
``gluon-fused-worker`` the fused pass making Tβ), the FlashInfer adapters (when flashinfer imports) and
one long sequence in windows (``gluon-windows``: the next window's intra launch on a second stream
beside the state pass; ``gluon-p-from-intra`` / ``gluon-windows-p``: P made by the intra launch; ``gluon-windows-p-heads``: its
programs a chunk's value heads together), with
padding slots, zero-length and one-token sequences, a sequence that is not a multiple of the chunk,
sequences long enough to be split into segments (context parallelism), GQA
heads and the Qwen3-Next head geometry. KDA and lightning (``--op``) run the same shapes through their
Triton prefill / decode / verify (and FlashInfer's KDA when it imports), with gates at both ends (per
channel ≈ 0 and ≈ −5 for KDA; strong and MiniMax decay for lightning). Each case also checks the result against the torch reference, so
a clean memcheck run is also a correct one. Not a test: it needs the GPU and the sanitizer.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import benchmarks.checkout  # noqa: E402, F401  (stampgen from this checkout if not installed)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "kernels"))

from gdn_inputs import clone_inputs, make_inputs, rel_rmse  # noqa: E402
from test_kda_kernels import kda_inputs  # noqa: E402
from test_lightning_kernels import lightning_inputs  # noqa: E402

from benchmarks.gdn_prefill_probe import with_config  # noqa: E402
from benchmarks.out_folder import require_gpu  # noqa: E402
from stampgen.kernels import gdn, kda, lightning  # noqa: E402
from stampgen.kernels._validation import KernelUnavailableError  # noqa: E402

# The Triton passes (no chunk_gluon in their place) with chunk_gluon_batch's state pass
_BATCH = dict(gluon_state=False, gluon_pdl=False, gluon_batch=True)
# One sequence in windows of two chunks and more (pinned: by default only a captured call has them)
_WINDOWS = dict(gluon_state=True, gluon_pdl=False, gluon_intra=True, gluon_window_first=2)
# Rows of the Triton prefill with launch options (``chunk.LaunchConfig`` fields): the Triton intra launch
# (the plain ``triton`` row takes the Gluon one on sm_90 with bf16), and ``chunk_gluon``'s state pass in
# place of the segment / carry / state passes.
CONFIG_ROWS = {
    "triton-intra": dict(gluon_intra=False),
    "triton+gluon": dict(gluon_state=True, gluon_pdl=False, gluon_intra=False),
    "triton+gluon-pdl": dict(gluon_state=True, gluon_pdl=True, gluon_intra=False),
    "gluon-intra+gluon-pdl": dict(gluon_state=True, gluon_pdl=True, gluon_intra=True),
    # the state pass of the Triton passes: Triton's, or chunk_gluon_batch's at V tiles of 64 (the
    # plain ``triton`` row takes it at 128 where V allows, on sm_90 with bf16)
    "triton-state": dict(_BATCH, gluon_batch=False),
    "gluon-batch64": dict(_BATCH, gluon_batch_block_v=64),
    # chunk_gluon_batch's pass at V tiles of 128 itself, not chunk_gluon_fused's in its place (the plain
    # ``triton`` row's default where bf16 and V a multiple of 128 allow it: Tβ from the intra launch)
    "gluon-batch128": dict(_BATCH, gluon_fused=False),
    # chunk_gluon_fused with Tβ made by its worker (the intra launch cut to the segment pass's chunks)
    "gluon-fused-worker": dict(_BATCH, gluon_intra=True, gluon_fused=True, gluon_fused_tbeta="worker"),
    # ... on two programs, each running many items one after another (one an SM runs one or a few here)
    "gluon-fused-worker-2": dict(
        _BATCH, gluon_intra=True, gluon_fused=True, gluon_fused_tbeta="worker", gluon_fused_programs=2
    ),
    # one sequence in windows of two chunks and more (one window where the call has several sequences)
    "gluon-windows": _WINDOWS,
    # P made by the Gluon intra launch and read by chunk_gluon, unwindowed (as its PDL dependent) and in windows
    "gluon-p-from-intra": dict(gluon_state=True, gluon_pdl=True, gluon_intra=True, gluon_p_from_intra=True),
    "gluon-windows-p": dict(_WINDOWS, gluon_p_from_intra=True),
    # ... with the intra launch's programs a chunk's value heads together (the default from 32k tokens)
    "gluon-windows-p-heads": dict(_WINDOWS, gluon_p_from_intra=True, gluon_intra_heads_inner=True),
}


def _prefill_with_config(row: str, **inputs):
    """The prefill of ``CONFIG_ROWS[row]``."""

    def run():
        return gdn.prefill(**inputs, backend="triton")

    return with_config(CONFIG_ROWS[row], run)


CASES = [
    # phase, shapes, extra
    ("prefill", dict(N=3, H=2, HV=4, K=64, V=64, seqlens=[64, 1, 600]), {}),  # 600: split in 3 segments
    ("prefill", dict(N=4, H=16, HV=32, K=128, V=128, seqlens=[0, 65, 130, 7], pad=1), {}),
    ("prefill", dict(N=3, H=16, HV=32, K=128, V=128, seqlens=[0, 700, 7]), {}),  # 700: 3 segments
    ("prefill", dict(N=1, H=2, HV=4, K=128, V=128, seqlens=[1000]), {}),  # one sequence: windows
    ("decode", dict(N=5, H=2, HV=4, K=64, V=64, pad=2), {}),
    ("decode", dict(N=8, H=16, HV=32, K=128, V=128, pad=1), {}),
    ("verify", dict(N=3, H=2, HV=4, K=64, V=64, D=4, pad=1), {}),
    ("verify", dict(N=4, H=16, HV=32, K=128, V=128, D=4, pad=1), {}),
]


def _check(label: str, out, ref) -> bool:
    torch.cuda.synchronize()
    err = rel_rmse(out.float(), ref.float())
    ok = bool(err <= 1e-2) and bool(torch.isfinite(out).all())
    print(f"{label} rel_rmse={err:.2e} {'ok' if ok else 'WRONG'}", flush=True)
    return ok


def run_gdn(rows: list[str] | None = None) -> int:
    """Every GDN case on every backend and row (``rows``: only those)."""
    backends = ["triton"] + (["flashinfer"] if "flashinfer" in gdn.available_backends() else [])
    if torch.cuda.get_device_capability() == (9, 0):
        backends += list(CONFIG_ROWS)
    if rows is not None:
        backends = [b for b in backends if b in rows]
    failures = 0
    for phase, shapes, _ in CASES:
        inputs = make_inputs(phase, dtype=torch.bfloat16, device="cuda", seed=7, **shapes)
        ref_inputs = clone_inputs(inputs)
        ref = getattr(gdn, phase)(**ref_inputs, backend="torch")
        for backend in backends:
            if backend == "flashinfer" and (shapes["K"] != 128 or shapes["V"] != 128):
                continue  # FlashInfer's GDN kernels are built for 128-wide heads only
            if backend in CONFIG_ROWS and phase != "prefill":
                continue  # launch options of the prefill only
            run = clone_inputs(inputs)
            if backend in CONFIG_ROWS:
                out = _prefill_with_config(backend, **run)
            else:
                out = getattr(gdn, phase)(**run, backend=backend)
            failures += not _check(f"gdn {phase:8s} {backend:10s} {shapes}", out, ref)
    return failures


# (module, input builder, gates at both ends of the op's range)
GATED_OPS = {
    "kda": (kda, kda_inputs, ("normal", "mixed")),
    "lightning": (lightning, lightning_inputs, ("minimax", "strong")),
}


def run_gated(op: str) -> int:
    module, build, gates = GATED_OPS[op]
    backends = [b for b in ("triton", "flashinfer") if b in module.available_backends()]
    failures = 0
    for phase, shapes, _ in CASES:
        for gate in gates:
            fp32 = build(phase, gate=gate, seed=7, device="cuda", **shapes)
            ref = getattr(module, phase)(**clone_inputs(fp32), backend="torch")
            plain = ["triton-plain"] if op == "lightning" and phase == "prefill" else []
            for backend in backends + plain:
                run = clone_inputs(fp32)
                for name in ("q", "k", "v"):
                    run[name] = run[name].to(torch.bfloat16)
                label = f"{op} {phase:8s} {backend:12s} {gate:7s} {shapes}"
                try:
                    if backend == "triton-plain":  # lightning's Triton output pass, not the Gluon one
                        from stampgen.kernels.lightning import chunk as lightning_chunk

                        T, HV, V = run["v"].shape
                        config = lightning_chunk.launch_config(T, HV, run["q"].shape[2], V)._replace(
                            gluon=False
                        )
                        del run["beta"]
                        out = lightning_chunk.prefill(**run, beta=None, scale=1.0, config=config)
                    else:
                        out = getattr(module, phase)(**run, backend=backend)
                except KernelUnavailableError as err:
                    if backend == "triton":
                        raise
                    # a peer's adapter refuses shapes or phases its kernel lacks (FlashInfer's KDA:
                    # K = V = 128 only, no prefill on SM90): nothing of ours to check there
                    print(f"{label} skipped: {err}")
                    continue
                failures += not _check(label, out, ref)
    return failures


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--op", choices=["gdn", "kda", "lightning", "all"], default="gdn")
    parser.add_argument(
        "--rows", help="GDN only: comma-separated backends and rows to run (default: all), e.g. gluon-windows"
    )
    args = parser.parse_args(argv)
    rows = args.rows.split(",") if args.rows else None
    unknown = sorted(set(rows or []) - {"triton", "flashinfer", *CONFIG_ROWS})
    if unknown:
        parser.error(
            f"unknown row(s) {', '.join(unknown)}; choose from triton, flashinfer, {', '.join(CONFIG_ROWS)}"
        )
    if rows is not None and args.op != "gdn":
        parser.error("--rows applies to --op gdn")
    require_gpu(parser)
    ops = ["gdn", *GATED_OPS] if args.op == "all" else [args.op]
    failures = sum(run_gdn(rows) if op == "gdn" else run_gated(op) for op in ops)
    print("memcheck cases done", "with failures" if failures else "clean")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
