"""Precedence chains: each tier reads what its kind may read (a config leaf, a slot, a sibling field), all
tiers yield one type, the chain is total, no tier is shadowed by one that always yields, and fields are
evaluated after the fields they read (a cycle is an error)."""

from __future__ import annotations

from collections.abc import Set

from stampgen.codegen import ir
from stampgen.codegen.checks.expressions import Context, Expressions
from stampgen.codegen.checks.report import Report
from stampgen.codegen.checks.symbols import Symbols
from stampgen.codegen.checks.type_refs import literal_fits, resolve_type
from stampgen.codegen.diagnostics import did_you_mean
from stampgen.codegen.model import BoolT, EnumT, Scope, Type, type_name


class Chains:
    def __init__(self, symbols: Symbols, report: Report, expressions: Expressions) -> None:
        self.symbols = symbols
        self.report = report
        self.expressions = expressions

    def chain(
        self,
        field: ir.FieldDecl,
        ctx: Context,
        local: dict[str, Type],
        optional: Set[str],
        slots: dict[str, Type],
        fields: dict[str, ir.FieldDecl],
    ) -> Type | None:
        """Check one precedence chain; returns the field's type. `local` holds what `when` may read."""
        symbols, report = self.symbols, self.report
        ftype = resolve_type(field.declared, symbols, report) if field.declared is not None else None
        for tier in field.tiers:
            t = None
            if isinstance(tier, (ir.FlagTier, ir.BaseTier)):
                t = self._leaf_tier(tier)
            elif isinstance(tier, ir.AutoTier):
                if ctx != Context.STAMP:
                    report.error(
                        "auto-out-of-stamp",
                        "`auto` tiers read a stamp's slot; launch rules have none",
                        tier.loc,
                    )
                elif tier.ref.name not in slots:
                    report.error(
                        "unknown-slot",
                        f"`auto {tier.ref.name}`: the stamp declares no slot `{tier.ref.name}`",
                        tier.ref.loc,
                        did_you_mean(tier.ref.name, slots) or "declare it: slot NAME: Type from gate, ...",
                    )
                else:
                    t = slots[tier.ref.name]
            elif isinstance(tier, ir.FollowTier):
                if tier.ref.name == field.name.value:
                    report.error("follow-self", f"`{field.name.value}` follows itself", tier.ref.loc)
                elif tier.ref.name not in fields:
                    report.error(
                        "unknown-field",
                        f"`follow {tier.ref.name}`: no field `{tier.ref.name}` here",
                        tier.ref.loc,
                        did_you_mean(tier.ref.name, fields),
                    )
                else:
                    t = local.get(tier.ref.name)
            if t is not None:
                if ftype is None:
                    ftype = t
                elif t != ftype:
                    report.error(
                        "tier-type-mismatch",
                        f"tier yields `{type_name(t)}` but field `{field.name.value}` is `{type_name(ftype)}`",
                        tier.loc,
                    )
            if tier.when is not None:
                self.expressions.check(tier.when, ctx, local, optional)
        consts = [tier for tier in field.tiers if isinstance(tier, ir.ConstTier)]
        if ftype is None:
            if consts and len(consts) == len(field.tiers):
                ftype = self._constants_type(field, consts, local)
            if ftype is None:
                return None
        for const in consts:
            literal_fits(const.value, ftype, f"field `{field.name.value}`", report)
        self._totality(field)
        return ftype

    def _leaf_tier(self, tier: ir.FlagTier | ir.BaseTier) -> Type | None:
        """The type of the config leaf a `flag` or `base` tier reads; warns when the kind does not suit it."""
        symbols = self.symbols
        leaf = symbols.leaves.get(tier.ref.name)
        if tier.ref.name in symbols.untyped:
            return None
        if leaf is None or leaf.scope != Scope.PROCESS:
            self.report.error(
                "bad-tier-source",
                f"`{tier.kind}` reads a config leaf; `{tier.ref.name}` is not one",
                tier.ref.loc,
                did_you_mean(tier.ref.name, symbols.config_leaves()),
            )
            return None
        symbols.used.add(leaf.full_name)
        if isinstance(tier, ir.FlagTier) and not leaf.optional:
            self.report.warning(
                "flag-never-unset",
                f"`flag {leaf.full_name}`: the leaf has a default, so this tier always wins",
                tier.loc,
                "use `base` for a leaf with a default, or make the leaf optional (`?`)",
            )
        if isinstance(tier, ir.BaseTier) and leaf.optional and leaf.default is None:
            self.report.warning(
                "base-may-be-unset",
                f"`base {leaf.full_name}`: the leaf is optional, so it may yield nothing",
                tier.loc,
            )
        return leaf.type

    def _constants_type(
        self, field: ir.FieldDecl, consts: list[ir.ConstTier], local: dict[str, Type]
    ) -> Type | None:
        """The type of a field whose every tier is a constant: the one enum that has all its members (among
        several, the one its sibling fields have); bool for booleans. Else an error asking to declare it."""
        symbols = self.symbols
        values = [tier.value for tier in consts]
        if all(isinstance(v, ir.BoolLit) for v in values):
            return BoolT()
        names = [v.value for v in values if isinstance(v, ir.NameLit)]
        candidates = [
            e
            for e in symbols.enums.values()
            if names and len(names) == len(values) and set(names) <= set(e.members)
        ]
        if len(candidates) > 1:
            siblings = [t for t in local.values() if isinstance(t, EnumT)]
            candidates = [e for e in candidates if e in siblings] or candidates
        if len(candidates) == 1:
            symbols.used.add(candidates[0].name)
            return candidates[0]
        symbols.used.update(e.name for e in candidates)  # the error is the finding, not "never used" on each
        text = ir.literal_text(values[0]) if values else "..."
        together = (
            ", ".join(e.name for e in candidates[:-1]) + f" and {candidates[-1].name}" if candidates else ""
        )
        self.report.error(
            "untyped-field",
            f"cannot tell the type of `{field.name.value}`: every tier is a constant"
            + (f", and {together} all have `{text}`" if len(candidates) > 1 else ""),
            field.loc,
            f"declare it: `{field.name.value}: {candidates[0].name if candidates else 'Type'} = {text}`",
        )
        return None

    def _always_yields(self, tier: ir.Tier) -> bool:
        if tier.when is not None and not (isinstance(tier.when, ir.Const) and tier.when.value):
            return False
        if isinstance(tier, (ir.ConstTier, ir.FollowTier)):
            return True  # a followed field is itself total (checked on its own)
        if isinstance(tier, (ir.FlagTier, ir.BaseTier)):
            leaf = self.symbols.leaves.get(tier.ref.name)
            return leaf is not None and (not leaf.optional or leaf.default is not None)
        return False  # auto: the caller may give nothing

    def _totality(self, field: ir.FieldDecl) -> None:
        """Some tier always yields (or the chain may end with no value); none after it can win."""
        for i, tier in enumerate(field.tiers):
            if isinstance(tier.when, ir.Const) and not tier.when.value:
                self.report.warning(
                    "shadowed-tier",
                    f"this `{tier.kind}` tier can never win: its condition is false",
                    tier.loc,
                )
            if self._always_yields(tier):
                for later in field.tiers[i + 1 :]:
                    self.report.warning(
                        "shadowed-tier",
                        f"this `{later.kind}` tier can never win: the `{tier.kind}` tier at "
                        f"{tier.loc.line}:{tier.loc.col} always yields a value",
                        later.loc,
                        "remove it, or give the earlier tier a `when` condition",
                    )
                return
        self.report.error(
            "not-total",
            f"field `{field.name.value}` may end with no value: every tier can decline",
            field.loc,
            "end the chain with a constant, a `base` leaf with a default, or a tier without `when`",
        )

    def order(self, fields: dict[str, ir.FieldDecl]) -> tuple[str, ...]:
        """Fields after those they read (follow targets and fields named in `when`); reports cycles."""
        deps: dict[str, list[str]] = {}
        for name, field in fields.items():
            reads = []
            for tier in field.tiers:
                if isinstance(tier, ir.FollowTier) and tier.ref.name in fields:
                    reads.append(tier.ref.name)
                if tier.when is not None:
                    reads += [r.name for r in ir.expr_refs(tier.when) if r.name in fields]
            deps[name] = [r for r in reads if r != name]
        order: list[str] = []
        state: dict[str, int] = {}

        def visit(name: str, path: list[str]) -> None:
            if state.get(name) == 2:
                return
            if state.get(name) == 1:
                cycle = path[path.index(name) :] + [name]
                self.report.error(
                    "follow-cycle",
                    "fields read each other in a cycle: " + " -> ".join(cycle),
                    fields[name].loc,
                )
                return
            state[name] = 1
            for dep in deps[name]:
                visit(dep, path + [name])
            state[name] = 2
            order.append(name)

        for name in fields:
            visit(name, [])
        return tuple(order)
