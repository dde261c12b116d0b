"""The linear-attention consumers: built once per runner, after the runner is stamped.

``rules/linear_attn.rules`` names the guarded ones (``guard GDNAttnBackend, KDAAttnBackend,
AscendGDNAttnBackend from "stampgen.kernels.backends" reads LinearAttnBackends``). Each of those, in
``__init__``:

1. reads the stamp only through the generated ``require_linear_attn_backends(runner)``: a runner without
   a stamp raises (an ``AttributeError``) instead of getting a default — there is no silent Triton;
2. refuses (:class:`ModelFamilyError`) a runner whose model family is not the one its layers implement:
   a GDN consumer on a KDA runner would run the wrong recurrence;
3. applies its generated ``validate_*`` block: rule violations raise ``RuleViolationError`` naming the
   rules line, fallbacks are applied and logged by the generated code;
4. binds one kernel per phase, and refuses (``KernelUnavailableError``, at construction) a value that has
   no kernel here — never a silent substitute.

``LightningAttentionBackend`` takes its kernel from the model config, not from the stamp, so it does not
read it; it checks the family and applies its own validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from stampgen.generated.linear_attn import (
    RULES_SOURCE,
    LinearAttnBackends,
    ModelFamily,
    Platform,
    require_linear_attn_backends,
    validate_gdn_attn_backend,
    validate_kda_attn_backend,
    validate_lightning_attention_backend,
)
from stampgen.kernels import gdn
from stampgen.kernels._validation import KernelUnavailableError

__all__ = [
    "PHASES",
    "AscendGDNAttnBackend",
    "GDNAttnBackend",
    "KDAAttnBackend",
    "KernelUnavailableError",
    "LightningAttentionBackend",
    "ModelFamilyError",
]

PHASES = ("prefill", "decode", "verify")


class ModelFamilyError(ValueError):
    """A consumer was built on a runner of a model family whose layers it does not implement."""


def _require_family(consumer: type, runner: Any, families: tuple[ModelFamily, ...]) -> None:
    """Refuse a runner whose ``runner_facts.family`` is not one of ``families``, naming both."""
    family = runner.runner_facts.family
    if family not in families:
        name = getattr(runner, "name", type(runner).__name__)
        raise ModelFamilyError(
            f"{consumer.__name__} for runner {name!r}: the runner's model family is {_backend_name(family)}, "
            f"and {consumer.__name__} implements {', '.join(f.value for f in families)} layers only; "
            "attn_backend_wrapper builds the consumer of the runner's family"
        )


def _backend_name(value: Any) -> str:
    """A stamp value (enum member or str) as the kernel registries spell it."""
    return getattr(value, "value", value)


def _stamp_names(stamp: LinearAttnBackends) -> Mapping[str, str]:
    return MappingProxyType({phase: _backend_name(getattr(stamp, phase)) for phase in PHASES})


class _DispatchesToOp:
    """The phase methods of a consumer: each calls the op's public function (``_api``: ``kernels.gdn``,
    ``kernels.kda`` or ``kernels.lightning``) with the ``backend=`` bound for that phase."""

    op: str
    _api: Any
    families: tuple[ModelFamily, ...]
    KERNELS: Mapping[tuple[str, str], str]  # the op's kernel table, read-only
    runner_name: str
    kernel_backends: Mapping[str, str]

    def prefill(self, q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale=None):
        return self._api.prefill(
            q,
            k,
            v,
            g,
            beta,
            state_pool=state_pool,
            state_indices=state_indices,
            cu_seqlens=cu_seqlens,
            scale=scale,
            backend=self.kernel_backends["prefill"],
        )

    def decode(self, q, k, v, g, beta, *, state_pool, state_indices, scale=None):
        return self._api.decode(
            q,
            k,
            v,
            g,
            beta,
            state_pool=state_pool,
            state_indices=state_indices,
            scale=scale,
            backend=self.kernel_backends["decode"],
        )

    def verify(self, q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale=None):
        return self._api.verify(
            q,
            k,
            v,
            g,
            beta,
            state_pool=state_pool,
            state_indices=state_indices,
            intermediate_states=intermediate_states,
            scale=scale,
            backend=self.kernel_backends["verify"],
        )

    def _read_stamp(self, runner: Any, validate: Any) -> LinearAttnBackends:
        """The first steps of a stamped consumer's construction: the stamp through the generated guard
        (fail closed: no stamp, no backend), the family check, then the op's generated validation
        ``validate`` (fallbacks applied); the validated stamp."""
        stamp = require_linear_attn_backends(runner)
        _require_family(type(self), runner, self.families)
        self.runner_name = getattr(runner, "name", type(runner).__name__)
        return validate(stamp, server=runner.process_config.server, runner_facts=runner.runner_facts)

    def _bind_kernels(self, runner: Any, stamp: LinearAttnBackends) -> Mapping[str, str]:
        """The ``backend=`` of each phase: the validated stamp's choice, refused with
        ``KernelUnavailableError`` where the op has no kernel for it (``KERNELS``)."""
        chosen = _stamp_names(stamp)
        missing = [phase for phase in PHASES if (phase, chosen[phase]) not in self.KERNELS]
        if missing:
            raise KernelUnavailableError(self._no_kernel_message(chosen, missing, self.KERNELS))
        return chosen

    def _no_kernel_message(
        self, chosen: Mapping[str, str], missing: list[str], kernels: Mapping[tuple[str, str], str]
    ) -> str:
        """Why the stamp ``chosen`` has no kernel in the ``missing`` phases, and which flag picks one."""
        module = self._api.__name__.removeprefix("stampgen.")
        lines = []
        for phase in missing:
            have = sorted(backend for (p, backend) in kernels if p == phase)
            lines.append(
                f"{phase}={chosen[phase]} has no {self.op.upper()} {phase} kernel in {module} "
                f"(it has: {', '.join(have)}); pick one with --linear-attn-{phase}-backend "
                "or --linear-attn-backend"
            )
        return (
            f"{type(self).__name__} for runner {self.runner_name!r}: {RULES_SOURCE} allows the stamp "
            f"LinearAttnBackends(decode={chosen['decode']}, prefill={chosen['prefill']}, "
            f"verify={chosen['verify']}), but " + "; ".join(lines)
        )

    def __repr__(self) -> str:
        bound = getattr(self, "kernel_backends", {})  # absent when construction refused
        phases = ", ".join(f"{phase}={backend}" for phase, backend in bound.items())
        return f"{type(self).__name__}({getattr(self, 'runner_name', '?')!r}, {phases})"


class GDNAttnBackend(_DispatchesToOp):
    """Gated DeltaNet layers of one runner: one kernel of ``kernels.gdn`` per phase, as the stamp says.

    ``linear_attn_backends`` is the validated stamp (fallbacks applied); ``kernel_backends`` maps each phase
    to the ``backend=`` its calls pass to ``kernels.gdn``.
    """

    op = "gdn"
    _api = gdn
    families: tuple[ModelFamily, ...] = (ModelFamily.GDN,)
    # kernels.gdn's table when this class was defined, a read-only copy: an entry added to
    # kernels.gdn.KERNELS later cannot make a consumer accept a kernel that does not exist
    KERNELS: Mapping[tuple[str, str], str] = MappingProxyType(dict(gdn.KERNELS))

    def __init__(self, runner: Any) -> None:
        self.linear_attn_backends: LinearAttnBackends = self._read_stamp(runner, validate_gdn_attn_backend)
        self.kernel_backends: Mapping[str, str] = self._bind_kernels(runner, self.linear_attn_backends)


class _KernelsNotBuilt:
    """Phases of a consumer whose kernels are not in this package: each call refuses, naming why."""

    def _unavailable(self, phase: str):
        raise NotImplementedError

    def prefill(self, q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale=None):
        self._unavailable("prefill")

    def decode(self, q, k, v, g, beta, *, state_pool, state_indices, scale=None):
        self._unavailable("decode")

    def verify(self, q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale=None):
        self._unavailable("verify")


# The NPU GDN kernels (sgl_kernel_npu ops, which the rules call "triton") are not part of this package.
_NPU_GDN_BACKENDS = ("triton",)


class AscendGDNAttnBackend(_KernelsNotBuilt, GDNAttnBackend):
    """GDN layers of a runner on an Ascend NPU. Same guard and validation; NPU kernels only.

    The NPU kernels are not built in this package: construction checks the stamp, every call raises
    ``KernelUnavailableError``.
    """

    def _bind_kernels(self, runner: Any, stamp: LinearAttnBackends) -> Mapping[str, str]:
        platform = runner.runner_facts.platform
        if platform != Platform.NPU:
            raise KernelUnavailableError(
                f"AscendGDNAttnBackend for runner {self.runner_name!r}: NPU kernels need an NPU runner, "
                f"this one is on {_backend_name(platform)} (use GDNAttnBackend)"
            )
        chosen = _stamp_names(stamp)
        missing = [phase for phase in PHASES if chosen[phase] not in _NPU_GDN_BACKENDS]
        if missing:
            kernels = {(phase, backend): "npu" for phase in PHASES for backend in _NPU_GDN_BACKENDS}
            raise KernelUnavailableError(self._no_kernel_message(chosen, missing, kernels))
        return chosen

    def _unavailable(self, phase: str):
        raise KernelUnavailableError(
            f"AscendGDNAttnBackend {phase}: the NPU GDN kernels (sgl_kernel_npu) are not part of this package"
        )


class KDAAttnBackend(_DispatchesToOp):
    """Kimi Delta Attention layers (plain and safe-gate) of one runner: one kernel of ``kernels.kda`` per
    phase, as the stamp says.

    Same construction as ``GDNAttnBackend``: the stamp through the generated guard (fail closed), the
    family check, the generated KDA validation (fallbacks applied and logged), then one kernel per phase;
    a value the rules allow but ``kernels.kda`` has no kernel for (``cutedsl``, ``flashkda``, …) is refused
    at construction with ``KernelUnavailableError``. Both gate forms run the same kernels: the gate is
    activated (plain or bounded) before the op.
    """

    op = "kda"
    families: tuple[ModelFamily, ...] = (ModelFamily.KDA, ModelFamily.KDA_SAFE_GATE)
    from stampgen.kernels import kda as _api

    # kernels.kda's table when this class was defined, read-only (as GDNAttnBackend's)
    KERNELS: Mapping[tuple[str, str], str] = MappingProxyType(dict(_api.KERNELS))

    def __init__(self, runner: Any) -> None:
        self.linear_attn_backends: LinearAttnBackends = self._read_stamp(runner, validate_kda_attn_backend)
        self.kernel_backends: Mapping[str, str] = self._bind_kernels(runner, self.linear_attn_backends)


class LightningAttentionBackend(_DispatchesToOp):
    """Lightning (MiniMax / Bailing linear) attention of one runner: ``kernels.lightning`` in every phase.

    Its kernel comes from the model config, not from the linear-attention flags, so it never reads the
    stamp; the rules only refuse draft trees (its generated validation). ``kernel_backend`` names the
    ``kernels.lightning`` backend of all three phases (default ``triton``, our own kernels); one it has no
    kernel for — ``flashinfer`` among them: FlashInfer has no lightning attention — is refused at
    construction with ``KernelUnavailableError``.
    """

    op = "lightning"
    families: tuple[ModelFamily, ...] = (ModelFamily.LIGHTNING,)
    from stampgen.kernels import lightning as _api

    KERNELS: Mapping[tuple[str, str], str] = MappingProxyType(dict(_api.KERNELS))

    def __init__(self, runner: Any, kernel_backend: str = "triton") -> None:
        _require_family(type(self), runner, self.families)
        self.runner_name: str = getattr(runner, "name", type(runner).__name__)
        validate_lightning_attention_backend(server=runner.process_config.server)
        missing = [phase for phase in PHASES if (phase, kernel_backend) not in self.KERNELS]
        if missing:
            have = sorted({backend for (_, backend) in self.KERNELS})
            raise KernelUnavailableError(
                f"LightningAttentionBackend for runner {self.runner_name!r}: kernels.lightning has no "
                f"{kernel_backend!r} kernel for {', '.join(missing)} (it has: {', '.join(have)})"
            )
        self.kernel_backends: Mapping[str, str] = MappingProxyType(dict.fromkeys(PHASES, kernel_backend))
