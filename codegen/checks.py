"""Semantic checks: IR → Model, collecting every diagnostic instead of stopping at the first.

Layers (torchgen-style): the grammar fixed the shape; `_Declarations` checks each declaration on its own
(duplicates inside it, types, defaults, identifiers, parity clauses); `_References` checks across
declarations (names resolve in the right scope, literals fit their types, follow cycles, totality and
shadowed tiers, nothing per-runner writes process config, waivers are reasoned and unexpired); then the
emitters claim the names they would generate (`generate` refuses what they refuse, so `check` says it too).
A Model is built only when no error was found.

Two checks need more than one file: `check_across_files` (a stamp, or a runner attribute, declared by two
files) and `check_imports` (the registries and consumer modules the rules name, imported and held to them).
`stampgen check` runs both; `--no-import` skips the second.
"""

from __future__ import annotations

import ast
import contextlib
import datetime
import importlib
import importlib.util
import io
import os
import re
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from keyword import iskeyword
from pathlib import Path
from types import ModuleType

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, Note, did_you_mean, error, sort_key, warning
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

TODAY_ENV = "STAMPGEN_TODAY"  # YYYY-MM-DD: the date waivers are held to, instead of today's
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def check(
    rules: ir.RulesFile, today: datetime.date | None = None, *, generation: bool = True
) -> tuple[Model | None, list[Diagnostic]]:
    """Check one parsed file. Returns the Model (None if any error) and every diagnostic, sorted.

    `today` (default: `current_date()`) is the date waivers expire against. `generation=False` leaves out
    what only generating would refuse (for `generate` itself, whose emitters refuse it anyway)."""
    checker = _Checker(rules, today or current_date())
    model = checker.run()
    diags = checker.diags
    if model is not None and generation:
        diags += _generation_diagnostics(model)
    diags = sorted(diags, key=sort_key)
    if any(d.is_error for d in diags):
        return None, diags
    return model, diags


def current_date() -> datetime.date:
    """Today, as waivers see it: STAMPGEN_TODAY when set (tests hold a waiver before and after its date)."""
    given = os.environ.get(TODAY_ENV, "")
    if not given:
        return datetime.date.today()
    parsed = parse_date(given)
    if parsed is None:
        raise ValueError(f"{TODAY_ENV}={given!r} is not a date (YYYY-MM-DD)")
    return parsed


def parse_date(text: str) -> datetime.date | None:
    """A YYYY-MM-DD date, or None when `text` is not one."""
    if not _DATE.match(text):
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        return None


def _generation_diagnostics(model: Model) -> list[Diagnostic]:
    """What `generate` would refuse in a model that passed the checks: a generated name that clashes, a
    validate block that reads two stamps. The emitters own those rules; running them here (without
    rendering) keeps one definition of each and gives every refusal a position before `generate` runs."""
    from stampgen.codegen.emit.module import build_module
    from stampgen.codegen.emit.names import RenderError

    try:
        build_module(model, model.path, "check")
    except RenderError as exc:
        return list(exc.diagnostics)
    return []


