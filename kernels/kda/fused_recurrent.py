"""Our Triton KDA decode and verify: the shared token-serial kernel (``kernels.chunked.recurrent``) with a
per-key-channel gate and the delta rule. Pool, padding and verify semantics are that module's."""

from __future__ import annotations

from stampgen.kernels.chunked.recurrent import GATE_PER_KEY, run_recurrent


def decode(q, k, v, g, beta, *, state_pool, state_indices, scale, BV=None):
    """KDA decode: one token per sequence, pool updated in place. ``BV`` overrides the tile."""
    return run_recurrent(
        q, k, v, g, beta, state_pool=state_pool, state_indices=state_indices, scale=scale,
        gate=GATE_PER_KEY, delta_rule=True, BV=BV,
    )  # fmt: skip


def verify(q, k, v, g, beta, *, state_pool, state_indices, intermediate_states, scale, BV=None):
    """KDA verify: D draft tokens per sequence; the state after each to ``intermediate_states``."""
    return run_recurrent(
        q, k, v, g, beta, state_pool=state_pool, state_indices=state_indices,
        intermediate_states=intermediate_states, scale=scale, gate=GATE_PER_KEY, delta_rule=True, BV=BV,
    )  # fmt: skip
