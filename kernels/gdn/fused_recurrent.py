"""Our Triton kernels for GDN decode and verify: one pass over the pool state, fp32 math.

Decode is pure HBM streaming (~0.9 FLOP per byte: ``docs/kernels.md``, "Rooflines on the H200"): each
request reads and writes its whole fp32 state (2 MiB per layer at Qwen3-Next shapes) and touches a few
hundred bytes of q/k/v. So the kernel is shaped like a copy kernel:

* one program per (sequence, v-head, V-tile); the tile is ``[BV, K]`` rows of the K-last pool, so each
  row is K contiguous fp32 — full 16-byte vector loads and stores, no transposes;
* the state is read once and written once, in place; q, k, v, g and beta are tiny and come from L2;
* enough programs to keep every SM streaming: ``V // BV`` tiles per (sequence, head), chosen by
  ``_decode_config`` (no autotuning: benchmarking a kernel that updates the pool in
  place would apply the update several times, and restoring the pool would copy gigabytes).

Verify is the same program looping over the D draft tokens of its sequence, keeping the state in
registers: one pool read, D intermediate-state writes, the pool never written. The two kernels share
their per-token step (``_load_token``, ``_update``) and their tile addressing; Triton inlines the
helpers, and the sm_90 machine code is the same as when each kernel spelled them out (SASS hash from
``benchmarks/gdn_kernel_resources.py``), so the measurements below still hold.

Measured on an H200 at Qwen3-Next shapes (benchmarks/gdn_recurrent_probe.py): decode at 92–94% of the
copy bandwidth for B = 64…1024 (270.8 µs at B = 256), verify (B = 64, D = 4) at 1.07x its bytes bound.

Padding (``state_indices[n] == -1``): the state load is masked to zeros, the output row is zeroed and no
state is stored (neither to the pool nor, in verify, to ``intermediate_states``, whose padding rows are
left untouched). The pool's slot pitch is ``state_pool.stride(0)`` and slot offsets are computed in
int64, so pools larger than 2^31 elements and pool views (a layer of a bigger buffer) work. Nothing here
syncs with the host, so both launches can be captured into a CUDA graph.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from stampgen.kernels.chunked.blocks import program_tile
from stampgen.kernels.chunked.common import SM_COUNT_HINT


@triton.jit
def _state_tile(state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, offs_k, offs_v, K, V):
    """(base, offsets, mask, is-real) of this program's [BV, K] tile of its sequence's pool slot."""
    slot = tl.load(state_indices_ptr + i_n).to(tl.int64)
    # Never form an address from -1: padding reads slot 0's address under an all-false mask.
    state_base = state_pool_ptr + tl.maximum(slot, 0) * stride_pool_slot + i_hv * (V * K)
    state_mask = (offs_v < V)[:, None] & (offs_k < K)[None, :]
    return state_base, offs_v[:, None] * K + offs_k[None, :], state_mask, slot >= 0


@triton.jit
def _load_token(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    tok,
    i_h,
    i_hv,
    offs_k,
    offs_v,
    mask_k,
    mask_v,
    stride_q_tok,
    stride_q_head,
    stride_v_tok,
    stride_v_head,
    HV: tl.constexpr,
):
    """q, k (fp32 [BK]), v (fp32 [BV]), g and β of token ``tok`` for this program's heads."""
    q = tl.load(q_ptr + tok * stride_q_tok + i_h * stride_q_head + offs_k, mask=mask_k, other=0.0).to(
        tl.float32
    )
    k = tl.load(k_ptr + tok * stride_q_tok + i_h * stride_q_head + offs_k, mask=mask_k, other=0.0).to(
        tl.float32
    )
    v = tl.load(v_ptr + tok * stride_v_tok + i_hv * stride_v_head + offs_v, mask=mask_v, other=0.0).to(
        tl.float32
    )
    return q, k, v, tl.load(g_ptr + tok * HV + i_hv), tl.load(beta_ptr + tok * HV + i_hv)


@triton.jit
def _update(state, q, k, v, g, beta, scale, real):
    """One token of the gated delta rule on a [BV, K] state tile: (new state, output row)."""
    state = state * tl.exp(g)
    u = beta * (v - tl.sum(state * k[None, :], axis=1))  # β(v − Sᵀk), one value per V row
    state = state + u[:, None] * k[None, :]  # S += k uᵀ
    o = tl.sum(state * (q * scale)[None, :], axis=1)  # Sᵀ(scale·q)
    return state, tl.where(real, o, 0.0)


@triton.jit
def _gdn_decode_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    state_pool_ptr,
    state_indices_ptr,
    stride_q_tok,
    stride_q_head,
    stride_v_tok,
    stride_v_head,
    stride_pool_slot,
    scale,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_n, i_hv, i_h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V

    state_base, state_offs, state_mask, real = _state_tile(
        state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, offs_k, offs_v, K, V
    )

    tok = tl.cast(i_n, tl.int64)
    # fmt: off
    q, k, v, g, beta = _load_token(
        q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, tok, i_h, i_hv, offs_k, offs_v, mask_k, mask_v,
        stride_q_tok, stride_q_head, stride_v_tok, stride_v_head, HV,
    )
    # fmt: on
    state = tl.load(state_base + state_offs, mask=state_mask & real, other=0.0, eviction_policy="evict_first")
    state, o = _update(state, q, k, v, g, beta, scale, real)

    tl.store(o_ptr + (tok * HV + i_hv) * V + offs_v, o.to(o_ptr.dtype.element_ty), mask=mask_v)
    tl.store(state_base + state_offs, state, mask=state_mask & real, eviction_policy="evict_first")


