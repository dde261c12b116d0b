"""The demo on a CUDA GPU with the Triton kernels the runners' stamps choose, in bf16 (the `gpu` marker).

The same arguments as the H200 run recorded in benchmarks/RESULTS.md ("Runtime (tiny models, H200)"): the
Qwen3-Next target's GDN layers run the Triton prefill, decode and verify kernels its stamp names, every
pair reproduces the target's greedy output, and the self-speculating DSpark pair accepts every token.
"""

from __future__ import annotations

import io
import re

import pytest

from stampgen.kernels.runtime import demo

pytestmark = pytest.mark.gpu

CUDA_TRITON_BF16 = ["--device", "cuda", "--dtype", "bfloat16", "--backend", "triton"]
ACCEPT = re.compile(r"^(\w+) -> \w+: mean accept length: (\d+\.\d\d) \(draft tokens (\d+)\)$", re.M)


def test_on_cuda_the_demo_runs_the_stamped_triton_kernels_and_every_pair_stays_greedy():
    out = io.StringIO()
    assert demo.main(CUDA_TRITON_BF16, out=out) == 0
    text = out.getvalue()
    assert "GDNAttnBackend                prefill=triton decode=triton verify=triton" in text
    assert text.count("speculative output equals the target's greedy output") == len(demo.PAIRS)
    accept = {draft: (float(a), int(d)) for draft, a, d in ACCEPT.findall(text)}
    assert accept["DeepseekV4ForCausalLMDSpark"] == (5.0, 4)
    assert all(1.0 <= a <= d + 1 for a, d in accept.values())
