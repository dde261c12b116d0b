"""Diagnostics: what the checker tells a user, with a position, the source line and a caret."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import msgspec

from stampgen.codegen.ir import Loc, TextEnum


class Severity(TextEnum):
    ERROR = "error"  # the rules cannot be generated (exit 1)
    WARNING = "warning"  # the rules work, but something in them is probably not meant (exit 1 with --strict)


class Note(msgspec.Struct, frozen=True):
    """A secondary position of a diagnostic: the rule that shadows, pre-empts or overlaps the one reported."""

    message: str
    loc: Loc
    line: str | None = None  # the text of loc's line, when it lies in another file than the diagnostic


class Diagnostic(msgspec.Struct, frozen=True):
    severity: Severity
    code: str  # stable identifier, e.g. "unknown-name"; golden tests pin the message per code
    message: str
    loc: Loc
    hint: str | None = None
    notes: tuple[Note, ...] = ()  # shown under the caret, each with its own position, source line and caret

    @property
    def is_error(self) -> bool:
        return self.severity == Severity.ERROR


def error(code: str, message: str, loc: Loc, hint: str | None = None) -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, message, loc, hint)


def warning(code: str, message: str, loc: Loc, hint: str | None = None) -> Diagnostic:
    return Diagnostic(Severity.WARNING, code, message, loc, hint)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A hint naming the closest candidate, or None when nothing is close."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def render(diag: Diagnostic, source: str | None) -> str:
    """`PATH:LINE:COL: error: MESSAGE [code]`, then the source line and a caret under the span; then each
    note as `note: PATH:LINE:COL: MESSAGE` with its own source line and caret, indented one step more."""
    # lines as the parser counts them: \n only (splitlines() also splits at \f, \x1c, U+2028...)
    src_lines = None if source is None else [line.removesuffix("\r") for line in source.split("\n")]
    lines = [f"{diag.loc}: {diag.severity}: {diag.message} [{diag.code}]"]
    lines += _excerpt(diag.loc, src_lines, "  ")
    for note in diag.notes:
        lines.append(f"  note: {note.loc}: {note.message}")
        if note.loc.path == diag.loc.path:
            lines += _excerpt(note.loc, src_lines, "    ")
        elif note.line is not None:  # another file's line, carried by the note: only its own line counts
            lines += _excerpt(note.loc, [""] * (note.loc.line - 1) + [note.line], "    ")
    if diag.hint:
        lines.append(f"  hint: {diag.hint}")
    return "\n".join(lines)


def _excerpt(loc: Loc, src_lines: list[str] | None, indent: str) -> list[str]:
    """The source line of `loc` and a caret under its span (one character when the span spans lines)."""
    if src_lines is None or not 1 <= loc.line <= len(src_lines):
        return []
    text = src_lines[loc.line - 1].expandtabs(1)
    width = 1
    if loc.end_line == loc.line and loc.end_col > loc.col:
        width = max(1, min(loc.end_col, len(text) + 1) - loc.col)
    return [f"{indent}{text}", indent + " " * (loc.col - 1) + "^" + "~" * (width - 1)]


def sort_key(diag: Diagnostic) -> tuple[str, int, int, str]:
    return (diag.loc.path, diag.loc.line, diag.loc.col, diag.code)
