"""Layer 2, across declarations: what each declaration reads resolves to what the others declare. Auto gates
and the slots they feed, stamps' chains (codegen/checks/chains.py), launch blocks and the stamp fields they
`use`, validate blocks and their fallbacks, guards' stamps, two stamps on one runner attribute; nothing
per-runner writes process config; and, last, what nothing reads.

It builds the Model's infos from the Symbols of layer 1 (codegen/checks/declarations.py) and reads nothing
of a later stage.
"""

from __future__ import annotations

from collections.abc import Iterable, Set

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.checks.chains import Chains
from stampgen.codegen.checks.expressions import Context, Expressions
from stampgen.codegen.checks.report import Report
from stampgen.codegen.checks.symbols import StampShape, Symbols
from stampgen.codegen.checks.type_refs import literal_fits, resolve_type
from stampgen.codegen.diagnostics import did_you_mean
from stampgen.codegen.model import (
    AutoInfo,
    FieldInfo,
    LaunchInfo,
    Scope,
    StampInfo,
    Type,
    ValidateInfo,
    type_name,
)


class Resolved(msgspec.Struct, frozen=True):
    """The infos of the declarations whose references resolved (with errors, some are missing)."""

    autos: dict[str, AutoInfo]
    stamps: dict[str, StampInfo]
    launches: tuple[LaunchInfo, ...]
    validates: tuple[ValidateInfo, ...]


def resolve(rules: ir.RulesFile, symbols: Symbols, report: Report) -> Resolved:
    """Check what every declaration of `rules` reads against `symbols`, reporting into `report`."""
    return _References(symbols, report).run(rules.decls)


def _reads(tier: ir.Tier) -> list[str]:
    """The names a tier reads: the one it copies (none for a constant), then those of its condition."""
    names = [tier.ref.name] if tier.ref is not None else []
    return names + ([r.name for r in ir.expr_refs(tier.when)] if tier.when is not None else [])


