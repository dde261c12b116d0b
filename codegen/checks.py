"""Semantic checks: IR → Model, collecting every diagnostic instead of stopping at the first.

Layers (torchgen-style): the grammar fixed the shape; `_Declarations` checks each declaration on its own
(duplicates inside it, types, defaults, identifiers, parity clauses); `_References` checks across
declarations (names resolve in the right scope, literals fit their types, follow cycles, totality and
shadowed tiers, nothing per-runner writes process config). A Model is built only when no error was found.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from keyword import iskeyword

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, did_you_mean, error, sort_key, warning
from stampgen.codegen.model import (
    LAUNCH,
    PROCESS,
    RUNNER,
    AutoInfo,
    BoolT,
    EnumT,
    FieldInfo,
    IntT,
    LaunchInfo,
    LeafInfo,
    Model,
    SlotInfo,
    StampInfo,
    Type,
    ValidateInfo,
    is_valid_identifier,
    type_name,
)

FACT_SCOPES = {"launch": LAUNCH, "runner": RUNNER}
_REGISTRY_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_BUILTIN_TYPES = ("bool",)

# contexts in which an expression is read
CTX_STAMP, CTX_LAUNCH, CTX_AUTO, CTX_VALIDATE = "stamp", "launch", "auto", "validate"


def check(rules: ir.RulesFile) -> tuple[Model | None, list[Diagnostic]]:
    """Check one parsed file. Returns the Model (None if any error) and every diagnostic, sorted."""
    checker = _Checker(rules)
    model = checker.run()
    diags = sorted(checker.diags, key=sort_key)
    if any(d.is_error for d in diags):
        return None, diags
    return model, diags


class _Checker:
    def __init__(self, rules: ir.RulesFile):
        self.rules = rules
        self.diags: list[Diagnostic] = []
        self.enums: dict[str, EnumT] = {}
        self.leaves: dict[str, LeafInfo] = {}
        self.namespaces: dict[str, str] = {}
        self.stamp_decls: dict[str, ir.StampDecl] = {}
        self.auto_decls: dict[str, ir.AutoDecl] = {}
        self.used: set[str] = set()  # full names of leaves and names of enums/autos that something reads
        self.untyped: set[str] = set()  # leaves whose type did not resolve (reported once, at the type)

    # ------------------------------------------------------------------ reporting
    def err(self, code: str, message: str, loc: ir.Loc, hint: str | None = None) -> None:
        self.diags.append(error(code, message, loc, hint))

    def warn(self, code: str, message: str, loc: ir.Loc, hint: str | None = None) -> None:
        self.diags.append(warning(code, message, loc, hint))

    def ident(self, name: ir.Name, what: str) -> None:
        if not is_valid_identifier(name.value):
            reason = "it is a Python keyword" if iskeyword(name.value) else "it starts with `_`"
            self.err(
                "bad-identifier",
                f"{what} `{name.value}` cannot be used: {reason}",
                name.loc,
                "rename it; names from the rules become Python identifiers",
            )

    # ------------------------------------------------------------------ entry
    def run(self) -> Model | None:
        decls = self.rules.decls
        self._declare(decls)
        autos = {}
        stamps = {}
        launches = []
        validates = []
        for decl in decls:
            if isinstance(decl, ir.AutoDecl):
                info = self._auto(decl)
                if info:
                    autos[info.name] = info
            elif isinstance(decl, ir.StampDecl):
                info = self._stamp(decl)
                if info:
                    stamps[info.name] = info
            elif isinstance(decl, ir.LaunchDecl):
                launches.append(self._launch(decl))
            elif isinstance(decl, ir.ValidateDecl):
                validates.append(self._validate(decl))
        guards = tuple(d for d in decls if isinstance(d, ir.GuardDecl))
        parities = tuple(d for d in decls if isinstance(d, ir.ParityDecl))
        self._guards(guards)
        for parity in parities:
            self._parity(parity)
        self._unused(decls)
        if any(d.is_error for d in self.diags):
            return None
        return Model(
            path=self.rules.path,
            enums=self.enums,
            leaves=self.leaves,
            namespaces=self.namespaces,
            autos=autos,
            stamps=stamps,
            launches=tuple(launches),
            validates=tuple(validates),
            guards=guards,
            parities=parities,
            file=self.rules,
        )

    # ------------------------------------------------------------------ layer 2: declarations on their own
    def _declare(self, decls: Iterable[ir.Decl]) -> None:
        seen: dict[str, ir.Name] = {}
        validate_names: dict[str, ir.Name] = {}
        for decl in decls:
            name = getattr(decl, "name", None)
            if name is None:
                continue
            table = validate_names if isinstance(decl, ir.ValidateDecl) else seen
            if name.value in table:
                self.err(
                    "duplicate-declaration",
                    f"`{name.value}` is declared twice",
                    name.loc,
                    f"first declared at {table[name.value].loc}",
                )
                continue
            table[name.value] = name
            self.ident(name, "name")
        # enums first: leaf types refer to them
        for decl in decls:
            if isinstance(decl, ir.EnumDecl):
                self._enum(decl)
        for decl in decls:
            if isinstance(decl, (ir.ConfigDecl, ir.FactsDecl)):
                self._leaves(decl)
            elif isinstance(decl, ir.StampDecl):
                self.stamp_decls.setdefault(decl.name.value, decl)
            elif isinstance(decl, ir.AutoDecl):
                self.auto_decls.setdefault(decl.name.value, decl)

    def _enum(self, decl: ir.EnumDecl) -> None:
        if decl.name.value in _BUILTIN_TYPES or decl.name.value == "int":
            self.err(
                "builtin-type-shadowed", f"enum `{decl.name.value}` shadows a built-in type", decl.name.loc
            )
            return
        members: dict[str, ir.Name] = {}
        for member in decl.members:
            if member.value in members:
                self.err(
                    "duplicate-member",
                    f"enum `{decl.name.value}` lists `{member.value}` twice",
                    member.loc,
                    f"first listed at {members[member.value].loc}",
                )
                continue
            members[member.value] = member
            self.ident(member, "enum member")
        if not members:
            self.err("empty-enum", f"enum `{decl.name.value}` has no members", decl.loc)
        open_member = None
        if decl.open_member is not None:
            open_member = decl.open_member.value
            if open_member not in members:
                self.err(
                    "open-member-missing",
                    f"`open({open_member})` names a member that enum `{decl.name.value}` does not list",
                    decl.open_member.loc,
                    f"add `{open_member}` to the members",
                )
        if decl.name.value not in self.enums:
            self.enums[decl.name.value] = EnumT(decl.name.value, tuple(members), open_member)

    def resolve_type(self, ref: ir.TypeRef) -> Type | None:
        if isinstance(ref, ir.IntType):
            if len(set(ref.values)) != len(ref.values):
                self.err("duplicate-domain-value", "an int domain lists a value twice", ref.loc)
            return IntT(tuple(sorted(set(ref.values))))
        if ref.name == "bool":
            return BoolT()
        if ref.name in self.enums:
            self.used.add(ref.name)
            return self.enums[ref.name]
        self.err(
            "unknown-type",
            f"unknown type `{ref.name}`",
            ref.loc,
            did_you_mean(ref.name, [*self.enums, "bool"]),
        )
        return None

    def literal_fits(self, lit: ir.Literal, t: Type, what: str) -> bool:
        """Report (and return False) when a literal is not a value of the type."""
        if isinstance(t, EnumT):
            if not isinstance(lit, ir.NameLit):
                self.err("type-mismatch", f"{what} is of type `{t.name}`, not {_lit_kind(lit)}", lit.loc)
                return False
            if lit.value not in t.members:
                self.err(
                    "unknown-member",
                    f"`{lit.value}` is not a member of enum `{t.name}`",
                    lit.loc,
                    did_you_mean(lit.value, t.members),
                )
                return False
            return True
        if isinstance(t, IntT):
            if not isinstance(lit, ir.IntLit):
                self.err("type-mismatch", f"{what} is an int, not {_lit_kind(lit)}", lit.loc)
                return False
            if lit.value not in t.values:
                self.err(
                    "out-of-domain",
                    f"{lit.value} is outside the domain of {what} ({type_name(t)})",
                    lit.loc,
                )
                return False
            return True
        if not isinstance(lit, ir.BoolLit):
            self.err("type-mismatch", f"{what} is a bool, not {_lit_kind(lit)}", lit.loc)
            return False
        return True

    def _leaves(self, decl: ir.ConfigDecl | ir.FactsDecl) -> None:
        ns = decl.name.value
        if isinstance(decl, ir.FactsDecl):
            if ns not in FACT_SCOPES:
                self.err(
                    "bad-facts-scope",
                    f"facts block `{ns}` must be named `launch` (once per process) or `runner` (per runner)",
                    decl.name.loc,
                )
                return
            scope = FACT_SCOPES[ns]
        else:
            if ns in FACT_SCOPES:
                self.err(
                    "bad-facts-scope",
                    f"`{ns}` is reserved for facts; name this config block otherwise",
                    decl.name.loc,
                )
                return
            scope = PROCESS
        if ns in self.namespaces:
            return  # duplicate declaration, already reported
        self.namespaces[ns] = scope
        seen: dict[str, ir.Name] = {}
        for leaf in decl.leaves:
            if leaf.name.value in seen:
                self.err(
                    "duplicate-leaf",
                    f"`{ns}` declares `{leaf.name.value}` twice",
                    leaf.name.loc,
                    f"first declared at {seen[leaf.name.value].loc}",
                )
                continue
            seen[leaf.name.value] = leaf.name
            self.ident(leaf.name, "leaf")
            t = self.resolve_type(leaf.type)
            if scope != PROCESS and (leaf.optional or leaf.default is not None):
                self.err(
                    "fact-not-total",
                    f"fact `{ns}.{leaf.name.value}` cannot be optional or have a default: facts are always known",
                    leaf.loc,
                    "model an unknown value as a member of its domain",
                )
            default = None
            if leaf.default is not None and t is not None:
                if self.literal_fits(leaf.default, t, f"`{ns}.{leaf.name.value}`"):
                    default = leaf.default.value
            if t is not None:
                self.leaves[f"{ns}.{leaf.name.value}"] = LeafInfo(
                    ns, leaf.name.value, scope, t, leaf.optional, default, leaf.loc
                )
            else:
                self.untyped.add(f"{ns}.{leaf.name.value}")

    # ------------------------------------------------------------------ layer 3: references
    def _lookup(self, ref: ir.Ref, ctx: str, local: dict[str, Type], stamp: str | None = None) -> Type | None:
        """The type of a reference read in `ctx`; reports unknown names and scope violations."""
        name = ref.name
        if "." not in name:
            if name in local:
                return local[name]
            candidates = list(local) + list(self.leaves)
            self.err("unknown-name", f"unknown name `{name}`", ref.loc, did_you_mean(name, candidates))
            return None
        head, _, tail = name.partition(".")
        if head in self.stamp_decls and ctx == CTX_VALIDATE:
            fields = {f.name.value: f for f in self.stamp_decls[head].fields}
            if tail not in fields:
                self.err(
                    "unknown-field",
                    f"stamp `{head}` has no field `{tail}`",
                    ref.loc,
                    did_you_mean(tail, fields),
                )
                return None
            return local.get(name)
        if head in self.stamp_decls:
            self.err(
                "stamp-read-out-of-scope",
                f"`{name}` reads a stamp; only validate blocks read stamps",
                ref.loc,
            )
            return None
        leaf = self.leaves.get(name)
        if leaf is None and name in self.untyped:
            return None  # its unknown type is the error; do not report every read of it too
        if leaf is None:
            candidates = list(self.leaves) + (list(local) if ctx == CTX_VALIDATE else [])
            self.err("unknown-name", f"unknown name `{name}`", ref.loc, did_you_mean(name, candidates))
            return None
        self.used.add(name)
        if leaf.scope == RUNNER and ctx in (CTX_STAMP, CTX_LAUNCH):
            if ctx == CTX_STAMP:
                self.err(
                    "stamp-reads-fact",
                    f"a stamp resolver reads process config and its slots only, not the runner fact `{name}`",
                    ref.loc,
                    "compute runner-dependent defaults in an `auto` gate and hand them in through a slot",
                )
            else:
                self.err(
                    "launch-reads-runner-fact",
                    f"launch-level rules run once per process, before any runner: they cannot read `{name}`",
                    ref.loc,
                    "read `launch.*` facts here, or move the rule to an `auto` gate or a `validate` block",
                )
            return None
        if leaf.scope == LAUNCH and ctx == CTX_STAMP:
            self.err(
                "stamp-reads-fact",
                f"a stamp resolver reads process config and its slots only, not the launch fact `{name}`",
                ref.loc,
                "apply launch facts in a `launch` block",
            )
            return None
        return leaf.type

    def leaf_optional(self, name: str, local_optional: set[str]) -> bool:
        if name in local_optional:
            return True
        leaf = self.leaves.get(name)
        return bool(leaf and leaf.optional)

    def expr(self, e: ir.Expr, ctx: str, local: dict[str, Type], optional: set[str] = frozenset()) -> None:
        """Type-check an expression read in `ctx` with the given local names."""
        if isinstance(e, ir.Truthy):
            t = self._lookup(e.ref, ctx, local)
            if t is not None and not isinstance(t, BoolT):
                self.err(
                    "not-a-condition",
                    f"`{e.ref.name}` is of type `{type_name(t)}`, not bool: compare it with a value",
                    e.loc,
                    f"e.g. `{e.ref.name} == ...` or `{e.ref.name} is set`",
                )
        elif isinstance(e, ir.Compare):
            t = self._lookup(e.ref, ctx, local)
            if t is None:
                return
            if e.op in ("<", "<=", ">="):
                if not isinstance(t, IntT):
                    self.err(
                        "ordering-on-non-int",
                        f"`{e.op}` compares integers; `{e.ref.name}` is of type `{type_name(t)}`",
                        e.loc,
                    )
                elif not isinstance(e.value, ir.IntLit):
                    self.err(
                        "type-mismatch", f"`{e.ref.name}` is an int, not {_lit_kind(e.value)}", e.value.loc
                    )
            else:
                self.literal_fits(e.value, t, f"`{e.ref.name}`")
        elif isinstance(e, ir.Member):
            t = self._lookup(e.ref, ctx, local)
            if t is not None:
                for v in e.values:
                    self.literal_fits(v, t, f"`{e.ref.name}`")
        elif isinstance(e, ir.AnyField):
            if ctx != CTX_VALIDATE or e.stamp.name not in self.stamp_decls:
                if e.stamp.name in self.stamp_decls:
                    self.err(
                        "stamp-read-out-of-scope",
                        f"`{e.value.value} in {e.stamp.name}` reads a stamp; only validate blocks read stamps",
                        e.loc,
                    )
                else:
                    self.err(
                        "unknown-stamp",
                        f"`{e.stamp.name}` is not a stamp (`value in Stamp` asks whether any field has the value)",
                        e.stamp.loc,
                        did_you_mean(e.stamp.name, self.stamp_decls),
                    )
                return
            types = [
                local.get(f"{e.stamp.name}.{f.name.value}") for f in self.stamp_decls[e.stamp.name].fields
            ]
            enum_types = [t for t in types if isinstance(t, EnumT)]
            if enum_types and not any(e.value.value in t.members for t in enum_types):
                self.err(
                    "unknown-member",
                    f"`{e.value.value}` is not a value of any field of `{e.stamp.name}`",
                    e.value.loc,
                    did_you_mean(e.value.value, {m for t in enum_types for m in t.members}),
                )
        elif isinstance(e, ir.IsUnset):
            t = self._lookup(e.ref, ctx, local)
            if t is not None and not self.leaf_optional(e.ref.name, optional):
                self.warn(
                    "never-unset",
                    f"`{e.ref.name}` always has a value, so `is {'set' if e.negated else 'unset'}` is constant",
                    e.loc,
                )
        elif isinstance(e, ir.Not):
            self.expr(e.operand, ctx, local, optional)
        elif isinstance(e, (ir.And, ir.Or, ir.Implies)):
            self.expr(e.left, ctx, local, optional)
            self.expr(e.right, ctx, local, optional)

    def _set(self, stmt: ir.SetStmt, ctx: str, local: dict[str, Type], optional: set[str]) -> None:
        if ctx != CTX_LAUNCH:
            self.err(
                "runner-writes-config",
                f"a {ctx} rule writes process config (`{stmt.target.name}`); per-runner rules never do",
                stmt.loc,
                "per-runner decisions go in the stamp; only `launch` blocks may set config leaves",
            )
            return
        leaf = self.leaves.get(stmt.target.name)
        if stmt.target.name in self.untyped:
            pass
        elif leaf is None or leaf.scope != PROCESS:
            self.err(
                "bad-set-target",
                f"`set` writes config leaves; `{stmt.target.name}` is not one",
                stmt.target.loc,
                did_you_mean(stmt.target.name, [n for n, lf in self.leaves.items() if lf.scope == PROCESS]),
            )
        else:
            self.used.add(leaf.full_name)
            self.literal_fits(stmt.value, leaf.type, f"`{leaf.full_name}`")
        if stmt.when is not None:
            self.expr(stmt.when, ctx, local, optional)

    def _check_stmt(self, stmt: ir.Check, ctx: str, local: dict[str, Type], optional: set[str]) -> None:
        if not stmt.message.strip():
            self.err("empty-message", f"`{stmt.kind}` needs a message a user can act on", stmt.loc)
        self.expr(stmt.cond, ctx, local, optional)

    def _chain(
        self,
        field: ir.FieldDecl,
        ctx: str,
        local: dict[str, Type],
        optional: set[str],
        slots: dict[str, Type],
        fields: dict[str, ir.FieldDecl],
    ) -> Type | None:
        """Check one precedence chain; returns the field's type. `local` holds what `when` may read."""
        ftype: Type | None = None
        typed_tiers: list[tuple[ir.Tier, Type]] = []
        for tier in field.tiers:
            t = None
            if tier.kind in ("flag", "base"):
                leaf = self.leaves.get(tier.ref.name)
                if tier.ref.name in self.untyped:
                    pass
                elif leaf is None or leaf.scope != PROCESS:
                    self.err(
                        "bad-tier-source",
                        f"`{tier.kind}` reads a config leaf; `{tier.ref.name}` is not one",
                        tier.ref.loc,
                        did_you_mean(
                            tier.ref.name, [n for n, lf in self.leaves.items() if lf.scope == PROCESS]
                        ),
                    )
                else:
                    self.used.add(leaf.full_name)
                    t = leaf.type
                    if tier.kind == "flag" and not leaf.optional:
                        self.warn(
                            "flag-never-unset",
                            f"`flag {leaf.full_name}`: the leaf has a default, so this tier always wins",
                            tier.loc,
                            "use `base` for a leaf with a default, or make the leaf optional (`?`)",
                        )
                    if tier.kind == "base" and leaf.optional and leaf.default is None:
                        self.warn(
                            "base-may-be-unset",
                            f"`base {leaf.full_name}`: the leaf is optional, so it may yield nothing",
                            tier.loc,
                        )
            elif tier.kind == "auto":
                if ctx != CTX_STAMP:
                    self.err(
                        "auto-out-of-stamp",
                        "`auto` tiers read a stamp's slot; launch rules have none",
                        tier.loc,
                    )
                elif tier.ref.name not in slots:
                    self.err(
                        "unknown-slot",
                        f"`auto {tier.ref.name}`: the stamp declares no slot `{tier.ref.name}`",
                        tier.ref.loc,
                        did_you_mean(tier.ref.name, slots) or "declare it: slot NAME: Type from gate, ...",
                    )
                else:
                    t = slots[tier.ref.name]
            elif tier.kind == "follow":
                if tier.ref.name == field.name.value:
                    self.err("follow-self", f"`{field.name.value}` follows itself", tier.ref.loc)
                elif tier.ref.name not in fields:
                    self.err(
                        "unknown-field",
                        f"`follow {tier.ref.name}`: no field `{tier.ref.name}` here",
                        tier.ref.loc,
                        did_you_mean(tier.ref.name, fields),
                    )
                else:
                    t = local.get(tier.ref.name)
            if t is not None:
                typed_tiers.append((tier, t))
                if ftype is None:
                    ftype = t
                elif t != ftype:
                    self.err(
                        "tier-type-mismatch",
                        f"tier yields `{type_name(t)}` but field `{field.name.value}` is `{type_name(ftype)}`",
                        tier.loc,
                    )
            if tier.when is not None:
                self.expr(tier.when, ctx, local, optional)
        if ftype is None:
            consts = [tier for tier in field.tiers if tier.kind == "const"]
            if consts and field.tiers == tuple(consts):
                self.err(
                    "untyped-field",
                    f"cannot tell the type of `{field.name.value}`: every tier is a constant",
                    field.loc,
                    "start the chain with a flag, base, auto or follow tier",
                )
            return None
        for tier in field.tiers:
            if tier.kind == "const":
                self.literal_fits(tier.value, ftype, f"field `{field.name.value}`")
        self._totality(field, slots)
        return ftype

    def _always_yields(self, tier: ir.Tier) -> bool:
        if tier.when is not None and not (isinstance(tier.when, ir.Const) and tier.when.value):
            return False
        if tier.kind in ("const", "follow"):
            return True  # a followed field is itself total (checked on its own)
        if tier.kind in ("flag", "base"):
            leaf = self.leaves.get(tier.ref.name)
            return bool(leaf) and (not leaf.optional or leaf.default is not None)
        return False  # auto: the caller may give nothing

    def _totality(self, field: ir.FieldDecl, slots: dict[str, Type]) -> None:
        for i, tier in enumerate(field.tiers):
            if isinstance(tier.when, ir.Const) and not tier.when.value:
                self.warn(
                    "shadowed-tier",
                    f"this `{tier.kind}` tier can never win: its condition is false",
                    tier.loc,
                )
            if self._always_yields(tier):
                for later in field.tiers[i + 1 :]:
                    self.warn(
                        "shadowed-tier",
                        f"this `{later.kind}` tier can never win: the `{tier.kind}` tier at "
                        f"{tier.loc.line}:{tier.loc.col} always yields a value",
                        later.loc,
                        "remove it, or give the earlier tier a `when` condition",
                    )
                return
        self.err(
            "not-total",
            f"field `{field.name.value}` may end with no value: every tier can decline",
            field.loc,
            "end the chain with a constant, a `base` leaf with a default, or a tier without `when`",
        )

    def _order(self, fields: dict[str, ir.FieldDecl], where: ir.Loc) -> tuple[str, ...]:
        """Fields after those they read (follow targets and fields named in `when`); reports cycles."""
        deps: dict[str, list[str]] = {}
        for name, field in fields.items():
            reads = []
            for tier in field.tiers:
                if tier.kind == "follow" and tier.ref.name in fields:
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
                self.err(
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

    def _namespaces(self, exprs_refs: Iterable[str]) -> tuple[str, ...]:
        used = {name.split(".", 1)[0] for name in exprs_refs if "." in name}
        return tuple(ns for ns in self.namespaces if ns in used)

    # ------------------------------------------------------------------ declarations that read things
    def _auto(self, decl: ir.AutoDecl) -> AutoInfo | None:
        t = self.resolve_type(decl.type)
        if t is not None:
            self.literal_fits(decl.value, t, f"auto `{decl.name.value}`")
        self.expr(decl.when, CTX_AUTO, {})
        refs = [r.name for r in ir.expr_refs(decl.when)]
        if t is None:
            return None
        return AutoInfo(decl.name.value, t, self._namespaces(refs), decl)

    def _stamp(self, decl: ir.StampDecl) -> StampInfo | None:
        head, _, attribute = decl.target.name.partition(".")
        if head != "runner" or "." in attribute or not is_valid_identifier(attribute):
            self.err(
                "bad-stamp-target",
                f"a stamp lives on a runner attribute: `on runner.NAME`, not `on {decl.target.name}`",
                decl.target.loc,
            )
        for write in decl.writes:
            self._set(write, CTX_STAMP, {}, set())
        slots: dict[str, Type] = {}
        slot_infos = []
        for slot in decl.slots:
            self.ident(slot.name, "slot")
            if slot.name.value in slots:
                self.err("duplicate-field", f"stamp declares `{slot.name.value}` twice", slot.name.loc)
                continue
            t = self.resolve_type(slot.type)
            if t is None:
                continue
            slots[slot.name.value] = t
            for source in slot.sources:
                gate = self.auto_decls.get(source.value)
                if gate is None:
                    self.err(
                        "unknown-gate",
                        f"slot `{slot.name.value}` is computed from `{source.value}`, which is not an auto gate",
                        source.loc,
                        did_you_mean(source.value, self.auto_decls),
                    )
                    continue
                self.used.add(source.value)
                gate_type = self.resolve_type(gate.type) if not isinstance(gate.type, ir.IntType) else None
                if gate_type is not None and gate_type != t:
                    self.err(
                        "slot-type-mismatch",
                        f"gate `{source.value}` yields `{type_name(gate_type)}`, slot `{slot.name.value}` is "
                        f"`{type_name(t)}`",
                        source.loc,
                    )
            slot_infos.append(SlotInfo(slot.name.value, t, tuple(s.value for s in slot.sources), slot))
        fields: dict[str, ir.FieldDecl] = {}
        for field in decl.fields:
            self.ident(field.name, "field")
            if field.name.value in fields or field.name.value in slots:
                self.err(
                    "duplicate-field",
                    f"stamp `{decl.name.value}` declares `{field.name.value}` twice",
                    field.name.loc,
                )
                continue
            fields[field.name.value] = field
        if not fields:
            self.err("empty-stamp", f"stamp `{decl.name.value}` has no fields", decl.loc)
        order = self._order(fields, decl.loc)
        types: dict[str, Type] = {}
        local: dict[str, Type] = dict(slots)
        for name in order:
            # a field's `when` may read fields resolved before it, its slots, and config
            t = self._chain(fields[name], CTX_STAMP, {**local, **types}, set(slots), slots, fields)
            if t is not None:
                types[name] = t
        if len(types) != len(fields) or len(order) != len(fields):
            return None
        refs = [
            r.name for f in fields.values() for tier in f.tiers for r in ([tier.ref] if tier.ref else [])
        ] + [
            r.name for f in fields.values() for tier in f.tiers if tier.when for r in ir.expr_refs(tier.when)
        ]
        infos = tuple(FieldInfo(name, types[name], fields[name]) for name in fields)
        return StampInfo(
            decl.name.value, attribute, infos, order, tuple(slot_infos), self._namespaces(refs), decl
        )

    def _launch(self, decl: ir.LaunchDecl) -> LaunchInfo:
        local: dict[str, Type] = {}
        infos = []
        refs: list[str] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.SetStmt):
                self._set(stmt, CTX_LAUNCH, local, set())
                refs.append(stmt.target.name)
                refs += [r.name for r in ir.expr_refs(stmt.when)] if stmt.when else []
            elif isinstance(stmt, ir.Check):
                self._check_stmt(stmt, CTX_LAUNCH, local, set())
                refs += [r.name for r in ir.expr_refs(stmt.cond)]
            else:
                self.ident(stmt.name, "local")
                if stmt.name.value in local:
                    self.err(
                        "duplicate-field",
                        f"`{stmt.name.value}` is defined twice in this block",
                        stmt.name.loc,
                    )
                    continue
                t = self._chain(
                    stmt, CTX_LAUNCH, local, set(), {}, {**{n: stmt for n in local}, stmt.name.value: stmt}
                )
                for tier in stmt.tiers:
                    refs += [tier.ref.name] if tier.ref else []
                    refs += [r.name for r in ir.expr_refs(tier.when)] if tier.when else []
                if t is not None:
                    local[stmt.name.value] = t
                    infos.append(FieldInfo(stmt.name.value, t, stmt))
        return LaunchInfo(decl.name.value, tuple(infos), self._namespaces(refs), decl)

    def _validate(self, decl: ir.ValidateDecl) -> ValidateInfo:
        local: dict[str, Type] = {}
        for stamp in self.stamp_decls.values():
            for field in stamp.fields:
                t = self._field_type_hint(stamp, field)
                if t is not None:
                    local[f"{stamp.name.value}.{field.name.value}"] = t
        refs: list[str] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.SetStmt):
                self._set(stmt, CTX_VALIDATE, local, set())
            elif isinstance(stmt, ir.Check):
                self._check_stmt(stmt, CTX_VALIDATE, local, set())
                refs += [r.name for r in ir.expr_refs(stmt.cond)]
            else:
                refs += [stmt.field.name] + [r.name for r in ir.expr_refs(stmt.when)]
                self._fallback(stmt, local)
        stamps = tuple(sorted({r.split(".", 1)[0] for r in refs if r.split(".", 1)[0] in self.stamp_decls}))
        return ValidateInfo(decl.name.value, stamps, self._namespaces(refs), decl)

    def _field_type_hint(self, stamp: ir.StampDecl, field: ir.FieldDecl) -> Type | None:
        """A stamp field's type as seen from a validate block (first typed tier; errors reported elsewhere)."""
        for tier in field.tiers:
            if tier.kind in ("flag", "base") and tier.ref.name in self.leaves:
                return self.leaves[tier.ref.name].type
            if tier.kind == "auto":
                slot = next((s for s in stamp.slots if s.name.value == tier.ref.name), None)
                if slot is not None and isinstance(slot.type, ir.NamedType) and slot.type.name in self.enums:
                    return self.enums[slot.type.name]
            if tier.kind == "follow":
                target = next((f for f in stamp.fields if f.name.value == tier.ref.name), None)
                if target is not None and target is not field:
                    return self._field_type_hint(stamp, target)
        return None

    def _fallback(self, stmt: ir.Fallback, local: dict[str, Type]) -> None:
        head = stmt.field.name.split(".", 1)[0]
        t = local.get(stmt.field.name)
        if head not in self.stamp_decls or t is None:
            self.err(
                "bad-fallback-target",
                f"`fallback` replaces a stamp field (`Stamp.field`); `{stmt.field.name}` is not one",
                stmt.field.loc,
                did_you_mean(stmt.field.name, local),
            )
        else:
            ok = self.literal_fits(stmt.from_value, t, f"`{stmt.field.name}`")
            ok = self.literal_fits(stmt.to_value, t, f"`{stmt.field.name}`") and ok
            if ok and stmt.from_value.value == stmt.to_value.value:
                self.err("fallback-to-itself", "a fallback must replace a value with another one", stmt.loc)
        if not stmt.log.strip():
            self.err(
                "empty-message", "a fallback's `log` message must say what was replaced and why", stmt.loc
            )
        self.expr(stmt.when, CTX_VALIDATE, local)

    def _guards(self, guards: tuple[ir.GuardDecl, ...]) -> None:
        seen: dict[str, ir.Name] = {}
        for guard in guards:
            if guard.stamp.value not in self.stamp_decls:
                self.err(
                    "unknown-stamp",
                    f"guard reads `{guard.stamp.value}`, which is not a stamp",
                    guard.stamp.loc,
                    did_you_mean(guard.stamp.value, self.stamp_decls),
                )
            if not _MODULE_PATH.match(guard.module):
                self.err(
                    "bad-module-path",
                    f'guard module "{guard.module}" is not a dotted module path',
                    guard.module_loc,
                    'e.g. from "myengine.backends"',
                )
            for consumer in guard.consumers:
                self.ident(consumer, "consumer")
                if consumer.value in seen:
                    self.err(
                        "duplicate-guard",
                        f"`{consumer.value}` is guarded twice",
                        consumer.loc,
                        f"first guarded at {seen[consumer.value].loc}",
                    )
                seen[consumer.value] = consumer
        attributes: dict[str, ir.StampDecl] = {}
        for stamp in self.stamp_decls.values():
            attr = stamp.target.name
            if attr in attributes:
                self.err(
                    "duplicate-stamp-target",
                    f"stamps `{attributes[attr].name.value}` and `{stamp.name.value}` both live on `{attr}`",
                    stamp.target.loc,
                )
            attributes[attr] = stamp

    def _parity(self, decl: ir.ParityDecl) -> None:
        if not _REGISTRY_PATH.match(decl.registry):
            self.err(
                "bad-registry-path",
                f'registry "{decl.registry}" must be "package.module:NAME" (a module path, a colon, a mapping)',
                decl.registry_loc,
                'e.g. over "myengine.models:ARCHS"',
            )
        seen: dict[str, ir.Loc] = {}
        for keyword, loc in decl.clause_locs:
            if keyword in seen:
                self.err("duplicate-clause", f"`{keyword}` is given twice in parity `{decl.name.value}`", loc)
            seen[keyword] = loc
        for required in ("draft", "target", "hooks"):
            if required not in seen:
                self.err(
                    "missing-clause", f"parity `{decl.name.value}` needs a `{required}` clause", decl.loc
                )
        if decl.draft is not None:
            try:
                pattern = re.compile(decl.draft)
                if pattern.groups > 1:
                    raise re.error("use one group: the suffix that marks a draft")
            except re.error as exc:
                self.err("bad-regex", f"draft pattern /{decl.draft}/ does not compile: {exc}", decl.draft_loc)
        if decl.at_least is not None and decl.at_least < 1:
            self.err("bad-at-least", "`at_least` must be 1 or more", dict(decl.clause_locs)["at_least"])
        for name in (*decl.exclude, *decl.hooks):
            if not name.value.isidentifier():
                self.err("bad-identifier", f"`{name.value}` is not an identifier", name.loc)

    def _unused(self, decls: Iterable[ir.Decl]) -> None:
        for decl in decls:
            if isinstance(decl, ir.EnumDecl) and decl.name.value not in self.used:
                self.warn("unused", f"enum `{decl.name.value}` is never used", decl.name.loc)
            elif isinstance(decl, ir.AutoDecl) and decl.name.value not in self.used:
                self.warn(
                    "unused",
                    f"auto gate `{decl.name.value}` feeds no slot",
                    decl.name.loc,
                    "name it in a stamp: slot NAME: Type from " + decl.name.value,
                )
            elif isinstance(decl, (ir.ConfigDecl, ir.FactsDecl)):
                for leaf in decl.leaves:
                    full = f"{decl.name.value}.{leaf.name.value}"
                    if full not in self.used and full in self.leaves:
                        self.warn("unused", f"`{full}` is never read", leaf.name.loc)


def _lit_kind(lit: ir.Literal) -> str:
    if isinstance(lit, ir.IntLit):
        return f"the int {lit.value}"
    if isinstance(lit, ir.BoolLit):
        return f"the bool {ir.literal_text(lit)}"
    return f"the name `{lit.value}`"
