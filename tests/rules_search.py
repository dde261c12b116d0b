"""The search the rules-vs-kernels tests run (tests/test_rules_vs_kernels.py for GDN,
tests/kernels/test_kda_backend.py for KDA): the whole runtime path — launch normalisation, gates, stamp,
validation, the consumer's construction — over a slice of the config domain.

For a backend value under test the slice sets every backend flag unset, to that value, to Triton or to
FlashInfer. A stamp value is always copied from one of those flags or is a rules constant, so the slice
holds every way the rules can put a value into a phase.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from typing import Any

from stampgen.generated.linear_attn import LaunchFacts, LinearAttnKernelBackend, RuleViolationError
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import PHASES
from stampgen.kernels.runtime import (
    ARCHS,
    MambaConfig,
    ModelRunner,
    ProcessConfig,
    ServerConfig,
    attn_backend_wrapper,
    launch,
    runner_facts_for,
)

SERVER = ServerConfig(chunked_prefill_size=8192)
VALUES = tuple(member.value for member in LinearAttnKernelBackend)
PHASE_FLAG = {phase: f"linear_attn_{phase}_backend" for phase in PHASES}
Flags = tuple[tuple[str, str | None], ...]


def launched_runner(
    arch: str, machine: tuple[dict, str | None], server: ServerConfig = SERVER, **flags: Any
) -> ModelRunner | None:
    """A launched runner of ``arch`` on ``machine`` = (runner facts, --mamba-ssm-dtype) with these mamba
    flags and server settings; None when launch refuses them."""
    device, ssm_dtype = machine
    config = ProcessConfig(mamba=MambaConfig(ssm_dtype=ssm_dtype, **flags), server=server)
    try:
        launch(config, LaunchFacts(sm=device["sm"], cuda=device["cuda"], kimi_k3=arch == "KimiK3ForCausalLM"))
    except RuleViolationError:
        return None
    cls = ARCHS[arch]
    return ModelRunner(
        "target", model_cls=cls, runner_facts=runner_facts_for(cls, **device), process_config=config
    )


def built(runner: ModelRunner, validate: Callable[..., Any]):
    """(the stamp ``validate`` passes, as names; the consumer, or the KernelUnavailableError its
    construction raised); None if the rules refuse the runner."""
    try:
        consumer = attn_backend_wrapper(runner)
    except RuleViolationError:
        return None
    except KernelUnavailableError as err:
        consumer = err
    stamp = validate(
        runner.linear_attn_backends, server=runner.process_config.server, runner_facts=runner.runner_facts
    )
    return {phase: getattr(stamp, phase).value for phase in PHASES}, consumer


def flag_slice(value: str) -> Iterator[Flags]:
    """The search slice's flag settings for the backend ``value`` (hashable, for cached outcomes)."""
    choices = tuple(dict.fromkeys((None, value, "triton", "flashinfer")))
    bases = tuple(dict.fromkeys((value, "triton", "flashinfer")))
    for base, *phase_flags in itertools.product(bases, choices, choices, choices):
        yield (("linear_attn_backend", base), *zip(PHASE_FLAG.values(), phase_flags))
