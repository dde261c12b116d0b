"""Output folders of the benchmark tools (``--out``, and the resources tool's ``--sass`` / ``--listing``):
made, parents too, right after the arguments are parsed, or a usage error saying why one cannot be made
or written into (a file in its way, no permission) — not a traceback after minutes of GPU work. A tool
that needs a GPU says so (``out_dir``'s ``needs``; ``require_gpu`` where it writes no folder): the folder
is checked, then the GPU, and only then made, so a refused run leaves nothing behind and either refusal
is the same usage error (exit 2)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def out_dir(
    parser: argparse.ArgumentParser,
    path: str | os.PathLike | None,
    option: str = "--out",
    needs: str | None = None,
    sm90: bool = False,
):
    """``path`` (given as ``option``) made, and returned; None stays None. ``needs``: what the tool needs
    of this machine (``require_gpu``), checked after the folder is found makeable (or, already there,
    writable) and before it is made."""
    _check_makeable(parser, path, option)
    if needs:
        require_gpu(parser, needs, sm90)
    if path:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            parser.error(f"{option}: {err}")
    return path


def require_gpu(parser: argparse.ArgumentParser, needs: str = "a CUDA GPU", sm90: bool = False) -> None:
    """A usage error saying the tool ``needs`` what it names unless this machine has a CUDA GPU (``sm90``:
    of compute capability 9.0, the Gluon kernels')."""
    import torch  # (here: the CPU tools that make folders do not import it)

    if not torch.cuda.is_available() or (sm90 and torch.cuda.get_device_capability() != (9, 0)):
        parser.error(f"needs {needs}")


def _check_makeable(parser: argparse.ArgumentParser, path: str | os.PathLike | None, option: str) -> None:
    """A usage error if ``path`` could not be made (a file in its way, a parent this user may not write)
    or, already there, written into; nothing made either way."""
    if not path:
        return
    wanted = Path(path).absolute()
    there = wanted
    while not there.exists():  # (False too below a file: the walk stops at the file)
        there = there.parent
    if not there.is_dir():
        parser.error(f"{option}: {path}: {there} is not a folder")
    if not os.access(there, os.W_OK | os.X_OK):  # (a folder made in it, or one already there written into)
        what = "write into it" if there == wanted else f"make a folder in {there}"
        parser.error(f"{option}: {path}: cannot {what} (permission denied)")