class _Checker:
    def __init__(self, rules: ir.RulesFile, today: datetime.date):
        self.rules = rules
        self.today = today
        self.diags: list[Diagnostic] = []
        self.enums: dict[str, EnumT] = {}
        self.leaves: dict[str, LeafInfo] = {}
        self.namespaces: dict[str, str] = {}
        self.stamp_decls: dict[str, ir.StampDecl] = {}
        self.auto_decls: dict[str, ir.AutoDecl] = {}
        self.used: set[str] = set()  # full names of leaves and names of enums/autos that something reads
        self.duplicates: set[ir.Loc] = set()  # leaves declared a second time (reported there, once)
        self.untyped: set[str] = set()  # leaves whose type did not resolve (reported once, at the type)

    # ------------------------------------------------------------------ reporting
    def err(
        self, code: str, message: str, loc: ir.Loc, hint: str | None = None, notes: tuple[Note, ...] = ()
    ) -> None:
        self.diags.append(msgspec.structs.replace(error(code, message, loc, hint), notes=notes))

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
        if not decls:
            self.err(
                "empty-rules-file",
                "this rules file declares nothing: its generated tests would hold nothing",
                ir.Loc(self.rules.path, 1, 1, 1, 1),
                "declare the rules it is for, or delete the file",
            )
        self._declare(decls)
        autos = {}
        stamps = {}
        for decl in decls:
            if isinstance(decl, ir.AutoDecl):
                info = self._auto(decl)
                if info:
                    autos[info.name] = info
            elif isinstance(decl, ir.StampDecl):
                info = self._stamp(decl)
                if info:
                    stamps[info.name] = info
            elif isinstance(decl, ir.ValidateDecl):
                self._waivers(decl.waivers)
                if decl.waivers and not any(isinstance(s, ir.Check) for s in decl.stmts):
                    for waiver in decl.waivers:
                        self.warn(
                            "stale-waiver",
                            f"validate block `{decl.name.value}` has no forbid or require: the waiver for "
                            f"`{waiver.cls.value}` waives nothing",
                            waiver.cls.loc,
                            "remove the waiver",
                        )
        # after the stamps: a launch block may `use` a stamp's fields, a validate block reads them
        launches = [self._launch(d, stamps) for d in decls if isinstance(d, ir.LaunchDecl)]
        validates = [self._validate(d, stamps) for d in decls if isinstance(d, ir.ValidateDecl)]
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
                    notes=(Note("first declared here", table[name.value].loc),),
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
                    notes=(Note("first declared here", seen[leaf.name.value].loc),),
                )
                self.duplicates.add(leaf.name.loc)
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
        ftype: Type | None = self.resolve_type(field.declared) if field.declared is not None else None
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
                ftype = self._constants_type(field, consts, local)
            if ftype is None:
                return None
        for tier in field.tiers:
            if tier.kind == "const":
                self.literal_fits(tier.value, ftype, f"field `{field.name.value}`")
        self._totality(field, slots)
        return ftype

    def _constants_type(
        self, field: ir.FieldDecl, consts: list[ir.Tier], local: dict[str, Type]
    ) -> Type | None:
        """The type of a field whose every tier is a constant: the one enum that has all its members (among
        several, the one its sibling fields have); bool for booleans. Else an error asking to declare it."""
        values = [tier.value for tier in consts if tier.value is not None]
        if all(isinstance(v, ir.BoolLit) for v in values):
            return BoolT()
        names = [v.value for v in values if isinstance(v, ir.NameLit)]
        candidates = [
            e
            for e in self.enums.values()
            if names and len(names) == len(values) and set(names) <= set(e.members)
        ]
        if len(candidates) > 1:
            siblings = [t for t in local.values() if isinstance(t, EnumT)]
            candidates = [e for e in candidates if e in siblings] or candidates
        if len(candidates) == 1:
            self.used.add(candidates[0].name)
            return candidates[0]
        self.used.update(e.name for e in candidates)  # the error is the finding, not "never used" on each
        text = ir.literal_text(values[0]) if values else "..."
        together = (
            ", ".join(e.name for e in candidates[:-1]) + f" and {candidates[-1].name}" if candidates else ""
        )
        self.err(
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

    def _launch(self, decl: ir.LaunchDecl, stamps: dict[str, StampInfo]) -> LaunchInfo:
        local: dict[str, Type] = {}
        infos = []
        refs: list[str] = []
        expanded: list[ir.SetStmt | ir.Check | ir.FieldDecl | ir.UseStmt] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.UseStmt):
                for field in self._use(stmt, stamps, local):
                    local[field.name] = field.type
                    infos.append(field)
                    expanded.append(field.decl)
                    for tier in field.decl.tiers:
                        refs += [tier.ref.name] if tier.ref and tier.ref.name in self.leaves else []
                        refs += (
                            [r.name for r in ir.expr_refs(tier.when) if r.name in self.leaves]
                            if tier.when
                            else []
                        )
                continue
            expanded.append(stmt)
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
        checked = msgspec.structs.replace(decl, stmts=tuple(expanded))
        return LaunchInfo(decl.name.value, tuple(infos), self._namespaces(refs), checked)

    def _use(self, stmt: ir.UseStmt, stamps: dict[str, StampInfo], local: dict[str, Type]) -> list[FieldInfo]:
        """The stamp fields a `use` makes locals of the launch block. A field must be computable at launch
        from config alone: no slot (only a runner has those), and the fields it reads used before it."""
        found: list[FieldInfo] = []
        for ref in stmt.fields:
            stamp_name, _, field_name = ref.name.partition(".")
            if stamp_name not in self.stamp_decls:
                self.err(
                    "unknown-stamp",
                    f"`use {ref.name}`: `{stamp_name}` is not a stamp",
                    ref.loc,
                    did_you_mean(stamp_name, self.stamp_decls),
                )
                continue
            info = stamps.get(stamp_name)
            if info is None:  # the stamp has errors of its own, reported there
                continue
            field = next((f for f in info.fields if f.name == field_name), None)
            if field is None or "." in field_name:
                self.err(
                    "unknown-field",
                    f"`use {ref.name}`: {stamp_name} has no field `{field_name}`",
                    ref.loc,
                    did_you_mean(field_name, [f.name for f in info.fields]),
                )
                continue
            slots = {s.name for s in info.slots}
            fields = {f.name for f in info.fields}
            read: list[str] = []
            for tier in field.decl.tiers:
                read += [tier.ref.name] if tier.ref else []
                read += [r.name for r in ir.expr_refs(tier.when)] if tier.when else []
            for name in dict.fromkeys(read):
                if name in slots:
                    self.err(
                        "use-reads-slot",
                        f"`use {ref.name}`: its chain reads the slot `{name}`, which only a runner has "
                        "(a launch block runs before any runner exists)",
                        ref.loc,
                        "a launch block can check the config leaves that chain reads instead",
                    )
                elif name in fields and name not in local and name not in {f.name for f in found}:
                    self.err(
                        "use-order",
                        f"`use {ref.name}`: its chain reads `{name}`, which this block has not used yet",
                        ref.loc,
                        f"use {stamp_name}.{name} first: `use {stamp_name}.{name}, {ref.name}`",
                    )
            if field.name in local or field.name in {f.name for f in found}:
                self.err("duplicate-field", f"`{field.name}` is defined twice in this block", ref.loc)
                continue
            found.append(FieldInfo(field.name, field.type, field.decl))
        return found

    def _validate(self, decl: ir.ValidateDecl, stamps: dict[str, StampInfo]) -> ValidateInfo:
        # the stamps' checked field types (a stamp with errors has none: reads of it stay silent)
        local = {f"{info.name}.{f.name}": f.type for info in stamps.values() for f in info.fields}
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
        self._waivers(decl.waivers)
        draft_pattern = _draft_pattern(decl)
        excluded = {n.value for n in decl.exclude}
        for waiver in decl.waivers:
            cls = waiver.cls.value
            if cls in excluded or (draft_pattern is not None and draft_pattern.search(cls) is None):
                why = "is excluded" if cls in excluded else f"does not match the draft pattern /{decl.draft}/"
                self.warn(
                    "stale-waiver",
                    f"`{cls}` {why}, so parity `{decl.name.value}` never checks it: the waiver waives nothing",
                    waiver.cls.loc,
                    "name the draft class the waiver is for, or remove it",
                )

    def _waivers(self, waivers: tuple[ir.Waiver, ...]) -> None:
        """Each waiver on its own: one per class, a reason, a real date that has not passed."""
        seen: dict[str, ir.Name] = {}
        for waiver in waivers:
            cls = waiver.cls.value
            if cls in seen:
                self.err(
                    "duplicate-waiver",
                    f"`{cls}` is waived twice in this block",
                    waiver.cls.loc,
                    f"first waived at {seen[cls].loc}",
                )
            seen.setdefault(cls, waiver.cls)
            if waiver.reason is None or not waiver.reason.strip():
                self.err(
                    "waiver-without-reason",
                    f"the waiver for `{cls}` gives no reason",
                    waiver.loc,
                    f'say why it is acceptable until then: waive {cls} until {waiver.until} "reason"',
                )
            until = parse_date(waiver.until)
            if until is None:
                self.err(
                    "bad-date",
                    f"`{waiver.until}` is not a date: write YYYY-MM-DD, e.g. 2026-09-30",
                    waiver.until_loc,
                )
            elif until < self.today:
                self.err(
                    "expired-waiver",
                    f"the waiver for `{cls}` expired on {until.isoformat()} (today is {self.today.isoformat()})",
                    waiver.until_loc,
                    "fix what it waives, or renew it with a new date and reason",
                )

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
                    if full not in self.used and full in self.leaves and leaf.name.loc not in self.duplicates:
                        self.warn("unused", f"`{full}` is never read", leaf.name.loc)


