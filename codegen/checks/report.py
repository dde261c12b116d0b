"""Where the layers of one check report: every diagnostic, collected, never stopping at the first."""

from __future__ import annotations

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, Note, error, warning


class Report:
    """The diagnostics found so far, in the order found (`check` sorts them)."""

    def __init__(self) -> None:
        self.diags: list[Diagnostic] = []

    def error(
        self, code: str, message: str, loc: ir.Loc, hint: str | None = None, notes: tuple[Note, ...] = ()
    ) -> None:
        self.diags.append(msgspec.structs.replace(error(code, message, loc, hint), notes=notes))

    def warning(self, code: str, message: str, loc: ir.Loc, hint: str | None = None) -> None:
        self.diags.append(warning(code, message, loc, hint))

    @property
    def has_errors(self) -> bool:
        return any(d.is_error for d in self.diags)
