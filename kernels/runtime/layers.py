"""Tiny real models: torch modules of the seed's two systems, small enough for a CPU, real enough to fail.

* :class:`HybridMoeForCausalLM` with Qwen3-Next's shape (:func:`tiny_qwen3_next_config`): Gated DeltaNet
  layers, one full-attention layer with a KV cache, and an MoE FFN of routed experts plus one gated shared
  expert in every layer; with DeepSeek-V4's (:func:`tiny_deepseek_v4_config`): full attention and an MoE
  with an ungated shared expert, the one fusion matters for; with Kimi-Linear's
  (:func:`tiny_kimi_linear_config`): Kimi Delta Attention layers (a gate per key channel) and one
  full-attention layer; with a MiniMax-like lightning shape (:func:`tiny_bailing_v2_5_config`, the
  registry's lightning entry ``BailingMoeV2_5ForCausalLM``): lightning attention layers and one
  full-attention layer. The last two have an ungated shared expert.
* :class:`MTPDraftModel`: an MTP / NextN draft layer, which borrows its target's embedding and LM head.

Everything a layer reads at run time comes in a :class:`ForwardBatch`: the phase, the rows (one slot per
sequence, ``-1`` for padding), the runner's pools, and the runner's linear-attention consumer. GDN and KDA
layers call only that consumer (``GDNAttnBackend`` / ``KDAAttnBackend`` ``.prefill/decode/verify``), so
their kernels are the ones the runner's stamp chose; lightning layers call only theirs
(``LightningAttentionBackend``, whose kernel the model config names, not the stamp); a runner without the
consumer of its layers' op cannot run them. The MoE layers take their weight layout from
an :class:`ExpertsLayout`, which reads the runner's ``SharedExpertsFusionDecision`` through the generated
guard (``rules/loader.rules``).

Checkpoints are flat ``{name: tensor}`` mappings in the HF naming (``model.layers.0.mlp.experts.3.gate_proj
.weight``). :func:`checkpoint_slots` maps every name a model reads to the part of a parameter it fills; the
stacked expert tensors are where the two layouts differ (fused: the shared expert is ``experts.{E}``).
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from stampgen.generated.loader import SharedExpertsFusion, require_shared_experts_fusion_decision

__all__ = [
    "CheckpointSlot",
    "ExpertsLayout",
    "ForwardBatch",
    "ForwardMode",
    "HybridMoeForCausalLM",
    "KimiDeltaAttention",
    "LayerType",
    "LightningAttention",
    "MTPDraftModel",
    "RunnerPools",
    "TinyConfig",
    "checkpoint_slots",
    "tiny_bailing_v2_5_config",
    "tiny_deepseek_v4_config",
    "tiny_kimi_linear_config",
    "tiny_qwen3_next_config",
]


class LayerType(str, enum.Enum):
    LINEAR_ATTENTION = "linear_attention"
    FULL_ATTENTION = "full_attention"


class ForwardMode(enum.Enum):
    """The phase of one forward pass. Draft extends run as prefill: varlen, from each slot's state."""

    PREFILL = "prefill"
    DECODE = "decode"
    VERIFY = "verify"


@dataclass(frozen=True)
class TinyConfig:
    """What stands in for an HF config: the attributes the layers and the loader hooks read."""

    architectures: tuple[str, ...]
    layer_types: tuple[LayerType, ...]
    vocab_size: int = 128
    hidden_size: int = 64
    rms_norm_eps: float = 1e-6
    # full attention
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 16
    rope_theta: float = 10000.0
    # linear attention (H, HV, K, V of docs/kernels.md); linear_attn_op: which layers, "gdn", "kda" or
    # "lightning"; lightning_kernel_backend: the kernels.lightning backend of lightning layers (their
    # kernel comes from the model config, not from the linear-attention stamp)
    linear_attn_op: str = "gdn"
    lightning_kernel_backend: str = "torch"
    linear_num_key_heads: int = 2
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel_dim: int = 4
    # MoE: routed experts and one shared expert of the same width (what fusion needs)
    num_experts: int = 8
    num_experts_per_tok: int = 2
    moe_intermediate_size: int = 32
    n_shared_experts: int = 1
    shared_expert_intermediate_size: int = 32
    shared_expert_gate: bool = False  # Qwen3-Next scales its shared expert by sigmoid(gate(x))
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    enforce_shared_experts_fusion: bool = False  # read by DeepSeek-V4's loader hook
    num_nextn_predict_layers: int = 1

    def replace(self, **changes: Any) -> TinyConfig:
        return dataclasses.replace(self, **changes)


# Two linear-attention layers and a full-attention one, as every tiny hybrid here has.
_HYBRID_LAYERS = (LayerType.LINEAR_ATTENTION, LayerType.LINEAR_ATTENTION, LayerType.FULL_ATTENTION)


def tiny_qwen3_next_config(**changes: Any) -> TinyConfig:
    """Qwen3-Next's shape: two GDN layers and a full-attention one; a gated shared expert."""
    config = TinyConfig(
        architectures=("Qwen3NextForCausalLM",),
        layer_types=_HYBRID_LAYERS,
        shared_expert_gate=True,
    )
    return config.replace(**changes)


