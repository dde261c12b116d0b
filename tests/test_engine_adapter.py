"""The engine adapter (kernels/runtime/engine.py) and the facts probe (kernels/runtime/facts.py).

Which leaves exist comes from the rules themselves (parsed here), never from a list in this file, so a
leaf added to the rules without a server argument fails these tests. There is no GPU here: the device,
flashinfer and the model config are fakes.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import sys
import types
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
import torch

from stampgen.codegen.load import load
from stampgen.codegen.model import BoolT, EnumT, IntT, LeafInfo, Scope
from stampgen.generated import linear_attn as la
from stampgen.kernels.runtime import ARCHS, RunnerFactsError, attn_backend_wrapper, launch
from stampgen.kernels.runtime import facts as probe
from stampgen.kernels.runtime.engine import (
    SERVER_ARGS,
    add_linear_attn_arguments,
    config_views_from_server_args,
    process_config_from_server_args,
)
from stampgen.kernels.runtime.runner import ModelRunner

RULES = "rules/linear_attn.rules"


def rules_config_leaves() -> list[LeafInfo]:
    loaded = load(RULES)
    assert loaded.model is not None
    leaves = [leaf for leaf in loaded.model.leaves.values() if leaf.scope == Scope.PROCESS]
    assert len(leaves) >= 20, [leaf.full_name for leaf in leaves]
    return leaves


def another_value(leaf: LeafInfo) -> Any:
    """A value of the leaf's type other than its default (and other than unset)."""
    if isinstance(leaf.type, BoolT):
        return not leaf.default
    candidates = leaf.type.values if isinstance(leaf.type, IntT) else leaf.type.members
    return next(v for v in reversed(candidates) if v != leaf.default)


def engine_spelling(leaf: LeafInfo, value: Any) -> Any:
    """How the engine gives a value on its server arguments (a delimiter token for a set-means-true bool)."""
    spec = SERVER_ARGS[leaf.full_name]
    if spec.set_means_true:
        return 7 if value else None
    return value


def record_value(views: dict[str, msgspec.Struct], leaf: LeafInfo) -> Any:
    return getattr(views[leaf.namespace], leaf.name)


# --------------------------------------------------------------------------------------------- server arguments


@pytest.mark.parametrize("leaf", rules_config_leaves(), ids=lambda leaf: leaf.full_name)
def test_every_config_leaf_of_the_rules_is_mapped_from_a_server_argument(leaf: LeafInfo) -> None:
    assert leaf.full_name in SERVER_ARGS, f"{leaf.full_name} has no server argument in engine.SERVER_ARGS"
    value = another_value(leaf)
    server_args = SimpleNamespace(**{SERVER_ARGS[leaf.full_name].arg: engine_spelling(leaf, value)})
    views = config_views_from_server_args(server_args)
    assert record_value(views, leaf) == value
    others = [other for other in rules_config_leaves() if other.full_name != leaf.full_name]
    assert all(record_value(views, other) == other.default for other in others)  # and nothing else moved


@pytest.mark.parametrize("leaf", rules_config_leaves(), ids=lambda leaf: leaf.full_name)
def test_every_config_leaf_has_a_flag_that_sets_it(leaf: LeafInfo) -> None:
    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)
    spec = SERVER_ARGS[leaf.full_name]
    value = another_value(leaf)
    if isinstance(leaf.type, BoolT) and not spec.set_means_true:
        argv = [spec.flag] if value else [f"--no-{spec.flag[2:]}"]
    else:
        argv = [spec.flag, str(engine_spelling(leaf, value))]
    config = process_config_from_server_args(parser.parse_args(argv))
    assert getattr(getattr(config, leaf.namespace), leaf.name) == value


def test_the_server_arguments_name_no_leaf_the_rules_lack() -> None:
    assert set(SERVER_ARGS) == {leaf.full_name for leaf in rules_config_leaves()}
    assert list(la.CONFIG_LEAVES) == [leaf.full_name for leaf in rules_config_leaves()]


