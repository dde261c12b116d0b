"""The tiny models (kernels/runtime/layers.py): real layers that run only the kernels of their runner's stamp.

Each test builds runners the way an engine does (ProcessConfig, launch, ModelRunner, the loader,
attn_backend_wrapper) on a CPU with the torch reference kernels, and checks one property of the layers:
where their kernels come from, that the state pools carry a sequence from one call to the next, that
padding rows change nothing, and that the two MoE layouts compute the same function.
"""

from __future__ import annotations

import pytest
import torch

from stampgen.generated.linear_attn import LaunchFacts, RuleViolationError
from stampgen.kernels import gdn, kda, lightning
from stampgen.kernels._validation import KernelUnavailableError
from stampgen.kernels.backends import KDAAttnBackend, LightningAttentionBackend
from stampgen.kernels.runtime import MambaConfig, ProcessConfig, ServerConfig, launch
from stampgen.kernels.runtime.layers import (
    ForwardMode,
    GatedDeltaNet,
    KimiDeltaAttention,
    LayerType,
    LightningAttention,
    SparseMoeBlock,
    minimax_slopes,
    tiny_bailing_v2_5_config,
    tiny_deepseek_v4_config,
    tiny_kimi_linear_config,
    tiny_qwen3_next_config,
)
from stampgen.kernels.runtime.loader import make_checkpoint
from stampgen.kernels.runtime.models import ARCHS
from stampgen.kernels.runtime.speculative import ModelWorker, build_worker
from tests.machines import CPU

EVERY_PHASE_TORCH = MambaConfig(linear_attn_backend="torch", linear_attn_verify_backend="torch")


def launched(mamba: MambaConfig = EVERY_PHASE_TORCH) -> ProcessConfig:
    config = ProcessConfig(mamba=mamba, server=ServerConfig(chunked_prefill_size=8192))
    launch(config, LaunchFacts(sm=0, cuda=0, kimi_k3=False))
    return config


def worker(arch="Qwen3NextForCausalLM", hf_config=None, *, config=None, seed=0, **kwargs) -> ModelWorker:
    hf_config = hf_config or tiny_qwen3_next_config()
    checkpoint = make_checkpoint(ARCHS[arch], hf_config, seed=seed)
    return build_worker(
        "target",
        ARCHS[arch],
        process_config=config or launched(),
        runner_facts=dict(
            CPU, head_k_dim=hf_config.linear_key_head_dim, head_v_dim=hf_config.linear_value_head_dim
        ),
        hf_config=hf_config,
        checkpoint=checkpoint,
        **kwargs,
    )


PROMPTS = [[5, 17, 3, 99, 42], [7, 7, 1, 64, 23, 88, 2, 11, 9], [31, 4]]


pytestmark = pytest.mark.usefixtures("one_cpu_thread")  # tests/conftest.py


def prefill_logits(w: ModelWorker, rows, slots=None):
    slots = slots or list(range(1, len(rows) + 1))
    for slot in slots:
        if slot >= 0:
            w.pools.reset(slot)
    logits, _, batch = w.forward(ForwardMode.PREFILL, slots, rows)
    return [logits[batch.offsets[n] : batch.offsets[n + 1]] for n in range(len(rows))]


def test_the_qwen3_next_target_has_gdn_layers_a_full_attention_layer_and_moe_with_a_gated_shared_expert():
    model = worker().model
    assert model.layer_types.count(LayerType.LINEAR_ATTENTION) == 2
    assert model.layer_types.count(LayerType.FULL_ATTENTION) == 1
    for layer in model.model.layers:
        moe = layer.mlp
        assert isinstance(moe, SparseMoeBlock) and not moe.fused
        assert moe.experts_w13.shape[0] == tiny_qwen3_next_config().num_experts
        assert moe.shared_expert_gate is not None


def test_gdn_layers_run_the_kernels_of_the_runners_stamp_and_nothing_else(monkeypatch):
    calls = []
    original = gdn.prefill

    def recording_prefill(*args, backend, **kwargs):
        calls.append(backend)
        return original(*args, backend="torch", **kwargs)

    monkeypatch.setattr(gdn, "prefill", recording_prefill)
    # the stamp says prefill=triton (an explicit flag); the recorder runs it on the reference
    w = worker(
        config=launched(MambaConfig(linear_attn_backend="torch", linear_attn_prefill_backend="triton"))
    )
    assert w.linear_attn.kernel_backends["prefill"] == "triton"
    prefill_logits(w, PROMPTS)
    assert calls == ["triton", "triton"]  # one call per GDN layer, with the stamped backend


