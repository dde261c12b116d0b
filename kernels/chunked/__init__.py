"""Building blocks shared by the KDA and lightning kernels, and with GDN's the triangular solve.

* :mod:`.common` (host side, no Triton needed): the chunk sizes, the backend loader behind every op's
  ``backend=`` dispatch, the default scale, the launch configuration of the recurrent kernels;
* :mod:`.blocks` (Triton ``@jit`` helpers): where a program's sequence and pool tile are, log-space decay
  factors that are only ever formed from non-positive exponents;
* :mod:`.recurrent`: one token-serial Triton kernel for decode and verify, specialised at compile time by
  the shape of the gate (per value head, per key channel) and by whether the delta rule applies;
* :mod:`.chunk_map`: each sequence's first global chunk, and the chunk a program of a chunk-parallel
  grid takes;
* :mod:`.solve` (Triton): a chunk's ``(I + A)⁻¹ diag(β)`` for the delta-rule prefills (GDN's and KDA's);
* :mod:`.reference`: the token-by-token torch driver behind every op's ``naive`` backend, given the op's
  one-token step;
* :mod:`.library`: the ``torch.library`` registration of an op's three phases;
* :mod:`.gluon_pdl` (Gluon): programmatic dependent launch in GDN's and lightning's Gluon passes.

Importing this package imports no Triton; :mod:`.blocks` and :mod:`.recurrent` do.
"""

from stampgen.kernels.chunked.common import (
    CHUNK_SIZE,
    KernelLoader,
    resolve_scale,
    triton_interpreted,
)

__all__ = ["CHUNK_SIZE", "KernelLoader", "resolve_scale", "triton_interpreted"]