def test_a_flags_help_is_its_leafs_comment_in_the_rules() -> None:
    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)
    helps = {action.dest: action.help for action in parser._actions}
    # the comments at the end of these leaves' lines in rules/linear_attn.rules
    assert helps["mamba_ssm_dtype"].startswith("--mamba-ssm-dtype, as the operator gave it (")
    assert helps["linear_attn_verify_backend"].startswith("unset: flashinfer if decode is, else triton (")
    assert helps["enable_linear_replayssm"].startswith("(")  # no comment: the position alone


def test_the_parsed_defaults_are_the_rules_defaults() -> None:
    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)
    views = config_views_from_server_args(parser.parse_args([]))
    for leaf in rules_config_leaves():
        assert record_value(views, leaf) == leaf.default, leaf.full_name


def test_each_flag_is_typed_from_the_rules_and_helps_with_its_leaf() -> None:
    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)
    actions = {action.dest: action for action in parser._actions}
    for leaf in rules_config_leaves():
        spec = SERVER_ARGS[leaf.full_name]
        action = actions[spec.arg]
        where = f"({RULES}: {leaf.full_name})"
        assert action.help is not None
        assert action.help.startswith(f"{leaf.doc} {where}" if leaf.doc else where), action.help
        if isinstance(leaf.type, IntT) and not spec.set_means_true:
            assert tuple(action.choices) == leaf.type.values
        elif isinstance(leaf.type, EnumT) and leaf.type.open_member is None:
            assert set(leaf.type.members) <= set(action.choices)
        elif isinstance(leaf.type, EnumT):
            assert action.choices is None  # open: a plugin's name is taken (and becomes its open member)


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        (["--mamba-ssm-dtype", "bf16"], "--mamba-ssm-dtype"),
        (["--chunked-prefill-size", "2048"], "--chunked-prefill-size"),
        (["--speculative-eagle-topk", "3"], "--speculative-eagle-topk"),
        (["--disaggregation-mode", "both"], "--disaggregation-mode"),
    ],
)
def test_the_parser_refuses_a_value_the_rules_do_not_declare(
    argv: list[str], refused: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    assert refused in capsys.readouterr().err


def test_the_engines_own_spellings_are_read_as_the_rules_values() -> None:
    server_args = SimpleNamespace(
        speculative_algorithm="EAGLE",
        disaggregation_mode="null",
        cuda_graph_backend_prefill="disabled",
        multi_item_scoring_delimiter=151643,
        linear_attn_backend="my_plugin_kernels",
    )
    views = config_views_from_server_args(server_args)
    assert views["server"].speculative_algorithm == "eagle"
    assert views["server"].disaggregation == "none"
    assert views["server"].prefill_cuda_graph == "off"
    assert views["server"].multi_item_scoring is True
    assert views["mamba"].linear_attn_backend == "my_plugin_kernels"  # open: the resolver makes it custom
    parser = argparse.ArgumentParser()
    add_linear_attn_arguments(parser)
    parsed = parser.parse_args(
        ["--speculative-algorithm", "EAGLE3", "--cuda-graph-backend-prefill", "breakable"]
    )
    assert (parsed.speculative_algorithm, parsed.cuda_graph_backend_prefill) == ("eagle3", "breakable")
    assert process_config_from_server_args(parsed).server.prefill_cuda_graph == "piecewise"


@pytest.mark.parametrize(
    ("server_args", "named"),
    [
        (dict(mamba_ssm_dtype="bf16"), "--mamba-ssm-dtype (rules/linear_attn.rules: mamba.ssm_dtype)"),
        (
            dict(chunked_prefill_size=2048),
            "--chunked-prefill-size (rules/linear_attn.rules: server.chunked_prefill_size)",
        ),
        (dict(speculative_algorithm="NGRAM"), "--speculative-algorithm"),
    ],
)
def test_a_server_argument_the_rules_do_not_declare_is_refused_naming_flag_and_leaf(
    server_args: dict[str, Any], named: str
) -> None:
    with pytest.raises(ValueError) as raised:
        config_views_from_server_args(SimpleNamespace(**server_args))
    assert str(raised.value).startswith(named)


def test_an_engines_full_server_arguments_launch_and_stamp_a_runner() -> None:
    server_args = SimpleNamespace(
        linear_attn_backend="triton",
        linear_attn_decode_backend=None,
        linear_attn_prefill_backend=None,
        linear_attn_verify_backend=None,
        mamba_ssm_dtype=None,
        enable_deterministic_inference=False,
        chunked_prefill_size=8192,
        speculative_algorithm=None,
        speculative_eagle_topk=None,
        attention_backend="fa3",
        disaggregation_mode="null",
        unrelated_engine_option=True,
    )
    config = process_config_from_server_args(server_args)
    launch(config, la.LaunchFacts(sm=9, cuda=13, kimi_k3=False))
    cls = ARCHS["Qwen3NextForCausalLM"]
    facts = probe.detect_runner_facts(
        cls, platform="cuda", sm=9, sm_minor=0, cuda=13, pool_dtype="float32", head_k_dim=128, head_v_dim=128,
        flashinfer_gdn_prefill=True,
    )  # fmt: skip
    runner = ModelRunner("target", model_cls=cls, runner_facts=facts, process_config=config)
    attn_backend_wrapper(runner)
    assert runner.linear_attn_backends == la.LinearAttnBackends("triton", "flashinfer", "triton")


# --------------------------------------------------------------------------------------------- facts


@pytest.fixture
def blackwell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake SM100 device under a CUDA 13 torch."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (10, 0))
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.version, "hip", None, raising=False)


