"""Output folders of the benchmark tools (``--out``, and the resources tool's ``--sass`` / ``--listing``):
made, parents too, right after the arguments are parsed, or a usage error saying why one cannot be (a
file in its way, no permission) — not a traceback after minutes of GPU work. A tool that needs a GPU
checks the folder, then the GPU (``require_gpu``), and only then makes it (``gpu_run_folder``): a refused run leaves
nothing behind, and either refusal is the same usage error (exit 2)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def out_dir(parser: argparse.ArgumentParser, path: str | os.PathLike | None, option: str = "--out"):
    """``path`` (given as ``option``) made, and returned; None stays None."""
    if path:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            parser.error(f"{option}: {err}")
    return path


def _check_makeable(parser: argparse.ArgumentParser, path: str | os.PathLike | None, option: str) -> None:
    """A usage error, as ``out_dir`` gives it, if ``path`` could not be made; nothing made either way."""
    if not path:
        return
    wanted = Path(path).absolute()
    there = wanted
    while not there.exists():  # (False too below a file: the walk stops at the file)
        there = there.parent
    if not there.is_dir():
        parser.error(f"{option}: {path}: {there} is not a folder")
    if there != wanted and not os.access(there, os.W_OK | os.X_OK):
        parser.error(f"{option}: {path}: cannot make a folder in {there} (permission denied)")


def gpu_run_folder(
    parser: argparse.ArgumentParser,
    path: str | os.PathLike | None,
    need: str = "a CUDA GPU",
    sm90: bool = False,
    option: str = "--out",
):
    """``out_dir`` for a tool that needs ``need`` (``require_gpu``): the folder checked, then the GPU, then
    the folder made and returned."""
    _check_makeable(parser, path, option)
    require_gpu(parser, need, sm90)
    return out_dir(parser, path, option)


def require_gpu(parser: argparse.ArgumentParser, need: str = "a CUDA GPU", sm90: bool = False) -> None:
    """A usage error saying the tool ``needs`` what it names unless this machine has a CUDA GPU (``sm90``:
    of compute capability 9.0, the Gluon kernels')."""
    import torch  # (here: the CPU tools that make folders do not import it)

    if not torch.cuda.is_available() or (sm90 and torch.cuda.get_device_capability() != (9, 0)):
        parser.error(f"needs {need}")
