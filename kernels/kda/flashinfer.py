"""KDA on FlashInfer's ``recurrent_kda``: adapters from our op API (docs/design.md) to its own.

FlashInfer (``flashinfer-python>=0.7.2``) has one KDA entry point for every phase,
``flashinfer.recurrent_kda(q, k, v, g, beta, ..., initial_state, output_final_state, cu_seqlens)``, with
fla's batch-first layout (``[B, T, H, K]``; varlen = ``B = 1`` plus ``cu_seqlens``) and a K-last state
``[N, HV, V, K]`` — the pool's own layout. Its fast prefill paths are SM100+; **on SM90 (H100/H200) every
phase runs its recurrent CuTe-DSL kernel, token-serial**, so prefill there is far slower than our chunked
Triton kernel. It is imported lazily, inside the functions: importing this module never needs it, and a
call without it (or without an SM90+ GPU) raises ``KernelUnavailableError`` saying what to install.

What the adapters do with our inputs:

* the gate is passed as our log-space ``g``, rounded to bf16 (as ``beta`` is: ``recurrent_kda``
  takes every per-token input in bf16), with ``use_gate_in_kernel=False`` (no ``A_log``,
  ``dt_bias``, ``lower_bound``: the activation, plain or safe, happened before the op), ``beta`` after the
  sigmoid (``beta_is_logit=False``), q and k not re-normalised (``use_qk_l2norm_in_kernel=False``), our
  ``scale``;
* states are gathered from the pool (zeros for padding), passed as ``initial_state`` with
  ``output_final_state=True``, and the final states scattered back to the rows with index ≥ 0 (prefill,
  decode); FlashInfer's own pool indexing is not used, because its padding conventions differ from ours
  (docs/kernels.md, "The state pool");
* decode is a batch of one-token sequences (``[N, 1, H, K]``); verify runs its D draft tokens one call
  each, writing the state after each into ``intermediate_states[real, d]`` (the pool is only read);
* output rows of padding sequences are zeroed. Gather, scatter and masks run on the device.

Limits, raised as ``KernelUnavailableError``: K = V = 128 and bf16 q/k/v (the only configuration its
kernels are built for); no prefill on SM90, where its multi-token calls measured wrong (``prefill``). Its SM90 kernel holds the state in bf16: each call rounds the state it starts
from to bf16 (decode and verify: every token; the pool itself stays fp32). The GPU tests skip when
FlashInfer is missing.
"""

from __future__ import annotations

import importlib

import torch

from stampgen.kernels._validation import KernelUnavailableError

__all__ = ["decode", "is_available", "prefill", "verify"]

INSTALL_HINT = (
    "install flashinfer-python>=0.7.2 with its CuTe-DSL compiler "
    "(pip install 'flashinfer-python[cu13]>=0.7.2' for a CUDA 13 torch) and run on an NVIDIA GPU of "
    "compute capability 9.0 or newer"
)
MIN_CAPABILITY = (9, 0)
HEAD_DIM = 128


def _recurrent_kda():
    try:
        module = importlib.import_module("flashinfer")
    except ImportError as err:
        raise KernelUnavailableError(f"kda backend 'flashinfer' needs FlashInfer: {INSTALL_HINT}") from err
    function = getattr(module, "recurrent_kda", None)
    if function is None:
        raise KernelUnavailableError(
            f"this FlashInfer ({getattr(module, '__version__', '?')}) has no recurrent_kda; {INSTALL_HINT}"
        )
    return function


def is_available() -> bool:
    """FlashInfer importable with ``recurrent_kda`` and an SM90+ GPU present."""
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < MIN_CAPABILITY:
        return False
    try:
        _recurrent_kda()
    except KernelUnavailableError:
        return False
    return True


def _check_supported(q: torch.Tensor, v: torch.Tensor) -> None:
    if torch.cuda.get_device_capability(q.device) < MIN_CAPABILITY:
        raise KernelUnavailableError(
            f"kda backend 'flashinfer' needs compute capability ≥ 9.0; {INSTALL_HINT}"
        )
    if q.shape[-1] != HEAD_DIM or v.shape[-1] != HEAD_DIM:
        raise KernelUnavailableError(
            f"kda backend 'flashinfer' supports K = V = {HEAD_DIM} only, got K={q.shape[-1]}, V={v.shape[-1]}"
        )
    if q.dtype != torch.bfloat16:
        raise KernelUnavailableError(f"kda backend 'flashinfer' takes bf16 q, k, v, got {q.dtype}")


def _gather(state_pool: torch.Tensor, state_indices: torch.Tensor) -> torch.Tensor:
    """[N, HV, V, K] fp32 initial states; padding rows are zeros (never gathered with −1)."""
    real = (state_indices >= 0)[:, None, None, None]
    rows = state_pool.index_select(0, state_indices.clamp(min=0).long())
    return torch.where(real, rows, torch.zeros((), dtype=rows.dtype, device=rows.device))


