"""Drafts answer the loader's questions exactly when their targets do (rules: `parity draft_hooks`).

A draft entry class without its target's `shared_experts_fusion_disable_reason` got another shared-expert
fusion decision, loaded its weights in the wrong layout, and the accept length fell from 5.60 to 2.05
(SGLang #33312). The generated `check_draft_hooks` checks the registry; these tests hold our registry
to it and show that it catches the bug.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from stampgen.generated.linear_attn import ModelFamily, check_draft_hooks
from stampgen.kernels.runtime.models import ARCHS, EntryClass, resolve_model_cls

HOOK = "shared_experts_fusion_disable_reason"


def pairs_of(report) -> set[tuple[str, str]]:
    return set(report.pairs)


def test_the_registry_has_at_least_eleven_checked_draft_target_pairs():
    report = check_draft_hooks(ARCHS)
    assert len(report.pairs) >= 11, report.pairs


def test_every_draft_in_the_registry_answers_the_hooks_its_target_answers():
    report = check_draft_hooks(ARCHS)
    assert not report.offenders, report.offenders


def test_a_draft_missing_its_targets_hook_is_reported_naming_both_classes_and_the_hook():
    # The DSpark draft as it was before SGLang #33312: a class without the hook.
    broken = type("DeepseekV4ForCausalLMDSpark", (EntryClass,), {"__doc__": "no hook"})
    archs = dict(ARCHS, DeepseekV4ForCausalLMDSpark=broken)
    report = check_draft_hooks(archs)
    assert len(report.offenders) == 1, report.offenders
    described = repr(report.offenders[0])
    assert "DeepseekV4ForCausalLMDSpark" in described
    assert "DeepseekV4ForCausalLM" in described.replace("DeepseekV4ForCausalLMDSpark", "")
    assert HOOK in described


def test_a_draft_subclass_that_drops_the_hook_is_reported():
    # Subclassing the target-less base instead of delegating: the hook is gone.
    class Glm4MoeForCausalLMNextN(EntryClass):
        pass

    report = check_draft_hooks(dict(ARCHS, Glm4MoeForCausalLMNextN=Glm4MoeForCausalLMNextN))
    assert "Glm4MoeForCausalLMNextN" in repr(report.offenders)


def test_a_draft_with_a_hook_its_target_lacks_is_reported():
    class MiMoMTP(EntryClass):
        @classmethod
        def shared_experts_fusion_disable_reason(cls, hf_config, quant_config):
            return None

    report = check_draft_hooks(dict(ARCHS, MiMoMTP=MiMoMTP))
    described = repr(report.offenders)
    assert "MiMoMTP" in described and "MiMoForCausalLM" in described


def test_the_shared_bailing_draft_and_eagle3_checkpoints_are_not_paired():
    drafts = {draft for draft, _ in pairs_of(check_draft_hooks(ARCHS))}
    assert "BailingMoeForCausalLMNextN" not in drafts
    assert "LlamaForCausalLMEagle3" not in drafts


def test_drafts_pair_with_the_targets_named_in_the_rules():
    pairs = pairs_of(check_draft_hooks(ARCHS))
    assert ("DeepseekV4ForCausalLMDSpark", "DeepseekV4ForCausalLM") in pairs
    assert ("MiMoMTP", "MiMoForCausalLM") in pairs  # base "ForCausalLM"
    assert ("Qwen3ForCausalLMDFlash", "Qwen3ForCausalLM") in pairs


def test_drafts_reach_the_same_fusion_decision_as_their_targets():
    configs = [
        SimpleNamespace(n_shared_experts=1, moe_num_shared_experts=1, shared_expert_intermediate_size=512),
        SimpleNamespace(n_shared_experts=2, moe_num_shared_experts=0, enforce_shared_experts_fusion=True),
    ]
    for draft, target in pairs_of(check_draft_hooks(ARCHS)):
        if not hasattr(ARCHS[target], HOOK):
            continue
        for hf_config in configs:
            decisions = [getattr(ARCHS[name], HOOK)(hf_config, None) for name in (draft, target)]
            assert decisions[0] == decisions[1], (draft, target, hf_config)


def test_the_shared_bailing_draft_asks_the_target_named_by_the_config():
    bailing_draft = ARCHS["BailingMoeForCausalLMNextN"]
    config = SimpleNamespace(architectures=["BailingMoeV2ForCausalLM"], n_shared_experts=2)
    assert bailing_draft.shared_experts_fusion_disable_reason(config, None) == (
        ARCHS["BailingMoeV2ForCausalLM"].shared_experts_fusion_disable_reason(config, None)
    )


def test_every_entry_class_names_a_model_family_of_the_rules():
    families = {member.value for member in ModelFamily}
    for name, cls in ARCHS.items():
        assert cls.linear_attn_family in families, name


def test_resolve_model_cls_returns_the_first_registered_architecture():
    cls, arch = resolve_model_cls(["NotAModel", "Qwen3NextForCausalLM", "Qwen3ForCausalLM"])
    assert (cls, arch) == (ARCHS["Qwen3NextForCausalLM"], "Qwen3NextForCausalLM")


def test_resolve_model_cls_refuses_unregistered_architectures():
    with pytest.raises(ValueError, match="NotAModel"):
        resolve_model_cls(["NotAModel"])
