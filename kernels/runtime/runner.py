"""Model runners and the stamp site.

A process holds one :class:`ModelRunner` per model it runs: the target and, for speculative decoding, a
draft. Every runner refers to the one shared :class:`~kernels.runtime.config.ProcessConfig` (never a
copy, and it never writes it) and knows its own :class:`RunnerFacts` (family, platform, SM, pool dtype,
head dims...).

:func:`attn_backend_wrapper` is the stamp site: it resolves the runner's ``LinearAttnBackends`` through the
generated ``stamp_linear_attn_backends`` (which runs the runner's auto-default gates, resolves the
precedence, stamps ``runner.linear_attn_backends`` and writes no config), and only then builds the
linear-attention consumer for the runner's family; the consumer reads the stamp through the generated
guard. Each runner keeps its own frozen stamp, so a second runner can never reset the first one's choice.
"""

from __future__ import annotations

import logging
from typing import Any

from stampgen.generated.linear_attn import (
    LinearAttnBackends,
    ModelFamily,
    Platform,
    RunnerFacts,
    stamp_linear_attn_backends,
)
from stampgen.kernels.runtime.config import ProcessConfig
from stampgen.kernels.runtime.models import EntryClass

logger = logging.getLogger(__name__)

__all__ = ["ModelRunner", "StampConflictError", "attn_backend_wrapper", "runner_facts_for"]

_STAMP_ATTRIBUTE = "linear_attn_backends"


class StampConflictError(RuntimeError):
    """A runner already holds a different stamp: a stamp is resolved once per runner and never replaced."""


def runner_facts_for(model_cls: type[EntryClass], **facts: Any) -> RunnerFacts:
    """The runner facts of a runner of ``model_cls``: ``family`` from the class, the rest as given."""
    if "family" in facts:
        raise TypeError("family comes from the model class (linear_attn_family); do not pass it")
    return RunnerFacts(family=ModelFamily(model_cls.linear_attn_family), **facts)


class ModelRunner:
    """One model of the process (target or draft), with its own stamp once :func:`attn_backend_wrapper` ran.

    ``linear_attn_backends`` is absent until stamped (reading it raises ``AttributeError``, which is how the
    generated guard fails closed); it takes a ``LinearAttnBackends`` once, and refuses a different one later.
    Everything else is read-only.
    """

    __slots__ = ("_name", "_is_draft", "_model_cls", "_runner_facts", "_process_config", _STAMP_ATTRIBUTE)

    def __init__(
        self,
        name: str,
        *,
        model_cls: type[EntryClass],
        runner_facts: RunnerFacts,
        process_config: ProcessConfig,
        is_draft: bool = False,
    ) -> None:
        if not isinstance(process_config, ProcessConfig):
            raise TypeError(f"process_config must be a ProcessConfig, got {type(process_config).__name__}")
        if not isinstance(runner_facts, RunnerFacts):
            raise TypeError(f"runner_facts must be a RunnerFacts, got {type(runner_facts).__name__}")
        family = ModelFamily(model_cls.linear_attn_family)
        if runner_facts.family != family:
            raise ValueError(
                f"runner {name!r}: runner_facts.family is {_name(runner_facts.family)} but "
                f"{model_cls.__name__} is a {family.value} model (use runner_facts_for)"
            )
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_is_draft", is_draft)
        object.__setattr__(self, "_model_cls", model_cls)
        object.__setattr__(self, "_runner_facts", runner_facts)
        object.__setattr__(self, "_process_config", process_config)

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_draft(self) -> bool:
        return self._is_draft

    @property
    def model_cls(self) -> type[EntryClass]:
        return self._model_cls

    @property
    def runner_facts(self) -> RunnerFacts:
        return self._runner_facts

    @property
    def process_config(self) -> ProcessConfig:
        """The process's configuration, shared with every other runner (read it; never write it)."""
        return self._process_config

    def __setattr__(self, name: str, value: Any) -> None:
        if name != _STAMP_ATTRIBUTE:
            raise AttributeError(f"ModelRunner.{name} is read-only")
        if not isinstance(value, LinearAttnBackends):
            raise TypeError(f"{_STAMP_ATTRIBUTE} must be a LinearAttnBackends, got {type(value).__name__}")
        current = getattr(self, _STAMP_ATTRIBUTE, None)
        if current is not None and current != value:
            raise StampConflictError(
                f"runner {self._name!r} is already stamped with {current!r}; refusing to replace it "
                f"with {value!r} (a stamp is resolved once per runner)"
            )
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ModelRunner.{name} cannot be deleted")

    def __repr__(self) -> str:
        role = "draft" if self._is_draft else "target"
        return f"ModelRunner({self._name!r}, {role}, {self._model_cls.__name__})"


def attn_backend_wrapper(runner: ModelRunner) -> Any:
    """Stamp ``runner`` with its ``LinearAttnBackends``, then build its linear-attention consumer.

    Returns the consumer for the runner's family: ``GDNAttnBackend`` (``AscendGDNAttnBackend`` on NPU),
    ``KDAAttnBackend`` (plain and safe-gate KDA), ``LightningAttentionBackend``, or None for a family whose
    layers read no linear-attention stamp (Mamba2 picks its kernel from ``mamba_backend``; ``other`` has no
    linear-attention layers). Every runner is stamped, whatever its family.
    """
    from stampgen.kernels.backends import (
        AscendGDNAttnBackend,
        GDNAttnBackend,
        KDAAttnBackend,
        LightningAttentionBackend,
    )

    config = runner.process_config
    if not config.launched:
        raise RuntimeError(
            f"runner {runner.name!r}: the process configuration was not launched; call "
            "stampgen.kernels.runtime.launch(process_config, launch_facts) once, before building any runner"
        )
    stamp = stamp_linear_attn_backends(
        runner, mamba=config.mamba, server=config.server, runner_facts=runner.runner_facts
    )
    logger.debug("runner %r stamped: %r", runner.name, stamp)

    family = runner.runner_facts.family
    if family == ModelFamily.GDN:
        if runner.runner_facts.platform == Platform.NPU:
            return AscendGDNAttnBackend(runner)
        return GDNAttnBackend(runner)
    if family in (ModelFamily.KDA, ModelFamily.KDA_SAFE_GATE):
        return KDAAttnBackend(runner)
    if family == ModelFamily.LIGHTNING:
        return LightningAttentionBackend(runner)
    return None


def _name(value: Any) -> str:
    return getattr(value, "value", value)