def _scatter(state_pool: torch.Tensor, state_indices: torch.Tensor, states: torch.Tensor) -> None:
    """``state_pool[state_indices[n]] = states[n]`` for the real rows (index ≥ 0), without a host sync.

    Padding rows are pointed at the slot of the first real row and carry that row's state, so the
    repeated index writes the same bytes whatever the write order; with no real row at all, every row
    writes slot 0's current content back to slot 0.
    """
    real = state_indices >= 0
    any_real = real.any()
    first = real.to(torch.int8).argmax().view(1)  # the first real row (0 when there is none)
    slots = state_indices.long()
    stand_in_slot = torch.where(any_real, slots.index_select(0, first), torch.zeros_like(first))
    stand_in_state = torch.where(
        any_real, states.index_select(0, first), state_pool.index_select(0, stand_in_slot)
    )
    target = torch.where(real, slots, stand_in_slot)
    state_pool.index_copy_(0, target, torch.where(real[:, None, None, None], states, stand_in_state))


def _call(q, k, v, g, beta, initial, scale, cu_seqlens=None):
    """(o [B, T, HV, V], final states [N, HV, V, K] fp32) of ``recurrent_kda`` on batch-first inputs.

    ``recurrent_kda`` takes every per-token input in bf16 (it raises ``TypeError`` on our fp32 ``g``
    and ``beta``), and on SM90 its kernel is built for a bf16 state (an fp32 one is refused: "Mismatched
    Tensor on argument #5 ... expected dtype=bfloat16", FlashInfer 0.7.2 on the H200), so the gate, beta
    and the initial state are rounded to bf16 here and the final state widened back to fp32.
    """
    o, final = _recurrent_kda()(
        q,
        k,
        v,
        g.to(torch.bfloat16),
        beta.to(torch.bfloat16),
        scale=scale,
        initial_state=initial.to(torch.bfloat16),
        output_final_state=True,
        use_qk_l2norm_in_kernel=False,
        use_gate_in_kernel=False,
        cu_seqlens=cu_seqlens,
    )
    return o, final.float()


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale):
    _check_supported(q, v)
    if torch.cuda.get_device_capability(q.device)[0] == 9:
        # Measured on the H200 (FlashInfer 0.7.2): one-token sequences right (2.5e-3), every longer one
        # wrong, whether packed with cu_seqlens or called one by one (rel RMSE 0.5 to 120 against the
        # reference); decode and verify, one token per call, are right. Refused rather than wrong.
        raise KernelUnavailableError(
            "kda backend 'flashinfer': FlashInfer's SM90 recurrent_kda gives wrong outputs for sequences "
            "of more than one token (measured, FlashInfer 0.7.2 on the H200); use the 'triton' prefill"
        )
    T = q.shape[0]
    initial = _gather(state_pool, state_indices)
    o, final = _call(q[None], k[None], v[None], g[None], beta[None], initial, scale, cu_seqlens.long())
    _scatter(state_pool, state_indices, final.float())
    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    real_token = torch.repeat_interleave(state_indices >= 0, lengths.long(), output_size=T)
    return torch.where(
        real_token[:, None, None], o[0].to(v.dtype), torch.zeros((), dtype=v.dtype, device=v.device)
    )


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale):
    _check_supported(q, v)
    initial = _gather(state_pool, state_indices)
    o, final = _call(q[:, None], k[:, None], v[:, None], g[:, None], beta[:, None], initial, scale)
    _scatter(state_pool, state_indices, final.float())
    real = (state_indices >= 0)[:, None, None]
    return torch.where(real, o[:, 0].to(v.dtype), torch.zeros((), dtype=v.dtype, device=v.device))


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale):
    _check_supported(q, v)
    N, D = intermediate_states.shape[:2]
    real = state_indices >= 0
    state = _gather(state_pool, state_indices)
    by_seq = [t.unflatten(0, (N, D)) for t in (q, k, v, g, beta)]
    o = torch.zeros(N, D, *v.shape[1:], dtype=v.dtype, device=v.device)
    for d in range(D):
        q_d, k_d, v_d, g_d, beta_d = (t[:, d : d + 1] for t in by_seq)
        o_d, state = _call(q_d, k_d, v_d, g_d, beta_d, state, scale)
        state = state.float()
        o[:, d] = torch.where(real[:, None, None], o_d[:, 0].to(v.dtype), o[:, d])
        keep = intermediate_states[:, d]
        keep.copy_(torch.where(real[:, None, None, None], state, keep))
    return o.flatten(0, 1)
