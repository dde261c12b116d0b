"""The view of one generated module: every rule kind's emitter, run in declaration order, and what the
module imports and exports. Emitters work out every name, expression and literal; the templates lay out
statements and blocks (codegen/render.py)."""

from __future__ import annotations

import posixpath
import re

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.blocks import LaunchView, ValidateView, emit_launch, emit_validate
from stampgen.codegen.emit.enums import EnumView, emit_enum
from stampgen.codegen.emit.facts import FactsView, emit_facts
from stampgen.codegen.emit.gates import GateView, emit_gate
from stampgen.codegen.emit.names import (
    RenderError,
    TopLevel,
    by_value_name,
    coercer_name,
    facts_class,
    py_literal,
    py_str,
    type_ann,
)
from stampgen.codegen.emit.parities import ParityView, emit_parity
from stampgen.codegen.emit.positions import TableEntry, table_entries
from stampgen.codegen.emit.stamps import StampView, emit_stamp
from stampgen.codegen.model import EnumT, IntT, Model, Scope


class ConfigLeafView(msgspec.Struct, frozen=True, kw_only=True):
    """One config leaf as the generated CONFIG_LEAVES describes it: every value is Python source."""

    name: str  # a Python literal: `mamba.linear_attn_backend`
    value_type: str
    values: str
    optional: str
    default: str
    open: str
    doc: str


class ImportView(msgspec.Struct, frozen=True, kw_only=True):
    """What the module takes from the module of a rules file it imports: that file's vocabulary (re-exported,
    so an importer of this module finds it here too) and its RULE_POSITIONS, merged into this one's."""

    module: str
    rules: str  # the imported rules file, as positions name it
    names: list[str]  # in the order ruff's isort keeps: constants, classes, then the rest
    positions: str  # the local name of its RULE_POSITIONS

    def lines(self) -> list[str]:
        """The import statements, ordered as isort orders two imports from one module: by first name."""
        statements = [
            (isort_order("RULE_POSITIONS"), f"from .{self.module} import RULE_POSITIONS as {self.positions}")
        ]
        if self.names:
            statements.append(
                (isort_order(self.names[0]), f"from .{self.module} import {', '.join(self.names)}")
            )
        return [line for _, line in sorted(statements)]


def isort_order(name: str) -> tuple[int, str, str]:
    """A name's place in a `from x import a, B, C` list as isort (ruff's `I` rules) orders it."""
    kind = 0 if name.isupper() else 1 if name.lstrip("_")[:1].isupper() else 2
    return kind, name.lower(), name


def used_imports(view: ModuleView, body: str) -> ModuleView:
    """`view` importing only the private names `body` (the module rendered from `view`) reads besides its
    import lines: an unused import is a lint error in the generated code, and the enum and facts classes
    are always imported, as this module re-exports them."""
    text = "\n".join(line for line in body.splitlines() if not line.startswith("from ."))
    imports = [
        msgspec.structs.replace(
            i,
            names=[n for n in i.names if not n.startswith("_") or re.search(rf"\b{re.escape(n)}\b", text)],
        )
        for i in view.imports
    ]
    return msgspec.structs.replace(view, imports=imports)


class ModuleView(msgspec.Struct, frozen=True, kw_only=True):
    rules_source: str  # rules/NAME.rules
    rules_literal: str  # the same, as a Python literal
    module: str  # NAME
    stdlib: list[str]  # import lines
    imports: list[ImportView]  # the modules of the rules files this one imports
    all_names: list[str]
    positions: list[TableEntry]
    enums: list[EnumView]
    facts: list[FactsView]
    gates: list[GateView]
    stamps: list[StampView]
    launches: list[LaunchView]
    validates: list[ValidateView]
    parities: list[ParityView]
    config_leaves: list[ConfigLeafView]  # declaration order
    reads_config: bool  # some function reads config leaves (it needs the missing-leaf helpers)


def _export_order(name: str) -> tuple[int, list[str | int]]:
    """`__all__` as ruff's default rules sort it (RUF022, isort style): CONSTANTS, then Classes, then
    the rest, each in natural order (numbers compared as numbers)."""
    group = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return group, [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name)]


def config_leaf_views(model: Model) -> list[ConfigLeafView]:
    """Every config leaf of the rules, as data an engine can build its flags and config from."""
    views = []
    for leaf in model.leaves.values():
        if leaf.scope != Scope.PROCESS:
            continue
        t = leaf.type
        if isinstance(t, EnumT):
            values = f"tuple({t.name})"
        elif isinstance(t, IntT):
            values = "(" + ", ".join(str(v) for v in t.values) + ("," if len(t.values) == 1 else "") + ")"
        else:
            values = "(False, True)"
        views.append(
            ConfigLeafView(
                name=py_str(leaf.full_name),
                value_type=type_ann(t),
                values=values,
                optional=repr(leaf.optional),
                default=py_literal(leaf.default, t),
                open=repr(isinstance(t, EnumT) and t.open_member is not None),
                doc=py_str(leaf.doc),
            )
        )
    return views


