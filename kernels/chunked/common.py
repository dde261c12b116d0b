"""Host-side building blocks of the chunked linear-attention ops: sizes, dispatch, launch settings.

Nothing here imports Triton, so an op's public module (``kernels.kda``, ``kernels.lightning``) imports
without it and says what to install only when a Triton backend is asked for.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping

import torch

from stampgen.kernels._validation import KernelUnavailableError, validate_linear_attn_args

# Tokens per chunk of every chunked prefill kernel (GDN's ``chunk_common.CHUNK`` is this one):
# one 64-row tile. Chunks never cross a sequence boundary; a sequence's last chunk is masked.
CHUNK_SIZE = 64
# log2(e): exp(x) = exp2(x · LOG2E). Kept here so host and kernels agree on the constant.
LOG2E = 1.4426950408889634

TRITON_HINT = (
    "install triton (pip install 'triton>=3.3') and run on a CUDA GPU, "
    "or set TRITON_INTERPRET=1 for the CPU interpreter"
)


def triton_interpreted() -> bool:
    """True when Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def resolve_scale(scale: float | None, default: float) -> float:
    """The query scale a kernel gets: the caller's, else the op's default (GDN/KDA ``K ** -0.5``,
    lightning 1.0)."""
    return default if scale is None else float(scale)


def tma_addressable(rows: torch.Tensor) -> bool:
    """Whether TMA can address a [T, cols] view: its base and its row pitch 16-byte aligned."""
    return rows.data_ptr() % 16 == 0 and (rows.stride(0) * rows.element_size()) % 16 == 0


def head_dim_contiguous(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """Kernels index tokens and heads by stride but need the head dim contiguous."""
    return [t if t.stride(-1) == 1 else t.contiguous() for t in tensors]


# H200 (132 SMs): only used to keep small grids from leaving SMs idle, so a rough figure is enough.
SM_COUNT_HINT = 132


def recurrent_tile(programs_per_tile: int, V: int, K: int, *, next_power_of_2: Callable[[int], int]) -> int:
    """BV for the token-serial kernels: ~1024 state elements per program on one warp, thinner tiles when
    fewer than ~4 programs per SM would run (the choice ``kernels.gdn.fused_recurrent`` measured)."""
    if triton_interpreted():
        return min(16, next_power_of_2(V))  # programs run one after another: few, still several V tiles
    BK = next_power_of_2(K)
    BV = max(1, min(next_power_of_2(V), 1024 // BK))
    while BV > 1 and programs_per_tile * -(-V // BV) < 4 * SM_COUNT_HINT:
        BV //= 2
    return BV


class KernelLoader:
    """An op's ``(phase, backend) -> "module:function"`` table, imported on first use, and the one way
    its public functions call a kernel (:meth:`run`).

    ``package`` is the op's package (``stampgen.kernels.kda``); ``hints`` say per backend what to
    install; ``gate_dims`` is the op's gate shape for validation (``kernels._validation``),
    ``beta_required`` whether it takes β (lightning: no; a given β is validated, then not passed on),
    ``default_scale`` the query scale for a head dim K when the caller gives none. :meth:`get` refuses an
    unknown backend with ``ValueError`` and a backend that cannot run here (a Triton or FlashInfer backend
    on CPU tensors without the interpreter, a missing module) with :class:`KernelUnavailableError`.
    """

    def __init__(
        self,
        op: str,
        package: str,
        kernels: Mapping[tuple[str, str], str],
        hints: Mapping[str, str],
        *,
        gate_dims: tuple[str, ...],
        beta_required: bool = True,
        default_scale: Callable[[int], float] = lambda K: K**-0.5,
    ):
        self.op = op
        self.package = package
        self.kernels = kernels
        self.hints = hints
        self.gate_dims = gate_dims
        self.beta_required = beta_required
        self.default_scale = default_scale
        self.backends = tuple(dict.fromkeys(backend for _, backend in kernels))

    def run(self, phase: str, q, k, v, g, beta, *, scale: float | None, backend: str, **pool):
        """The public ``phase`` call: validate the arguments (``ValueError`` naming the bad one), pick the
        kernel (:meth:`get`), call it with ``scale`` resolved. ``pool``: ``state_pool``,
        ``state_indices`` and the phase's ``cu_seqlens`` or ``intermediate_states``."""
        validate_linear_attn_args(
            phase, q, k, v, g, beta, gate_dims=self.gate_dims, beta_required=self.beta_required, **pool
        )
        kernel = self.get(phase, backend, q.device)
        scale = resolve_scale(scale, self.default_scale(q.shape[-1]))
        return kernel(q, k, v, g, beta if self.beta_required else None, scale=scale, **pool)

    def available_backends(self) -> tuple[str, ...]:
        """The backends that can run in this environment (packages importable, a suitable device)."""
        found = ["torch"] if "torch" in self.backends else []
        has_cuda = torch.cuda.is_available()
        if "triton" in self.backends and importlib.util.find_spec("triton") is not None:
            if has_cuda or triton_interpreted():
                found.append("triton")
        if (
            "flashinfer" in self.backends
            and importlib.util.find_spec("flashinfer") is not None
            and has_cuda
            and torch.cuda.get_device_capability() >= (9, 0)
        ):
            found.append("flashinfer")
        return tuple(found)

    def get(self, phase: str, backend: str, device: torch.device):
        if backend not in self.backends:
            raise ValueError(f"backend must be one of {self.backends}, got {backend!r}")
        if (phase, backend) not in self.kernels:
            raise KernelUnavailableError(f"{self.op} has no {phase} kernel for backend {backend!r}")
        if backend == "triton" and device.type != "cuda" and not triton_interpreted():
            raise KernelUnavailableError(
                f"{self.op} backend 'triton' needs CUDA tensors (got {device.type}); {self.hints['triton']}"
            )
        if backend == "flashinfer" and device.type != "cuda":
            raise KernelUnavailableError(
                f"{self.op} backend 'flashinfer' needs CUDA tensors (got {device.type}); "
                f"{self.hints['flashinfer']}"
            )
        module_name, function_name = self.kernels[(phase, backend)].split(":")
        try:
            module = importlib.import_module(f"{self.package}.{module_name}")
        except ModuleNotFoundError as err:
            raise KernelUnavailableError(
                f"{self.op} {phase} backend {backend!r} cannot be imported here (missing module "
                f"{err.name!r}); {self.hints.get(backend, '')}"
            ) from err
        return getattr(module, function_name)
