"""Model runners and the stamp site.

A process holds one :class:`ModelRunner` per model it runs: the target and, for speculative decoding, a
draft. Every runner refers to the one shared :class:`~kernels.runtime.config.ProcessConfig` (never a
copy, and it never writes it) and knows its own :class:`RunnerFacts` (family, platform, SM, pool dtype,
head dims...).

:func:`attn_backend_wrapper` is the stamp site: it checks that the runner's facts agree with what the
process was launched with, resolves the runner's ``LinearAttnBackends`` through the generated
``stamp_linear_attn_backends`` (which runs the runner's auto-default gates, resolves the precedence,
stamps ``runner.linear_attn_backends`` once and writes no config), checks that every rank of the process
group holds the same stamp (``ensure_linear_attn_backends_agree``), and only then builds the
linear-attention consumer for the runner's family; the consumer reads the stamp through the generated
guard. Each runner keeps its own frozen stamp, so a second runner can never reset the first one's choice.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from stampgen.generated.linear_attn import (
    RULE_POSITIONS,
    LinearAttnBackends,
    LinearAttnKernelBackend,
    ModelFamily,
    Platform,
    RunnerFacts,
    StampConflictError,
    StampMismatchError,
    ensure_linear_attn_backends_agree,
    stamp_linear_attn_backends,
)
from stampgen.kernels.runtime.config import ProcessConfig
from stampgen.kernels.runtime.models import EntryClass

logger = logging.getLogger(__name__)

__all__ = [
    "ModelRunner",
    "RunnerFactsError",
    "StampConflictError",
    "StampMismatchError",
    "attn_backend_wrapper",
    "runner_facts_for",
]

_STAMP_ATTRIBUTE = "linear_attn_backends"
_STAMP_SOURCE = RULE_POSITIONS["stamp LinearAttnBackends"]

# The families whose layers keep a recurrent state in a pool, so that the pool's dtype is a real fact of
# the runner (a runner of family `other` has no linear-attention layers, hence no pool).
_POOLED_FAMILIES = frozenset(
    (ModelFamily.GDN, ModelFamily.KDA, ModelFamily.KDA_SAFE_GATE, ModelFamily.LIGHTNING, ModelFamily.MAMBA2)
)


class RunnerFactsError(ValueError):
    """A runner's facts contradict what the process was launched with (its SM or CUDA version), or its
    state pool's dtype is not the ``--mamba-ssm-dtype`` the operator gave: the launch-level rules decided on
    the launch facts, so a runner on another machine would get kernels they forbid."""


def runner_facts_for(model_cls: type[EntryClass], **facts: Any) -> RunnerFacts:
    """The runner facts of a runner of ``model_cls``: ``family`` from the class, the rest as given."""
    if "family" in facts:
        raise TypeError("family comes from the model class (linear_attn_family); do not pass it")
    return RunnerFacts(family=ModelFamily(model_cls.linear_attn_family), **facts)


class ModelRunner:
    """One model of the process (target or draft), with its own stamp once :func:`attn_backend_wrapper` ran.

    ``linear_attn_backends`` is absent until stamped (reading it raises ``AttributeError``, which is how the
    generated guard fails closed); it takes a complete ``LinearAttnBackends`` once, takes the same one again
    harmlessly, and refuses a different one (``StampConflictError``, the generated module's), also when
    threads race to set it. Everything else is read-only.
    """

    __slots__ = (
        "_name",
        "_is_draft",
        "_model_cls",
        "_runner_facts",
        "_process_config",
        "_stamp_lock",
        _STAMP_ATTRIBUTE,
    )
    # set once, by __init__, through object.__setattr__ (this class's own __setattr__ refuses them)
    _name: str
    _is_draft: bool
    _model_cls: type[EntryClass]
    _runner_facts: RunnerFacts
    _process_config: ProcessConfig
    _stamp_lock: threading.Lock

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
        # Makes "read the stamp, compare, set it" one step for this runner: without it two threads could
        # both read "unstamped" and both set, the second silently replacing the first. One lock per runner
        # (not the generated module's): it guards this runner's attribute only, and the generated
        # stamp_linear_attn_backends, which holds its own lock while it sets the attribute, takes this one
        # inside it, never the other way round.
        object.__setattr__(self, "_stamp_lock", threading.Lock())

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
        unset = [
            field
            for field in value.__struct_fields__
            if not isinstance(getattr(value, field), LinearAttnKernelBackend)
        ]
        if unset:
            raise ValueError(
                f"runner {self._name!r}: refusing {value!r} as its {_STAMP_ATTRIBUTE}: "
                f"{', '.join(unset)} {'is' if len(unset) == 1 else 'are'} unset (stamp LinearAttnBackends, "
                f"{_STAMP_SOURCE})"
            )
        with self._stamp_lock:
            current = getattr(self, _STAMP_ATTRIBUTE, None)
            if current is None:
                object.__setattr__(self, name, value)
                return
        if current != value:
            raise StampConflictError(
                _STAMP_ATTRIBUTE, current, value, _STAMP_SOURCE, f"ModelRunner {self._name!r}"
            )

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ModelRunner.{name} cannot be deleted")

    def __repr__(self) -> str:
        role = "draft" if self._is_draft else "target"
        return f"ModelRunner({self._name!r}, {role}, {self._model_cls.__name__})"


def attn_backend_wrapper(
    runner: ModelRunner,
    *,
    all_gather: Callable[[dict[str, Any]], Sequence[Any]] | None = None,
    lightning_kernel_backend: str = "triton",
) -> Any:
    """Stamp ``runner`` with its ``LinearAttnBackends``, check every rank agrees, then build its consumer.

    Refuses (:class:`RunnerFactsError`) a runner whose facts contradict the launch facts or the operator's
    ``--mamba-ssm-dtype``. After stamping it calls the generated ``ensure_linear_attn_backends_agree``: with
    a process group up (``torch.distributed`` initialised) or an ``all_gather`` given, every rank's stamp
    must be equal, else ``StampMismatchError`` on every rank; without either there is nothing to compare.
    It is then a collective: every rank builds the same runners in the same order.

    Returns the consumer for the runner's family: ``GDNAttnBackend`` (``AscendGDNAttnBackend`` on NPU),
    ``KDAAttnBackend`` (plain and safe-gate KDA), ``LightningAttentionBackend``, or None for a family whose
    layers read no linear-attention stamp (Mamba2 picks its kernel from ``mamba_backend``; ``other`` has no
    linear-attention layers). Every runner is stamped, whatever its family. ``lightning_kernel_backend`` is
    the ``kernels.lightning`` backend the model config names (lightning reads no stamp); other families
    ignore it.
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
    _check_runner_facts(runner)
    stamp = stamp_linear_attn_backends(
        runner, mamba=config.mamba, server=config.server, runner_facts=runner.runner_facts
    )
    ensure_linear_attn_backends_agree(runner, all_gather=all_gather)
    logger.debug("runner %r stamped: %r", runner.name, stamp)

    family = runner.runner_facts.family
    if family == ModelFamily.GDN:
        if runner.runner_facts.platform == Platform.NPU:
            return AscendGDNAttnBackend(runner)
        return GDNAttnBackend(runner)
    if family in (ModelFamily.KDA, ModelFamily.KDA_SAFE_GATE):
        return KDAAttnBackend(runner)
    if family == ModelFamily.LIGHTNING:
        return LightningAttentionBackend(runner, kernel_backend=lightning_kernel_backend)
    return None


def _check_runner_facts(runner: ModelRunner) -> None:
    """Refuse a runner whose facts contradict the process's launch facts (SM major, CUDA major) or, for a
    runner with a state pool, whose pool dtype is not the ``--mamba-ssm-dtype`` the launched configuration
    holds (when it holds one). Raises :class:`RunnerFactsError` naming both values."""
    config = runner.process_config
    launch_facts = config.launch_facts
    facts = runner.runner_facts
    for fact in ("sm", "cuda"):
        ours, launched = getattr(facts, fact), getattr(launch_facts, fact)
        if ours != launched:
            raise RunnerFactsError(
                f"runner {runner.name!r}: runner.{fact} = {ours}, but the process was launched with "
                f"launch.{fact} = {launched}; the launch-level rules decided for launch.{fact} = {launched}, "
                "so a runner on other hardware could get kernels they forbid. Detect both from the same "
                "device (stampgen.kernels.runtime.facts)"
            )
    ssm_dtype = config.mamba.ssm_dtype
    if ssm_dtype is not None and facts.family in _POOLED_FAMILIES and facts.pool_dtype != ssm_dtype:
        raise RunnerFactsError(
            f"runner {runner.name!r}: its state pool is {_name(facts.pool_dtype)} (runner.pool_dtype), but "
            f"--mamba-ssm-dtype is {_name(ssm_dtype)} (mamba.ssm_dtype); allocate the pool in the dtype the "
            "operator gave"
        )


def _name(value: Any) -> str:
    return getattr(value, "value", value)