@triton.jit
def _gdn_verify_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    g_ptr,
    beta_ptr,
    o_ptr,
    state_pool_ptr,
    state_indices_ptr,
    inter_ptr,
    stride_q_tok,
    stride_q_head,
    stride_v_tok,
    stride_v_head,
    stride_pool_slot,
    stride_inter_seq,
    stride_inter_draft,
    scale,
    D,
    H: tl.constexpr,
    HV: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
):
    i_n, i_hv, i_h, offs_v = program_tile(H, HV, V, BV)
    offs_k = tl.arange(0, BK)
    mask_k = offs_k < K
    mask_v = offs_v < V

    state_base, state_offs, state_mask, real = _state_tile(
        state_pool_ptr, state_indices_ptr, stride_pool_slot, i_n, i_hv, offs_k, offs_v, K, V
    )
    state = tl.load(state_base + state_offs, mask=state_mask & real, other=0.0, eviction_policy="evict_first")

    n64 = tl.cast(i_n, tl.int64)
    inter_base = inter_ptr + n64 * stride_inter_seq + i_hv * (V * K)
    for i_d in range(0, D):
        d64 = tl.cast(i_d, tl.int64)
        tok = n64 * D + d64
        # fmt: off
        q, k, v, g, beta = _load_token(
            q_ptr, k_ptr, v_ptr, g_ptr, beta_ptr, tok, i_h, i_hv, offs_k, offs_v, mask_k, mask_v,
            stride_q_tok, stride_q_head, stride_v_tok, stride_v_head, HV,
        )
        # fmt: on
        state, o = _update(state, q, k, v, g, beta, scale, real)

        tl.store(o_ptr + (tok * HV + i_hv) * V + offs_v, o.to(o_ptr.dtype.element_ty), mask=mask_v)
        tl.store(
            inter_base + d64 * stride_inter_draft + state_offs,
            state,
            mask=state_mask & real,
            eviction_policy="evict_first",
        )


def _decode_config(programs_per_tile: int, V: int, K: int) -> tuple[int, int]:
    """(BV, num_warps) for decode: one warp per program, ~1024 state elements (4 KiB fp32) per program.

    Measured on an H200 at Qwen3-Next shapes (benchmarks/gdn_recurrent_probe.py, K = 128): [8, 128]
    tiles on one warp beat [32, 128] tiles on four warps by ~12% at B = 64…1024 — the K reductions stay
    inside the warp (no shared memory, no barrier) and many small programs keep more loads in flight.
    Small batches (fewer than ~4 programs per SM) take thinner tiles: B = 1 runs 3.2 µs with [4, 128]
    against 3.6 µs with [8, 128].
    """
    if os.environ.get("TRITON_INTERPRET") == "1":
        # The CPU interpreter runs programs one after another: few programs, still more than one V-tile.
        return min(16, triton.next_power_of_2(V)), 1
    BK = triton.next_power_of_2(K)
    BV = max(1, min(triton.next_power_of_2(V), 1024 // BK))
    while BV > 1 and programs_per_tile * triton.cdiv(V, BV) < 4 * SM_COUNT_HINT:
        BV //= 2
    return BV, 1


def _verify_config(programs_per_tile: int, V: int, K: int) -> tuple[int, int]:
    """(BV, num_warps) for verify: half decode's tile ([4, 128] at K = 128), since each program loops
    over D tokens; measured 171.6 µs against 175.6 µs for [8, 128] at B = 64, D = 4."""
    BV, num_warps = _decode_config(programs_per_tile, V, K)
    if os.environ.get("TRITON_INTERPRET") == "1":
        return BV, num_warps
    return max(1, BV // 2), num_warps


def _qkv_strides_ok(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The kernels index tokens and heads by stride but need the head dim contiguous."""
    return [t if t.stride(-1) == 1 else t.contiguous() for t in tensors]


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale, BV=None, num_warps=None):
    """GDN decode: one token per sequence, pool updated in place. ``BV``/``num_warps`` override tuning."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    q, k, v = _qkv_strides_ok(q, k, v)
    g, beta = g.contiguous(), beta.contiguous()
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if T == 0:
        return o
    auto_BV, auto_warps = _decode_config(T * HV, V, K)
    BV = BV or auto_BV
    grid = (triton.cdiv(V, BV) * T * HV,)
    _gdn_decode_kernel[grid](
        q,
        k,
        v,
        g,
        beta,
        o,
        state_pool,
        state_indices,
        q.stride(0),
        q.stride(1),
        v.stride(0),
        v.stride(1),
        state_pool.stride(0),
        scale,
        H=H,
        HV=HV,
        K=K,
        V=V,
        BK=triton.next_power_of_2(K),
        BV=BV,
        num_warps=num_warps or auto_warps,
    )
    return o


def verify(
    q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale, BV=None, num_warps=None
):
    """GDN verify: D draft tokens per sequence; states after each token to ``intermediate_states``."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    N, D = intermediate_states.shape[:2]
    q, k, v = _qkv_strides_ok(q, k, v)
    g, beta = g.contiguous(), beta.contiguous()
    o = torch.empty((T, HV, V), dtype=v.dtype, device=v.device)
    if T == 0:
        return o
    auto_BV, auto_warps = _verify_config(N * HV, V, K)
    BV = BV or auto_BV
    grid = (triton.cdiv(V, BV) * N * HV,)
    _gdn_verify_kernel[grid](
        q,
        k,
        v,
        g,
        beta,
        o,
        state_pool,
        state_indices,
        intermediate_states,
        q.stride(0),
        q.stride(1),
        v.stride(0),
        v.stride(1),
        state_pool.stride(0),
        intermediate_states.stride(0),
        intermediate_states.stride(1),
        scale,
        D,
        H=H,
        HV=HV,
        K=K,
        V=V,
        BK=triton.next_power_of_2(K),
        BV=BV,
        num_warps=num_warps or auto_warps,
    )
    return o