def tiny_deepseek_v4_config(**changes: Any) -> TinyConfig:
    """DeepSeek-V4's MoE shape (full attention stands in for its attention): an ungated shared expert."""
    config = TinyConfig(
        architectures=("DeepseekV4ForCausalLM",),
        layer_types=(LayerType.FULL_ATTENTION, LayerType.FULL_ATTENTION),
        routed_scaling_factor=1.5,
    )
    return config.replace(**changes)


def _equal_heads_config(architecture: str, op: str, changes: dict[str, Any]) -> TinyConfig:
    """A tiny hybrid whose ``op`` layers have H = HV = 2 heads of 64 (KDA and lightning have no GQA)."""
    config = TinyConfig(
        architectures=(architecture,),
        layer_types=_HYBRID_LAYERS,
        linear_attn_op=op,
        linear_num_key_heads=2,
        linear_num_value_heads=2,
        linear_key_head_dim=64,
        linear_value_head_dim=64,
    )
    return config.replace(**changes)


def tiny_kimi_linear_config(**changes: Any) -> TinyConfig:
    """Kimi-Linear's shape: two KDA layers (H = HV, a decay per key channel) and a full-attention one; an
    ungated shared expert."""
    return _equal_heads_config("KimiLinearForCausalLM", "kda", changes)


def tiny_bailing_v2_5_config(**changes: Any) -> TinyConfig:
    """A MiniMax-like lightning shape (Ring-linear, ``BailingMoeV2_5ForCausalLM``): two lightning layers
    (H = HV, the MiniMax slopes, no q/k norm, scale 1) and a full-attention one; an ungated shared expert."""
    return _equal_heads_config("BailingMoeV2_5ForCausalLM", "lightning", changes)


# --------------------------------------------------------------------------------------------- pools


