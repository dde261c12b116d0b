"""The model loader: ask the entry class, stamp its answer, build the layers in that layout, load the weights.

For one runner, in this order (SGLang's loader, as ``docs/background.md`` tells it):

1. Ask the runner's entry class ``shared_experts_fusion_disable_reason(hf_config, quant_config)`` — before
   any layer exists. A reason means unfused, ``None`` fused; a class without the hook has no answer and
   gets the loader's default (the operator's intent: fused unless ``--disable-shared-experts-fusion``).
2. Stamp that decision, once, through the generated ``stamp_shared_experts_fusion_decision``
   (``rules/loader.rules``: the operator's "no" > the model's answer > fused), and check that every rank
   holds the same one. The stamp lives on the runner's :class:`LoaderStamps`.
3. Build the layers (the entry class's ``build_model``) with the :class:`~.layers.ExpertsLayout` read from
   that stamp through the generated guard.
4. Load the checkpoint by name into the layout the layers have. A checkpoint carries no layout marker: its
   names follow the layout of the model that saved it (the target's, for every checkpoint here). A reader
   in the other layout finds names missing (left zero) and names it has no place for (dropped). Like
   SGLang's loader this one keeps going, and says so (:class:`LoadReport`, a warning in the log): that is
   how a draft that answers the hook otherwise than its target silently serves garbled weights
   (SGLang #33312).

:func:`make_checkpoint` writes the seeded checkpoint of a target (its layers and its MTP layer, in the
target's layout).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import torch
from torch import nn

from stampgen.generated.loader import (
    SharedExpertsFusion,
    SharedExpertsFusionDecision,
    ensure_shared_experts_fusion_decision_agree,
    resolve_shared_experts_fusion_decision_with_provenance,
    stamp_shared_experts_fusion_decision,
)
from stampgen.kernels.runtime.layers import (
    ExpertsLayout,
    HybridMoeForCausalLM,
    MTPDraftModel,
    checkpoint_slots,
    random_checkpoint,
)
from stampgen.kernels.runtime.models import EntryClass

logger = logging.getLogger(__name__)

__all__ = [
    "FUSION_HOOK",
    "FusionAnswer",
    "LoadReport",
    "LoadedModel",
    "LoaderConfig",
    "LoaderError",
    "LoaderStamps",
    "ask_fusion_hook",
    "load_model",
    "make_checkpoint",
]

FUSION_HOOK = "shared_experts_fusion_disable_reason"


class LoaderError(RuntimeError):
    """The loader cannot build this runner's model (its entry class has no model, or no checkpoint)."""


class LoaderConfig(msgspec.Struct, frozen=True, kw_only=True):
    """``config loader`` of ``rules/loader.rules``: the operator's loader flags."""

    disable_shared_experts_fusion: bool = False  # --disable-shared-experts-fusion


@dataclass(frozen=True)
class FusionAnswer:
    """What the entry class said: whether it has the hook, its reason (None: fusion allowed), and that as
    the stamp's ``model_answer`` slot (None when there is no hook)."""

    has_hook: bool
    reason: str | None

    @property
    def model_answer(self) -> SharedExpertsFusion | None:
        if not self.has_hook:
            return None
        return SharedExpertsFusion.UNFUSED if self.reason is not None else SharedExpertsFusion.FUSED


def ask_fusion_hook(model_cls: type[EntryClass], hf_config: Any, quant_config: Any) -> FusionAnswer:
    """Ask ``model_cls`` the loader's question, if it has the hook."""
    hook = getattr(model_cls, FUSION_HOOK, None)
    if hook is None:
        return FusionAnswer(has_hook=False, reason=None)
    return FusionAnswer(has_hook=True, reason=hook(hf_config, quant_config))


class LoaderStamps:
    """The loader's stamps of one runner (``rules/loader.rules``): ``shared_experts_fusion``, set once.

    They live here, beside the runner, because ``ModelRunner`` takes only its linear-attention stamp.
    ``name`` is the runner's, so that errors and logs name it.
    """

    __slots__ = ("runner", "shared_experts_fusion")
    runner: Any
    shared_experts_fusion: SharedExpertsFusionDecision

    def __init__(self, runner: Any) -> None:
        object.__setattr__(self, "runner", runner)

    @property
    def name(self) -> str:
        return getattr(self.runner, "name", "runner")

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "shared_experts_fusion":
            raise AttributeError(f"LoaderStamps.{name} is read-only")
        if getattr(self, name, None) is not None:
            raise AttributeError(f"runner {self.name!r} already holds its {name} stamp")
        if not isinstance(value, SharedExpertsFusionDecision):
            raise TypeError(f"{name} must be a SharedExpertsFusionDecision, got {type(value).__name__}")
        object.__setattr__(self, name, value)


@dataclass(frozen=True)
class LoadReport:
    """Which checkpoint names the model read, which of its own it did not find (left zero), and which of
    the checkpoint's names under its own prefixes it had no place for (dropped)."""

    loaded: tuple[str, ...]
    missing: tuple[str, ...]
    unused: tuple[str, ...]

    @property
    def clean(self) -> bool:
        return not self.missing and not self.unused


