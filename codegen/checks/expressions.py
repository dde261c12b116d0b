"""What an expression may read where: each name resolves in the scope of the context that reads it (a stamp
resolver reads config and its slots, a launch block config and launch facts, an auto gate and a validate
block anything), conditions are booleans, and every literal fits the type it is compared with."""

from __future__ import annotations

from collections.abc import Set

from stampgen.codegen import ir
from stampgen.codegen.checks.report import Report
from stampgen.codegen.checks.symbols import Symbols
from stampgen.codegen.checks.type_refs import lit_kind, literal_fits
from stampgen.codegen.diagnostics import did_you_mean
from stampgen.codegen.model import BoolT, EnumT, IntT, Scope, Type, type_name


class Context(ir.TextEnum):
    """Where an expression is read, which decides the names it may read."""

    STAMP = "stamp"  # a stamp's precedence chains: process config and the stamp's slots
    LAUNCH = "launch"  # a launch block: process config and launch facts
    AUTO = "auto"  # an auto gate: config and every fact
    VALIDATE = "validate"  # a validate block: config, every fact, and the stamps' fields


class Expressions:
    """Type-checks expressions against the symbols; reports into `report`, marks what it reads used."""

    def __init__(self, symbols: Symbols, report: Report) -> None:
        self.symbols = symbols
        self.report = report

    def lookup(self, ref: ir.Ref, ctx: Context, local: dict[str, Type]) -> Type | None:
        """The type of a reference read in `ctx`; reports unknown names and scope violations."""
        symbols, name = self.symbols, ref.name
        if "." not in name:
            if name in local:
                return local[name]
            candidates = list(local) + list(symbols.leaves)
            self.report.error(
                "unknown-name", f"unknown name `{name}`", ref.loc, did_you_mean(name, candidates)
            )
            return None
        head, _, tail = name.partition(".")
        if head in symbols.stamp_decls and ctx == Context.VALIDATE:
            fields = {f.name.value: f for f in symbols.stamp_decls[head].fields}
            if tail not in fields:
                self.report.error(
                    "unknown-field",
                    f"stamp `{head}` has no field `{tail}`",
                    ref.loc,
                    did_you_mean(tail, fields),
                )
                return None
            return local.get(name)
        if head in symbols.stamp_decls:
            self.report.error(
                "stamp-read-out-of-scope",
                f"`{name}` reads a stamp; only validate blocks read stamps",
                ref.loc,
            )
            return None
        leaf = symbols.leaves.get(name)
        if leaf is None and name in symbols.untyped:
            return None  # its unknown type is the error; do not report every read of it too
        if leaf is None:
            candidates = list(symbols.leaves) + (list(local) if ctx == Context.VALIDATE else [])
            self.report.error(
                "unknown-name", f"unknown name `{name}`", ref.loc, did_you_mean(name, candidates)
            )
            return None
        symbols.used.add(name)
        if leaf.scope == Scope.RUNNER and ctx in (Context.STAMP, Context.LAUNCH):
            if ctx == Context.STAMP:
                self.report.error(
                    "stamp-reads-fact",
                    f"a stamp resolver reads process config and its slots only, not the runner fact `{name}`",
                    ref.loc,
                    "compute runner-dependent defaults in an `auto` gate and hand them in through a slot",
                )
            else:
                self.report.error(
                    "launch-reads-runner-fact",
                    f"launch-level rules run once per process, before any runner: they cannot read `{name}`",
                    ref.loc,
                    "read `launch.*` facts here, or move the rule to an `auto` gate or a `validate` block",
                )
            return None
        if leaf.scope == Scope.LAUNCH and ctx == Context.STAMP:
            self.report.error(
                "stamp-reads-fact",
                f"a stamp resolver reads process config and its slots only, not the launch fact `{name}`",
                ref.loc,
                "apply launch facts in a `launch` block",
            )
            return None
        return leaf.type

    def _optional(self, name: str, local_optional: Set[str]) -> bool:
        if name in local_optional:
            return True
        leaf = self.symbols.leaves.get(name)
        return bool(leaf and leaf.optional)

    def check(
        self, e: ir.Expr, ctx: Context, local: dict[str, Type], optional: Set[str] = frozenset()
    ) -> None:
        """Type-check an expression read in `ctx` with the given local names (`optional`: those that may be
        unset)."""
        stamp_decls = self.symbols.stamp_decls
        if isinstance(e, ir.Truthy):
            t = self.lookup(e.ref, ctx, local)
            if t is not None and not isinstance(t, BoolT):
                self.report.error(
                    "not-a-condition",
                    f"`{e.ref.name}` is of type `{type_name(t)}`, not bool: compare it with a value",
                    e.loc,
                    f"e.g. `{e.ref.name} == ...` or `{e.ref.name} is set`",
                )
        elif isinstance(e, ir.Compare):
            t = self.lookup(e.ref, ctx, local)
            if t is None:
                return
            if e.op in (ir.CompareOp.LT, ir.CompareOp.LE, ir.CompareOp.GE):
                if not isinstance(t, IntT):
                    self.report.error(
                        "ordering-on-non-int",
                        f"`{e.op}` compares integers; `{e.ref.name}` is of type `{type_name(t)}`",
                        e.loc,
                    )
                elif not isinstance(e.value, ir.IntLit):
                    self.report.error(
                        "type-mismatch", f"`{e.ref.name}` is an int, not {lit_kind(e.value)}", e.value.loc
                    )
            else:
                literal_fits(e.value, t, f"`{e.ref.name}`", self.report)
        elif isinstance(e, ir.Member):
            t = self.lookup(e.ref, ctx, local)
            if t is not None:
                for v in e.values:
                    literal_fits(v, t, f"`{e.ref.name}`", self.report)
        elif isinstance(e, ir.AnyField):
            if ctx != Context.VALIDATE or e.stamp.name not in stamp_decls:
                if e.stamp.name in stamp_decls:
                    self.report.error(
                        "stamp-read-out-of-scope",
                        f"`{e.value.value} in {e.stamp.name}` reads a stamp; only validate blocks read stamps",
                        e.loc,
                    )
                else:
                    self.report.error(
                        "unknown-stamp",
                        f"`{e.stamp.name}` is not a stamp (`value in Stamp` asks whether any field has the value)",
                        e.stamp.loc,
                        did_you_mean(e.stamp.name, stamp_decls),
                    )
                return
            types = [local.get(f"{e.stamp.name}.{f.name.value}") for f in stamp_decls[e.stamp.name].fields]
            enum_types = [t for t in types if isinstance(t, EnumT)]
            if enum_types and not any(e.value.value in t.members for t in enum_types):
                self.report.error(
                    "unknown-member",
                    f"`{e.value.value}` is not a value of any field of `{e.stamp.name}`",
                    e.value.loc,
                    did_you_mean(e.value.value, {m for t in enum_types for m in t.members}),
                )
        elif isinstance(e, ir.IsUnset):
            t = self.lookup(e.ref, ctx, local)
            if t is not None and not self._optional(e.ref.name, optional):
                self.report.warning(
                    "never-unset",
                    f"`{e.ref.name}` always has a value, so `is {'set' if e.negated else 'unset'}` is constant",
                    e.loc,
                )
        elif isinstance(e, ir.Not):
            self.check(e.operand, ctx, local, optional)
        elif isinstance(e, (ir.And, ir.Or, ir.Implies)):
            self.check(e.left, ctx, local, optional)
            self.check(e.right, ctx, local, optional)