class RunnerPools:
    """One runner's memory: a recurrent-state pool per linear-attention layer and a conv-state pool per GDN
    or KDA layer (lightning has no conv), a KV cache per attention layer, and the number of tokens each
    slot holds (``seq_lens``, shared by every layer).

    Slot 0 is never handed out (a null slot, as FlashInfer's bf16 decode wants); padding rows use ``-1``.
    """

    def __init__(
        self,
        config: TinyConfig,
        layer_types: tuple[LayerType, ...],
        *,
        slots: int,
        max_len: int,
        device: torch.device | str,
        dtype: torch.dtype,
    ) -> None:
        self.slots = slots
        self.max_len = max_len
        self.device = torch.device(device)
        self.seq_lens = [0] * slots
        self.ssm: dict[int, torch.Tensor] = {}
        self.conv: dict[int, torch.Tensor] = {}
        self.kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        c = config
        conv_dim = 2 * c.linear_num_key_heads * c.linear_key_head_dim
        conv_dim += c.linear_num_value_heads * c.linear_value_head_dim
        for layer_id, layer_type in enumerate(layer_types):
            if layer_type is LayerType.LINEAR_ATTENTION:
                shape = (slots, c.linear_num_value_heads, c.linear_value_head_dim, c.linear_key_head_dim)
                self.ssm[layer_id] = torch.zeros(shape, dtype=torch.float32, device=device)
                if c.linear_attn_op == "lightning":
                    continue
                width = c.linear_conv_kernel_dim - 1
                self.conv[layer_id] = torch.zeros(slots, conv_dim, width, dtype=dtype, device=device)
            else:
                shape = (slots, max_len, c.num_key_value_heads, c.head_dim)
                self.kv[layer_id] = (
                    torch.zeros(shape, dtype=dtype, device=device),
                    torch.zeros(shape, dtype=dtype, device=device),
                )

    def reset(self, slot: int) -> None:
        """Make ``slot`` empty for a new sequence."""
        self.seq_lens[slot] = 0
        for pool in (*self.ssm.values(), *self.conv.values()):
            pool[slot].zero_()

    def snapshot(self, slots: list[int]) -> dict[str, Any]:
        """The state of ``slots``, to :meth:`restore` after tentative steps (a draft's proposals)."""
        index = torch.tensor(slots, dtype=torch.long, device=self.device)
        return {
            "slots": list(slots),
            "seq_lens": [self.seq_lens[s] for s in slots],
            "ssm": {i: pool[index].clone() for i, pool in self.ssm.items()},
            "conv": {i: pool[index].clone() for i, pool in self.conv.items()},
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        slots = snapshot["slots"]
        index = torch.tensor(slots, dtype=torch.long, device=self.device)
        for slot, length in zip(slots, snapshot["seq_lens"]):
            self.seq_lens[slot] = length  # KV entries past the length are dead and get overwritten
        for i, saved in snapshot["ssm"].items():
            self.ssm[i][index] = saved
        for i, saved in snapshot["conv"].items():
            self.conv[i][index] = saved


@dataclass
class ForwardBatch:
    """One forward pass of one runner: ``N`` rows, each a sequence (its slot) or padding (slot ``-1``).

    ``tokens_per_row[n]`` new tokens of row ``n`` are packed in order; ``prefix_lens[n]`` tokens of it are
    already in the pools. Decode has one token per row, verify ``verify_tokens`` per row.
    """

    mode: ForwardMode
    slots: list[int]
    tokens_per_row: list[int]
    prefix_lens: list[int]
    pools: RunnerPools
    linear_attn: Any  # the runner's linear-attention consumer (GDN/KDA/Lightning...Backend), or None
    device: torch.device
    verify_tokens: int | None = None
    # What a verify pass keeps per linear-attention layer for the commit: (intermediate states, conv
    # windows; None for lightning, which has no conv).
    verified: dict[int, tuple[torch.Tensor, torch.Tensor | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        offsets = [0]
        for count in self.tokens_per_row:
            offsets.append(offsets[-1] + count)
        self.offsets = offsets
        self.state_indices = torch.tensor(self.slots, dtype=torch.int32, device=self.device)
        self.cu_seqlens = torch.tensor(offsets, dtype=torch.int32, device=self.device)
        positions = [p + j for p, count in zip(self.prefix_lens, self.tokens_per_row) for j in range(count)]
        self.positions = torch.tensor(positions, dtype=torch.long, device=self.device)

    @property
    def num_rows(self) -> int:
        return len(self.slots)

    @property
    def num_tokens(self) -> int:
        return self.offsets[-1]


# --------------------------------------------------------------------------------------------- checkpoints


@dataclass(frozen=True)
class CheckpointSlot:
    """The part of a parameter that one checkpoint tensor fills: ``param.data[index]``."""

    param: torch.Tensor  # an nn.Parameter
    index: tuple[Any, ...] = ()

    def view(self) -> torch.Tensor:
        return self.param.data[self.index] if self.index else self.param.data


def checkpoint_slots(module: nn.Module, prefix: str = "") -> dict[str, CheckpointSlot]:
    """Every checkpoint name ``module`` reads, and where it goes. Modules with their own naming (the MoE
    blocks) say so with an ``own_checkpoint_slots(prefix)`` method."""
    own = getattr(module, "own_checkpoint_slots", None)
    if own is not None:
        return own(prefix)
    slots = {prefix + name: CheckpointSlot(param) for name, param in module.named_parameters(recurse=False)}
    for name, child in module.named_children():
        slots.update(checkpoint_slots(child, f"{prefix}{name}."))
    return slots


# --------------------------------------------------------------------------------------------- building blocks


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (x32 * self.weight.float()).to(x.dtype)


def _l2norm(x: torch.Tensor) -> torch.Tensor:
    """Per head, in fp32 (docs/kernels.md: ``x / sqrt(sum(x²) + 1e-6)``)."""
    x32 = x.float()
    return x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + 1e-6)


def _rotate(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotary position embedding of ``x: [T, heads, d]`` at ``positions: [T]`` (rotate-half form)."""
    d = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d))
    angles = positions.float()[:, None] * inv_freq[None, :]  # [T, d/2]
    cos = torch.cat((angles.cos(), angles.cos()), -1)[:, None, :]
    sin = torch.cat((angles.sin(), angles.sin()), -1)[:, None, :]
    x32 = x.float()
    half = d // 2
    rotated = torch.cat((-x32[..., half:], x32[..., :half]), -1)
    return (x32 * cos + rotated * sin).to(x.dtype)


class GatedDeltaNet(nn.Module):
    """A Qwen3-Next GDN mixer: projections, a causal depthwise conv (width 4) with SiLU, the gates, the GDN
    op through the runner's consumer, a gated RMSNorm and the output projection.

    State per slot: the GDN state (``pools.ssm``, ``[HV, V, K]`` fp32) and the conv's last ``W - 1``
    inputs (``pools.conv``). Prefill and decode update both; verify reads them and keeps, for the commit,
    the GDN state after every verified token (``intermediate_states``) and the conv window.
    """

    op = "gdn"  # the consumer's op these layers call (GDNAttnBackend.op)
    label, consumer = "GDN", "GDNAttnBackend"

    def __init__(self, config: TinyConfig, layer_id: int) -> None:
        super().__init__()
        c = config
        self.layer_id = layer_id
        self.H, self.HV = c.linear_num_key_heads, c.linear_num_value_heads
        self.K, self.V = c.linear_key_head_dim, c.linear_value_head_dim
        self.width = c.linear_conv_kernel_dim
        self.key_dim, self.value_dim = self.H * self.K, self.HV * self.V
        conv_dim = 2 * self.key_dim + self.value_dim
        self.in_proj_qkvz = nn.Linear(c.hidden_size, 2 * self.key_dim + 2 * self.value_dim, bias=False)
        self.conv1d = nn.Conv1d(conv_dim, conv_dim, self.width, groups=conv_dim, bias=False)
        self._init_gates(c)
        self.norm = RMSNorm(self.V, c.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, c.hidden_size, bias=False)

    def _init_gates(self, c: TinyConfig) -> None:
        self.in_proj_ba = nn.Linear(c.hidden_size, 2 * self.HV, bias=False)
        self.A_log = nn.Parameter(torch.zeros(self.HV))
        self.dt_bias = nn.Parameter(torch.zeros(self.HV))

    def _gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``g: [T, HV]`` (log-space, fp32) and ``beta: [T, HV]`` (after the sigmoid, fp32)."""
        b, a = torch.split(self.in_proj_ba(x).float(), [self.HV, self.HV], dim=-1)
        g = -torch.exp(self.A_log.float()) * F.softplus(a + self.dt_bias.float())
        return g, torch.sigmoid(b)

    def _gate_output(self, o: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.norm(o) * F.silu(z)

    def forward(self, x: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        backend = _consumer_of(self, batch)
        T = x.shape[0]
        q, k, v, z = torch.split(
            self.in_proj_qkvz(x), [self.key_dim, self.key_dim, self.value_dim, self.value_dim], dim=-1
        )
        conv_out, window = self._conv(torch.cat((q, k, v), -1), batch)
        q, k, v = torch.split(F.silu(conv_out), [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = _l2norm(q.reshape(T, self.H, self.K)).to(x.dtype)
        k = _l2norm(k.reshape(T, self.H, self.K)).to(x.dtype)
        v = v.reshape(T, self.HV, self.V).contiguous()
        g, beta = self._gates(x)
        o, intermediate = _linear_op(self, backend, batch, q, k, v, g, beta)
        if intermediate is not None:
            assert window is not None
            batch.verified[self.layer_id] = (intermediate, window)
        o = self._gate_output(o, z.reshape(T, self.HV, self.V))
        return self.out_proj(o.reshape(T, self.value_dim))

    def _conv(self, mixed: torch.Tensor, batch: ForwardBatch) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The causal conv over each row's tokens, continuing from the slot's last ``W - 1`` inputs.

        Returns the conv's output and, for verify, each row's window ``[N, C, W - 1 + D]`` (its slot's
        inputs, then the verified tokens'), from which the commit takes the slot's new conv state.
        """
        pool = batch.pools.conv[self.layer_id]
        weight = self.conv1d.weight  # [C, 1, W]
        if batch.mode is ForwardMode.PREFILL:
            out = torch.empty_like(mixed)
            for n, slot in enumerate(batch.slots):
                begin, end = batch.offsets[n], batch.offsets[n + 1]
                if end == begin:
                    continue
                prev = pool[slot] if slot >= 0 else pool.new_zeros(pool.shape[1:])
                window = torch.cat((prev, mixed[begin:end].t()), -1)  # [C, W - 1 + L]
                out[begin:end] = F.conv1d(window[None], weight, groups=window.shape[0])[0].t()
                if slot >= 0:
                    pool[slot] = window[:, -(self.width - 1) :]
            return out, None
        per_row = batch.verify_tokens or 1  # decode: one token per row
        rows = mixed.reshape(batch.num_rows, per_row, -1).transpose(1, 2)  # [N, C, per_row]
        real = batch.state_indices >= 0
        prev = pool.new_zeros((batch.num_rows, *pool.shape[1:]))
        prev[real] = pool[batch.state_indices[real].long()]
        windows = torch.cat((prev, rows), -1)  # [N, C, W - 1 + per_row]
        out = F.conv1d(windows, weight, groups=windows.shape[1]).transpose(1, 2).reshape(batch.num_tokens, -1)
        if batch.mode is ForwardMode.DECODE:
            pool[batch.state_indices[real].long()] = windows[real][:, :, 1:]
            return out, None
        return out, windows

    def commit(self, batch: ForwardBatch, accepted: torch.Tensor) -> None:
        """After verify: each real row's slot takes the state after its last kept token.

        ``accepted[n]`` is the number of draft tokens row ``n`` kept (0..D); it keeps ``accepted + 1``
        verified tokens, so the GDN state is ``intermediate_states[n, accepted]``.
        """
        _, window = batch.verified[self.layer_id]
        assert window is not None
        rows, slots, kept = _commit_states(self, batch, accepted)
        taps = kept[:, None] + 1 + torch.arange(self.width - 1, device=rows.device)[None, :]  # [R, W - 1]
        chosen = window[rows].gather(2, taps[:, None, :].expand(-1, window.shape[1], -1))
        batch.pools.conv[self.layer_id][slots] = chosen


def _linear_op(layer: Any, backend: Any, batch: ForwardBatch, q, k, v, g, beta, **kwargs: Any):
    """(o, the state after every verified token or None): ``layer``'s op in the batch's phase through the
    runner's consumer, on the layer's state pool (prefill and decode update it in place; verify only
    reads it)."""
    common = dict(state_pool=batch.pools.ssm[layer.layer_id], state_indices=batch.state_indices, **kwargs)
    if batch.mode is ForwardMode.PREFILL:
        return backend.prefill(q, k, v, g, beta, cu_seqlens=batch.cu_seqlens, **common), None
    if batch.mode is ForwardMode.DECODE:
        return backend.decode(q, k, v, g, beta, **common), None
    assert batch.verify_tokens is not None
    intermediate = torch.empty(
        (batch.num_rows, batch.verify_tokens, layer.HV, layer.V, layer.K),
        dtype=torch.float32,
        device=q.device,
    )
    return backend.verify(q, k, v, g, beta, intermediate_states=intermediate, **common), intermediate


def _commit_states(layer: Any, batch: ForwardBatch, accepted: torch.Tensor):
    """After verify: each real row's slot of ``layer``'s state pool takes the state after its last kept
    token (``accepted[n]`` draft tokens kept, so ``intermediate_states[n, accepted[n]]``). Returns the
    real rows, their slots and their kept counts."""
    intermediate, _ = batch.verified[layer.layer_id]
    real = batch.state_indices >= 0
    rows = torch.nonzero(real).flatten()
    slots = batch.state_indices[real].long()
    kept = accepted.to(rows.device)[rows]
    batch.pools.ssm[layer.layer_id][slots] = intermediate[rows, kept]
    return rows, slots, kept


def _consumer_of(layer: Any, batch: ForwardBatch) -> Any:
    """The runner's consumer for ``layer``'s op; refuses a batch without one, or with another op's."""
    backend = batch.linear_attn
    if backend is None:
        raise RuntimeError(
            f"{layer.label} layer {layer.layer_id}: this runner has no linear-attention consumer; "
            f"{layer.label} layers run the kernels of the runner's consumer (attn_backend_wrapper builds a "
            f"{layer.consumer})"
        )
    op = getattr(backend, "op", layer.op)
    if op != layer.op:
        raise RuntimeError(
            f"{layer.label} layer {layer.layer_id}: the runner's consumer {backend!r} runs {op} kernels, "
            f"not {layer.op} (is the entry class's family {layer.op}?)"
        )
    return backend


class KimiDeltaAttention(GatedDeltaNet):
    """A Kimi-Linear KDA mixer: GDN's layer (projections, the causal conv with SiLU, L2-normalised q/k, the
    state and conv pools, verify and commit), with KDA's gates and output gate.

    The decay is per key channel: ``g = −exp(A_log[h]) · softplus(f_proj(x) + dt_bias[h, :])``,
    ``g: [T, HV, K]`` fp32 log-space (docs/kernels.md, "Kimi Delta Attention"); ``beta = sigmoid(b_proj(x))``.
    The output goes through a sigmoid-gated RMSNorm. The op runs only through the runner's
    ``KDAAttnBackend``, i.e. the ``kernels.kda`` kernels the runner's stamp names.
    """

    op = "kda"
    label, consumer = "KDA", "KDAAttnBackend"

    def _init_gates(self, c: TinyConfig) -> None:
        self.b_proj = nn.Linear(c.hidden_size, self.HV, bias=False)
        self.f_proj = nn.Linear(c.hidden_size, self.HV * self.K, bias=False)
        self.A_log = nn.Parameter(torch.zeros(self.HV))
        self.dt_bias = nn.Parameter(torch.zeros(self.HV * self.K))

    def _gates(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        T = x.shape[0]
        f = self.f_proj(x).float().reshape(T, self.HV, self.K)
        decay = torch.exp(self.A_log.float())[:, None]  # [HV, 1]
        g = -decay * F.softplus(f + self.dt_bias.float().reshape(self.HV, self.K))
        return g.contiguous(), torch.sigmoid(self.b_proj(x).float())

    def _gate_output(self, o: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.norm(o) * torch.sigmoid(z)


def minimax_slopes(heads: int, layer_id: int, num_layers: int) -> torch.Tensor:
    """``s_h = 2^(−8(h+1)/H) · (1 − layer/(L−1) + 1e-5)``, fp32 ``[heads]``, for a power-of-two head count
    (docs/kernels.md, "Lightning attention")."""
    if heads & (heads - 1):
        raise ValueError(f"the MiniMax slopes here take a power-of-two head count, not {heads}")
    base = 2.0 ** (-8.0 * torch.arange(1, heads + 1, dtype=torch.float64) / heads)
    factor = 1.0 - layer_id / max(1, num_layers - 1) + 1e-5
    return (base * factor).float()


class LightningAttention(nn.Module):
    """A MiniMax lightning mixer: ``q, k, v = SiLU(qkv_proj(x))``, the lightning op through the runner's
    ``LightningAttentionBackend`` with ``g: [HV] = −slope`` per head (constant, not a parameter), scale
    1.0 and no q/k normalisation; an RMSNorm, a sigmoid output gate and the output projection.

    State per slot: the lightning state only (``pools.ssm``, ``[HV, V, K]`` fp32; no conv). Verify keeps
    the state after every verified token; the commit takes the one at the last kept token.
    """

    op = "lightning"
    label, consumer = "lightning", "LightningAttentionBackend"

    def __init__(self, config: TinyConfig, layer_id: int) -> None:
        super().__init__()
        c = config
        self.layer_id = layer_id
        self.H, self.HV = c.linear_num_key_heads, c.linear_num_value_heads
        self.K, self.V = c.linear_key_head_dim, c.linear_value_head_dim
        self.key_dim, self.value_dim = self.H * self.K, self.HV * self.V
        self.qkv_proj = nn.Linear(c.hidden_size, 2 * self.key_dim + self.value_dim, bias=False)
        self.output_gate = nn.Linear(c.hidden_size, self.value_dim, bias=False)
        self.norm = RMSNorm(self.value_dim, c.rms_norm_eps)
        self.out_proj = nn.Linear(self.value_dim, c.hidden_size, bias=False)
        # fp32 whatever the model's dtype: a plain attribute, neither a parameter nor a buffer
        self.decay = -minimax_slopes(self.HV, layer_id, len(c.layer_types))

    def forward(self, x: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        backend = _consumer_of(self, batch)
        T = x.shape[0]
        q, k, v = torch.split(F.silu(self.qkv_proj(x)), [self.key_dim, self.key_dim, self.value_dim], dim=-1)
        q = q.reshape(T, self.H, self.K).contiguous()
        k = k.reshape(T, self.H, self.K).contiguous()
        v = v.reshape(T, self.HV, self.V).contiguous()
        g = self.decay.to(x.device)
        o, intermediate = _linear_op(self, backend, batch, q, k, v, g, None, scale=1.0)
        if intermediate is not None:
            batch.verified[self.layer_id] = (intermediate, None)
        o = self.norm(o.reshape(T, self.value_dim)) * torch.sigmoid(self.output_gate(x))
        return self.out_proj(o)

    def commit(self, batch: ForwardBatch, accepted: torch.Tensor) -> None:
        """After verify: each real row's slot takes the state after its last kept token."""
        _commit_states(self, batch, accepted)


_LINEAR_MIXERS: dict[str, type[nn.Module]] = {
    "gdn": GatedDeltaNet,
    "kda": KimiDeltaAttention,
    "lightning": LightningAttention,
}


class FullAttention(nn.Module):
    """Grouped-query attention with RoPE over a per-slot KV cache (``pools.kv``).

    Every phase writes its tokens' keys and values at ``prefix_len..`` of the row's slot; what counts is
    ``pools.seq_lens``, which the worker advances (and, after verify, truncates to what was accepted).
    Padding rows write nothing and return zeros.
    """

    def __init__(self, config: TinyConfig, layer_id: int) -> None:
        super().__init__()
        c = config
        self.layer_id = layer_id
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.theta = c.rope_theta
        self.q_proj = nn.Linear(c.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        T = x.shape[0]
        q = _rotate(self.q_proj(x).reshape(T, self.heads, self.head_dim), batch.positions, self.theta)
        k = _rotate(self.k_proj(x).reshape(T, self.kv_heads, self.head_dim), batch.positions, self.theta)
        v = self.v_proj(x).reshape(T, self.kv_heads, self.head_dim)
        k_cache, v_cache = batch.pools.kv[self.layer_id]
        out = x.new_zeros((T, self.heads, self.head_dim))
        group = self.heads // self.kv_heads
        for n, slot in enumerate(batch.slots):
            begin, end = batch.offsets[n], batch.offsets[n + 1]
            if slot < 0 or end == begin:
                continue
            start, count = batch.prefix_lens[n], end - begin
            if start + count > k_cache.shape[1]:
                raise RuntimeError(
                    f"slot {slot}: {start + count} tokens exceed the KV cache ({k_cache.shape[1]})"
                )
            k_cache[slot, start : start + count] = k[begin:end]
            v_cache[slot, start : start + count] = v[begin:end]
            keys = k_cache[slot, : start + count].repeat_interleave(group, dim=1)  # [L, heads, d]
            values = v_cache[slot, : start + count].repeat_interleave(group, dim=1)
            query_pos = torch.arange(start, start + count, device=x.device)[:, None]
            mask = torch.arange(start + count, device=x.device)[None, :] <= query_pos  # [count, L]
            attended = F.scaled_dot_product_attention(
                q[begin:end].transpose(0, 1), keys.transpose(0, 1), values.transpose(0, 1), attn_mask=mask
            )
            out[begin:end] = attended.transpose(0, 1)
        return self.o_proj(out.reshape(T, self.heads * self.head_dim))


# --------------------------------------------------------------------------------------------- MoE


class ExpertsLayout:
    """How one runner lays out its MoE weights, from its ``SharedExpertsFusionDecision``.

    Built from the runner's loader stamps (``runner.shared_experts_fusion``), read through the generated
    guard: no stamp, no layout (``UnstampedRunnerError``) — a layer never guesses one.
    """

    def __init__(self, runner: Any) -> None:
        self.decision = require_shared_experts_fusion_decision(runner)

    @property
    def fused(self) -> bool:
        return self.decision.layout is SharedExpertsFusion.FUSED

    def __repr__(self) -> str:
        return f"ExpertsLayout({self.decision.layout.value})"


class SharedExpertMLP(nn.Module):
    """SwiGLU MLP; the checkpoint names its projections ``gate_proj``, ``up_proj``, ``down_proj``."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.intermediate = intermediate
        self.gate_up_proj = nn.Linear(hidden, 2 * intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up_proj(x).chunk(2, -1)
        return self.down_proj(F.silu(gate) * up)

    def own_checkpoint_slots(self, prefix: str) -> dict[str, CheckpointSlot]:
        i = self.intermediate
        return {
            f"{prefix}gate_proj.weight": CheckpointSlot(self.gate_up_proj.weight, (slice(0, i),)),
            f"{prefix}up_proj.weight": CheckpointSlot(self.gate_up_proj.weight, (slice(i, 2 * i),)),
            f"{prefix}down_proj.weight": CheckpointSlot(self.down_proj.weight),
        }


class SparseMoeBlock(nn.Module):
    """Routed experts (softmax top-k) plus one shared expert, in the runner's layout.

    Unfused: ``experts_w13/w2`` hold the ``E`` routed experts and ``shared_experts`` is its own MLP.
    Fused: they hold ``E + 1`` experts, the last is the shared one (checkpoint name ``experts.{E}``), and
    every token routes to it with weight 1 — the same function, one grouped GEMM instead of two.
    """

    def __init__(self, config: TinyConfig, layout: ExpertsLayout) -> None:
        super().__init__()
        c = config
        if c.n_shared_experts != 1 or c.shared_expert_intermediate_size != c.moe_intermediate_size:
            raise ValueError("this MoE has exactly one shared expert as wide as a routed one")
        if layout.fused and c.shared_expert_gate:
            raise ValueError(
                "a gated shared expert cannot be fused into the routed experts (no gate in a slot)"
            )
        self.fused = layout.fused
        self.num_experts, self.top_k = c.num_experts, c.num_experts_per_tok
        self.intermediate = c.moe_intermediate_size
        self.norm_topk_prob, self.routed_scaling_factor = c.norm_topk_prob, c.routed_scaling_factor
        slots = self.num_experts + (1 if self.fused else 0)
        self.gate = nn.Linear(c.hidden_size, self.num_experts, bias=False)  # the router
        self.experts_w13 = nn.Parameter(torch.zeros(slots, 2 * self.intermediate, c.hidden_size))
        self.experts_w2 = nn.Parameter(torch.zeros(slots, c.hidden_size, self.intermediate))
        if not self.fused:
            self.shared_experts = SharedExpertMLP(c.hidden_size, c.shared_expert_intermediate_size)
        self.shared_expert_gate = nn.Linear(c.hidden_size, 1, bias=False) if c.shared_expert_gate else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        probs = torch.softmax(self.gate(x).float(), dim=-1)
        weights, experts = torch.topk(probs, self.top_k, dim=-1)  # [T, k]
        if self.norm_topk_prob:
            weights = weights / weights.sum(-1, keepdim=True)
        weights = weights * self.routed_scaling_factor
        if self.fused:  # the shared expert is slot E, chosen by every token with weight 1
            shared = torch.full_like(experts[:, :1], self.num_experts)
            experts = torch.cat((experts, shared), -1)
            weights = torch.cat((weights, torch.ones_like(weights[:, :1])), -1)
        gate_up = torch.einsum("tkih,th->tki", self.experts_w13[experts], x)
        gate, up = gate_up.chunk(2, -1)
        expert_out = torch.einsum("tkhi,tki->tkh", self.experts_w2[experts], F.silu(gate) * up)
        out = (expert_out.float() * weights[..., None]).sum(1).to(x.dtype)
        if not self.fused:
            shared_out = self.shared_experts(x)
            if self.shared_expert_gate is not None:
                shared_out = torch.sigmoid(self.shared_expert_gate(x)) * shared_out
            out = out + shared_out
        return out

    def own_checkpoint_slots(self, prefix: str) -> dict[str, CheckpointSlot]:
        i = self.intermediate
        slots = {f"{prefix}gate.weight": CheckpointSlot(self.gate.weight)}
        for e in range(self.experts_w13.shape[0]):
            slots[f"{prefix}experts.{e}.gate_proj.weight"] = CheckpointSlot(
                self.experts_w13, (e, slice(0, i))
            )
            slots[f"{prefix}experts.{e}.up_proj.weight"] = CheckpointSlot(
                self.experts_w13, (e, slice(i, 2 * i))
            )
            slots[f"{prefix}experts.{e}.down_proj.weight"] = CheckpointSlot(self.experts_w2, (e,))
        if not self.fused:
            slots.update(self.shared_experts.own_checkpoint_slots(f"{prefix}shared_experts."))
        if self.shared_expert_gate is not None:
            slots[f"{prefix}shared_expert_gate.weight"] = CheckpointSlot(self.shared_expert_gate.weight)
        return slots


# --------------------------------------------------------------------------------------------- models


class DecoderLayer(nn.Module):
    def __init__(
        self, config: TinyConfig, layer_id: int, layer_type: LayerType, layout: ExpertsLayout
    ) -> None:
        super().__init__()
        self.layer_type = layer_type
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if layer_type is LayerType.LINEAR_ATTENTION:
            mixer = _LINEAR_MIXERS.get(config.linear_attn_op)
            if mixer is None:
                raise ValueError(
                    f"linear_attn_op {config.linear_attn_op!r}: the tiny models have "
                    f"{', '.join(_LINEAR_MIXERS)}"
                )
            self.linear_attn: nn.Module = mixer(config, layer_id)
        else:
            self.self_attn: nn.Module = FullAttention(config, layer_id)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = SparseMoeBlock(config, layout)

    @property
    def mixer(self) -> nn.Module:
        return self.linear_attn if self.layer_type is LayerType.LINEAR_ATTENTION else self.self_attn

    def forward(self, hidden: torch.Tensor, batch: ForwardBatch) -> torch.Tensor:
        hidden = hidden + self.mixer(self.input_layernorm(hidden), batch)
        return hidden + self.mlp(self.post_attention_layernorm(hidden))


class _Backbone(nn.Module):
    def __init__(self, config: TinyConfig, layout: ExpertsLayout) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            DecoderLayer(config, i, layer_type, layout) for i, layer_type in enumerate(config.layer_types)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class HybridMoeForCausalLM(nn.Module):
    """A causal LM of linear-attention (GDN, KDA or lightning) and full-attention decoder layers with MoE
    FFNs (the target, or a draft that holds the target's weights).

    ``forward`` returns fp32 logits for every token and the last layer's hidden states before the final
    norm (what an MTP draft reads).
    """

    def __init__(self, config: TinyConfig, layout: ExpertsLayout) -> None:
        super().__init__()
        self.config = config
        self.layout = layout
        self.model = _Backbone(config, layout)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)

    @property
    def layer_types(self) -> tuple[LayerType, ...]:
        return tuple(self.config.layer_types)

    @property
    def embed_tokens(self) -> nn.Embedding:
        return self.model.embed_tokens

    def forward(self, input_ids: torch.Tensor, batch: ForwardBatch) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            hidden = layer(hidden, batch)
        return self.lm_head(self.model.norm(hidden)).float(), hidden

    def commit(self, batch: ForwardBatch, accepted: torch.Tensor) -> None:
        """After a verify pass: every linear-attention layer keeps the state after the accepted tokens."""
        for layer in self.model.layers:
            if layer.layer_type is LayerType.LINEAR_ATTENTION:
                layer.linear_attn.commit(batch, accepted)


class _MTPLayers(nn.Module):
    def __init__(self, config: TinyConfig, layout: ExpertsLayout) -> None:
        super().__init__()
        self.enorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.hnorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.eh_proj = nn.Linear(2 * config.hidden_size, config.hidden_size, bias=False)
        self.layers = nn.ModuleList([DecoderLayer(config, 0, LayerType.FULL_ATTENTION, layout)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)


class MTPDraftModel(nn.Module):
    """One MTP (NextN) layer: from the target's hidden state at position ``i`` and the embedding of token
    ``i + 1``, predict token ``i + 2``. Its checkpoint names are ``mtp.*`` in the target's checkpoint; it
    borrows the target's embedding and LM head (they are not its parameters)."""

    layer_types = (LayerType.FULL_ATTENTION,)

    def __init__(
        self, config: TinyConfig, layout: ExpertsLayout, *, embed_tokens: nn.Module, lm_head: nn.Module
    ):
        super().__init__()
        self.config = config
        self.layout = layout
        self.mtp = _MTPLayers(config, layout)
        self._borrowed = (embed_tokens, lm_head)  # a tuple: not registered, not in the checkpoint

    def forward(
        self, input_ids: torch.Tensor, batch: ForwardBatch, *, hidden_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        embed_tokens, lm_head = self._borrowed
        mixed = torch.cat((self.mtp.enorm(embed_tokens(input_ids)), self.mtp.hnorm(hidden_in)), -1)
        hidden = self.mtp.eh_proj(mixed)
        for layer in self.mtp.layers:
            hidden = layer(hidden, batch)
        return lm_head(self.mtp.norm(hidden)).float(), hidden


# --------------------------------------------------------------------------------------------- init


def random_tensor(name: str, shape: torch.Size, generator: torch.Generator) -> torch.Tensor:
    """A seeded initial value for checkpoint tensor ``name`` (fp32, CPU): norms 1, GDN / KDA decay
    parameters in their usual ranges, everything else normal with a 1/sqrt(fan-in) scale."""
    if name.endswith("norm.weight"):
        return torch.ones(shape)
    if name.endswith("A_log"):
        return torch.empty(shape).uniform_(1.0, 16.0, generator=generator).log()
    if name.endswith("dt_bias"):
        return torch.empty(shape).uniform_(-1.0, 1.0, generator=generator)
    if name.endswith("embed_tokens.weight"):
        return torch.randn(shape, generator=generator)
    fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
    return torch.randn(shape, generator=generator) / math.sqrt(fan_in)


def random_checkpoint(slots: Mapping[str, CheckpointSlot], *, seed: int) -> dict[str, torch.Tensor]:
    """Seeded tensors for every name of ``slots`` (in name order, so a name's value depends on the seed and
    the names before it only)."""
    generator = torch.Generator().manual_seed(seed)
    return {name: random_tensor(name, slots[name].view().shape, generator) for name in sorted(slots)}


def named_tensors(slots: Mapping[str, CheckpointSlot]) -> Iterator[tuple[str, torch.Tensor]]:
    """What a model holds, by checkpoint name: what saving it in its own layout writes."""
    for name in sorted(slots):
        yield name, slots[name].view().detach().clone().cpu()
