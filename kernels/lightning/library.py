"""The lightning phases as PyTorch custom ops: ``torch.ops.stampgen.lightning_{prefill,decode,verify}``.

Importing this module registers them (``kernels.chunked.library`` says how); ``beta`` may be None:

    torch.ops.stampgen.lightning_prefill(q, k, v, g, beta, state_pool, state_indices, cu_seqlens, scale=None,
                                         *, backend)
    torch.ops.stampgen.lightning_decode(q, k, v, g, beta, state_pool, state_indices, scale=None, *, backend)
    torch.ops.stampgen.lightning_verify(q, k, v, g, beta, state_pool, state_indices, intermediate_states,
                                        scale=None, *, backend)
"""

from __future__ import annotations

from stampgen.kernels import lightning
from stampgen.kernels.chunked.library import register_phase_ops

__all__ = ["lightning_decode", "lightning_prefill", "lightning_verify"]

_ops = register_phase_ops("lightning", lightning, beta_optional=True)
lightning_prefill, lightning_decode, lightning_verify = _ops.prefill, _ops.decode, _ops.verify