@dataclass(frozen=True)
class LoadedModel:
    """One runner's model, as the loader built it, with the loader's decision and what it read."""

    runner: Any
    model: HybridMoeForCausalLM | MTPDraftModel
    stamps: LoaderStamps
    fusion: FusionAnswer
    fusion_provenance: str  # the deciding tier of the stamp's layout, and its rules line
    report: LoadReport

    @property
    def shared_experts_fusion(self) -> SharedExpertsFusionDecision:
        return self.stamps.shared_experts_fusion


def decide_shared_experts_fusion(
    stamps: LoaderStamps,
    *,
    model_cls: type[EntryClass],
    hf_config: Any,
    quant_config: Any = None,
    loader_config: LoaderConfig,
    all_gather: Callable[[dict[str, Any]], Sequence[Any]] | None = None,
) -> tuple[FusionAnswer, str]:
    """Ask the hook, stamp the decision on ``stamps``, check the ranks agree; the answer and provenance."""
    answer = ask_fusion_hook(model_cls, hf_config, quant_config)
    stamp_shared_experts_fusion_decision(stamps, loader=loader_config, model_answer=answer.model_answer)
    ensure_shared_experts_fusion_decision_agree(stamps, all_gather=all_gather)
    _, provenance = resolve_shared_experts_fusion_decision_with_provenance(
        loader_config, model_answer=answer.model_answer
    )
    return answer, provenance.layout


def load_model(
    runner: Any,
    *,
    hf_config: Any,
    checkpoint: Mapping[str, torch.Tensor],
    quant_config: Any = None,
    loader_config: LoaderConfig | None = None,
    target: LoadedModel | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    all_gather: Callable[[dict[str, Any]], Sequence[Any]] | None = None,
) -> LoadedModel:
    """Build and load ``runner``'s model (its ``model_cls``) from ``checkpoint``.

    ``target`` is the target's loaded model, for a draft that borrows its embedding and LM head.
    """
    model_cls = runner.model_cls
    build = getattr(model_cls, "build_model", None)
    if build is None:
        raise LoaderError(f"{model_cls.__name__} is a registry entry only: it has no build_model")
    stamps = LoaderStamps(runner)
    answer, provenance = decide_shared_experts_fusion(
        stamps,
        model_cls=model_cls,
        hf_config=hf_config,
        quant_config=quant_config,
        loader_config=loader_config or LoaderConfig(),
        all_gather=all_gather,
    )
    layout = ExpertsLayout(stamps)
    try:
        with torch.device("cpu"):
            model = build(hf_config, layout=layout, target=None if target is None else target.model)
    except ValueError as exc:  # the layers refuse what they cannot be (a gated shared expert, fused)
        raise LoaderError(
            f"runner {stamps.name!r}: {model_cls.__name__} cannot be built in the {layout.decision.layout.value} "
            f"layout its SharedExpertsFusionDecision gives ({provenance}): {exc}"
        ) from exc
    report = load_weights(model, checkpoint)
    if not report.clean:
        logger.warning(
            "runner %r (%s, %s layout): %d checkpoint tensors not found (left zero), %d not used (dropped); "
            "the checkpoint was saved in another layout",
            stamps.name,
            model_cls.__name__,
            layout.decision.layout.value,
            len(report.missing),
            len(report.unused),
        )
    model = model.to(device=device, dtype=dtype).eval().requires_grad_(False)
    return LoadedModel(runner, model, stamps, answer, provenance, report)


def load_weights(model: nn.Module, checkpoint: Mapping[str, torch.Tensor]) -> LoadReport:
    """Copy every checkpoint tensor the model has a place for; report the rest."""
    slots = checkpoint_slots(model)
    prefixes = {name.split(".", 1)[0] for name in slots}
    loaded, unused = [], []
    for name in sorted(checkpoint):
        slot = slots.get(name)
        if slot is None:
            if name.split(".", 1)[0] in prefixes:
                unused.append(name)
            continue
        view = slot.view()
        tensor = checkpoint[name]
        if tuple(tensor.shape) != tuple(view.shape):
            raise LoaderError(
                f"{name}: the checkpoint has shape {tuple(tensor.shape)}, the model {tuple(view.shape)}"
            )
        with torch.no_grad():
            view.copy_(tensor)
        loaded.append(name)
    missing = sorted(set(slots) - set(loaded))
    return LoadReport(tuple(loaded), tuple(missing), tuple(unused))


def make_checkpoint(
    target_cls: type[EntryClass],
    hf_config: Any,
    *,
    seed: int,
    quant_config: Any = None,
    loader_config: LoaderConfig | None = None,
) -> dict[str, torch.Tensor]:
    """The seeded checkpoint of a target: its layers and, when ``num_nextn_predict_layers``, its MTP layer,
    in the layout the target's own answer gives (a checkpoint is saved by the model it belongs to)."""
    stamps = LoaderStamps(None)
    decide_shared_experts_fusion(
        stamps,
        model_cls=target_cls,
        hf_config=hf_config,
        quant_config=quant_config,
        loader_config=loader_config or LoaderConfig(),
    )
    layout = ExpertsLayout(stamps)
    with torch.device("cpu"):
        target = HybridMoeForCausalLM(hf_config, layout)
        slots = checkpoint_slots(target)
        if getattr(hf_config, "num_nextn_predict_layers", 0):
            mtp = MTPDraftModel(hf_config, layout, embed_tokens=target.embed_tokens, lm_head=target.lm_head)
            slots.update(checkpoint_slots(mtp))
    return random_checkpoint(slots, seed=seed)
