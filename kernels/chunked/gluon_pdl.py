"""Programmatic dependent launch (PDL) in Gluon kernels, which have no builtin for it (Triton kernels
call ``tl.extra.cuda.gdc_wait`` / ``gdc_launch_dependents``): the two PTX instructions as inline
assembly, shared by GDN's and lightning's Gluon passes.

A launch made with ``launch_pdl=True`` may start its programs while the launch before it on the stream
still runs, once that launch's programs have all called ``launch_dependents`` (or ended); it must call
``wait_for_primary`` before it reads anything the earlier launch writes.
"""

from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def wait_for_primary():
    """Wait here until the launch before this one has finished and its writes are visible."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def launch_dependents():
    """Let the launch after this one (made with ``launch_pdl=True``) start its programs now."""
    gl.inline_asm_elementwise(
        "griddepcontrol.launch_dependents; // $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1
    )
