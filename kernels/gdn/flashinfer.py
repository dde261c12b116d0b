"""GDN on FlashInfer's CuTe-DSL kernels (SM90+): adapters from our op API (docs/design.md) to its own.

FlashInfer (``flashinfer-python>=0.7.2``) has the three phases for Hopper and newer, compiled on first
call by the CuTe-DSL compiler of ``nvidia-cutlass-dsl`` (no nvcc). It is imported lazily, inside the
functions, so importing this module never needs it; a call without it (or without an SM90+ GPU) raises
``KernelUnavailableError`` saying what to install.

What each adapter does with our inputs (``docs/kernels.md`` has the peer's conventions):

* prefill → ``flashinfer.gdn_prefill.chunk_gated_delta_rule``: gate as linear ``alpha = exp(g)`` in
  fp32 (never bf16: weak decays would round to 1.0), fp32 beta, int64 ``cu_seqlens``, q/k not
  re-normalised. The initial states are gathered from the pool ([N, HV, V, K], FlashInfer's layout is
  the pool's), padding rows zeroed; the final states are scattered back to the rows with index ≥ 0;
  output rows of padding sequences are zeroed. Gather and scatter run on the device (no host sync).
* decode → ``flashinfer.gdn_decode.gated_delta_rule_decode_pretranspose`` on the pool itself
  (``initial_state=state_pool``, ``initial_state_indices``; the fp32 path updates rows in place, skips
  index −1 and writes a zero output row for it).
* verify → ``flashinfer.gdn_decode.gated_delta_rule_mtp`` with ``disable_state_update=True`` and our
  ``intermediate_states`` as its ``intermediate_states_buffer`` (it is indexed by batch row, as ours);
  padding rows are skipped by the kernel (output row left as allocated: we allocate zeros; their
  intermediate-state rows are left untouched, as the contract says).

Gates in decode and verify. FlashInfer computes them in-kernel from raw inputs,
``g = −exp(A_log)·softplus(a + dt_bias)`` (softplus linear above 20) and ``β = sigmoid(b)``; it has no
flag for activated gates. We pass ``A_log = dt_bias = 0`` (so ``−exp(0) = −1``) and

    a = softplus⁻¹(−g) = log(expm1(−g)) = −g + log(−expm1(g))     (the second form never overflows)
    b = logit(β)

so the kernel's ``exp(−softplus(a))`` gives back ``exp(g)`` and ``sigmoid(b)`` gives back β. ``a`` is
clamped to [−80, 80]: g = 0 would give a = −inf, and one MTP kernel variant computes
``0·x`` for the unused softplus branch, which is NaN for infinite x; softplus(−80) is exactly 0 in fp32
(α = 1, as for g = 0), and g < −80 becomes α = exp(−80) ≈ 1.8e-35 instead of ≈ 0. The conversion is
one Triton launch (``raw_gate_inputs``) computing ``a = log(1 − exp(g)) − g`` (1 − exp(g) carries no
error beyond the rounding of exp(g)) and ``b = log(β / (1 − β))``. In fp32 (decode: the kernel reads a
and b as fp32) the round trip returns α and β to within the fast-math exp/log on both sides: ≤ 2e-7
relative in exact arithmetic (CPU), ≤ 4e-6 with the GPU's approximate exp/log over g ∈ [−20, 0] (tested
in ``tests/kernels/test_gdn_flashinfer_gpu.py``). ``gated_delta_rule_mtp`` however casts ``a`` and ``b``
to bf16 before its kernel, so verify's α and β carry bf16 rounding of their logits (≤ 0.7% relative on
β and on α for ordinary decays; on random inputs this moves verify outputs by ~6e-4 relative RMSE,
under the bf16 input rounding itself; measured on the H200 against our Triton verify: 1.3e-3 on outputs,
4.6e-4 on intermediate states).
FlashInfer can only decay (α ≤ 1): a positive g (not a valid GDN gate) comes out as NaN.

Limits of the peer kernels, raised as ``KernelUnavailableError`` (this backend cannot run the call):
K = V = 128; q/k/v bf16 (prefill also fp16) — FlashInfer's decode kernels would silently round other
dtypes to bf16.
"""

from __future__ import annotations

import importlib
import os

import torch

from stampgen.kernels._validation import KernelUnavailableError

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover
    triton = tl = None

_TRITON_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

__all__ = ["decode", "is_available", "prefill", "raw_gate_inputs", "verify"]

