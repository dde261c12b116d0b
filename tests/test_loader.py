"""The loader (kernels/runtime/loader.py): the hook's answer, stamped per runner, decides the weight layout.

The decision is the generated `SharedExpertsFusionDecision` stamp of rules/loader.rules (operator's "no" >
the model's answer > fused), resolved before any layer is built and read by the layers through the
generated guard. A checkpoint's names follow the layout of the model that saved it, so a runner that
decides otherwise than its target reads the target's checkpoint wrongly: that is SGLang #33312.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from stampgen.generated.linear_attn import LaunchFacts
from stampgen.generated.loader import (
    SharedExpertsFusion,
    SharedExpertsFusionDecision,
    StampMismatchError,
    UnstampedRunnerError,
)
from stampgen.kernels.runtime import MambaConfig, ModelRunner, ProcessConfig, launch, runner_facts_for
from stampgen.kernels.runtime.layers import ExpertsLayout, tiny_deepseek_v4_config, tiny_qwen3_next_config
from stampgen.kernels.runtime.loader import (
    FUSION_HOOK,
    LoaderConfig,
    LoaderError,
    LoaderStamps,
    ask_fusion_hook,
    load_model,
    make_checkpoint,
)
from stampgen.kernels.runtime.models import ARCHS, DeepseekV4ForCausalLM, EntryClass
from tests.machines import CPU

DEEPSEEK = tiny_deepseek_v4_config()
DEEPSEEK_FUSABLE = DEEPSEEK.replace(enforce_shared_experts_fusion=True)


pytestmark = pytest.mark.usefixtures("one_cpu_thread")  # tests/conftest.py


def runner(cls, name="target"):
    config = ProcessConfig(mamba=MambaConfig(linear_attn_backend="torch"))
    launch(config, LaunchFacts(sm=0, cuda=0, kimi_k3=False))
    return ModelRunner(name, model_cls=cls, runner_facts=runner_facts_for(cls, **CPU), process_config=config)


def load(cls, hf_config=DEEPSEEK, *, checkpoint=None, target=None, **kwargs):
    checkpoint = (
        checkpoint if checkpoint is not None else make_checkpoint(DeepseekV4ForCausalLM, hf_config, seed=0)
    )
    return load_model(runner(cls), hf_config=hf_config, checkpoint=checkpoint, target=target, **kwargs)


def without_hook(base: type) -> type:
    """``base`` as it would be without its hook: a registry entry of the same name and model."""
    return type(base.__name__, (EntryClass,), {"build_model": base.__dict__["build_model"]})


def test_the_loader_asks_the_hook_before_it_builds_any_layer():
    events = []

    class Probe(EntryClass):
        @classmethod
        def shared_experts_fusion_disable_reason(cls, hf_config, quant_config):
            events.append("hook")
            return "probe says no"

        @classmethod
        def build_model(cls, hf_config, *, layout, target=None):
            events.append(("build", layout.decision.layout.value))
            return DeepseekV4ForCausalLM.build_model(hf_config, layout=layout)

    load(Probe)
    assert events == ["hook", ("build", "unfused")]


def test_a_reason_means_unfused_and_none_means_fused():
    assert load(DeepseekV4ForCausalLM).shared_experts_fusion.layout is SharedExpertsFusion.UNFUSED
    fusable = load(DeepseekV4ForCausalLM, DEEPSEEK_FUSABLE)
    assert fusable.shared_experts_fusion.layout is SharedExpertsFusion.FUSED
    assert fusable.fusion.has_hook and fusable.fusion.reason is None
    assert fusable.fusion_provenance.startswith("auto model_answer (rules/loader.rules:")


def test_a_class_without_the_hook_gets_the_loaders_default_fused():
    loaded = load(without_hook(DeepseekV4ForCausalLM))
    assert not loaded.fusion.has_hook
    assert loaded.shared_experts_fusion.layout is SharedExpertsFusion.FUSED
    assert loaded.fusion_provenance.startswith("fused (rules/loader.rules:")


def test_the_operators_disable_flag_wins_over_the_models_answer():
    loaded = load(
        DeepseekV4ForCausalLM,
        DEEPSEEK_FUSABLE,
        loader_config=LoaderConfig(disable_shared_experts_fusion=True),
    )
    assert loaded.shared_experts_fusion.layout is SharedExpertsFusion.UNFUSED
    assert loaded.fusion_provenance.startswith("unfused when loader.disable_shared_experts_fusion")


def test_the_fused_layout_stacks_the_shared_expert_as_routed_expert_e():
    unfused = load(DeepseekV4ForCausalLM).model.model.layers[0].mlp
    fused = load(DeepseekV4ForCausalLM, DEEPSEEK_FUSABLE).model.model.layers[0].mlp
    experts = DEEPSEEK.num_experts
    assert unfused.experts_w13.shape[0] == experts and hasattr(unfused, "shared_experts")
    assert fused.experts_w13.shape[0] == experts + 1 and not hasattr(fused, "shared_experts")


def test_the_fused_layout_routes_every_token_to_the_shared_slot():
    moe = load(DeepseekV4ForCausalLM, DEEPSEEK_FUSABLE).model.model.layers[0].mlp
    x = torch.randn(6, DEEPSEEK.hidden_size)
    with torch.no_grad():
        with_shared = moe(x)
        moe.experts_w2[DEEPSEEK.num_experts].zero_()  # silence slot E: every token's output changes
        without_shared = moe(x)
    assert ((with_shared - without_shared).abs().sum(-1) > 0).all()


def test_a_checkpoint_read_in_the_layout_it_was_saved_in_loads_every_tensor():
    for config in (DEEPSEEK, DEEPSEEK_FUSABLE):
        report = load(DeepseekV4ForCausalLM, config).report
        assert report.clean and report.loaded


def test_a_fused_reader_of_an_unfused_checkpoint_finds_no_shared_slot_and_drops_the_shared_expert():
    unfused_checkpoint = make_checkpoint(DeepseekV4ForCausalLM, DEEPSEEK, seed=0)
    report = load(without_hook(DeepseekV4ForCausalLM), checkpoint=unfused_checkpoint).report
    experts = DEEPSEEK.num_experts
    layers = len(DEEPSEEK.layer_types)
    assert report.missing == tuple(
        sorted(
            f"model.layers.{i}.mlp.experts.{experts}.{p}.weight"
            for i in range(layers)
            for p in ("down_proj", "gate_proj", "up_proj")
        )
    )
    assert len(report.unused) == 3 * layers and all(".mlp.shared_experts." in n for n in report.unused)


def test_weights_not_found_are_left_zero_in_the_fused_slot():
    mlp = load(without_hook(DeepseekV4ForCausalLM)).model.model.layers[0].mlp
    assert not mlp.experts_w13[DEEPSEEK.num_experts].any() and mlp.experts_w13[0].any()


def test_a_checkpoint_holds_the_targets_mtp_layer_which_the_target_does_not_read():
    checkpoint = make_checkpoint(DeepseekV4ForCausalLM, DEEPSEEK, seed=0)
    assert any(name.startswith("mtp.layers.0.mlp.shared_experts.") for name in checkpoint)
    target = load(DeepseekV4ForCausalLM, checkpoint=checkpoint)
    assert target.report.clean  # the mtp.* names are another model's, not unused
    draft = load(ARCHS["DeepseekV4ForCausalLMNextN"], checkpoint=checkpoint, target=target)
    assert draft.report.clean and all(name.startswith("mtp.") for name in draft.report.loaded)
    assert draft.model._borrowed[0] is target.model.embed_tokens  # borrowed, not loaded


def test_an_mtp_draft_needs_its_target():
    with pytest.raises(LoaderError, match="borrows its target's embedding"):
        load(ARCHS["DeepseekV4ForCausalLMNextN"])


def test_a_gated_draft_without_the_hook_is_refused_by_the_loader_naming_class_and_layout():
    qwen3_next = tiny_qwen3_next_config()
    target = load(ARCHS["Qwen3NextForCausalLM"], qwen3_next)
    with pytest.raises(LoaderError) as raised:
        load(without_hook(ARCHS["Qwen3NextForCausalLMMTP"]), qwen3_next, target=target)
    message = str(raised.value)
    assert "Qwen3NextForCausalLMMTP cannot be built in the fused layout" in message
    assert "rules/loader.rules:" in message and "gated shared expert cannot be fused" in message


def test_a_checkpoint_is_a_function_of_its_seed():
    one, same, other = (make_checkpoint(DeepseekV4ForCausalLM, DEEPSEEK, seed=s) for s in (3, 3, 4))
    assert one.keys() == same.keys() == other.keys()
    assert all(torch.equal(one[n], same[n]) for n in one)
    assert not all(torch.equal(one[n], other[n]) for n in one)


def test_a_registry_entry_without_a_model_is_refused_by_name():
    with pytest.raises(LoaderError, match="Glm4MoeForCausalLM is a registry entry only"):
        load(ARCHS["Glm4MoeForCausalLM"])


def test_the_layout_is_read_through_the_guard_and_fails_closed_without_a_stamp():
    with pytest.raises(UnstampedRunnerError, match="shared_experts_fusion"):
        ExpertsLayout(SimpleNamespace())
    with pytest.raises(UnstampedRunnerError):
        ExpertsLayout(LoaderStamps(None))


def test_a_runners_fusion_stamp_is_set_once():
    stamps = LoaderStamps(SimpleNamespace(name="draft"))
    stamps.shared_experts_fusion = SharedExpertsFusionDecision(layout="fused")
    with pytest.raises(AttributeError, match="'draft' already holds"):
        stamps.shared_experts_fusion = SharedExpertsFusionDecision(layout="unfused")


def test_every_rank_must_load_the_same_layout():
    def other_rank_unfused(local):
        return [local, {"layout": "unfused"}]

    with pytest.raises(StampMismatchError, match="SharedExpertsFusionDecision differs"):
        load(DeepseekV4ForCausalLM, DEEPSEEK_FUSABLE, all_gather=other_rank_unfused)


def test_the_hook_is_asked_with_the_configs_the_loader_was_given():
    answer = ask_fusion_hook(ARCHS["Qwen3NextForCausalLMMTP"], tiny_qwen3_next_config(), None)
    assert answer.has_hook and "gates its shared expert" in answer.reason
    assert answer.model_answer is SharedExpertsFusion.UNFUSED
    assert not ask_fusion_hook(ARCHS["MiMoForCausalLM"], None, None).has_hook
    assert hasattr(DeepseekV4ForCausalLM, FUSION_HOOK)
