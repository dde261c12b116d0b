"""Reading .rules files: path discovery, parse, check. The front half of every command."""

from __future__ import annotations

from pathlib import Path

import msgspec

from codegen.checks import check
from codegen.diagnostics import Diagnostic, error
from codegen.ir import Loc
from codegen.model import Model
from codegen.parser import parse

DEFAULT_RULES_GLOB = "rules/*.rules"


class Loaded(msgspec.Struct):
    path: str  # as given / relative to the working directory, used in every position
    source: str | None
    model: Model | None
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return self.model is not None and not any(d.is_error for d in self.diagnostics)


def discover(paths: list[str] | None, root: Path = Path(".")) -> list[str]:
    """The rules files to work on: the given paths (folders expand to their *.rules), else rules/*.rules."""
    if not paths:
        return sorted(
            str(p.relative_to(root)) if root != Path(".") else str(p) for p in root.glob(DEFAULT_RULES_GLOB)
        )
    found: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found += sorted(str(q) for q in p.glob("*.rules"))
        else:
            found.append(raw)
    return found


def load_text(source: str, path: str) -> Loaded:
    rules, diags = parse(source, path)
    if rules is None:
        return Loaded(path, source, None, diags)
    model, check_diags = check(rules)
    return Loaded(path, source, model, diags + check_diags)


def load(path: str) -> Loaded:
    """Parse and check one file; a file that cannot be read is a diagnostic, never a traceback."""
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Loaded(
            path, None, None, [error("unreadable", f"cannot read the file: {reason}", Loc(path, 1, 1, 1, 1))]
        )
    return load_text(source, path)
