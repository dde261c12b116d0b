"""Greedy speculative decoding (kernels/runtime/speculative.py) against plain greedy decoding of the target.

Greedy verification makes the output the target's own greedy output whatever the draft proposes, so every
pair must match `generate_greedy` token for token; the draft decides only how many tokens a verify step
commits (SGLang's accept length: accepted drafts + the bonus token, 1 to D + 1).
"""

from __future__ import annotations

import pytest
import torch

from stampgen.generated.linear_attn import LaunchFacts
from stampgen.kernels import kda
from stampgen.kernels.backends import KDAAttnBackend, LightningAttentionBackend
from stampgen.kernels.runtime import MambaConfig, ProcessConfig, ServerConfig, launch
from stampgen.kernels.runtime.layers import (
    ForwardMode,
    tiny_bailing_v2_5_config,
    tiny_deepseek_v4_config,
    tiny_kimi_linear_config,
    tiny_qwen3_next_config,
)
from stampgen.kernels.runtime.loader import make_checkpoint
from stampgen.kernels.runtime.models import ARCHS
from stampgen.kernels.runtime.speculative import (
    Phase,
    build_worker,
    generate_greedy,
    generate_speculative,
)
from tests.machines import CPU

PROMPTS = [[5, 17, 3, 99, 42], [7, 7, 1, 64, 23, 88, 2, 11, 9], [31, 4, 120]]  # three lengths
NEW_TOKENS = 16


pytestmark = pytest.mark.usefixtures("one_cpu_thread")  # tests/conftest.py


PAIRS = {
    "Qwen3NextForCausalLMMTP": ("Qwen3NextForCausalLM", tiny_qwen3_next_config()),
    "DeepseekV4ForCausalLMNextN": ("DeepseekV4ForCausalLM", tiny_deepseek_v4_config()),
    "DeepseekV4ForCausalLMDSpark": ("DeepseekV4ForCausalLM", tiny_deepseek_v4_config()),
    "BailingMoeForCausalLMNextN": ("BailingMoeV2_5ForCausalLM", tiny_bailing_v2_5_config()),
}
# KDA verifies with triton, nv_cutedsl or flashinfer (rules/linear_attn.rules): its pair is tested apart,
# with a recorder that runs the stamped triton verify on the torch reference.
KIMI = {"KimiLinearForCausalLMMTP": ("KimiLinearForCausalLM", tiny_kimi_linear_config())}


def pair(draft_arch, hf_config=None, *, seed=0, mamba=None):
    target_arch, default_config = {**PAIRS, **KIMI}[draft_arch]
    hf_config = hf_config or default_config
    config = ProcessConfig(
        mamba=mamba or MambaConfig(linear_attn_backend="torch", linear_attn_verify_backend="torch"),
        server=ServerConfig(chunked_prefill_size=8192, speculative_algorithm="nextn", speculative_topk=1),
    )
    launch(config, LaunchFacts(sm=0, cuda=0, kimi_k3=False))
    common = dict(
        process_config=config,
        runner_facts=dict(
            CPU, head_k_dim=hf_config.linear_key_head_dim, head_v_dim=hf_config.linear_value_head_dim
        ),
        hf_config=hf_config,
        checkpoint=make_checkpoint(ARCHS[target_arch], hf_config, seed=seed),
        slots=len(PROMPTS) + 1,
    )
    target = build_worker("target", ARCHS[target_arch], **common)
    return target, build_worker("draft", ARCHS[draft_arch], target=target, **common)


@pytest.fixture(scope="module")
def qwen3_next():
    return pair("Qwen3NextForCausalLMMTP")


@pytest.fixture(scope="module")
def dspark():
    return pair("DeepseekV4ForCausalLMDSpark")


@pytest.mark.parametrize("draft_arch", sorted(PAIRS))
def test_speculative_decoding_produces_the_targets_greedy_output_token_for_token(draft_arch):
    target, draft = pair(draft_arch)
    greedy = generate_greedy(target, PROMPTS, max_new_tokens=NEW_TOKENS)
    result = generate_speculative(target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=3)
    assert result.outputs == greedy
    assert all(len(out) == NEW_TOKENS for out in greedy)


def test_the_lightning_target_verifies_through_its_consumer_and_commits_between_1_and_d_plus_1():
    target, draft = pair("BailingMoeForCausalLMNextN")
    assert isinstance(target.linear_attn, LightningAttentionBackend) and draft.linear_attn is None
    for draft_tokens in (1, 4):
        result = generate_speculative(
            target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=draft_tokens
        )
        assert result.outputs == generate_greedy(target, PROMPTS, max_new_tokens=NEW_TOKENS)
        assert all(1 <= n <= draft_tokens + 1 for n in result.accept_lengths)


