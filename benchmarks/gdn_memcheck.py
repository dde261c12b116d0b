"""Small cases of every GDN kernel, to run under `compute-sanitizer --tool memcheck` on a GPU.

    compute-sanitizer --tool memcheck --error-exitcode 9 python3 benchmarks/gdn_memcheck.py

Covers our Triton prefill / decode / verify (on sm_90 the prefill's intra launch is the Gluon one;
``triton-intra``: the Triton one), the prefill with the Gluon state pass (``triton+gluon``, on sm_90;
``-pdl``: the state pass launched as the intra launch's programmatic dependent) and the FlashInfer
adapters (when flashinfer imports), with
padding slots, zero-length and one-token sequences, a sequence that is not a multiple of the chunk, sequences
long enough to be split into segments (context parallelism), GQA
heads and the Qwen3-Next head geometry. Each case also checks the result against the torch reference, so
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

from benchmarks.gdn_prefill_probe import with_config  # noqa: E402
from stampgen.kernels import gdn  # noqa: E402

# Rows of the Triton prefill with launch options (``chunk.LaunchConfig`` fields): the Triton intra launch
# (the plain ``triton`` row takes the Gluon one on sm_90 with bf16), and ``chunk_gluon``'s state pass in
# place of the segment / carry / state passes.
CONFIG_ROWS = {
    "triton-intra": dict(gluon_intra=False),
    "triton+gluon": dict(gluon_state=True, gluon_pdl=False, gluon_intra=False),
    "triton+gluon-pdl": dict(gluon_state=True, gluon_pdl=True, gluon_intra=False),
    "gluon-intra+gluon-pdl": dict(gluon_state=True, gluon_pdl=True, gluon_intra=True),
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
    ("decode", dict(N=5, H=2, HV=4, K=64, V=64, pad=2), {}),
    ("decode", dict(N=8, H=16, HV=32, K=128, V=128, pad=1), {}),
    ("verify", dict(N=3, H=2, HV=4, K=64, V=64, D=4, pad=1), {}),
    ("verify", dict(N=4, H=16, HV=32, K=128, V=128, D=4, pad=1), {}),
]


def main() -> int:
    if not torch.cuda.is_available():
        print("gdn_memcheck.py needs a CUDA GPU", file=sys.stderr)
        return 2
    backends = ["triton"] + (["flashinfer"] if "flashinfer" in gdn.available_backends() else [])
    if torch.cuda.get_device_capability() == (9, 0):
        backends += list(CONFIG_ROWS)
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
            torch.cuda.synchronize()
            err = rel_rmse(out.float(), ref.float())
            ok = err <= 1e-2
            failures += not ok
            print(
                f"{phase:8s} {backend:10s} {shapes} rel_rmse={err:.2e} {'ok' if ok else 'WRONG'}", flush=True
            )
    print("memcheck cases done", "with failures" if failures else "clean")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
