"""The model registry: entry classes by architecture name, standing in for an engine's model modules.

Each class carries only what the runtime and the loader ask of it:

* ``linear_attn_family`` — the runner's linear-attention family, a ``ModelFamily`` value of the rules
  (``"gdn"``, ``"kda"``, ``"kda_safe_gate"``, ``"lightning"``, ``"mamba2"``, ``"other"``). An engine finds it
  from the HF config class; a draft can have another family than its target (a Qwen3-Next MTP layer is
  full attention; a NemotronH MTP draft without Mamba layers has none).
* ``shared_experts_fusion_disable_reason(hf_config, quant_config) -> str | None`` — the loader's question
  "may the shared expert be fused into the routed experts?" (None = yes). Only models with a shared
  expert have it, and every draft whose target has it has it too (delegating, with its own arguments):
  a draft without it got another fusion decision than its target and loaded its weights in the wrong
  layout (SGLang #33312). ``parity draft_hooks`` in the rules checks this over :data:`ARCHS`.

``hf_config`` and ``quant_config`` are any objects with the attributes a hook reads (missing ones take
the defaults of the real configs).

Some classes are real models too: ``build_model(hf_config, *, layout, target=None)`` builds the torch
module the loader fills (``kernels/runtime/layers.py``; ``layout`` is the runner's ``ExpertsLayout``, from
its fusion stamp; ``target`` the target's model, for drafts that borrow from it). So far:
``Qwen3NextForCausalLM`` and its MTP draft, ``DeepseekV4ForCausalLM`` and its NextN and DSpark drafts,
``KimiLinearForCausalLM`` (KDA layers) and its MTP draft, and ``BailingMoeV2_5ForCausalLM`` (the registry's
lightning entry, built MiniMax-like) with the shared Bailing NextN draft.
torch is imported only when a model is built, so the registry imports without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar

__all__ = ["ARCHS", "resolve_model_cls"]


class EntryClass:
    """Base of every entry class. No hooks here: their presence is per class, on purpose."""

    linear_attn_family: ClassVar[str] = "other"


def _causal_lm(hf_config: Any, layout: Any) -> Any:
    from stampgen.kernels.runtime.layers import HybridMoeForCausalLM

    return HybridMoeForCausalLM(hf_config, layout)


def _mtp_draft(hf_config: Any, layout: Any, target: Any, draft: str) -> Any:
    from stampgen.kernels.runtime.layers import MTPDraftModel

    if target is None:
        raise ValueError(f"{draft} borrows its target's embedding and LM head: build it with target=")
    return MTPDraftModel(hf_config, layout, embed_tokens=target.embed_tokens, lm_head=target.lm_head)


def _single_shared_expert_reason(hf_config: Any, model: str) -> str | None:
    n_shared = getattr(hf_config, "n_shared_experts", 1)
    if n_shared != 1:
        return f"{model} fuses exactly one shared expert; this config has {n_shared}"
    return None


# --------------------------------------------------------------------------------------------- targets


class DeepseekV3ForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        if getattr(quant_config, "name", None) == "w4afp8":
            return "w4afp8 checkpoints keep the shared expert unfused"
        return _single_shared_expert_reason(hf_config, "DeepSeek-V3")


class DeepseekV4ForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        if getattr(hf_config, "enforce_shared_experts_fusion", False):
            return None
        return "Config does not support fused shared expert(s)."

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _causal_lm(hf_config, layout)


class Glm4MoeForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return _single_shared_expert_reason(hf_config, "GLM-4 MoE")


class Glm4MoeLiteForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return _single_shared_expert_reason(hf_config, "GLM-4 MoE Lite")


class LongcatFlashForCausalLM(EntryClass):
    @staticmethod
    def shared_experts_fusion_disable_reason(hf_config: Any, quant_config: Any) -> str | None:
        return "LongCat-Flash routes to zero-computation experts instead of a shared expert"


class MiMoForCausalLM(EntryClass):
    """Dense: no shared expert, so no fusion question."""


class Step3p5ForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return _single_shared_expert_reason(hf_config, "Step-3.5")


class Ernie4_5_MoeForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        if getattr(hf_config, "moe_num_shared_experts", 0) == 0:
            return "this ERNIE-4.5 MoE config has no shared expert"
        return None


class Qwen3NextForCausalLM(EntryClass):
    linear_attn_family = "gdn"

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return "Qwen3-Next gates its shared expert (shared_expert_gate); a fused slot cannot"

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _causal_lm(hf_config, layout)


class Qwen3MoeForCausalLM(EntryClass):
    """Routed experts only: no shared expert, no fusion question."""


class Qwen3_5ForCausalLM(EntryClass):
    linear_attn_family = "gdn"

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        text_config = getattr(hf_config, "text_config", hf_config)
        if getattr(text_config, "shared_expert_intermediate_size", 0) == 0:
            return "this Qwen3.5 config has no shared expert"
        return "Qwen3.5 gates its shared expert (shared_expert_gate); a fused slot cannot"


class NemotronHForCausalLM(EntryClass):
    linear_attn_family = "mamba2"


class Qwen3ForCausalLM(EntryClass):
    """Dense."""


class LlamaForCausalLM(EntryClass):
    """Dense."""


class BailingMoeV2ForCausalLM(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(
        cls, hf_config: Any, quant_config: Any, expected_architecture: str | None = None
    ) -> str | None:
        architectures = getattr(hf_config, "architectures", None) or []
        if expected_architecture is not None and expected_architecture not in architectures:
            return f"config is not a {expected_architecture} checkpoint"
        return _single_shared_expert_reason(hf_config, "Bailing MoE V2")


class BailingMoeV2_5ForCausalLM(BailingMoeV2ForCausalLM):
    """Ring-linear: lightning attention layers between full-attention ones."""

    linear_attn_family = "lightning"

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _causal_lm(hf_config, layout)


class KimiLinearForCausalLM(EntryClass):
    linear_attn_family = "kda"

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return _single_shared_expert_reason(hf_config, "Kimi Linear")

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _causal_lm(hf_config, layout)


class KimiK3ForCausalLM(EntryClass):
    """KDA with a bounded ("safe") gate."""

    linear_attn_family = "kda_safe_gate"

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return _single_shared_expert_reason(hf_config, "Kimi-K3")


# --------------------------------------------------------------------------------------------- drafts
# A draft answers the loader's question exactly when its target does, delegating with its own
# arguments: a draft checkpoint may carry its own quantisation and wraps the target's text config.


class DeepseekV3ForCausalLMNextN(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return DeepseekV3ForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)


class DeepseekV4ForCausalLMNextN(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return DeepseekV4ForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _mtp_draft(hf_config, layout, target, cls.__name__)


class DeepseekV4ForCausalLMDSpark(EntryClass):
    """The DSpark draft: missing this hook cut the accept length from 5.60 to 2.05 (SGLang #33312).

    Here it is self-speculating: it builds the target's architecture and loads the target's weights
    (the ``model.*`` and ``lm_head.*`` of the target's checkpoint), through this class.
    """

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return DeepseekV4ForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _causal_lm(hf_config, layout)


class Glm4MoeForCausalLMNextN(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return Glm4MoeForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)


class Glm4MoeLiteForCausalLMNextN(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return Glm4MoeLiteForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)


class LongcatFlashForCausalLMNextN(EntryClass):
    @staticmethod
    def shared_experts_fusion_disable_reason(hf_config: Any, quant_config: Any) -> str | None:
        return LongcatFlashForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)


class MiMoMTP(EntryClass):
    """Draft of MiMoForCausalLM (dense, like its target)."""


class Step3p5MTP(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return Step3p5ForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)


class Ernie4_5_MoeForCausalLMMTP(EntryClass):
    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return Ernie4_5_MoeForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)


class Qwen3NextForCausalLMMTP(EntryClass):
    """The MTP layer is full attention: no linear-attention family of its own."""

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return Qwen3NextForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _mtp_draft(hf_config, layout, target, cls.__name__)


class KimiLinearForCausalLMMTP(EntryClass):
    """An MTP draft of Kimi-Linear: one full-attention layer (no KDA layer, so no linear-attention family of
    its own), the target's MoE; it borrows the target's embedding and LM head."""

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        return KimiLinearForCausalLM.shared_experts_fusion_disable_reason(hf_config, quant_config)

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        return _mtp_draft(hf_config, layout, target, cls.__name__)


class Qwen3MoeForCausalLMMTP(EntryClass):
    """Draft of Qwen3MoeForCausalLM (no shared expert, like its target)."""


class Qwen3_5ForCausalLMMTP(EntryClass):
    """Full-attention MTP layer; the hook unwraps the text config and uses the MTP quant config."""

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        text_config = getattr(hf_config, "text_config", hf_config)
        mtp_quant_config = getattr(quant_config, "mtp", quant_config)
        return Qwen3_5ForCausalLM.shared_experts_fusion_disable_reason(text_config, mtp_quant_config)


class NemotronHForCausalLMMTP(EntryClass):
    """A NemotronH MTP draft whose pattern has no Mamba layer: no linear-attention family."""


class Qwen3ForCausalLMDFlash(EntryClass):
    """DFlash draft of a dense Qwen3."""


class BailingMoeForCausalLMNextN(EntryClass):
    """One draft class shared by every Bailing target; the rules exclude it from the name-based pairing."""

    @classmethod
    def shared_experts_fusion_disable_reason(cls, hf_config: Any, quant_config: Any) -> str | None:
        architectures = getattr(hf_config, "architectures", None) or ["BailingMoeV2ForCausalLM"]
        target = ARCHS.get(architectures[0], BailingMoeV2ForCausalLM)
        return BailingMoeV2ForCausalLM.shared_experts_fusion_disable_reason(
            hf_config, quant_config, expected_architecture=target.__name__
        )

    @classmethod
    def build_model(cls, hf_config: Any, *, layout: Any, target: Any = None) -> Any:
        """One MTP (NextN) layer of full attention, whatever the target's layers (lightning for V2.5)."""
        return _mtp_draft(hf_config, layout, target, cls.__name__)


class LlamaForCausalLMEagle3(EntryClass):
    """An EAGLE-3 checkpoint: a standalone model, not a draft entry class of a registered target."""


# --------------------------------------------------------------------------------------------- registry


def _registry(*classes: type[EntryClass]) -> Mapping[str, type[EntryClass]]:
    archs: dict[str, type[EntryClass]] = {}
    for cls in classes:
        if cls.__name__ in archs:
            raise ValueError(f"duplicate architecture {cls.__name__}")
        archs[cls.__name__] = cls
    # Read-only: an entry added, replaced or removed here would change what every runner of the process
    # loads, and what the generated parity check sees.
    return MappingProxyType(archs)


ARCHS: Mapping[str, type[EntryClass]] = _registry(
    DeepseekV3ForCausalLM,
    DeepseekV4ForCausalLM,
    Glm4MoeForCausalLM,
    Glm4MoeLiteForCausalLM,
    LongcatFlashForCausalLM,
    MiMoForCausalLM,
    Step3p5ForCausalLM,
    Ernie4_5_MoeForCausalLM,
    Qwen3NextForCausalLM,
    Qwen3MoeForCausalLM,
    Qwen3_5ForCausalLM,
    NemotronHForCausalLM,
    Qwen3ForCausalLM,
    LlamaForCausalLM,
    BailingMoeV2ForCausalLM,
    BailingMoeV2_5ForCausalLM,
    KimiLinearForCausalLM,
    KimiK3ForCausalLM,
    DeepseekV3ForCausalLMNextN,
    DeepseekV4ForCausalLMNextN,
    DeepseekV4ForCausalLMDSpark,
    Glm4MoeForCausalLMNextN,
    Glm4MoeLiteForCausalLMNextN,
    LongcatFlashForCausalLMNextN,
    MiMoMTP,
    Step3p5MTP,
    Ernie4_5_MoeForCausalLMMTP,
    Qwen3NextForCausalLMMTP,
    KimiLinearForCausalLMMTP,
    Qwen3MoeForCausalLMMTP,
    Qwen3_5ForCausalLMMTP,
    NemotronHForCausalLMMTP,
    Qwen3ForCausalLMDFlash,
    BailingMoeForCausalLMNextN,
    LlamaForCausalLMEagle3,
)
"""Every registered entry class, by architecture name (the names in an HF config's ``architectures``);
a read-only mapping."""


def resolve_model_cls(architectures: list[str] | tuple[str, ...] | str) -> tuple[type[EntryClass], str]:
    """The entry class of the first registered name in ``architectures``, and that name.

    Raises ``ValueError`` listing what was asked when none is registered.
    """
    names = [architectures] if isinstance(architectures, str) else list(architectures)
    for name in names:
        cls = ARCHS.get(name)
        if cls is not None:
            return cls, name
    raise ValueError(f"no registered model architecture among {names}; registered: {sorted(ARCHS)}")