INSTALL_HINT = (
    "install flashinfer-python>=0.7.2 with its CuTe-DSL compiler "
    "(pip install 'flashinfer-python[cu13]>=0.7.2' for a CUDA 13 torch, or 'stampgen[flashinfer]'), "
    "and run on an NVIDIA GPU of compute capability 9.0 or newer (Hopper H100/H200, Blackwell)"
)
MIN_CAPABILITY = (9, 0)
HEAD_DIM = 128  # the only K and V the FlashInfer GDN kernels take
# |a| bound for the decode/verify gate logit (see the module docstring).
_GATE_LOGIT_BOUND = 80.0

_modules: dict[str, object] = {}
_zeros_by_device: dict[tuple[torch.device, int], torch.Tensor] = {}


def _import_error() -> str | None:
    """Why FlashInfer's GDN modules cannot be imported here, or None once they are (cached on success)."""
    if "gdn_prefill" in _modules:
        return None
    try:
        prefill_module = importlib.import_module("flashinfer.gdn_prefill")
        decode_module = importlib.import_module("flashinfer.gdn_decode")
    except Exception as err:  # a broken install raises more than ImportError (missing CUDA libs, DSL)
        return f"{type(err).__name__}: {err}"
    _modules["gdn_prefill"] = prefill_module
    _modules["gdn_decode"] = decode_module
    return None


def is_available() -> bool:
    """FlashInfer's GDN modules import and the current CUDA device has compute capability ≥ 9.0."""
    return (
        _import_error() is None
        and torch.cuda.is_available()
        and torch.cuda.get_device_capability() >= MIN_CAPABILITY
    )


def _module(name: str, device: torch.device):
    """The FlashInfer module ``name`` for a call on ``device``, or KernelUnavailableError."""
    reason = _import_error()
    if reason is not None:
        raise KernelUnavailableError(
            f"gdn backend 'flashinfer' needs the flashinfer package, which cannot be imported here "
            f"({reason}); {INSTALL_HINT}"
        )
    if device.type != "cuda":
        raise KernelUnavailableError(
            f"gdn backend 'flashinfer' runs on CUDA tensors only, got {device.type}; {INSTALL_HINT}"
        )
    capability = torch.cuda.get_device_capability(device)
    if capability < MIN_CAPABILITY:
        raise KernelUnavailableError(
            f"gdn backend 'flashinfer' needs compute capability >= 9.0, but {torch.cuda.get_device_name(device)} "
            f"has {capability[0]}.{capability[1]}; {INSTALL_HINT}"
        )
    return _modules[name]


def _require_supported(phase: str, q: torch.Tensor, v: torch.Tensor) -> None:
    K, V = q.shape[-1], v.shape[-1]
    if K != HEAD_DIM or V != HEAD_DIM:
        raise KernelUnavailableError(
            f"gdn backend 'flashinfer' supports K = V = {HEAD_DIM} only, got K={K}, V={V}; "
            "use backend 'triton' or 'torch' for other head dims"
        )
    dtypes = (torch.bfloat16, torch.float16) if phase == "prefill" else (torch.bfloat16,)
    if q.dtype not in dtypes:
        names = " or ".join(str(d).removeprefix("torch.") for d in dtypes)
        raise KernelUnavailableError(
            f"gdn backend 'flashinfer' {phase} takes q, k, v in {names}, got {str(q.dtype).removeprefix('torch.')} "
            "(its kernels would round them to bf16); use backend 'triton' or 'torch'"
        )


def raw_gate_inputs(g: torch.Tensor, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) fp32 such that FlashInfer's ``exp(−softplus(a))`` = exp(g) and ``sigmoid(b)`` = beta.

    With ``A_log = dt_bias = 0``; see the module docstring for the derivation and the clamp. On a GPU
    this is one Triton launch (decode at small batch is latency-bound, and the equivalent torch
    expression is six launches); elsewhere, or without Triton, torch ops.
    """
    if _gate_logits_kernel is not None and (g.is_cuda or _TRITON_INTERPRET):
        g, beta = g.contiguous(), beta.contiguous()
        a = torch.empty_like(g)
        b = torch.empty_like(g)
        n = g.numel()
        if n:
            block = 1024
            _gate_logits_kernel[(triton.cdiv(n, block),)](
                g, beta, a, b, n, BOUND=_GATE_LOGIT_BOUND, BLOCK=block
            )
        return a, b
    return raw_gate_inputs_torch(g, beta)


def raw_gate_inputs_torch(g: torch.Tensor, beta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``raw_gate_inputs`` in torch ops: a = −g + log(−expm1(g)) clamped, b = logit(beta)."""
    a = torch.log(torch.expm1(g).neg_()).sub_(g).clamp_(-_GATE_LOGIT_BOUND, _GATE_LOGIT_BOUND)
    b = torch.logit(beta)
    return a, b


