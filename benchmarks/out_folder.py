"""Output folders of the benchmark tools (``--out``, and the resources tool's ``--sass`` / ``--listing``):
made, parents too, right after the arguments are parsed, or a usage error saying why one cannot be (a
file in its way, no permission) — not a traceback after minutes of GPU work."""

from __future__ import annotations

import argparse
import os


def out_dir(parser: argparse.ArgumentParser, path: str | os.PathLike | None, option: str = "--out"):
    """``path`` (given as ``option``) made, and returned; None stays None."""
    if path:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            parser.error(f"{option}: {err}")
    return path
