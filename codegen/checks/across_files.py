"""What no single file shows: a stamp, or a runner attribute, that two rules files both declare (two
generated modules would each stamp it, and only one of them can be the truth); a file of vocabulary only
that no rules file beside it imports (nothing reads what it declares)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, error, sort_key, warning
from stampgen.codegen.model import Model, StampInfo


def check_across_files(models: Sequence[Model]) -> list[Diagnostic]:
    """Every stamp name and every runner attribute stamped by one file only; every vocabulary file
    imported."""
    diags = check_unimported_vocabulary(models)
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


def _imports_of(path: Path) -> set[str]:
    """The files a rules file imports, by name, read from its text (an import is a whole line)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return set()
    return set(re.findall(r'^[ \t]*import[ \t]+"([^"\n]*)"', text, re.MULTILINE))


def check_unimported_vocabulary(models: Sequence[Model]) -> list[Diagnostic]:
    """A warning for each file that declares only enums, config and facts blocks, when no rules file
    beside it imports it (imports are of sibling files, so its folder is all there is to read)."""
    diags: list[Diagnostic] = []
    for model in models:
        own = [d for d in model.file.decls if not isinstance(d, ir.ImportDecl)]
        if not own or not all(isinstance(d, (ir.EnumDecl, ir.ConfigDecl, ir.FactsDecl)) for d in own):
            continue
        here = Path(model.path)
        siblings = [p for p in sorted(here.parent.glob("*.rules")) if p.name != here.name]
        if any(here.name in _imports_of(p) for p in siblings):
            continue
        diags.append(
            warning(
                "unused",
                f"{here.name} declares only vocabulary (enums, config, facts) and no rules file beside it "
                "imports it",
                own[0].loc,
                f'import it from the file that reads it: import "{here.name}"',
            )
        )
    return sorted(diags, key=sort_key)
