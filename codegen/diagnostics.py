"""Diagnostics: what the checker tells a user, with a position, the source line and a caret."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import msgspec

from stampgen.codegen.ir import Loc


class Diagnostic(msgspec.Struct, frozen=True):
    severity: str  # "error" | "warning"
    code: str  # stable identifier, e.g. "unknown-name"; golden tests pin the message per code
    message: str
    loc: Loc
    hint: str | None = None

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


def error(code: str, message: str, loc: Loc, hint: str | None = None) -> Diagnostic:
    return Diagnostic("error", code, message, loc, hint)


def warning(code: str, message: str, loc: Loc, hint: str | None = None) -> Diagnostic:
    return Diagnostic("warning", code, message, loc, hint)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A hint naming the closest candidate, or None when nothing is close."""
    close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None


def render(diag: Diagnostic, source: str | None) -> str:
    """`PATH:LINE:COL: error: MESSAGE [code]`, then the source line and a caret under the span."""
    head = f"{diag.loc}: {diag.severity}: {diag.message} [{diag.code}]"
    lines = [head]
    if source is not None:
        # lines as the parser counts them: \n only (splitlines() also splits at \f, \x1c, U+2028...)
        src_lines = [line.removesuffix("\r") for line in source.split("\n")]
        if 1 <= diag.loc.line <= len(src_lines):
            text = src_lines[diag.loc.line - 1].expandtabs(1)
            width = 1
            if diag.loc.end_line == diag.loc.line and diag.loc.end_col > diag.loc.col:
                width = max(1, min(diag.loc.end_col, len(text) + 1) - diag.loc.col)
            lines.append(f"  {text}")
            lines.append("  " + " " * (diag.loc.col - 1) + "^" + "~" * (width - 1))
    if diag.hint:
        lines.append(f"  hint: {diag.hint}")
    return "\n".join(lines)


def sort_key(diag: Diagnostic) -> tuple[str, int, int, str]:
    return (diag.loc.path, diag.loc.line, diag.loc.col, diag.code)
