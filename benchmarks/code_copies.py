"""Other copies of a kernel module (the probes' ``--against`` and ``--variants``: the code before a change,
a branch's version), each imported as a module of its own so that one process times or measures them
side by side with this tree. A missing file, a ``NAME=FILE`` without its name, or a copy that does not
import is a usage error naming it — checked before any GPU work, never a traceback."""

from __future__ import annotations

import argparse
import importlib.util
import os


def load_copy(parser: argparse.ArgumentParser, option: str, path: str, name: str | None = None):
    """The module in ``path`` (given as ``option``), imported under ``name`` (default: one made from the
    path, so two copies never share a module)."""
    if not os.path.isfile(path):
        parser.error(f"{option}: no such file {path!r}")
    spec = importlib.util.spec_from_file_location(name or f"copy_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        parser.error(f"{option} {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:  # a copy that does not import: say which, without a traceback
        parser.error(f"{option} {path}: {type(err).__name__}: {err}")
    return module


def named_copies(parser: argparse.ArgumentParser, option: str, value: str) -> dict[str, str]:
    """``NAME=FILE,...`` as {NAME: FILE}: each item needs both, and names are distinct."""
    copies: dict[str, str] = {}
    for item in filter(None, value.split(",")):
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            parser.error(f"{option}: expected NAME=FILE, got {item!r}")
        if name in copies:
            parser.error(f"{option}: the name {name!r} is given twice")
        copies[name] = path
    return copies