def _lit_kind(lit: ir.Literal) -> str:
    if isinstance(lit, ir.IntLit):
        return f"the int {lit.value}"
    if isinstance(lit, ir.BoolLit):
        return f"the bool {ir.literal_text(lit)}"
    return f"the name `{lit.value}`"


def _draft_pattern(decl: ir.ParityDecl) -> re.Pattern[str] | None:
    """The draft regex of a parity, or None when it has none or it does not compile (reported elsewhere)."""
    if decl.draft is None:
        return None
    try:
        return re.compile(decl.draft)
    except re.error:
        return None


# --------------------------------------------------------------------------------------------- across files


def check_across_files(models: Sequence[Model]) -> list[Diagnostic]:
    """What no single file shows: a stamp, or a runner attribute, that two rules files both declare (two
    generated modules would each stamp it, and only one of them can be the truth)."""
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


# --------------------------------------------------------------------------------------------- imports


_IMPORT_HINT = "make it importable from the project root, or skip the imports: `stampgen check --no-import`"


def check_imports(model: Model, search_path: str | None = None) -> list[Diagnostic]:
    """Import what the rules name and hold it to them, so that no generated test can pass vacuously: each
    parity registry must import and be a mapping of names to classes, each of its hooks must be on some class
    (a misspelt hook finds no offender, ever), each waiver must name a draft that is an offender; each
    guarded consumer module must import and hold its consumer classes. `search_path` (the project root) is
    put first on sys.path meanwhile. Importing runs those modules' code: `stampgen check --no-import` skips
    this."""
    diags: list[Diagnostic] = []
    with _on_path(search_path):
        for decl in model.parities:
            diags += _registry_findings(decl)
        for guard in model.guards:
            diags += _consumer_findings(guard)
    return sorted(diags, key=sort_key)


