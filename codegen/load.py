"""Reading .rules files: path discovery, parse, check. The front half of every command."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import msgspec

from stampgen.codegen.analysis import analyze as dead_rules
from stampgen.codegen.checks import check
from stampgen.codegen.diagnostics import Diagnostic, error, sort_key
from stampgen.codegen.ir import Loc
from stampgen.codegen.model import Model
from stampgen.codegen.parser import parse
from stampgen.codegen.project import Project, find_project


class Loaded(msgspec.Struct):
    path: str  # as given / relative to the working directory, used in every position
    source: str | None
    model: Model | None
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return self.model is not None and not any(d.is_error for d in self.diagnostics)


def discover(paths: list[str] | None, project: Project | None = None) -> list[str]:
    """The rules files to work on: the given paths (folders expand to their *.rules), else the project's
    rules folder (`rules/*.rules` below the project root), named relative to the working directory."""
    if not paths:
        project = project or find_project()
        return sorted(from_cwd(p) for p in project.rules_dir.glob("*.rules"))
    found: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found += sorted(str(q) for q in p.glob("*.rules"))
        else:
            found.append(raw)
    return found


def unreadable(paths: Iterable[str]) -> list[Diagnostic]:
    """An `unreadable` error for each file that cannot be opened (missing, a folder, no permission).

    Commands check this before reading anything and exit 2: it is a problem of the environment or of the
    command line, not a finding. A file that opens but is not UTF-8 text is reported by `load` like any
    other problem in a rules file (exit 1)."""
    found = []
    for path in paths:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            found.append(_unreadable(path, exc.strerror or str(exc)))
    return found


def _unreadable(name: str, reason: str) -> Diagnostic:
    return error("unreadable", f"cannot read the file: {reason}", Loc(name, 1, 1, 1, 1))


def load_text(source: str, path: str, *, analyze: bool = True) -> Loaded:
    """Parse and check `source`; on a clean check, also what only a reviewer needs (the dead-rule analysis,
    codegen/analysis.py, and what generating would refuse), which a caller that reads only the model (generate,
    explain, table, diff) skips with `analyze=False`."""
    rules, diags = parse(source, path)
    if rules is None:
        return Loaded(path, source, None, diags)
    model, check_diags = check(rules, generation=analyze)
    diags += check_diags
    if analyze and model is not None:
        diags = sorted(diags + dead_rules(model, check_diags), key=sort_key)
    return Loaded(path, source, model, diags)


def from_cwd(path: Path) -> str:
    """`path` relative to the working directory, `../` included (as ruff names files), so that a command
    run from a subfolder of the project still names the rules files it found as the user can type them."""
    try:
        return os.path.relpath(path.resolve(), Path.cwd().resolve())
    except ValueError:  # another drive (Windows)
        return str(path)


def load(path: str, name: str | None = None, *, analyze: bool = True) -> Loaded:
    """Parse and check one file, named `name` (default: `path`) in every position; a file that cannot be
    read is a diagnostic, never a traceback."""
    name = path if name is None else name
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Loaded(name, None, None, [_unreadable(name, reason)])
    return load_text(source, name, analyze=analyze)
