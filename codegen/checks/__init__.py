"""Semantic checks: IR → Model, collecting every diagnostic instead of stopping at the first.

In layers (torchgen-style), data flowing one way: the grammar fixed the shape; `declarations` checks each
declaration on its own and fills the symbol table; `references` checks across declarations (names resolve in
the right scope through `expressions`, precedence chains through `chains`, nothing per-runner writes process
config) and builds the Model's infos; then the emitters claim the names they would generate (`generation`:
`generate` refuses what they refuse, so `check` says it too). A Model is built only when no error was found.
The dead-rule analysis (codegen/analysis.py) runs on that Model.

Two checks need more than one file or more than the rules: `check_across_files` (a stamp, or a runner
attribute, declared by two files) and `check_imports` (the registries and consumer modules the rules name,
imported and held to them). `stampgen check` runs both; `--no-import` skips the second.
"""

from __future__ import annotations

import datetime

from stampgen.codegen import ir
from stampgen.codegen.checks.across_files import check_across_files
from stampgen.codegen.checks.declarations import declare
from stampgen.codegen.checks.generation import generation_diagnostics
from stampgen.codegen.checks.imports import check_imports, import_module
from stampgen.codegen.checks.parity import is_registry, parity_pairs
from stampgen.codegen.checks.references import resolve
from stampgen.codegen.checks.report import Report
from stampgen.codegen.checks.waivers import TODAY_ENV, current_date, parse_date
from stampgen.codegen.diagnostics import Diagnostic, sort_key
from stampgen.codegen.model import Model

__all__ = [
    "TODAY_ENV",
    "check",
    "check_across_files",
    "check_imports",
    "current_date",
    "import_module",
    "is_registry",
    "parity_pairs",
    "parse_date",
]


def check(
    rules: ir.RulesFile, today: datetime.date | None = None, *, generation: bool = True
) -> tuple[Model | None, list[Diagnostic]]:
    """Check one parsed file. Returns the Model (None if any error) and every diagnostic, sorted.

    `today` (default: `current_date()`) is the date waivers expire against. `generation=False` leaves out
    what only generating would refuse (for `generate` itself, whose emitters refuse it anyway)."""
    report = Report()
    symbols = declare(rules, today or current_date(), report)
    resolved = resolve(rules, symbols, report)
    diags = report.diags
    model = None
    if not report.has_errors:
        model = Model(
            path=rules.path,
            enums=symbols.enums,
            leaves=symbols.leaves,
            namespaces=symbols.namespaces,
            autos=resolved.autos,
            stamps=resolved.stamps,
            launches=resolved.launches,
            validates=resolved.validates,
            guards=tuple(d for d in rules.decls if isinstance(d, ir.GuardDecl)),
            parities=tuple(d for d in rules.decls if isinstance(d, ir.ParityDecl)),
            file=rules,
        )
        if generation:
            diags += generation_diagnostics(model)
    diags = sorted(diags, key=sort_key)
    if any(d.is_error for d in diags):
        return None, diags
    return model, diags
