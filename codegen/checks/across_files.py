"""What no single file shows: a stamp, or a runner attribute, that two rules files both declare (two
generated modules would each stamp it, and only one of them can be the truth)."""

from __future__ import annotations

from collections.abc import Sequence

from stampgen.codegen.diagnostics import Diagnostic, error, sort_key
from stampgen.codegen.model import Model, StampInfo


def check_across_files(models: Sequence[Model]) -> list[Diagnostic]:
    """Every stamp name and every runner attribute stamped by one file only."""
    diags: list[Diagnostic] = []
    by_name: dict[str, StampInfo] = {}
    by_attribute: dict[str, StampInfo] = {}
    for model in models:
        for info in model.stamps.values():
            first = by_name.setdefault(info.name, info)
            if first.decl.loc.path != info.decl.loc.path:
                diags.append(
                    error(
                        "duplicate-stamp",
                        f"stamp `{info.name}` is also declared in {first.decl.loc.path}",
                        info.decl.name.loc,
                        f"first declared at {first.decl.name.loc}; keep one of them",
                    )
                )
            first = by_attribute.setdefault(info.attribute, info)
            if first.decl.loc.path != info.decl.loc.path:
                diags.append(
                    error(
                        "duplicate-stamp-target",
                        f"stamps `{first.name}` ({first.decl.loc.path}) and `{info.name}` both live on "
                        f"`runner.{info.attribute}`",
                        info.decl.target.loc,
                        f"first stamped at {first.decl.target.loc}",
                    )
                )
    return sorted(diags, key=sort_key)