if triton is not None:

    @triton.jit
    def _gate_logits_kernel(g_ptr, beta_ptr, a_ptr, b_ptr, n, BOUND: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        g = tl.load(g_ptr + offs, mask=mask, other=-1.0)
        beta = tl.load(beta_ptr + offs, mask=mask, other=0.5)
        # a = log(expm1(−g)) = −g + log(1 − exp(g)). 1 − exp(g) is exact given the rounded exp(g) (no
        # cancellation error beyond it), so the kernel's 1 / (1 + exp(a)) returns exp(g) to about its ulp
        # without an expm1 (which Triton's interpreter lacks). g = 0 gives log(0) = −inf, clamped.
        a = tl.log(1.0 - tl.exp(g)) - g
        a = tl.minimum(
            tl.maximum(a, -BOUND, propagate_nan=tl.PropagateNan.ALL), BOUND, propagate_nan=tl.PropagateNan.ALL
        )
        b = tl.log(beta / (1.0 - beta))  # logit; β = 1 → +inf, β = 0 → −inf, both exact through sigmoid
        tl.store(a_ptr + offs, a, mask=mask)
        tl.store(b_ptr + offs, b, mask=mask)

    @triton.jit
    def _zero_padding_rows_kernel(
        o_ptr,
        seq_of_token_ptr,
        state_indices_ptr,
        T,
        ROW: tl.constexpr,
        BLOCK_T: tl.constexpr,
        BLOCK_R: tl.constexpr,
    ):
        tokens = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
        cols = tl.program_id(1) * BLOCK_R + tl.arange(0, BLOCK_R)
        in_range = tokens < T
        seq = tl.load(seq_of_token_ptr + tokens, mask=in_range, other=0)
        slot = tl.load(state_indices_ptr + seq, mask=in_range, other=0)
        padding = in_range & (slot < 0)
        offsets = tl.cast(tokens, tl.int64)[:, None] * ROW + cols[None, :]
        zeros = tl.zeros((BLOCK_T, BLOCK_R), dtype=o_ptr.dtype.element_ty)
        # Rows of real sequences are masked off: no memory traffic for them.
        tl.store(o_ptr + offsets, zeros, mask=padding[:, None] & (cols[None, :] < ROW))

else:  # pragma: no cover - FlashInfer installs normally come with a CUDA torch, which brings Triton
    _gate_logits_kernel = None
    _zero_padding_rows_kernel = None


def _dense_last_dim(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """FlashInfer's kernels load rows with 16-byte vectors: the last dim must be contiguous."""
    return [t if t.stride(-1) == 1 else t.contiguous() for t in tensors]


def _zero_head_params(device: torch.device, HV: int) -> torch.Tensor:
    """A cached fp32 zeros[HV], passed as both ``A_log`` and ``dt_bias`` (read only)."""
    key = (device, HV)
    zeros = _zeros_by_device.get(key)
    if zeros is None:
        zeros = torch.zeros(HV, dtype=torch.float32, device=device)
        _zeros_by_device[key] = zeros
    return zeros


def prefill(q, k, v, g, beta, *, state_pool, state_indices, cu_seqlens, scale):
    gdn_prefill = _module("gdn_prefill", q.device)
    _require_supported("prefill", q, v)
    T, HV, V = v.shape
    N = state_indices.shape[0]
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if N == 0 or T == 0:
        return o.zero_()

    real = state_indices >= 0
    real_rows = real[:, None, None, None]
    slot = state_indices.clamp(min=0).long()  # never gather with -1: it would wrap to the last slot
    initial = state_pool.index_select(0, slot).masked_fill_(~real_rows, 0.0)
    # Starts as the initial state, so a zero-length sequence scatters its state back unchanged.
    final = initial.clone()
    gdn_prefill.chunk_gated_delta_rule(
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        g=torch.exp(g),
        beta=beta.contiguous(),
        scale=scale,
        initial_state=initial,
        output_final_state=True,
        cu_seqlens=cu_seqlens.to(torch.int64),
        use_qk_l2norm_in_kernel=False,
        output=o,
        output_state=final,
        backend="flashinfer",
    )
    zero_padding_rows(o, cu_seqlens, state_indices)
    _scatter_real_rows(state_pool, slot, real, final)
    return o


def zero_padding_rows(o: torch.Tensor, cu_seqlens: torch.Tensor, state_indices: torch.Tensor) -> None:
    """o[t] = 0 for the tokens t of padding sequences (state index −1), without a host sync.

    On a GPU (or under the Triton interpreter) one Triton launch that reads per-token sequence ids and
    writes only the padding rows: a masked fill of the whole output would read and write all of it, which
    cost ~0.8 ms at 64k tokens on the H200 (more than half of FlashInfer's own prefill time there).
    """
    T, N = o.shape[0], state_indices.shape[0]
    if T == 0 or N == 0:
        return
    cu = cu_seqlens.to(torch.int64)
    seq_of_token = torch.searchsorted(cu[1:], torch.arange(T, device=o.device), right=True).clamp_(max=N - 1)
    if _zero_padding_rows_kernel is None or not (o.is_cuda or _TRITON_INTERPRET) or not o.is_contiguous():
        o.masked_fill_((state_indices[seq_of_token] < 0)[:, None, None], 0.0)
        return
    row = o[0].numel()
    block_t, block_r = 16, min(1024, triton.next_power_of_2(row))
    grid = (triton.cdiv(T, block_t), triton.cdiv(row, block_r))
    _zero_padding_rows_kernel[grid](
        o, seq_of_token, state_indices, T, ROW=row, BLOCK_T=block_t, BLOCK_R=block_r
    )


def _scatter_real_rows(state_pool, slot, real, final) -> None:
    """state_pool[slot[n]] = final[n] for the sequences with ``real[n]``, without a host sync.

    Padding rows are redirected to the slot of the first real sequence and carry that sequence's final
    state, so the duplicate index writes identical bytes (the result does not depend on write order); with
    no real sequence at all, every row rewrites slot 0 with its current content.
    """
    any_real = real.any()
    first = real.to(torch.int8).argmax().view(1)  # first real sequence (0 when there is none)
    fallback_slot = torch.where(any_real, slot.index_select(0, first), torch.zeros_like(first))
    fallback_state = torch.where(
        any_real, final.index_select(0, first), state_pool.index_select(0, fallback_slot)
    )
    target = torch.where(real, slot, fallback_slot)
    values = torch.where(real[:, None, None, None], final, fallback_state)
    state_pool.index_copy_(0, target, values)


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale):
    gdn_decode = _module("gdn_decode", q.device)
    _require_supported("decode", q, v)
    N, HV, V = v.shape
    o = torch.empty((N, 1, HV, V), dtype=torch.bfloat16, device=v.device)
    if N == 0:
        return o.view(N, HV, V)
    if state_pool.stride(0) % 4 != 0:
        raise KernelUnavailableError(
            f"gdn backend 'flashinfer' decode needs state_pool.stride(0) to be a multiple of 4 "
            f"(16-byte rows), got {state_pool.stride(0)}"
        )
    q, k, v = _dense_last_dim(q, k, v)
    a, b = raw_gate_inputs(g, beta)
    zeros = _zero_head_params(q.device, HV)
    gdn_decode.gated_delta_rule_decode_pretranspose(
        q.unsqueeze(1),
        k.unsqueeze(1),
        v.unsqueeze(1),
        None,
        zeros,  # A_log: exp(0) = 1
        a.unsqueeze(1),
        zeros,  # dt_bias
        b.unsqueeze(1),
        scale=scale,
        output=o,
        use_qk_l2norm=False,
        initial_state=state_pool,
        initial_state_indices=state_indices,
        backend="flashinfer",
    )
    return o.view(N, HV, V)


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale):
    gdn_decode = _module("gdn_decode", q.device)
    _require_supported("verify", q, v)
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N, D = intermediate_states.shape[:2]
    # Zeros: the kernel leaves the output rows of padding sequences as allocated.
    o = torch.zeros((N, D, HV, V), dtype=torch.bfloat16, device=v.device)
    if N == 0 or D == 0:
        return o.view(T, HV, V)
    q, k, v = _dense_last_dim(q, k, v)
    a, b = raw_gate_inputs(g, beta)  # fp32; gated_delta_rule_mtp casts them to bf16
    zeros = _zero_head_params(q.device, HV)
    # FlashInfer writes through a flat view of the buffer, so it must be dense; a strided one goes
    # through a dense copy (which keeps the padding rows' content) and back.
    buffer = intermediate_states if intermediate_states.is_contiguous() else intermediate_states.contiguous()
    gdn_decode.gated_delta_rule_mtp(
        q.reshape(N, D, H, K),
        k.reshape(N, D, H, K),
        v.reshape(N, D, HV, V),
        initial_state=state_pool,
        initial_state_indices=state_indices,
        A_log=zeros,
        a=a.view(N, D, HV),
        dt_bias=zeros,
        b=b.view(N, D, HV),
        scale=scale,
        output=o,
        intermediate_states_buffer=buffer,
        disable_state_update=True,
        use_qk_l2norm=False,
    )
    if buffer is not intermediate_states:
        intermediate_states.copy_(buffer)
    return o.view(T, HV, V)