class _References:
    def __init__(self, symbols: Symbols, report: Report) -> None:
        self.symbols = symbols
        self.report = report
        self.expressions = Expressions(symbols, report)
        self.chains = Chains(symbols, report, self.expressions)

    def run(self, decls: tuple[ir.Decl, ...]) -> Resolved:
        autos: dict[str, AutoInfo] = {}
        for decl in decls:
            if isinstance(decl, ir.AutoDecl):
                auto = self._auto(decl)
                if auto is not None:
                    autos[auto.name] = auto
        stamps: dict[str, StampInfo] = {}
        for shape in self.symbols.stamps:
            stamp = self._stamp(shape)
            if stamp is not None:
                stamps[stamp.name] = stamp
        # after the stamps: a launch block may `use` a stamp's fields, a validate block reads them
        launches = tuple(self._launch(d, stamps) for d in decls if isinstance(d, ir.LaunchDecl))
        validates = tuple(self._validate(d, stamps) for d in decls if isinstance(d, ir.ValidateDecl))
        self._guards(tuple(d for d in decls if isinstance(d, ir.GuardDecl)))
        self._unused(decls)
        return Resolved(autos, stamps, launches, validates)

    def _namespaces(self, refs: Iterable[str]) -> tuple[str, ...]:
        """The config and facts blocks among what `refs` read, in declaration order."""
        used = {name.split(".", 1)[0] for name in refs if "." in name}
        return tuple(ns for ns in self.symbols.namespaces if ns in used)

    # ------------------------------------------------------------------ statements
    def _set(self, stmt: ir.SetStmt, ctx: Context, local: dict[str, Type], optional: Set[str]) -> None:
        """Only launch blocks write process config; what they write is a config leaf, with a value of it."""
        symbols = self.symbols
        if ctx != Context.LAUNCH:
            self.report.error(
                "runner-writes-config",
                f"a {ctx} rule writes process config (`{stmt.target.name}`); per-runner rules never do",
                stmt.loc,
                "per-runner decisions go in the stamp; only `launch` blocks may set config leaves",
            )
            return
        leaf = symbols.leaves.get(stmt.target.name)
        if stmt.target.name in symbols.untyped:
            pass
        elif leaf is None or leaf.scope != Scope.PROCESS:
            self.report.error(
                "bad-set-target",
                f"`set` writes config leaves; `{stmt.target.name}` is not one",
                stmt.target.loc,
                did_you_mean(stmt.target.name, symbols.config_leaves()),
            )
        else:
            symbols.used.add(leaf.full_name)
            literal_fits(stmt.value, leaf.type, f"`{leaf.full_name}`", self.report)
        if stmt.when is not None:
            self.expressions.check(stmt.when, ctx, local, optional)

    # ------------------------------------------------------------------ auto gates and stamps
    def _auto(self, decl: ir.AutoDecl) -> AutoInfo | None:
        t = resolve_type(decl.type, self.symbols, self.report)
        if t is not None:
            literal_fits(decl.value, t, f"auto `{decl.name.value}`", self.report)
        self.expressions.check(decl.when, Context.AUTO, {})
        refs = [r.name for r in ir.expr_refs(decl.when)]
        if t is None:
            return None
        return AutoInfo(decl.name.value, t, self._namespaces(refs), decl)

    def _stamp(self, shape: StampShape) -> StampInfo | None:
        decl, slots, fields = shape.decl, shape.slots, shape.fields
        for write in decl.writes:
            self._set(write, Context.STAMP, {}, set())
        for slot in shape.slot_infos:
            self._slot_sources(slot.decl, slot.type)
        order = self.chains.order(fields)
        types: dict[str, Type] = {}
        local: dict[str, Type] = dict(slots)
        for name in order:
            # a field's `when` may read fields resolved before it, its slots, and config
            t = self.chains.chain(fields[name], Context.STAMP, {**local, **types}, set(slots), slots, fields)
            if t is not None:
                types[name] = t
        if len(types) != len(fields) or len(order) != len(fields):
            return None
        refs = [n for f in fields.values() for tier in f.tiers for n in _reads(tier)]
        infos = tuple(FieldInfo(name, types[name], fields[name]) for name in fields)
        return StampInfo(
            decl.name.value,
            shape.attribute,
            infos,
            order,
            shape.slot_infos,
            self._namespaces(refs),
            decl,
        )

    def _slot_sources(self, slot: ir.SlotDecl, t: Type) -> None:
        """Each gate a slot is computed from is an auto gate that yields the slot's type."""
        symbols = self.symbols
        for source in slot.sources:
            gate = symbols.auto_decls.get(source.value)
            if gate is None:
                self.report.error(
                    "unknown-gate",
                    f"slot `{slot.name.value}` is computed from `{source.value}`, which is not an auto gate",
                    source.loc,
                    did_you_mean(source.value, symbols.auto_decls),
                )
                continue
            symbols.used.add(source.value)
            if isinstance(gate.type, ir.IntType):
                continue  # an int gate is not held to the slot's domain
            gate_type = resolve_type(gate.type, symbols, self.report)
            if gate_type is not None and gate_type != t:
                self.report.error(
                    "slot-type-mismatch",
                    f"gate `{source.value}` yields `{type_name(gate_type)}`, slot `{slot.name.value}` is "
                    f"`{type_name(t)}`",
                    source.loc,
                )

    # ------------------------------------------------------------------ launch blocks
    def _launch(self, decl: ir.LaunchDecl, stamps: dict[str, StampInfo]) -> LaunchInfo:
        leaves = self.symbols.leaves
        local: dict[str, Type] = {}
        infos: list[FieldInfo] = []
        refs: list[str] = []
        expanded: list[ir.LaunchStmt] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.UseStmt):
                for field in self._use(stmt, stamps, local):
                    local[field.name] = field.type
                    infos.append(field)
                    expanded.append(field.decl)
                    refs += [n for tier in field.decl.tiers for n in _reads(tier) if n in leaves]
                continue
            expanded.append(stmt)
            if isinstance(stmt, ir.SetStmt):
                self._set(stmt, Context.LAUNCH, local, set())
                refs.append(stmt.target.name)
                refs += [r.name for r in ir.expr_refs(stmt.when)] if stmt.when else []
            elif isinstance(stmt, ir.Check):
                self.expressions.check(stmt.cond, Context.LAUNCH, local, set())
                refs += [r.name for r in ir.expr_refs(stmt.cond)]
            else:
                if stmt.name.value in local:
                    self.report.error(
                        "duplicate-field",
                        f"`{stmt.name.value}` is defined twice in this block",
                        stmt.name.loc,
                    )
                    continue
                siblings = dict.fromkeys([*local, stmt.name.value], stmt)  # what `follow` may name here
                t = self.chains.chain(stmt, Context.LAUNCH, local, set(), {}, siblings)
                refs += [n for tier in stmt.tiers for n in _reads(tier)]
                if t is not None:
                    local[stmt.name.value] = t
                    infos.append(FieldInfo(stmt.name.value, t, stmt))
        checked = msgspec.structs.replace(decl, stmts=tuple(expanded))
        return LaunchInfo(decl.name.value, tuple(infos), self._namespaces(refs), checked)

    def _use(self, stmt: ir.UseStmt, stamps: dict[str, StampInfo], local: dict[str, Type]) -> list[FieldInfo]:
        """The stamp fields a `use` makes locals of the launch block. A field must be computable at launch
        from config alone: no slot (only a runner has those), and the fields it reads used before it."""
        stamp_decls = self.symbols.stamp_decls
        found: list[FieldInfo] = []
        for ref in stmt.fields:
            stamp_name, _, field_name = ref.name.partition(".")
            if stamp_name not in stamp_decls:
                self.report.error(
                    "unknown-stamp",
                    f"`use {ref.name}`: `{stamp_name}` is not a stamp",
                    ref.loc,
                    did_you_mean(stamp_name, stamp_decls),
                )
                continue
            info = stamps.get(stamp_name)
            if info is None:  # the stamp has errors of its own, reported there
                continue
            field = next((f for f in info.fields if f.name == field_name), None)
            if field is None or "." in field_name:
                self.report.error(
                    "unknown-field",
                    f"`use {ref.name}`: {stamp_name} has no field `{field_name}`",
                    ref.loc,
                    did_you_mean(field_name, [f.name for f in info.fields]),
                )
                continue
            slots = {s.name for s in info.slots}
            fields = {f.name for f in info.fields}
            read = [n for tier in field.decl.tiers for n in _reads(tier)]
            for name in dict.fromkeys(read):
                if name in slots:
                    self.report.error(
                        "use-reads-slot",
                        f"`use {ref.name}`: its chain reads the slot `{name}`, which only a runner has "
                        "(a launch block runs before any runner exists)",
                        ref.loc,
                        "a launch block can check the config leaves that chain reads instead",
                    )
                elif name in fields and name not in local and name not in {f.name for f in found}:
                    self.report.error(
                        "use-order",
                        f"`use {ref.name}`: its chain reads `{name}`, which this block has not used yet",
                        ref.loc,
                        f"use {stamp_name}.{name} first: `use {stamp_name}.{name}, {ref.name}`",
                    )
            if field.name in local or field.name in {f.name for f in found}:
                self.report.error(
                    "duplicate-field", f"`{field.name}` is defined twice in this block", ref.loc
                )
                continue
            found.append(FieldInfo(field.name, field.type, field.decl))
        return found

    # ------------------------------------------------------------------ validate blocks
    def _validate(self, decl: ir.ValidateDecl, stamps: dict[str, StampInfo]) -> ValidateInfo:
        # the stamps' checked field types (a stamp with errors has none: reads of it stay silent)
        local = {f"{info.name}.{f.name}": f.type for info in stamps.values() for f in info.fields}
        refs: list[str] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.SetStmt):
                self._set(stmt, Context.VALIDATE, local, set())
            elif isinstance(stmt, ir.Check):
                self.expressions.check(stmt.cond, Context.VALIDATE, local, set())
                refs += [r.name for r in ir.expr_refs(stmt.cond)]
            else:
                refs += [stmt.field.name] + [r.name for r in ir.expr_refs(stmt.when)]
                self._fallback(stmt, local)
        read = tuple(
            sorted({r.split(".", 1)[0] for r in refs if r.split(".", 1)[0] in self.symbols.stamp_decls})
        )
        return ValidateInfo(decl.name.value, read, self._namespaces(refs), decl)

    def _fallback(self, stmt: ir.Fallback, local: dict[str, Type]) -> None:
        head = stmt.field.name.split(".", 1)[0]
        t = local.get(stmt.field.name)
        if head not in self.symbols.stamp_decls or t is None:
            self.report.error(
                "bad-fallback-target",
                f"`fallback` replaces a stamp field (`Stamp.field`); `{stmt.field.name}` is not one",
                stmt.field.loc,
                did_you_mean(stmt.field.name, local),
            )
        else:
            what = f"`{stmt.field.name}`"
            ok = literal_fits(stmt.from_value, t, what, self.report)
            ok = literal_fits(stmt.to_value, t, what, self.report) and ok
            if ok and stmt.from_value.value == stmt.to_value.value:
                self.report.error(
                    "fallback-to-itself", "a fallback must replace a value with another one", stmt.loc
                )
        self.expressions.check(stmt.when, Context.VALIDATE, local)

    # ------------------------------------------------------------------ guards, runner attributes, use
    def _guards(self, guards: tuple[ir.GuardDecl, ...]) -> None:
        """Each guard reads a stamp of this file, and no two stamps live on one runner attribute."""
        stamp_decls = self.symbols.stamp_decls
        for guard in guards:
            if guard.stamp.value not in stamp_decls:
                self.report.error(
                    "unknown-stamp",
                    f"guard reads `{guard.stamp.value}`, which is not a stamp",
                    guard.stamp.loc,
                    did_you_mean(guard.stamp.value, stamp_decls),
                )
        attributes: dict[str, ir.StampDecl] = {}
        for stamp in stamp_decls.values():
            attr = stamp.target.name
            if attr in attributes:
                self.report.error(
                    "duplicate-stamp-target",
                    f"stamps `{attributes[attr].name.value}` and `{stamp.name.value}` both live on `{attr}`",
                    stamp.target.loc,
                )
            attributes[attr] = stamp

    def _unused(self, decls: Iterable[ir.Decl]) -> None:
        decls = list(decls)
        # a file of vocabulary only (enums, config, facts) is there to be imported: its readers are elsewhere
        if all(isinstance(d, (ir.EnumDecl, ir.ConfigDecl, ir.FactsDecl, ir.ImportDecl)) for d in decls):
            return
        symbols = self.symbols
        for decl in decls:
            if isinstance(decl, ir.EnumDecl) and decl.name.value not in symbols.used:
                self.report.warning("unused", f"enum `{decl.name.value}` is never used", decl.name.loc)
            elif isinstance(decl, ir.AutoDecl) and decl.name.value not in symbols.used:
                self.report.warning(
                    "unused",
                    f"auto gate `{decl.name.value}` feeds no slot",
                    decl.name.loc,
                    "name it in a stamp: slot NAME: Type from " + decl.name.value,
                )
            elif isinstance(decl, (ir.ConfigDecl, ir.FactsDecl)):
                for leaf in decl.leaves:
                    full = f"{decl.name.value}.{leaf.name.value}"
                    if (
                        full not in symbols.used
                        and full in symbols.leaves
                        and leaf.name.loc not in symbols.duplicates
                    ):
                        self.report.warning("unused", f"`{full}` is never read", leaf.name.loc)
