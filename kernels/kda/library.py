"""The KDA phases as PyTorch custom ops: ``torch.ops.stampgen.kda_{prefill,decode,verify}``.

Importing this module registers them (``kernels.chunked.library`` says how):

    torch.ops.stampgen.kda_prefill(q, k, v, g, beta, state_pool, state_indices, cu_seqlens, scale=None, *, backend)
    torch.ops.stampgen.kda_decode(q, k, v, g, beta, state_pool, state_indices, scale=None, *, backend)
    torch.ops.stampgen.kda_verify(q, k, v, g, beta, state_pool, state_indices, intermediate_states,
                                  scale=None, *, backend)
"""

from __future__ import annotations

from stampgen.kernels import kda
from stampgen.kernels.chunked.library import register_phase_ops

__all__ = ["kda_decode", "kda_prefill", "kda_verify"]

_ops = register_phase_ops("kda", kda)
kda_prefill, kda_decode, kda_verify = _ops.prefill, _ops.decode, _ops.verify