@pytest.fixture
def flashinfer(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fake flashinfer package whose gdn_prefill has the chunked kernel."""
    module = types.ModuleType("flashinfer")
    module.__spec__ = importlib.machinery.ModuleSpec("flashinfer", None)
    module.gdn_prefill = SimpleNamespace(chunk_gated_delta_rule=lambda *args, **kwargs: None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    return module


QWEN3_NEXT_CONFIG = SimpleNamespace(linear_key_head_dim=128, linear_value_head_dim=128, head_dim=256)


def test_runner_facts_are_detected_on_the_device(blackwell: None, flashinfer: types.ModuleType) -> None:
    pool = torch.zeros(2, 1, 1, 1, dtype=torch.bfloat16)
    facts = probe.detect_runner_facts(
        ARCHS["Qwen3NextForCausalLM"], model_config=QWEN3_NEXT_CONFIG, state_pool=pool
    )
    assert facts == la.RunnerFacts(
        family="gdn", platform="cuda", sm=10, sm_minor=0, cuda=13, pool_dtype="bfloat16", head_k_dim=128,
        head_v_dim=128, flashinfer_gdn_prefill=True,
    )  # fmt: skip


def test_explicit_facts_override_detected_ones(blackwell: None, flashinfer: types.ModuleType) -> None:
    pool = torch.zeros(1, dtype=torch.bfloat16)
    facts = probe.detect_runner_facts(
        ARCHS["Qwen3NextForCausalLM"], model_config=QWEN3_NEXT_CONFIG, state_pool=pool, sm=9, pool_dtype="float32",
        head_v_dim=64, flashinfer_gdn_prefill=False,
    )  # fmt: skip
    assert (facts.sm, facts.cuda, facts.pool_dtype, facts.head_k_dim, facts.head_v_dim) == (
        9,
        13,
        "float32",
        128,
        64,
    )
    assert facts.flashinfer_gdn_prefill is False


def test_a_fact_given_explicitly_is_never_probed(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_probe(*args: Any) -> Any:
        raise AssertionError("probed the device")

    monkeypatch.setattr(probe, "device_facts", no_probe)
    monkeypatch.setattr(probe, "flashinfer_gdn_prefill_importable", no_probe)
    facts = probe.detect_runner_facts(
        ARCHS["KimiLinearForCausalLM"], platform="cpu", sm=0, sm_minor=0, cuda=0, pool_dtype="float32",
        head_k_dim=128, head_v_dim=128, flashinfer_gdn_prefill=False,
    )  # fmt: skip
    assert facts.family is la.ModelFamily.KDA
    assert probe.detect_launch_facts(sm=10, cuda=13, kimi_k3=True) == la.LaunchFacts(
        sm=10, cuda=13, kimi_k3=True
    )


def test_launch_facts_are_detected_on_the_same_device(blackwell: None) -> None:
    assert probe.detect_launch_facts() == la.LaunchFacts(sm=10, cuda=13, kimi_k3=False)


def test_this_cpu_machine_is_described_as_a_cpu_without_flashinfer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(probe.importlib.util, "find_spec", lambda name: None)
    assert probe.device_facts() == {"platform": "cpu", "sm": 0, "sm_minor": 0, "cuda": 0}
    assert probe.flashinfer_gdn_prefill_importable() is False


def test_flashinfer_without_the_gdn_prefill_kernel_is_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("flashinfer")
    module.__spec__ = importlib.machinery.ModuleSpec("flashinfer", None)
    module.gdn_prefill = SimpleNamespace()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    assert probe.flashinfer_gdn_prefill_importable() is False


def test_a_rocm_device_is_refused_rather_than_described_as_cuda(
    blackwell: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    with pytest.raises(ValueError, match="ROCm"):
        probe.device_facts()


def test_head_dims_come_from_the_text_config_of_a_multimodal_config() -> None:
    config = SimpleNamespace(text_config=SimpleNamespace(linear_key_head_dim=128, linear_value_head_dim=256))
    assert probe.head_dims(config) == {"head_k_dim": 128, "head_v_dim": 256}
    assert probe.head_dims(SimpleNamespace(head_dim=64)) == {"head_k_dim": 64, "head_v_dim": 64}
    with pytest.raises(ValueError, match="linear_key_head_dim, head_k_dim, head_dim"):
        probe.head_dims(SimpleNamespace())


def test_a_pool_of_a_dtype_the_rules_lack_is_refused() -> None:
    assert probe.pool_dtype(torch.zeros(1, dtype=torch.float16)) == "float16"
    with pytest.raises(ValueError, match="float64"):
        probe.pool_dtype(torch.zeros(1, dtype=torch.float64))


def test_a_runner_without_linear_layers_needs_no_pool_or_heads(
    blackwell: None, flashinfer: types.ModuleType
) -> None:
    facts = probe.detect_runner_facts(ARCHS["Qwen3NextForCausalLMMTP"])
    assert facts.family is la.ModelFamily.OTHER and facts.sm == 10
    with pytest.raises(ValueError, match="state pool"):
        probe.detect_runner_facts(ARCHS["Qwen3NextForCausalLM"], model_config=QWEN3_NEXT_CONFIG)


def test_detected_launch_and_runner_facts_agree_and_a_contradicting_runner_is_refused(
    blackwell: None, flashinfer: types.ModuleType
) -> None:
    server_args = SimpleNamespace(chunked_prefill_size=8192, mamba_ssm_dtype="bfloat16")
    config = process_config_from_server_args(server_args)
    launch(config, probe.detect_launch_facts())
    cls = ARCHS["Qwen3NextForCausalLM"]
    pool = torch.zeros(1, dtype=torch.bfloat16)
    runner = ModelRunner(
        "target", model_cls=cls, process_config=config,
        runner_facts=probe.detect_runner_facts(cls, model_config=QWEN3_NEXT_CONFIG, state_pool=pool),
    )  # fmt: skip
    attn_backend_wrapper(runner)
    assert runner.linear_attn_backends.prefill is la.LinearAttnKernelBackend.FLASHINFER
    elsewhere = ModelRunner(
        "draft", model_cls=cls, process_config=config,
        runner_facts=probe.detect_runner_facts(cls, model_config=QWEN3_NEXT_CONFIG, state_pool=pool, cuda=12),
    )  # fmt: skip
    with pytest.raises(
        RunnerFactsError, match="runner.cuda = 12, but the process was launched with launch.cuda = 13"
    ):
        attn_backend_wrapper(elsewhere)