def test_a_model_with_gdn_layers_refuses_a_runner_without_a_gdn_consumer():
    built = worker()
    with pytest.raises(ValueError, match="has GDN layers"):
        ModelWorker(built.loaded, None, slots=4, max_len=32, device="cpu", dtype=torch.float32)


def test_a_gdn_layer_without_a_consumer_in_its_batch_refuses_to_run():
    w = worker()
    w.linear_attn = None
    with pytest.raises(RuntimeError, match="no linear-attention consumer"):
        prefill_logits(w, PROMPTS[:1])


def test_padding_rows_and_batching_leave_each_sequences_logits_as_if_it_ran_alone():
    w = worker()
    batched = prefill_logits(w, [PROMPTS[0], None, PROMPTS[1], PROMPTS[2]], slots=[1, -1, 2, 3])
    for n, prompt in zip((0, 2, 3), PROMPTS):
        (alone,) = prefill_logits(w, [prompt], slots=[4])
        torch.testing.assert_close(batched[n], alone, rtol=1e-4, atol=1e-4)
    assert not batched[1].isnan().any()  # a padding row runs, and is ignored


def test_decoding_token_by_token_continues_a_prefill_exactly_as_one_longer_prefill():
    w = worker()
    sequence = PROMPTS[1]
    (whole,) = prefill_logits(w, [sequence])
    prefill_logits(w, [sequence[:4]])  # slot 1 now holds the first four tokens
    stepwise = []
    for token in sequence[4:]:
        logits, _, _ = w.forward(ForwardMode.DECODE, [1, -1], [[token], None])
        stepwise.append(logits[0])
    torch.testing.assert_close(torch.stack(stepwise), whole[4:], rtol=1e-4, atol=1e-4)


def test_verify_reads_the_pools_and_commit_keeps_the_state_after_the_accepted_tokens():
    w = worker()
    prefix, verified = PROMPTS[1][:5], PROMPTS[1][5:9]
    prefill_logits(w, [prefix])
    pools_before = {i: pool.clone() for i, pool in w.pools.ssm.items()}
    conv_before = {i: pool.clone() for i, pool in w.pools.conv.items()}
    _, _, batch = w.forward(ForwardMode.VERIFY, [1, -1], [verified, None], pad_len=len(verified))
    for i, pool in w.pools.ssm.items():  # verify never writes the pool
        assert torch.equal(pool, pools_before[i]) and torch.equal(w.pools.conv[i], conv_before[i])
    assert w.pools.seq_lens[1] == len(prefix)
    w.commit(batch, [1, 0])  # row 0 keeps its first two verified tokens
    assert w.pools.seq_lens[1] == len(prefix) + 2
    # the state now is the state after prefix + verified[:2]; the next token's logits say so
    logits_after_commit, _, _ = w.forward(ForwardMode.DECODE, [1, -1], [[verified[2]], None])
    (whole,) = prefill_logits(w, [prefix + verified[:3]])
    torch.testing.assert_close(logits_after_commit[0], whole[-1], rtol=1e-4, atol=1e-4)


