"""Argument checks shared by every linear-attention op (GDN, KDA, lightning).

The public functions of ``kernels.<op>`` call :func:`validate_linear_attn_args` once, before dispatching
to a backend, so kernels may assume valid inputs. Every failure raises ``ValueError`` whose message
starts with the name of the offending argument.

What is checked:

* always (metadata only, never a device sync): ranks, shapes, dtypes, devices, memory layout of the state
  pool and of the intermediate-state buffer, and the size relations between arguments;
* value checks, which need the data (``state_indices`` in ``[-1, slots)`` without duplicate
  non-negative slots; ``cu_seqlens`` starting at 0, non-decreasing and ending at ``T``): run always,
  except while the current CUDA stream is being captured into a graph — the values are then not known
  yet, and reading them back would break the capture. Eager calls on a GPU therefore pay one small
  host sync for these checks; set ``kernels._validation.CHECK_VALUES = False`` (benchmarks) to skip
  them, or pass ``check_values=`` explicitly.

The ops differ only in the shape of their gate ``g``, which is a parameter here (``gate_dims``):
``("T", "HV")`` for GDN, ``("T", "HV", "K")`` for KDA, ``("HV",)`` for lightning.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

PHASES = ("prefill", "decode", "verify")
QKV_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
CU_SEQLENS_DTYPES = (torch.int32, torch.int64)

GATE_DIMS_GDN = ("T", "HV")
GATE_DIMS_KDA = ("T", "HV", "K")
GATE_DIMS_LIGHTNING = ("HV",)

# Module-level switch for the data-dependent checks (see the module docstring).
CHECK_VALUES = True


class KernelUnavailableError(RuntimeError):
    """A backend cannot run in this environment (a package or a device is missing).

    The message says what to install or which device is needed.
    """


@dataclass(frozen=True)
class LinearAttnDims:
    """The sizes a validated call agrees on."""

    T: int  # packed tokens
    N: int  # sequences
    H: int  # q/k heads
    HV: int  # v heads (a multiple of H)
    K: int  # q/k head dim
    V: int  # v head dim
    slots: int  # rows of the state pool
    D: int | None  # verify: draft tokens per sequence; None otherwise


def _shape(t: torch.Tensor) -> str:
    return f"[{', '.join(str(s) for s in t.shape)}]"


def _require_tensor(name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def _require_rank(name: str, t: torch.Tensor, rank: int, layout: str) -> None:
    if t.dim() != rank:
        raise ValueError(f"{name} must have rank {rank} ({layout}), got shape {_shape(t)}")


def _require_shape(name: str, t: torch.Tensor, expected: tuple[int, ...], layout: str) -> None:
    if tuple(t.shape) != tuple(expected):
        want = "[" + ", ".join(str(s) for s in expected) + "]"
        raise ValueError(f"{name} must have shape {layout} = {want}, got {_shape(t)}")


def _require_dtype(name: str, t: torch.Tensor, allowed: tuple[torch.dtype, ...]) -> None:
    if t.dtype not in allowed:
        names = ", ".join(str(d).removeprefix("torch.") for d in allowed)
        raise ValueError(f"{name} must have dtype {names}, got {str(t.dtype).removeprefix('torch.')}")


def _require_inner_contiguous(name: str, t: torch.Tensor, inner: int) -> None:
    """The last ``inner`` dims are dense and row-major (the leading dims may have any stride)."""
    expected = 1
    for dim in range(t.dim() - 1, t.dim() - 1 - inner, -1):
        if t.shape[dim] != 1 and t.stride(dim) != expected:
            raise ValueError(
                f"{name} must be contiguous in its last {inner} dims (strides {tuple(t.stride())} "
                f"for shape {_shape(t)})"
            )
        expected *= t.shape[dim]


def _values_are_checked(check_values: bool | None) -> bool:
    if check_values is not None:
        return check_values
    if not CHECK_VALUES:
        return False
    return not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def validate_linear_attn_args(
    phase: str,
    q,
    k,
    v,
    g,
    beta,
    *,
    state_pool,
    state_indices,
    cu_seqlens=None,
    intermediate_states=None,
    gate_dims: tuple[str, ...] = GATE_DIMS_GDN,
    beta_required: bool = True,
    check_values: bool | None = None,
) -> LinearAttnDims:
    """Check one call of ``<op>.<phase>``; return its sizes or raise ``ValueError`` naming the argument.

    ``cu_seqlens`` is required for prefill and ``intermediate_states`` for verify (and neither is
    accepted elsewhere). ``beta`` may be ``None`` only when ``beta_required`` is false (lightning).
    ``check_values``: ``None`` follows the module rule (see the module docstring).
    """
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")

    # -- q, k, v: packed tokens ------------------------------------------------------------------
    for name, t in (("q", q), ("k", k), ("v", v)):
        _require_tensor(name, t)
    _require_rank("q", q, 3, "[T, H, K]")
    _require_rank("k", k, 3, "[T, H, K]")
    _require_rank("v", v, 3, "[T, HV, V]")
    _require_dtype("q", q, QKV_DTYPES)
    if k.dtype != q.dtype:
        raise ValueError(f"k must have q's dtype {q.dtype}, got {k.dtype}")
    if v.dtype != q.dtype:
        raise ValueError(f"v must have q's dtype {q.dtype}, got {v.dtype}")
    if k.shape != q.shape:
        raise ValueError(f"k must have q's shape {_shape(q)}, got {_shape(k)}")
    T, H, K = q.shape
    if v.shape[0] != T:
        raise ValueError(f"v must have T={T} tokens like q (v is [T, HV, V]), got shape {_shape(v)}")
    HV, V = v.shape[1], v.shape[2]
    if H == 0 or HV % H != 0:
        raise ValueError(f"v has HV={HV} heads, which must be a positive multiple of q's H={H} heads")

    # -- g, beta -----------------------------------------------------------------------------------
    sizes = {"T": T, "HV": HV, "K": K}
    _require_tensor("g", g)
    gate_shape = tuple(sizes[d] for d in gate_dims)
    _require_shape("g", g, gate_shape, "[" + ", ".join(gate_dims) + "]")
    _require_dtype("g", g, (torch.float32,))
    if beta is not None or beta_required:
        _require_tensor("beta", beta)
        _require_shape("beta", beta, (T, HV), "[T, HV]")
        _require_dtype("beta", beta, (torch.float32,))

    # -- state pool and indices --------------------------------------------------------------------
    _require_tensor("state_pool", state_pool)
    _require_rank("state_pool", state_pool, 4, "[slots, HV, V, K]")
    slots = state_pool.shape[0]
    _require_shape("state_pool", state_pool, (slots, HV, V, K), "[slots, HV, V, K]")
    _require_dtype("state_pool", state_pool, (torch.float32,))
    _require_inner_contiguous("state_pool", state_pool, 3)

    _require_tensor("state_indices", state_indices)
    _require_rank("state_indices", state_indices, 1, "[N]")
    _require_dtype("state_indices", state_indices, (torch.int32,))
    N = state_indices.shape[0]

    # -- per-phase token layout ----------------------------------------------------------------------
    D = None
    if phase == "prefill":
        if cu_seqlens is None:
            raise ValueError("cu_seqlens is required for prefill")
        _require_tensor("cu_seqlens", cu_seqlens)
        _require_dtype("cu_seqlens", cu_seqlens, CU_SEQLENS_DTYPES)
        _require_rank("cu_seqlens", cu_seqlens, 1, "[N + 1]")
        if cu_seqlens.shape[0] != N + 1:
            raise ValueError(
                f"cu_seqlens must have len(state_indices) + 1 = {N + 1} entries (one sequence per "
                f"state index), got {cu_seqlens.shape[0]}"
            )
    elif cu_seqlens is not None:
        raise ValueError(f"cu_seqlens is only for prefill, not {phase}")

    if phase == "decode" and T != N:
        raise ValueError(
            f"q must have one token per sequence in decode (T == N): q has T={T} tokens, "
            f"state_indices has N={N} sequences"
        )

    if phase == "verify":
        if intermediate_states is None:
            raise ValueError("intermediate_states is required for verify")
        _require_tensor("intermediate_states", intermediate_states)
        _require_rank("intermediate_states", intermediate_states, 5, "[N, D, HV, V, K]")
        D = intermediate_states.shape[1]
        _require_shape("intermediate_states", intermediate_states, (N, D, HV, V, K), "[N, D, HV, V, K]")
        _require_dtype("intermediate_states", intermediate_states, (torch.float32,))
        _require_inner_contiguous("intermediate_states", intermediate_states, 3)
        if T != N * D:
            raise ValueError(
                f"q must have N*D = {N}*{D} = {N * D} tokens in verify (D draft tokens per sequence, "
                f"sequence-major), got T={T}"
            )
    elif intermediate_states is not None:
        raise ValueError(f"intermediate_states is only for verify, not {phase}")

    # -- one device for everything ---------------------------------------------------------------------
    named = {
        "k": k,
        "v": v,
        "g": g,
        "beta": beta,
        "state_pool": state_pool,
        "state_indices": state_indices,
        "cu_seqlens": cu_seqlens,
        "intermediate_states": intermediate_states,
    }
    for name, t in named.items():
        if t is not None and t.device != q.device:
            raise ValueError(
                f"{name} is on {t.device}, but q is on {q.device}: all tensors must share one device"
            )

    if _values_are_checked(check_values):
        _check_values(state_indices, slots, cu_seqlens, T)

    return LinearAttnDims(T=T, N=N, H=H, HV=HV, K=K, V=V, slots=slots, D=D)


def _check_values(state_indices: torch.Tensor, slots: int, cu_seqlens: torch.Tensor | None, T: int) -> None:
    """Data-dependent checks, read back in one host sync; details are computed only on failure."""
    idx = state_indices.to(torch.int64)
    flags = [((idx < -1) | (idx >= slots)).any()]
    ordered = torch.sort(idx).values
    flags.append(((ordered[1:] == ordered[:-1]) & (ordered[1:] >= 0)).any())
    if cu_seqlens is not None:
        cu = cu_seqlens.to(torch.int64)
        flags.append(cu[0] != 0)
        flags.append((cu[1:] < cu[:-1]).any())
        flags.append(cu[-1] != T)
    failed = torch.stack(flags).tolist()

    if failed[0]:
        bad = idx[(idx < -1) | (idx >= slots)].tolist()
        raise ValueError(f"state_indices must lie in [-1, slots={slots}) (-1 = padding), got {bad[:8]}")
    if failed[1]:
        dup = ordered[1:][(ordered[1:] == ordered[:-1]) & (ordered[1:] >= 0)].unique().tolist()
        raise ValueError(f"state_indices must not repeat a slot within one call, slots {dup[:8]} repeat")
    if cu_seqlens is None:
        return
    if failed[2]:
        raise ValueError(f"cu_seqlens must start at 0, got {cu_seqlens[0].item()}")
    if failed[3]:
        raise ValueError(f"cu_seqlens must be non-decreasing, got {cu_seqlens.tolist()[:16]}")
    if failed[4]:
        raise ValueError(
            f"cu_seqlens must end at T={T} (the number of packed tokens), got {cu_seqlens[-1].item()}"
        )
