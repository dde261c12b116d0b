"""Our Triton lightning decode and verify: the shared token-serial kernel (``kernels.chunked.recurrent``)
with one constant decay per head and no delta rule. Pool, padding and verify semantics are that module's."""

from __future__ import annotations

from stampgen.kernels.chunked.recurrent import GATE_PER_HEAD, run_recurrent


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale, BV=None):
    """Lightning decode: one token per sequence, pool updated in place. ``beta`` is ignored."""
    return run_recurrent(
        q, k, v, g, None, state_pool=state_pool, state_indices=state_indices, scale=scale,
        gate=GATE_PER_HEAD, delta_rule=False, BV=BV,
    )  # fmt: skip


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale, BV=None):
    """Lightning verify: D draft tokens per sequence; the state after each to ``intermediate_states``."""
    return run_recurrent(
        q, k, v, g, None, state_pool=state_pool, state_indices=state_indices,
        intermediate_states=intermediate_states, scale=scale, gate=GATE_PER_HEAD, delta_rule=False, BV=BV,
    )  # fmt: skip