def test_the_fused_layout_computes_the_same_function_as_the_unfused_one():
    config = tiny_deepseek_v4_config()
    unfused = worker("DeepseekV4ForCausalLM", config)
    fused = worker("DeepseekV4ForCausalLM", config.replace(enforce_shared_experts_fusion=True))
    assert fused.model.model.layers[0].mlp.fused and not unfused.model.model.layers[0].mlp.fused
    # the same weights, laid out both ways: the shared expert becomes routed slot E
    experts = config.num_experts
    for fused_layer, layer in zip(fused.model.model.layers, unfused.model.model.layers):
        fused_layer.load_state_dict(
            {k: v for k, v in layer.state_dict().items() if "mlp" not in k}, strict=False
        )
        moe, fused_moe = layer.mlp, fused_layer.mlp
        fused_moe.gate.weight.copy_(moe.gate.weight)
        fused_moe.experts_w13[:experts] = moe.experts_w13
        fused_moe.experts_w2[:experts] = moe.experts_w2
        fused_moe.experts_w13[experts] = moe.shared_experts.gate_up_proj.weight
        fused_moe.experts_w2[experts] = moe.shared_experts.down_proj.weight
    for name in ("embed_tokens", "norm"):
        getattr(fused.model.model, name).load_state_dict(getattr(unfused.model.model, name).state_dict())
    fused.model.lm_head.load_state_dict(unfused.model.lm_head.state_dict())
    for got, want in zip(prefill_logits(fused, PROMPTS), prefill_logits(unfused, PROMPTS)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_a_gated_shared_expert_cannot_be_built_fused():
    from types import SimpleNamespace

    from stampgen.generated.loader import SharedExpertsFusionDecision
    from stampgen.kernels.runtime.layers import ExpertsLayout

    layout = ExpertsLayout(SimpleNamespace(shared_experts_fusion=SharedExpertsFusionDecision(layout="fused")))
    with pytest.raises(ValueError, match="gated shared expert cannot be fused"):
        SparseMoeBlock(tiny_qwen3_next_config(), layout)


def test_every_gdn_layer_keeps_its_own_state_pool_and_conv_state():
    w = worker()
    gdn_layers = [
        layer.linear_attn for layer in w.model.model.layers if isinstance(layer.mixer, GatedDeltaNet)
    ]
    assert sorted(w.pools.ssm) == sorted(layer.layer_id for layer in gdn_layers)
    prefill_logits(w, [PROMPTS[0]])
    states = [w.pools.ssm[layer.layer_id][1] for layer in gdn_layers]
    assert all(s.abs().sum() > 0 for s in states) and not torch.equal(states[0], states[1])
    assert not w.pools.ssm[gdn_layers[0].layer_id][0].any()  # slot 0 is the null slot


# --------------------------------------------------------------------------------------------- KDA, lightning

# KDA verify runs triton, nv_cutedsl or flashinfer (rules/linear_attn.rules, validate KDAAttnBackend): a
# Kimi-Linear runner on the CPU gets the torch reference for prefill and decode and triton for verify.
KDA_TORCH = MambaConfig(linear_attn_backend="torch")
KIMI = ("KimiLinearForCausalLM", tiny_kimi_linear_config())
BAILING = ("BailingMoeV2_5ForCausalLM", tiny_bailing_v2_5_config())


def kimi(mamba: MambaConfig = KDA_TORCH) -> ModelWorker:
    return worker(*KIMI, config=launched(mamba))


def recording(monkeypatch, module, phase, calls):
    """Record the backend= of every ``module.<phase>`` call and run it on the torch reference."""
    original = getattr(module, phase)

    def record(*args, backend, **kwargs):
        calls.append(backend)
        return original(*args, backend="torch", **kwargs)

    monkeypatch.setattr(module, phase, record)


def test_the_kimi_linear_target_has_kda_layers_a_full_attention_layer_and_moe_with_a_shared_expert():
    model = kimi().model
    assert model.layer_types == (
        LayerType.LINEAR_ATTENTION,
        LayerType.LINEAR_ATTENTION,
        LayerType.FULL_ATTENTION,
    )
    mixers = [layer.mixer for layer in model.model.layers]
    assert all(isinstance(m, KimiDeltaAttention) for m in mixers[:2])
    assert mixers[0].dt_bias.shape == (mixers[0].HV * mixers[0].K,)  # a gate per key channel
    for layer in model.model.layers:  # one ungated shared expert: Kimi Linear's hook lets it fuse
        assert isinstance(layer.mlp, SparseMoeBlock) and layer.mlp.fused


def test_the_kda_gate_is_per_key_channel_in_log_space():
    layer = kimi().model.model.layers[0].linear_attn
    x = torch.randn(5, tiny_kimi_linear_config().hidden_size)
    g, beta = layer._gates(x)
    assert g.shape == (5, layer.HV, layer.K) and g.dtype == torch.float32 and bool((g <= 0).all())
    assert beta.shape == (5, layer.HV) and bool(((beta > 0) & (beta < 1)).all())


def test_the_runners_kda_backend_binds_torch_on_the_cpu_and_the_kda_layers_run_it(monkeypatch):
    w = kimi()
    assert isinstance(w.linear_attn, KDAAttnBackend)
    assert dict(w.linear_attn.kernel_backends) == {"prefill": "torch", "decode": "torch", "verify": "triton"}
    prefills: list[str] = []
    decodes: list[str] = []
    recording(monkeypatch, kda, "prefill", prefills)
    recording(monkeypatch, kda, "decode", decodes)
    prefill_logits(w, PROMPTS)
    w.forward(ForwardMode.DECODE, [1, 2, -1], [[3], [4], None])
    assert prefills == ["torch", "torch"] and decodes == ["torch", "torch"]  # one call per KDA layer


def test_kda_layers_run_the_kernel_the_stamp_names_and_nothing_else(monkeypatch):
    w = kimi(MambaConfig(linear_attn_backend="torch", linear_attn_prefill_backend="triton"))
    assert w.linear_attn.kernel_backends["prefill"] == "triton"
    calls: list[str] = []
    recording(monkeypatch, kda, "prefill", calls)  # the recorder runs the stamped triton on the reference
    prefill_logits(w, PROMPTS)
    assert calls == ["triton", "triton"]


def test_a_stamp_naming_a_backend_without_a_kda_kernel_is_refused_when_the_runner_is_built():
    with pytest.raises(KernelUnavailableError, match="prefill=flashkda has no KDA prefill kernel"):
        kimi(MambaConfig(linear_attn_backend="torch", linear_attn_prefill_backend="flashkda"))


def test_the_rules_refuse_a_torch_verify_for_kda():
    with pytest.raises(RuleViolationError, match="KDA verify supports triton, nv_cutedsl and flashinfer"):
        kimi(EVERY_PHASE_TORCH)


def test_a_kda_layer_refuses_another_ops_consumer():
    w = kimi()
    w.linear_attn = worker().linear_attn  # the Qwen3-Next runner's GDNAttnBackend
    with pytest.raises(RuntimeError, match="runs gdn kernels, not kda"):
        prefill_logits(w, PROMPTS[:1])
    with pytest.raises(ValueError, match="has KDA layers"):
        ModelWorker(w.loaded, worker().linear_attn, slots=4, max_len=32, device="cpu", dtype=torch.float32)


def test_lightning_layers_run_the_kernel_the_model_config_names(monkeypatch):
    w = worker(*BAILING)
    assert isinstance(w.linear_attn, LightningAttentionBackend)
    assert dict(w.linear_attn.kernel_backends) == dict.fromkeys(("prefill", "decode", "verify"), "torch")
    mixers = [layer.mixer for layer in w.model.model.layers[:2]]
    assert all(isinstance(m, LightningAttention) for m in mixers)
    torch.testing.assert_close(mixers[1].decay, -minimax_slopes(2, 1, 3))  # g = -slope, per layer
    assert not w.pools.conv  # lightning has no conv state
    calls: list[str] = []
    recording(monkeypatch, lightning, "prefill", calls)
    prefill_logits(w, PROMPTS)
    assert calls == ["torch", "torch"]


def test_a_model_config_naming_a_backend_without_a_lightning_kernel_is_refused():
    config = tiny_bailing_v2_5_config(lightning_kernel_backend="flashinfer")
    with pytest.raises(KernelUnavailableError, match="no 'flashinfer' kernel"):
        worker(BAILING[0], config)


@pytest.mark.parametrize(("arch", "hf_config"), [KIMI, BAILING], ids=["kda", "lightning"])
def test_kda_and_lightning_decode_and_padding_continue_a_prefill_exactly(arch, hf_config):
    w = worker(arch, hf_config, config=launched(KDA_TORCH))
    sequence = PROMPTS[1]
    (whole,) = prefill_logits(w, [sequence])
    batched = prefill_logits(w, [PROMPTS[0], None, sequence[:4]], slots=[2, -1, 1])
    (alone,) = prefill_logits(w, [PROMPTS[0]], slots=[3])
    torch.testing.assert_close(batched[0], alone, rtol=1e-4, atol=1e-4)
    prefill_logits(w, [sequence[:4]])
    stepwise = []
    for token in sequence[4:]:
        logits, _, _ = w.forward(ForwardMode.DECODE, [1, -1], [[token], None])
        stepwise.append(logits[0])
    torch.testing.assert_close(torch.stack(stepwise), whole[4:], rtol=1e-4, atol=1e-4)
