"""``LightningAttentionBackend`` against ``kernels.lightning`` and the rules.

Lightning takes its kernel from the model config, not from the linear-attention flags: the rules give it
no stamp to read (it is no guarded consumer) and only refuse draft trees. So the consumer binds one
``kernels.lightning`` backend for all three phases (our Triton kernels by default), and refuses at
construction one that has no kernel — FlashInfer above all, which has no lightning attention.
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from gdn_inputs import clone_inputs, rel_rmse
from test_lightning_kernels import lightning_inputs

import stampgen.generated.linear_attn as rules
from stampgen.kernels import lightning
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import PHASES, LightningAttentionBackend
from stampgen.kernels.runtime import attn_backend_wrapper
from tests.machines import CPU
from tests.rules_search import SERVER, launched_runner

ARCH = "BailingMoeV2_5ForCausalLM"
RULES_FILE = Path(__file__).resolve().parents[2] / "rules" / "linear_attn.rules"


def lightning_runner(server=SERVER, **flags):
    """A launched lightning runner on a CPU machine (launch refuses none of these settings)."""
    runner = launched_runner(ARCH, (CPU, None), server=server, **flags)
    assert runner is not None
    return runner


def test_the_lightning_consumer_reads_no_stamp():
    guards = [line for line in RULES_FILE.read_text().splitlines() if line.startswith("guard ")]
    assert guards and not any("LightningAttentionBackend" in line for line in guards)
    consumer = LightningAttentionBackend(lightning_runner())  # never stamped
    assert dict(consumer.kernel_backends) == dict.fromkeys(PHASES, "triton")


@pytest.mark.parametrize("backend", lightning.BACKENDS)
def test_every_lightning_backend_can_be_bound_for_every_phase(backend):
    consumer = LightningAttentionBackend(lightning_runner(), kernel_backend=backend)
    assert all((phase, consumer.kernel_backends[phase]) in lightning.KERNELS for phase in PHASES)


@pytest.mark.parametrize("backend", ["flashinfer", "cutedsl", "seg_la"])
def test_a_backend_without_lightning_kernels_is_refused_at_construction(backend):
    with pytest.raises(KernelUnavailableError, match=f"no '{backend}' kernel"):
        LightningAttentionBackend(lightning_runner(), kernel_backend=backend)


def test_flashinfer_linear_attn_flags_do_not_reach_the_lightning_consumer():
    # The operator's --linear-attn-*-backend flags choose GDN/KDA kernels; lightning's stay its own.
    consumer = attn_backend_wrapper(
        lightning_runner(linear_attn_backend="flashinfer", linear_attn_decode_backend="flashinfer")
    )
    assert isinstance(consumer, LightningAttentionBackend)
    assert dict(consumer.kernel_backends) == dict.fromkeys(PHASES, "triton")


def test_draft_trees_are_refused_by_the_rules():
    server = msgspec.structs.replace(SERVER, speculative_algorithm="eagle", speculative_topk=2)
    with pytest.raises(rules.RuleViolationError, match="topk 1"):
        LightningAttentionBackend(lightning_runner(server=server))


@pytest.mark.parametrize("phase", PHASES)
def test_the_consumer_runs_triton_like_the_torch_reference(phase):
    consumer = attn_backend_wrapper(lightning_runner())
    shape = dict(N=3, H=2, HV=2, K=16, V=16, pad=1, seed=40)
    shape.update(seqlens=[30, 2, 5]) if phase == "prefill" else shape.update(
        D=2 if phase == "verify" else None
    )
    inputs = lightning_inputs(phase, **shape)
    ref = clone_inputs(inputs)
    o = getattr(consumer, phase)(**inputs)
    o_ref = getattr(lightning, phase)(**ref, backend="torch")
    assert rel_rmse(o, o_ref) <= 1e-5
    assert rel_rmse(inputs["state_pool"], ref["state_pool"]) <= 1e-5
