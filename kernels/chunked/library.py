"""Register an op's three phases as PyTorch custom ops: ``torch.ops.stampgen.<op>_{prefill,decode,verify}``.

``register_phase_ops("kda", kda)`` registers an op's phases (GDN's, KDA's and lightning's): each
custom op calls the op's public function with the same arguments (so it validates and dispatches exactly
as a direct call), declares what it mutates (prefill and decode: ``state_pool``; verify:
``intermediate_states`` only) and has a fake implementation returning an empty ``[T, HV, V]`` output of
v's dtype, so ``torch.compile(fullgraph=True)`` keeps it in its graph and functionalises the in-place
state updates. Tensor arguments are positional (custom ops take no keyword-only tensors); ``backend`` is
a keyword-only ``str``. With ``beta_optional`` (lightning, which ignores it) ``beta`` may be None.

CUDA graphs: the decode and verify kernels never sync with the host and the value checks of
``kernels._validation`` are skipped while a stream is being captured (warm the ops up first).
"""

# No ``from __future__ import annotations``: custom_op reads the annotations of the local functions
# below, and ``Beta`` is only known in their scope.
from types import ModuleType, SimpleNamespace

import torch

NAMESPACE = "stampgen"


def _output_like(v: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(v, memory_format=torch.contiguous_format)


def register_phase_ops(op: str, api: ModuleType, *, beta_optional: bool = False) -> SimpleNamespace:
    """Define ``stampgen::{op}_prefill``, ``_decode`` and ``_verify`` around ``api``'s public functions;
    returns them as ``.prefill``, ``.decode`` and ``.verify``."""
    Beta = torch.Tensor | None if beta_optional else torch.Tensor

    def prefill(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: Beta,  # type: ignore[valid-type]
        state_pool: torch.Tensor,
        state_indices: torch.Tensor,
        cu_seqlens: torch.Tensor,
        scale: float | None = None,
        *,
        backend: str,
    ) -> torch.Tensor:
        return api.prefill(
            q,
            k,
            v,
            g,
            beta,
            state_pool=state_pool,
            state_indices=state_indices,
            cu_seqlens=cu_seqlens,
            scale=scale,
            backend=backend,
        )

    def decode(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: Beta,  # type: ignore[valid-type]
        state_pool: torch.Tensor,
        state_indices: torch.Tensor,
        scale: float | None = None,
        *,
        backend: str,
    ) -> torch.Tensor:
        return api.decode(
            q, k, v, g, beta, state_pool=state_pool, state_indices=state_indices, scale=scale, backend=backend
        )

    def verify(
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: Beta,  # type: ignore[valid-type]
        state_pool: torch.Tensor,
        state_indices: torch.Tensor,
        intermediate_states: torch.Tensor,
        scale: float | None = None,
        *,
        backend: str,
    ) -> torch.Tensor:
        return api.verify(
            q,
            k,
            v,
            g,
            beta,
            state_pool=state_pool,
            state_indices=state_indices,
            intermediate_states=intermediate_states,
            scale=scale,
            backend=backend,
        )

    mutated = {"prefill": ("state_pool",), "decode": ("state_pool",), "verify": ("intermediate_states",)}
    ops = {}
    for phase, fn in (("prefill", prefill), ("decode", decode), ("verify", verify)):
        fn.__name__ = f"{op}_{phase}"
        fn.__doc__ = f"``kernels.{op}.{phase}`` as an op; mutates {', '.join(mutated[phase])} only."
        custom = torch.library.custom_op(f"{NAMESPACE}::{op}_{phase}", mutates_args=mutated[phase])(fn)
        custom.register_fake(lambda q, k, v, *args, **kwargs: _output_like(v))
        ops[phase] = custom
    return SimpleNamespace(**ops)