@contextlib.contextmanager
def _on_path(folder: str | None) -> Iterator[None]:
    if folder is None:
        yield
        return
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def import_module(name: str) -> tuple[ModuleType | None, str]:
    """The module, or None and why it does not import. What it prints is kept out of the report (stdout
    may be JSON); SystemExit is a failure to import like any other."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return importlib.import_module(name), ""
    except (Exception, SystemExit) as exc:
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _public_names(module: ModuleType) -> list[str]:
    return [n for n in dir(module) if not n.startswith("_")]


def _registry_findings(decl: ir.ParityDecl) -> list[Diagnostic]:
    module_name, _, attribute = decl.registry.partition(":")
    module, why = import_module(module_name)
    if module is None:
        return [
            error(
                "registry-not-importable",
                f"the registry module `{module_name}` of parity `{decl.name.value}` does not import: {why}",
                decl.registry_loc,
                _IMPORT_HINT,
            )
        ]
    if not hasattr(module, attribute):
        return [
            error(
                "unknown-registry",
                f"`{module_name}` has no `{attribute}`",
                decl.registry_loc,
                did_you_mean(attribute, _public_names(module)),
            )
        ]
    registry = getattr(module, attribute)
    if not is_registry(registry):
        return [
            error(
                "registry-not-a-mapping",
                f"`{decl.registry}` is a {type(registry).__name__}, not a mapping of names to classes",
                decl.registry_loc,
                'the registry maps each architecture name to its class: {"QwenMTP": QwenMTP, ...}',
            )
        ]
    diags = []
    attributes = {n for cls in registry.values() for n in dir(cls) if not n.startswith("__")}
    for hook in decl.hooks:
        if not any(hasattr(cls, hook.value) for cls in registry.values()):
            diags.append(
                error(
                    "unknown-hook",
                    f"no class of `{decl.registry}` has `{hook.value}`: parity `{decl.name.value}` would find "
                    "no offender, whatever the drafts do",
                    hook.loc,
                    did_you_mean(hook.value, attributes),
                )
            )
    pattern = _draft_pattern(decl)
    excluded = {n.value for n in decl.exclude}
    pairs, offences = parity_pairs(decl, registry)
    targets = dict(pairs)
    at_least = decl.at_least if decl.at_least is not None else 1
    if len(pairs) < at_least and pattern is not None:
        diags.append(
            error(
                "too-few-pairs",
                f"parity `{decl.name.value}` finds {len(pairs)} draft/target pair(s) in `{decl.registry}`, fewer "
                f"than the {at_least} it requires",
                decl.name.loc,
                "check the draft pattern and the target suffixes against the registry's names",
            )
        )
    for waiver in decl.waivers:
        cls = waiver.cls.value
        if cls in excluded or pattern is None or pattern.search(cls) is None:
            continue  # the checker said so without importing
        if cls not in registry:
            diags.append(
                warning(
                    "stale-waiver",
                    f"`{cls}` is not a class of `{decl.registry}`: the waiver waives nothing",
                    waiver.cls.loc,
                    did_you_mean(cls, registry) or "remove the waiver",
                )
            )
        elif cls not in offences:
            why = (
                f"answers the hooks its target `{targets[cls]}` answers"
                if cls in targets
                else f"has no target in `{decl.registry}`, so parity `{decl.name.value}` never checks it"
            )
            diags.append(
                warning(
                    "stale-waiver",
                    f"draft `{cls}` {why}: the waiver waives nothing",
                    waiver.cls.loc,
                    "remove the waiver",
                )
            )
    return diags


def is_registry(value: object) -> bool:
    """A mapping of names to classes, as a parity check reads its registry."""
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, type) for k, v in value.items()
    )


def parity_pairs(
    decl: ir.ParityDecl, archs: Mapping[str, type]
) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """The (draft, target) pairs a parity checks over a registry, and per offending draft the hooks that
    only one of the pair has: what the generated check_NAME() computes, for `check` and for its tests."""
    pattern = _draft_pattern(decl)
    excluded = {n.value for n in decl.exclude}
    pairs: list[tuple[str, str]] = []
    offences: dict[str, list[str]] = {}
    for draft in sorted(archs):
        match = pattern.search(draft) if pattern is not None and draft not in excluded else None
        if match is None:
            continue
        base = draft[: match.start()]
        target = next((base + s for s in decl.targets if base + s in archs and base + s != draft), None)
        if target is None:
            continue
        pairs.append((draft, target))
        hooks = [
            h.value for h in decl.hooks if hasattr(archs[draft], h.value) != hasattr(archs[target], h.value)
        ]
        if hooks:
            offences[draft] = hooks
    return pairs, offences


def _consumer_findings(guard: ir.GuardDecl) -> list[Diagnostic]:
    # Found, not run: a consumer module may load a GPU stack when imported (seconds of torch), and check
    # must stay fast. The module's source is read for the names it binds at its top level; the generated
    # guard tests import it and build each consumer.
    names, why = _module_top_level_names(guard.module)
    if names is None:
        return [
            error(
                "consumer-module-not-importable",
                f"the consumer module `{guard.module}` cannot be found: {why}",
                guard.module_loc,
                _IMPORT_HINT,
            )
        ]
    return [
        error(
            "unknown-consumer",
            f"`{guard.module}` has no class `{consumer.value}`: its guard test could not build it",
            consumer.loc,
            did_you_mean(consumer.value, names),
        )
        for consumer in guard.consumers
        if consumer.value not in names
    ]


def _module_top_level_names(name: str) -> tuple[set[str] | None, str]:
    """The names a module's source binds at its top level (classes, functions, assignments, imports), or
    None and why it cannot be found; a module without Python source is imported instead."""
    try:
        spec = importlib.util.find_spec(name)
    except (Exception, SystemExit) as exc:  # a parent package that fails to import, a bad name
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    if spec is None:
        return None, f"no module named {name!r}"
    source = None
    if spec.origin and spec.origin.endswith(".py"):
        try:
            source = Path(spec.origin).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = None
    if source is None:
        module, why = import_module(name)
        return (None, why) if module is None else (set(_public_names(module)), "")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return None, f"SyntaxError: {exc.msg} (line {exc.lineno})"
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names, ""
