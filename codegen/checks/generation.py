"""What `generate` would refuse in a model that passed the checks: a generated name that clashes, a validate
block that reads two stamps. The emitters own those rules; running them here (without rendering) keeps one
definition of each and gives every refusal a position before `generate` runs."""

from __future__ import annotations

from stampgen.codegen.diagnostics import Diagnostic
from stampgen.codegen.model import Model


def generation_diagnostics(model: Model) -> list[Diagnostic]:
    # imported here: the emitters are a later stage, which only this check runs ahead of time
    from stampgen.codegen.emit.module import build_module
    from stampgen.codegen.emit.names import RenderError

    try:
        build_module(model, model.path, "check")
    except RenderError as exc:
        return list(exc.diagnostics)
    return []
