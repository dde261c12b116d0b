"""The GDN phases as PyTorch custom ops: ``torch.ops.stampgen.gdn_{prefill,decode,verify}``.

Importing this module registers them (``kernels.chunked.library.register_phase_ops``, as for KDA and
lightning). Each op calls the public function of ``kernels.gdn`` with the same
arguments (so it validates and dispatches exactly as a direct call), and declares what it writes:

    torch.ops.stampgen.gdn_prefill(q, k, v, g, beta, state_pool, state_indices, cu_seqlens, scale=None, *, backend)
    torch.ops.stampgen.gdn_decode(q, k, v, g, beta, state_pool, state_indices, scale=None, *, backend)
    torch.ops.stampgen.gdn_verify(q, k, v, g, beta, state_pool, state_indices, intermediate_states,
                                  scale=None, *, backend)

prefill and decode mutate ``state_pool``; verify mutates ``intermediate_states`` only. Why ops and not
plain calls: ``torch.compile(fullgraph=True)`` cannot trace into Triton/CuTe launches or the host-side
argument checks, but it can keep an opaque op with a fake (meta) implementation in its graph — the fake
returns an empty ``[T, HV, V]`` output of v's dtype — and the mutation annotations let it functionalise
the in-place state updates. Tensor arguments are positional because custom ops do not take keyword-only
tensors; ``backend`` is a keyword-only ``str`` (``"torch"``, ``"triton"`` or ``"flashinfer"``).

CUDA graphs: the decode and verify backends never sync with the host, and the value checks of
``kernels._validation`` are skipped while a stream is being captured, so the ops can be captured (warm
them up first: the first call compiles the kernel).
"""

from __future__ import annotations

from stampgen.kernels import gdn
from stampgen.kernels.chunked.library import register_phase_ops

__all__ = ["gdn_decode", "gdn_prefill", "gdn_verify"]

_ops = register_phase_ops("gdn", gdn)
gdn_prefill, gdn_decode, gdn_verify = _ops.prefill, _ops.decode, _ops.verify