def import_views(model: Model, top: TopLevel) -> list[ImportView]:
    """What the module imports from the modules of the rules files it imports, each name from the module
    that declares it (a file imported through another one included): the names their vocabulary generates
    (an enum's class, lookup table and coercer; a facts block's class) and their RULE_POSITIONS, each name
    claimed here so that no declaration of this file generates it again."""
    by_origin: dict[str, list[ir.Vocabulary]] = {}
    for decl in (d for f in model.file.imported for d in f.decls):
        declared = by_origin.setdefault(decl.loc.path, [])
        if decl not in declared:
            declared.append(decl)
    views = []
    for origin, decls in by_origin.items():
        module = posixpath.basename(origin).removesuffix(".rules")
        names: list[str] = []
        for decl in decls:
            what = f"`{decl.name.value}`, imported from {origin},"
            if isinstance(decl, ir.EnumDecl):
                enum = model.enums[decl.name.value]
                wanted = [enum.name, by_value_name(enum.name), coercer_name(enum)]
            elif isinstance(decl, ir.FactsDecl) and model.namespaces.get(decl.name.value) != Scope.PROCESS:
                wanted = [facts_class(decl.name.value)]
            else:
                continue  # a config block generates no name: its leaves are read from the engine's objects
            names += [top.claim(name, what, decl.name.loc) for name in wanted]
        positions = top.claim(f"_{module.upper()}_RULE_POSITIONS", f"the import of {origin}", None)
        names.sort(key=isort_order)
        views.append(ImportView(module=module, rules=origin, names=names, positions=positions))
    return views


def build_module(model: Model, rules_source: str, module: str) -> ModuleView:
    """The view of generated/NAME.py; raises RenderError when a generated name would clash."""
    top = TopLevel(rules_source)
    imports = import_views(model, top)
    enums = [
        emit_enum(model, d, top)
        for d in model.file.decls
        if isinstance(d, ir.EnumDecl) and d.name.value in model.enums
    ]
    facts = [
        emit_facts(model, d, top)
        for d in model.file.decls
        if isinstance(d, ir.FactsDecl) and model.namespaces.get(d.name.value) != Scope.PROCESS
    ]
    for name, info in model.autos.items():
        top.claim(name, f"auto gate `{name}`", info.decl.name.loc)
    gates = {name: emit_gate(model, name, top) for name in model.autos}
    stamps = [emit_stamp(model, info, gates, top) for info in model.stamps.values()]
    launches = [emit_launch(model, info, top) for info in model.launches]
    validates = [emit_validate(model, info, top) for info in model.validates]
    parities = [emit_parity(decl, top) for decl in model.parities]
    if top.diagnostics:
        raise RenderError(top.diagnostics)

    config_leaves = config_leaf_views(model)
    stdlib = ["import enum"] if enums else []
    stdlib.append("import logging")
    if parities:
        stdlib.append("import re")
    if stamps:
        stdlib += ["import sys", "import threading"]  # ensure_X_agree finds torch.distributed; stamp_X locks
    stdlib.append("import types")
    from_stdlib = [
        "from collections.abc import Callable, Mapping, Sequence"
        if stamps
        else "from collections.abc import Mapping"
    ]
    if gates or stamps or launches or validates or config_leaves:
        from_stdlib.append("from typing import Any")

    all_names = ["RULES_SOURCE", "RULE_POSITIONS", "RuleViolationError", "UnstampedRunnerError"]
    if stamps:
        all_names += ["StampConflictError", "StampMismatchError"]
    if config_leaves:
        all_names += ["CONFIG_LEAVES", "ConfigLeaf"]
    all_names += [name for i in imports for name in i.names if not name.startswith("_")]
    all_names += [e.name for e in enums] + [f.cls for f in facts]
    for s in stamps:
        all_names += [
            s.name,
            s.provenance_cls,
            s.resolve,
            s.resolve_provenance,
            s.stamp_fn,
            s.require,
            s.ensure,
        ]
    all_names += list(gates)
    all_names += [launch.name for launch in launches] + [v.fn for v in validates]
    for p in parities:
        all_names += [p.fn, p.registry_const, p.at_least_const]
    if parities:
        all_names.append("ParityReport")
    views: list[GateView | StampView | LaunchView | ValidateView] = [
        *gates.values(),
        *stamps,
        *launches,
        *validates,
    ]
    return ModuleView(
        rules_source=rules_source,
        rules_literal=py_str(rules_source),
        module=module,
        stdlib=stdlib + from_stdlib,
        imports=imports,
        all_names=sorted(all_names, key=_export_order),
        positions=table_entries(model),
        enums=enums,
        facts=facts,
        gates=list(gates.values()),
        stamps=stamps,
        launches=launches,
        validates=validates,
        parities=parities,
        config_leaves=config_leaves,
        reads_config=any(v.reads.items for v in views),
    )
