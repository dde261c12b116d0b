"""The small runtime that stamps runners: process configuration, model registry, runners, stamp site.

    config = ProcessConfig(mamba=MambaConfig(linear_attn_decode_backend="flashinfer"))
    launch(config, LaunchFacts(sm=10, cuda=13, kimi_k3=False))      # once per process
    target = ModelRunner("target", model_cls=cls, runner_facts=runner_facts_for(cls, ...),
                         process_config=config)
    backend = attn_backend_wrapper(target)                          # stamps target, builds its consumer

``config`` and ``models`` import nothing generated, so the generated parity check can import the registry
(``kernels.runtime.models:ARCHS``) without a cycle; the runner names load on first use. ``ARCHS`` here is
that registry, a read-only mapping. An engine builds the config from its server arguments and adds its flags
with ``kernels.runtime.engine``, and detects launch and runner facts with ``kernels.runtime.facts``.
``StampConflictError`` and ``StampMismatchError`` are the generated module's, re-exported: one type each.
"""

from __future__ import annotations

from typing import Any

from stampgen.kernels.runtime.config import LaunchError, MambaConfig, ProcessConfig, ServerConfig, launch
from stampgen.kernels.runtime.models import ARCHS, resolve_model_cls

__all__ = [
    "ARCHS",
    "LaunchError",
    "MambaConfig",
    "ModelRunner",
    "ProcessConfig",
    "RunnerFactsError",
    "ServerConfig",
    "StampConflictError",
    "StampMismatchError",
    "attn_backend_wrapper",
    "launch",
    "resolve_model_cls",
    "runner_facts_for",
]

_RUNNER_NAMES = (
    "ModelRunner",
    "RunnerFactsError",
    "StampConflictError",
    "StampMismatchError",
    "attn_backend_wrapper",
    "runner_facts_for",
)


def __getattr__(name: str) -> Any:
    if name in _RUNNER_NAMES:
        from stampgen.kernels.runtime import runner

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
