"""The view of one generated module: every rule kind's emitter, run in declaration order, and what the
module imports and exports. Emitters work out every name, expression and literal; the templates lay out
statements and blocks (codegen/render.py)."""

from __future__ import annotations

import re

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.blocks import LaunchView, ValidateView, emit_launch, emit_validate
from stampgen.codegen.emit.enums import EnumView, emit_enum
from stampgen.codegen.emit.facts import FactsView, emit_facts
from stampgen.codegen.emit.gates import GateView, emit_gate
from stampgen.codegen.emit.names import RenderError, TopLevel, py_literal, py_str, type_ann
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


class ModuleView(msgspec.Struct, frozen=True, kw_only=True):
    rules_source: str  # rules/NAME.rules
    rules_literal: str  # the same, as a Python literal
    module: str  # NAME
    stdlib: list[str]  # import lines
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
            )
        )
    return views


def build_module(model: Model, rules_source: str, module: str) -> ModuleView:
    """The view of generated/NAME.py; raises RenderError when a generated name would clash."""
    top = TopLevel(rules_source)
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