def test_the_kimi_linear_pair_verifies_with_the_stamped_kda_kernel_and_matches_greedy(monkeypatch):
    calls: list[str] = []
    original = kda.verify

    def recording_verify(*args, backend, **kwargs):
        calls.append(backend)
        return original(*args, backend="torch", **kwargs)

    monkeypatch.setattr(kda, "verify", recording_verify)
    target, draft = pair("KimiLinearForCausalLMMTP", mamba=MambaConfig(linear_attn_backend="torch"))
    assert isinstance(target.linear_attn, KDAAttnBackend) and draft.linear_attn is None
    assert dict(target.linear_attn.kernel_backends) == {
        "prefill": "torch",
        "decode": "torch",
        "verify": "triton",
    }
    greedy = generate_greedy(target, PROMPTS, max_new_tokens=NEW_TOKENS)
    result = generate_speculative(target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=3)
    assert result.outputs == greedy
    assert all(1 <= n <= 4 for n in result.accept_lengths)
    assert calls == ["triton"] * (2 * result.steps)  # each verify step: one call per KDA layer


def test_the_hybrid_gdn_target_verifies_with_intermediate_states_and_still_matches_greedy(qwen3_next):
    target, draft = qwen3_next
    assert target.linear_attn.kernel_backends["verify"] == "torch"
    for draft_tokens in (1, 2, 5):
        result = generate_speculative(
            target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=draft_tokens
        )
        assert result.outputs == generate_greedy(target, PROMPTS, max_new_tokens=NEW_TOKENS), draft_tokens


@pytest.mark.parametrize("draft_tokens", [1, 3, 6])
def test_a_self_speculating_draft_with_the_targets_layout_accepts_every_token(dspark, draft_tokens):
    target, draft = dspark
    result = generate_speculative(
        target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=draft_tokens
    )
    assert set(result.accept_lengths) == {draft_tokens + 1}
    assert result.mean_accept_length == draft_tokens + 1


def test_accept_length_counts_the_tokens_each_verify_step_commits(qwen3_next):
    target, draft = qwen3_next
    steps = []
    result = generate_speculative(
        target, draft, PROMPTS, max_new_tokens=NEW_TOKENS, draft_tokens=3, on_step=steps.append
    )
    assert all(1 <= n <= 4 for n in result.accept_lengths)
    # per sequence: the prefill's token, then what the verify steps committed, covers the output
    assert sum(result.accept_lengths) + len(PROMPTS) >= len(PROMPTS) * NEW_TOKENS
    assert len(result.accept_lengths) == sum(sum(s["active"][:3]) for s in steps) + len(PROMPTS)
    assert result.mean_accept_length == sum(result.accept_lengths) / len(result.accept_lengths)


def test_a_finished_sequence_becomes_a_padding_row(dspark):
    target, draft = dspark
    slots_seen = []
    original = target.forward

    def recording_forward(mode, slots, rows, **kwargs):
        if mode is ForwardMode.VERIFY:
            slots_seen.append([s if r is not None else -1 for s, r in zip(slots, rows)])
        return original(mode, slots, rows, **kwargs)

    target.forward = recording_forward
    try:
        prompts = [PROMPTS[0], PROMPTS[1]]
        generate_speculative(target, draft, prompts, max_new_tokens=NEW_TOKENS, draft_tokens=3, batch_size=4)
    finally:
        del target.forward
    assert slots_seen[0] == [1, 2, -1, -1]  # two sequences and two padding rows
    assert all(row[2:] == [-1, -1] for row in slots_seen)


def test_the_kv_cache_holds_exactly_the_committed_tokens_after_each_step(qwen3_next):
    target, draft = qwen3_next
    lengths = []
    result = generate_speculative(
        target,
        draft,
        PROMPTS[:1],
        max_new_tokens=NEW_TOKENS,
        draft_tokens=3,
        on_step=lambda step: lengths.append(target.pools.seq_lens[1]),
    )
    # after each step the target has read the prompt and every committed token but the newest (next t0)
    expected, total = [], len(PROMPTS[0])
    for committed in result.accept_lengths:
        total += committed
        expected.append(total)
    assert lengths == expected


def test_verify_never_writes_the_target_pools(qwen3_next):
    target, draft = qwen3_next
    original = target.forward
    checked = []

    def checking_forward(mode, slots, rows, **kwargs):
        before = [pool.clone() for pool in (*target.pools.ssm.values(), *target.pools.conv.values())]
        lengths = list(target.pools.seq_lens)
        out = original(mode, slots, rows, **kwargs)
        if mode is ForwardMode.VERIFY:
            after = (*target.pools.ssm.values(), *target.pools.conv.values())
            checked.append(
                all(torch.equal(a, b) for a, b in zip(after, before)) and target.pools.seq_lens == lengths
            )
        return out

    target.forward = checking_forward
    try:
        generate_speculative(target, draft, PROMPTS, max_new_tokens=8, draft_tokens=3)
    finally:
        del target.forward
    assert checked and all(checked)


def test_every_phase_is_timed():
    target, draft = pair("DeepseekV4ForCausalLMNextN")
    result = generate_speculative(target, draft, PROMPTS, max_new_tokens=8, draft_tokens=2)
    assert result.timer.calls[Phase.PREFILL] == 1
    assert result.timer.calls[Phase.VERIFY] == result.steps == result.timer.calls[Phase.DRAFT]
    assert all(seconds > 0 for seconds in result.timer.seconds.values())
