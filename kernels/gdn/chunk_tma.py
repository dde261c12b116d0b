"""TMA for the chunked GDN prefill: which tensors it can address, and the descriptors over them, for
the Triton state pass (``tile_descriptors``) and for the Gluon kernels (``descriptor``,
``tiles_apply``: ``chunk_gluon``'s state pass and ``chunk_intra_gluon``'s intra launch share them).
"""

from __future__ import annotations

import functools

import torch
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor

from stampgen.kernels.chunked.common import tma_addressable
from stampgen.kernels.gdn.chunk_common import CHUNK, _block_k

_GL_DTYPES = {torch.bfloat16: gl.bfloat16, torch.float16: gl.float16}


def tile_descriptors(q, k, v, tbeta, block_v: int):
    """Triton tensor descriptors (TMA) of the state pass's whole-chunk tiles: q and k [64, K] of one qk
    head, v [64, BV], Tβ [64, 64], each over a [T, heads · cols] view. None where the tiles would
    overhang their head (K not a power of two, V not a multiple of BV) or a view is not 16-byte
    aligned, as TMA needs; the pass then loads through pointers."""
    T, H, K = q.shape
    HV, V = v.shape[1], v.shape[2]
    views = [(q.view(T, H * K), K), (k.view(T, H * K), K), (v.view(T, HV * V), block_v)]
    views.append((tbeta.view(T, HV * CHUNK), CHUNK))
    if K != _block_k(K) or V % block_v:
        return None
    if not all(tma_addressable(t) for t, _ in views):
        return None
    return tuple(TensorDescriptor.from_tensor(t, [CHUNK, cols]) for t, cols in views)


def tiles_apply(*tensors: torch.Tensor) -> bool:
    """Whether the Gluon kernels' TMA tiles of these packed [T, heads, dim] tensors run here
    (``chunk_gluon``'s state pass and ``chunk_intra_gluon``'s intra launch): an sm_90 GPU, one 16-bit
    dtype, data TMA can address (16-byte aligned), the first tensor's dim 64 or 128 (one TMA tile wide:
    K), and at least one chunk of tokens (a TMA tile of 64 rows over fewer is not a case worth a kernel
    of its own)."""
    first = tensors[0]
    if not first.is_cuda or first.dtype not in _GL_DTYPES or any(x.dtype != first.dtype for x in tensors):
        return False
    if torch.cuda.get_device_capability(first.device) != (9, 0):
        return False
    aligned = all(tma_addressable(x.reshape(x.shape[0], -1)) for x in tensors)
    return aligned and first.shape[0] >= CHUNK and first.shape[2] in (64, 128)


def descriptor(x: torch.Tensor, cols: int) -> GluonTensorDescriptor:
    """A Gluon TMA descriptor over ``x`` as [T, heads × dim] with [64, cols] tiles."""
    flat = x.reshape(x.shape[0], -1)
    layout = _tile_layout(cols, x.dtype)
    return GluonTensorDescriptor(flat, list(flat.shape), list(flat.stride()), [CHUNK, cols], layout)


@functools.cache
def _tile_layout(cols: int, dtype: torch.dtype) -> gl.NVMMASharedLayout:
    """The shared-memory layout of a [64, cols] tile, made once: Triton derives it afresh on each call
    (~8 µs on the host, two thirds of a descriptor's cost; a windowed prefill makes ten descriptors a
    window, and called eagerly its launches wait on the host)."""
    return gl.NVMMASharedLayout.get_default_for([CHUNK, cols], _GL_DTYPES[dtype])
