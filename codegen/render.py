"""Rendering: a checked Model → the text of generated/NAME.py and generated/test_NAME.py (before formatting).

Every name, expression and statement is worked out here, in Python, into small view records; the Jinja
templates (codegen/templates/*.jinja) only lay them out. Strings from the rules reach the output only
through `py_str` (a Python literal made by `repr`); names were validated by the checker
(`model.is_valid_identifier`) and are checked again here for clashes with the names the generator emits
itself. Nothing from a .rules file is ever evaluated.

Everything is iterated in declaration order or sorted: the output depends on nothing but the Model.
"""

from __future__ import annotations

import builtins
import functools
import keyword
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2

from stampgen.codegen import interpreter, ir
from stampgen.codegen.diagnostics import Diagnostic, error
from stampgen.codegen.domains import (
    SAMPLE_ROWS,
    SAMPLE_SEED,
    DecisionTable,
    InputDomain,
    decision_tables,
    gate_domain,
    launch_domain,
    stamp_domain,
    stamping_domain,
    validate_domain,
)
from stampgen.codegen.model import (
    LAUNCH,
    PROCESS,
    BoolT,
    EnumT,
    IntT,
    LeafInfo,
    Model,
    StampInfo,
    Type,
    ValidateInfo,
    domain,
)
from stampgen.codegen.naming import camel_case, snake_case

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
MODULE_TEMPLATE = "module.py.jinja"
TESTS_TEMPLATE = "test_module.py.jinja"

# Names the generated module defines or imports itself; rules names must not clash with them.
_MODULE_NAMES = (
    "enum",
    "logging",
    "re",
    "msgspec",
    "Any",
    "Mapping",
    "annotations",
    "logger",
    "RULES_SOURCE",
    "RuleViolationError",
    "UnstampedRunnerError",
    "ParityReport",
)


class RenderError(Exception):
    """The model cannot be rendered (a generated name would clash); carries diagnostics with positions."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


# --------------------------------------------------------------------------------------------- naming


def member_const(member: str) -> str:
    """The Python name of an enum member: `flashinfer` → `FLASHINFER`."""
    return member.upper()


def py_str(text: str) -> str:
    """A string from the rules as a Python literal (never spliced into code as it stands)."""
    return repr(str(text))


def type_ann(t: Type) -> str:
    if isinstance(t, EnumT):
        return t.name
    if isinstance(t, IntT):
        return "int"
    return "bool"


def opt_ann(t: Type, optional: bool) -> str:
    return f"{type_ann(t)} | None" if optional else type_ann(t)


def py_literal(value: Any, t: Type) -> str:
    """A value of a type as Python source: enum members by name, never by string."""
    if value is None:
        return "None"
    if isinstance(t, EnumT):
        return f"{t.name}.{member_const(value)}"
    if isinstance(t, BoolT):
        return "True" if value else "False"
    return repr(int(value))


def coercer_name(enum: EnumT) -> str:
    return f"_as_{snake_case(enum.name)}"


def facts_class(namespace: str) -> str:
    return f"{camel_case(namespace)}Facts"


def facts_param(namespace: str) -> str:
    return f"{namespace}_facts"


class _Namer:
    """Local names of one generated function: readable, unique, never shadowing a module-level name."""

    def __init__(self, reserved: Iterable[str]):
        self.taken = set(reserved) | set(dir(builtins)) | set(keyword.kwlist)

    def claim(self, wanted: str) -> str:
        name = wanted
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name


# --------------------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class _Ref:
    code: str  # how the generated code reads it
    type: Type
    optional: bool  # may be None


# precedence of the Python operators produced: 0 atom/comparison, 1 not, 2 and, 3 or
_ATOM, _NOT, _AND, _OR = 0, 1, 2, 3


class _Scope:
    """What each name of the rules is called inside one generated function."""

    def __init__(self, refs: Mapping[str, _Ref], stamp_fields: Mapping[str, Sequence[str]] = {}):
        self.refs = dict(refs)
        self.stamp_fields = stamp_fields  # stamp name -> its field names (for `value in Stamp`)

    def ref(self, name: str) -> _Ref:
        return self.refs[name]

    def cond(self, e: ir.Expr) -> str:
        return self._expr(e)[0]

    def _wrap(self, e: ir.Expr, limit: int) -> str:
        code, prec = self._expr(e)
        return f"({code})" if prec > limit else code

    def _expr(self, e: ir.Expr) -> tuple[str, int]:
        if isinstance(e, ir.Const):
            return ("True" if e.value else "False"), _ATOM
        if isinstance(e, ir.Not):
            flipped = _negated(e.operand)
            if flipped is not None:
                return self._expr(flipped)
            return f"not {self._wrap(e.operand, _NOT)}", _NOT
        if isinstance(e, ir.And):
            parts = _conjuncts(self._wrap(e.left, _AND)) + _conjuncts(self._wrap(e.right, _AND))
            return " and ".join(dict.fromkeys(parts)), _AND
        if isinstance(e, ir.Or):
            return f"{self._or_operand(e.left)} or {self._or_operand(e.right)}", _OR
        if isinstance(e, ir.Implies):
            return self._expr(ir.Or(ir.Not(e.left, e.loc), e.right, e.loc))
        if isinstance(e, ir.AnyField):
            return self._any_field(e)
        ref = self.ref(e.ref.name)
        if isinstance(e, ir.Truthy):
            return ref.code, _ATOM
        if isinstance(e, ir.IsUnset):
            return f"{ref.code} is {'not ' if e.negated else ''}None", _ATOM
        if isinstance(e, ir.Member):
            values = [py_literal(v.value, ref.type) for v in e.values]
            if len(values) == 1 and isinstance(ref.type, (EnumT, BoolT)):
                return f"{ref.code} is {'not ' if e.negated else ''}{values[0]}", _ATOM
            inside = f"({', '.join(values)}{',' if len(values) == 1 else ''})"
            return f"{ref.code} {'not in' if e.negated else 'in'} {inside}", _ATOM
        assert isinstance(e, ir.Compare)
        lit = py_literal(e.value.value, ref.type)
        if isinstance(ref.type, (EnumT, BoolT)):
            # enum members and booleans are singletons: compare by identity (None never matches)
            op = {"==": "is", "!=": "is not"}[e.op]
            return f"{ref.code} {op} {lit}", _ATOM
        if e.op in ("==", "!="):
            return f"{ref.code} {e.op} {lit}", _ATOM
        if ref.optional:  # unset is never below or above anything
            return f"{ref.code} is not None and {ref.code} {e.op} {lit}", _AND
        return f"{ref.code} {e.op} {lit}", _ATOM

    def _or_operand(self, e: ir.Expr) -> str:
        """An operand of `or`; an `and` inside one is parenthesised, though Python would not need it."""
        code, prec = self._expr(e)
        return f"({code})" if prec == _AND else code

    def _any_field(self, e: ir.AnyField) -> tuple[str, int]:
        name = e.value.value
        refs = [self.ref(f"{e.stamp.name}.{f}") for f in self.stamp_fields[e.stamp.name]]
        hits = [r for r in refs if isinstance(r.type, EnumT) and name in r.type.members]
        if not hits:
            return "False", _ATOM
        if len(hits) == len(refs) and len({r.type.name for r in hits}) == 1:
            member = py_literal(name, hits[0].type)
            return f"{member} in ({', '.join(r.code for r in hits)}{',' if len(hits) == 1 else ''})", _ATOM
        parts = [f"{r.code} is {py_literal(name, r.type)}" for r in hits]
        return " or ".join(parts), (_OR if len(parts) > 1 else _ATOM)


def _negated(e: ir.Expr) -> ir.Expr | None:
    """`not e` with the negation pushed inwards (De Morgan; `==` ↔ `!=`, `in` ↔ `not in`, `is unset` ↔
    `is set`), where that reads better and says the same for every value, None included; else None."""
    if isinstance(e, ir.Const):
        return ir.Const(not e.value, e.loc)
    if isinstance(e, ir.Compare) and e.op in ("==", "!="):
        return ir.Compare(e.ref, "!=" if e.op == "==" else "==", e.value, e.loc)
    if isinstance(e, ir.Member):
        return ir.Member(e.ref, e.values, not e.negated, e.loc)
    if isinstance(e, ir.IsUnset):
        return ir.IsUnset(e.ref, not e.negated, e.loc)
    if isinstance(e, ir.Not):
        return e.operand
    if isinstance(e, ir.And):
        return ir.Or(negate(e.left), negate(e.right), e.loc)
    if isinstance(e, ir.Or):
        return ir.And(negate(e.left), negate(e.right), e.loc)
    if isinstance(e, ir.Implies):
        return ir.And(e.left, negate(e.right), e.loc)
    return None


def negate(e: ir.Expr) -> ir.Expr:
    return _negated(e) or ir.Not(e, e.loc)


def _conjuncts(code: str) -> list[str]:
    """Split `a and b and (c or d)` at its top-level `and`s (conditions hold no string literals)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and code.startswith(" and ", i):
            parts.append(code[start:i])
            start = i + 5
    parts.append(code[start:])
    return parts


# --------------------------------------------------------------------------------------------- view records


@dataclass(frozen=True)
class EnumMember:
    const: str
    value: str  # a Python literal
    is_method: str


@dataclass(frozen=True)
class EnumView:
    name: str
    source: str
    members: list[EnumMember]
    open_const: str | None
    open_value: str | None
    by_value: str  # the lookup table's name
    coercer: str
    listing: str  # the members, for error messages (a Python literal)


@dataclass(frozen=True)
class FactField:
    name: str
    annotation: str
    source: str
    coerce: str | None  # the coercion expression of an enum fact, or None


@dataclass(frozen=True)
class FactsView:
    namespace: str
    cls: str
    source: str
    fields: list[FactField]
    doc: str


@dataclass(frozen=True)
class Read:
    """One config leaf read (once) into a local at the top of a function."""

    local: str
    annotation: str
    expr: str
    default: str | None  # used when the leaf is unset
    required: str | None  # the error (a Python literal) when a leaf the rules say is always set is unset
    leaf: str  # `namespace.leaf`
    attribute: str  # the attribute read
    declared: str  # `namespace.leaf (rules/x.rules:L:C)`


@dataclass(frozen=True)
class Branch:
    cond: str | None  # None: always taken (the chain's last branch)
    value: str
    comment: str  # the tier and its rules line
    provenance: str  # a Python literal: the tier as written and its rules line


@dataclass(frozen=True)
class Chain:
    local: str
    annotation: str
    text: str  # the chain as written, for a comment
    source: str
    branches: list[Branch]
    provenance_local: str = ""


@dataclass(frozen=True)
class Param:
    name: str
    annotation: str
    default: str | None = None

    def __str__(self) -> str:
        text = f"{self.name}: {self.annotation}"
        return f"{text} = {self.default}" if self.default is not None else text


@dataclass(frozen=True)
class Stmt:
    """One statement of a launch or validate block, in order."""

    kind: str  # set / check / local / fallback
    source: str
    cond: str | None = None  # set/fallback: when it applies; check: when it fails
    text: str = ""  # the statement as written (identifiers and literals only)
    target: str = ""  # set: the local; fallback: the field
    value: str = ""  # set/fallback: the new value
    namespace: str = ""  # set: the namespace written
    leaf: str = ""  # set: the leaf written
    log: str | None = None  # a Python literal
    message: str = ""  # check: a Python literal
    chain: Chain | None = None  # local


@dataclass(frozen=True)
class GateView:
    name: str
    source: str
    namespaces: list[str]
    params: list[Param]
    call_args: list[str]  # the namespaces it takes, in order
    reads: list[Read]
    cond: str
    value: str
    annotation: str
    log: str  # a Python literal: what stamp_X logs when the gate yields
    text: str


@dataclass(frozen=True)
class SlotFill:
    """How stamp_X computes a slot: the first gate that yields, else the caller's keyword."""

    local: str
    gates: list[GateView]
    param: Param | None


@dataclass(frozen=True)
class StampView:
    name: str
    snake: str
    source: str
    attribute: str
    provenance_cls: str
    resolve: str
    resolve_provenance: str
    stamp_fn: str
    require: str
    fields: list[tuple[str, str]]  # (name, annotation)
    field_coercions: list[FactField]  # enum fields: names given to the constructor become members
    field_locals: list[tuple[str, str]]  # (name, the resolver's local)
    provenance_locals: list[tuple[str, str]]  # (name, the local holding its deciding tier), declared order
    positional: list[Param]
    slots: list[Param]
    slot_coercions: list[tuple[str, str]]  # (slot local, coercion expression)
    reads: list[Read]
    chains: list[Chain]  # in evaluation order
    provenance_chains: list[Chain]
    config_namespaces: list[str]  # the resolver's positional parameters
    stamp_namespaces: list[str]  # stamp_X's keyword parameters (namespaces)
    sourceless_slots: list[str]  # slots no gate computes: stamp_X takes them as keywords
    stamp_params: list[Param]
    slot_fills: list[SlotFill]
    resolve_call: str  # the call of resolve_provenance from stamp_fn
    stamp_local: str
    provenance_local: str
    log_format: str  # a Python literal
    log_args: list[str]
    guards: list[tuple[str, str]]  # (consumer, module)
    guard_source: str | None
    unstamped_message: str  # a Python literal


@dataclass(frozen=True)
class LaunchView:
    name: str
    source: str
    namespaces: list[str]
    params: list[Param]
    reads: list[Read]
    stmts: list[Stmt]
    changes: str


@dataclass(frozen=True)
class ValidateView:
    name: str
    fn: str
    source: str
    stamp: str | None  # the stamp class it validates, or None
    stamp_param: str
    positional: list[Param]
    namespaces: list[str]
    params: list[Param]
    reads: list[Read]
    stmts: list[Stmt]


@dataclass(frozen=True)
class ParityView:
    name: str
    fn: str
    source: str
    registry: str  # Python literal
    registry_const: str
    at_least_const: str
    source_const: str
    at_least: int
    pattern: str  # Python literal
    pattern_const: str
    targets: str  # Python literal (a tuple)
    targets_const: str
    exclude: str
    exclude_const: str
    hooks: str
    hooks_const: str
    hook_names: list[str]
    draft_text: str  # for the docstring: identifiers and quotes removed
    module: str  # the registry's module (Python literal)


@dataclass
class ModuleView:
    rules_source: str  # rules/NAME.rules
    module: str  # NAME
    imports: list[str]
    all_names: list[str]
    enums: list[EnumView] = field(default_factory=list)
    facts: list[FactsView] = field(default_factory=list)
    stamps: list[StampView] = field(default_factory=list)
    gates: list[GateView] = field(default_factory=list)
    launches: list[LaunchView] = field(default_factory=list)
    validates: list[ValidateView] = field(default_factory=list)
    parities: list[ParityView] = field(default_factory=list)
    facts_classes: dict[str, str] = field(default_factory=dict)  # facts namespace -> its Struct
    guards: list[tuple[str, str, str, str]] = field(default_factory=list)  # (consumer, module, stamp, source)


# --------------------------------------------------------------------------------------------- the renderer


class _ModuleBuilder:
    def __init__(self, model: Model, rules_source: str, module: str):
        self.model = model
        self.rules_source = rules_source
        self.module = module
        self.diags: list[Diagnostic] = []
        self.top: dict[str, str] = {}  # generated top-level name -> what produced it
        for name in _MODULE_NAMES:
            self.top[name] = "the generated module itself"
        self.facts_namespaces = [ns for ns, scope in model.namespaces.items() if scope != PROCESS]

    # ------------------------------------------------------------------ names
    def claim(self, name: str, what: str, loc: ir.Loc | None) -> str:
        if name in self.top:
            self.diags.append(
                error(
                    "generated-name-clash",
                    f"{what} would generate `{name}`, which is already {self.top[name]}",
                    loc or ir.Loc(self.rules_source, 1, 1, 1, 1),
                    "rename it in the rules",
                )
            )
        else:
            where = f" ({loc})" if loc else ""
            self.top[name] = f"generated for {what}{where}"
        return name

    def reserved(self) -> set[str]:
        return set(self.top)

    # ------------------------------------------------------------------ shared pieces
    def source(self, loc: ir.Loc) -> str:
        return str(loc)

    def leaf(self, name: str) -> LeafInfo:
        return self.model.leaves[name]

    def param_for(self, namespace: str) -> Param:
        if self.model.namespaces[namespace] == PROCESS:
            return Param(namespace, "Any")
        return Param(facts_param(namespace), facts_class(namespace))

    def read(self, leaf: LeafInfo, param: str, local: str) -> Read:
        """Read a config leaf into a typed local: enum names become members, None stays unset."""
        raw = f"{param}.{leaf.name}"
        expr = self.coerce_expr(leaf.type, raw, leaf) if isinstance(leaf.type, EnumT) else raw
        default = py_literal(leaf.default, leaf.type) if leaf.default is not None else None
        required = None
        if not leaf.optional and leaf.default is None:
            required = py_str(
                f"{leaf.full_name} is unset, but the rules declare it always set ({leaf.loc}): give it a value"
            )
        return Read(
            local,
            opt_ann(leaf.type, True),
            expr,
            default,
            required,
            leaf.full_name,
            leaf.name,
            f"{leaf.full_name} ({leaf.loc})",
        )

    def coerce_expr(
        self, enum: EnumT, raw: str, leaf: LeafInfo | None = None, what: str | None = None
    ) -> str:
        if enum.open_member is not None:
            return f"{coercer_name(enum)}({raw})"
        if what is None:
            assert leaf is not None
            what = f"{leaf.full_name} ({leaf.loc})"
        return f"{coercer_name(enum)}({raw}, {py_str(what)})"

    def reads_for(
        self, namer: _Namer, names: Iterable[str], params: Mapping[str, str]
    ) -> tuple[list[Read], dict[str, _Ref]]:
        """Config leaves read once at the top (declaration order); facts are read from their struct."""
        wanted = set(names)
        reads: list[Read] = []
        refs: dict[str, _Ref] = {}
        config_leaves = [n for n in self.model.leaves if n in wanted and not self.leaf(n).is_fact]
        short = [self.leaf(n).name for n in config_leaves]
        for name in config_leaves:
            leaf = self.leaf(name)
            wanted_local = leaf.name if short.count(leaf.name) == 1 else f"{leaf.namespace}_{leaf.name}"
            r = self.read(leaf, params[leaf.namespace], namer.claim(wanted_local))
            reads.append(r)
            refs[name] = _Ref(r.local, leaf.type, leaf.optional and leaf.default is None)
        for name in self.model.leaves:
            leaf = self.leaf(name)
            if name in wanted and leaf.is_fact:
                refs[name] = _Ref(f"{params[leaf.namespace]}.{leaf.name}", leaf.type, False)
        return reads, refs

    def chain(
        self,
        decl: ir.FieldDecl,
        ftype: Type,
        local: str,
        scope: _Scope,
        namer: _Namer | None = None,
    ) -> Chain:
        branches: list[Branch] = []
        for tier in decl.tiers:
            when = scope._wrap(tier.when, _AND) if tier.when is not None else None
            if isinstance(tier.when, ir.Const) and tier.when.value:
                when = None
            if tier.kind == "const":
                value, maybe_none = py_literal(tier.value.value, ftype), False
            else:
                ref = scope.ref(tier.ref.name)
                value, maybe_none = ref.code, ref.optional
            conds = [c for c in (when, f"{value} is not None" if maybe_none else None) if c]
            text = interpreter.tier_text(tier)
            branches.append(
                Branch(
                    " and ".join(conds) if conds else None,
                    value,
                    f"{tier.kind}, {tier.loc}",
                    py_str(f"{text} ({tier.loc})"),
                )
            )
            if not conds:
                break  # it always yields: later tiers can never win (the checker warned)
        text = f"{decl.name.value} = " + " > ".join(interpreter.tier_text(t) for t in decl.tiers)
        provenance_local = namer.claim(f"{local}_source") if namer else ""
        return Chain(local, type_ann(ftype), text, str(decl.loc), branches, provenance_local)

    # ------------------------------------------------------------------ enums and facts
    def enums(self) -> list[EnumView]:
        views = []
        for decl in self.model.file.decls:
            if not isinstance(decl, ir.EnumDecl) or decl.name.value not in self.model.enums:
                continue
            enum = self.model.enums[decl.name.value]
            self.claim(enum.name, f"enum `{enum.name}`", decl.name.loc)
            consts: dict[str, str] = {}
            members = []
            for m, name in zip(enum.members, decl.members):
                const = member_const(m)
                if const in consts or not const.isidentifier() or keyword.iskeyword(const):
                    self.diags.append(
                        error(
                            "generated-name-clash",
                            f"enum member `{m}` becomes `{enum.name}.{const}`, which "
                            + (
                                f"`{consts[const]}` becomes too"
                                if const in consts
                                else "is not a Python name"
                            ),
                            name.loc,
                            "enum members are emitted in UPPER_CASE; rename one of them",
                        )
                    )
                consts[const] = m
                members.append(EnumMember(const, py_str(m), f"is_{m}"))
            by_value = self.claim(f"_{snake_case(enum.name).upper()}_BY_VALUE", f"enum `{enum.name}`", None)
            coercer = self.claim(coercer_name(enum), f"enum `{enum.name}`", None)
            views.append(
                EnumView(
                    enum.name,
                    str(decl.loc),
                    members,
                    member_const(enum.open_member) if enum.open_member else None,
                    py_str(enum.open_member) if enum.open_member else None,
                    by_value,
                    coercer,
                    py_str(", ".join(enum.members)),
                )
            )
        return views

    def facts(self) -> list[FactsView]:
        views = []
        for decl in self.model.file.decls:
            if not isinstance(decl, ir.FactsDecl) or decl.name.value not in self.facts_namespaces:
                continue
            ns = decl.name.value
            cls = self.claim(facts_class(ns), f"facts `{ns}`", decl.name.loc)
            fields = []
            for leaf in self.model.leaves_of(ns):
                coerce = None
                if isinstance(leaf.type, EnumT):
                    coerce = self.coerce_expr(leaf.type, f"self.{leaf.name}", leaf)
                fields.append(FactField(leaf.name, type_ann(leaf.type), str(leaf.loc), coerce))
            doc = (
                "What is known once per process, at launch, before any runner exists"
                if self.model.namespaces[ns] == LAUNCH
                else "What the caller knows about one runner when it builds it"
            )
            views.append(FactsView(ns, cls, str(decl.loc), fields, doc))
        return views

    # ------------------------------------------------------------------ gates
    def gate(self, name: str) -> GateView:
        info = self.model.autos[name]
        decl = info.decl
        namer = _Namer(self.reserved())
        params = [self.param_for(ns) for ns in info.namespaces]
        for p in params:
            namer.claim(p.name)
        param_of = {ns: p.name for ns, p in zip(info.namespaces, params)}
        refs = [r.name for r in ir.expr_refs(decl.when)]
        reads, scope_refs = self.reads_for(namer, refs, param_of)
        scope = _Scope(scope_refs)
        return GateView(
            name,
            str(decl.loc),
            list(info.namespaces),
            params,
            [p.name for p in params],
            reads,
            scope.cond(decl.when),
            py_literal(decl.value.value, info.type),
            type_ann(info.type),
            py_str(decl.log if decl.log else f"auto {name} yields {ir.literal_text(decl.value)}"),
            f"auto {name}: {interpreter.show_expr(decl.when)}",
        )

    # ------------------------------------------------------------------ stamps
    def stamp(self, info: StampInfo, gates: Mapping[str, GateView]) -> StampView:
        decl = info.decl
        snake = snake_case(info.name)
        loc = decl.name.loc
        self.claim(info.name, f"stamp `{info.name}`", loc)
        provenance_cls = self.claim(f"{info.name}Provenance", f"stamp `{info.name}`", loc)
        resolve = self.claim(f"resolve_{snake}", f"stamp `{info.name}`", loc)
        resolve_provenance = self.claim(f"resolve_{snake}_with_provenance", f"stamp `{info.name}`", loc)
        stamp_fn = self.claim(f"stamp_{snake}", f"stamp `{info.name}`", loc)
        require = self.claim(f"require_{snake}", f"stamp `{info.name}`", loc)
        return self._stamp_body(
            info, gates, snake, provenance_cls, resolve, resolve_provenance, stamp_fn, require
        )

    def _stamp_body(
        self,
        info: StampInfo,
        gates: Mapping[str, GateView],
        snake: str,
        provenance_cls: str,
        resolve: str,
        resolve_provenance: str,
        stamp_fn: str,
        require: str,
    ) -> StampView:
        decl = info.decl
        namer = _Namer(self.reserved())
        positional = [self.param_for(ns) for ns in info.config_namespaces]
        for p in positional:
            self._param_name(namer, p.name, f"stamp `{info.name}`", decl.loc)
        slots = []
        slot_coercions = []
        refs: dict[str, _Ref] = {}
        for slot in info.slots:
            self._param_name(namer, slot.name, f"slot `{slot.name}`", slot.decl.name.loc)
            ann = type_ann(slot.type)
            slots.append(
                Param(
                    slot.name,
                    f"{ann} | str | None" if isinstance(slot.type, EnumT) else f"{ann} | None",
                    "None",
                )
            )
            if isinstance(slot.type, EnumT):
                what = f"slot {slot.name} ({slot.decl.loc})"
                slot_coercions.append((slot.name, self.coerce_expr(slot.type, slot.name, what=what)))
            refs[slot.name] = _Ref(slot.name, slot.type, True)
        inputs = [n for n, _, _ in interpreter.stamp_inputs(self.model, info) if n in self.model.leaves]
        reads, leaf_refs = self.reads_for(namer, inputs, {ns: ns for ns in info.config_namespaces})
        refs.update(leaf_refs)
        field_locals = {f.name: namer.claim(f.name) for f in info.fields}
        for f in info.fields:
            refs[f.name] = _Ref(field_locals[f.name], f.type, False)
        scope = _Scope(refs)
        provenance_namer = _Namer(namer.taken)
        chains, provenance_chains = [], []
        for name in info.eval_order:
            f = info.field(name)
            chains.append(self.chain(f.decl, f.type, field_locals[name], scope))
            provenance_chains.append(self.chain(f.decl, f.type, field_locals[name], scope, provenance_namer))

        # stamp_X: the runner, then every namespace its gates and resolver read
        stamp_namer = _Namer(self.reserved() | {"runner"})
        used_ns = set(info.config_namespaces)
        for slot in info.slots:
            for gate in slot.sources:
                used_ns.update(self.model.autos[gate].namespaces)
        stamp_params = [self.param_for(ns) for ns in self.model.namespaces if ns in used_ns]
        for p in stamp_params:
            self._param_name(stamp_namer, p.name, f"stamp `{info.name}`", decl.loc)
        slot_fills = []
        for slot in info.slots:
            local = slot.name
            if slot.sources:
                stamp_namer.claim(local)
                slot_fills.append(SlotFill(local, [gates[g] for g in slot.sources], None))
            else:
                param = next(p for p in slots if p.name == slot.name)
                self._param_name(stamp_namer, slot.name, f"slot `{slot.name}`", slot.decl.name.loc)
                stamp_params.append(param)
                slot_fills.append(SlotFill(local, [], param))
        stamp_local = stamp_namer.claim("stamp")
        provenance_local = stamp_namer.claim("provenance")
        resolve_call = (
            f"{resolve_provenance}("
            + ", ".join([p.name for p in positional] + [f"{s.name}={s.name}" for s in info.slots])
            + ")"
        )
        parts, args = [], []
        for f in info.fields:
            parts.append(f"{f.name}=%s [%s]")
            args += [f"{stamp_local}.{f.name}", f"{provenance_local}.{f.name}"]
        log_format = py_str(f"runner.{info.attribute} = {info.name}(" + ", ".join(parts) + ")")

        guards = [
            (c.value, g.module) for g in self.model.guards if g.stamp.value == info.name for c in g.consumers
        ]
        guard_decl = next((g for g in self.model.guards if g.stamp.value == info.name), None)
        call = f"{stamp_fn}(runner, " + ", ".join(f"{p.name}=..." for p in stamp_params) + ")"
        unstamped = (
            f"this runner has no `{info.attribute}`: it was never stamped with {info.name} "
            f"({decl.loc}). Call {call} before building a consumer that reads it; "
            "consumers never guess a backend"
        )
        return StampView(
            info.name,
            snake,
            str(decl.loc),
            info.attribute,
            provenance_cls,
            resolve,
            resolve_provenance,
            stamp_fn,
            require,
            [(f.name, type_ann(f.type)) for f in info.fields],
            [
                FactField(
                    f.name,
                    type_ann(f.type),
                    str(f.decl.loc),
                    self.coerce_expr(f.type, f"self.{f.name}", what=f"{info.name}.{f.name} ({f.decl.loc})"),
                )
                for f in info.fields
                if isinstance(f.type, EnumT)
            ],
            [(f.name, field_locals[f.name]) for f in info.fields],
            [
                (
                    f.name,
                    next(c.provenance_local for c in provenance_chains if c.local == field_locals[f.name]),
                )
                for f in info.fields
            ],
            positional,
            slots,
            slot_coercions,
            reads,
            chains,
            provenance_chains,
            list(info.config_namespaces),
            [ns for ns in self.model.namespaces if ns in used_ns],
            [slot.name for slot in info.slots if not slot.sources],
            stamp_params,
            slot_fills,
            resolve_call,
            stamp_local,
            provenance_local,
            log_format,
            args,
            guards,
            str(guard_decl.loc) if guard_decl else None,
            py_str(unstamped),
        )

    def _param_name(self, namer: _Namer, name: str, what: str, loc: ir.Loc) -> None:
        if name in namer.taken:
            self.diags.append(
                error(
                    "generated-name-clash",
                    f"{what}: the parameter `{name}` would clash with a name the generated module uses",
                    loc,
                    "rename it in the rules",
                )
            )
        namer.taken.add(name)

    # ------------------------------------------------------------------ launch
    def launch(self, info) -> LaunchView:
        decl = info.decl
        self.claim(info.name, f"launch block `{info.name}`", decl.name.loc)
        namer = _Namer(self.reserved())
        params = [self.param_for(ns) for ns in info.namespaces]
        for p in params:
            self._param_name(namer, p.name, f"launch block `{info.name}`", decl.loc)
        changes = namer.claim("changes")
        param_of = {ns: p.name for ns, p in zip(info.namespaces, params)}
        names: list[str] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.SetStmt):
                names.append(stmt.target.name)
                names += [r.name for r in ir.expr_refs(stmt.when)] if stmt.when else []
            elif isinstance(stmt, ir.Check):
                names += [r.name for r in ir.expr_refs(stmt.cond)]
            else:
                for tier in stmt.tiers:
                    names += [tier.ref.name] if tier.ref else []
                    names += [r.name for r in ir.expr_refs(tier.when)] if tier.when else []
        reads, refs = self.reads_for(namer, names, param_of)
        local_types = {f.name: f.type for f in info.locals}
        stmts: list[Stmt] = []
        for stmt in decl.stmts:
            scope = _Scope(refs)
            if isinstance(stmt, ir.SetStmt):
                leaf = self.leaf(stmt.target.name)
                stmts.append(
                    Stmt(
                        "set",
                        str(stmt.loc),
                        cond=scope.cond(stmt.when) if stmt.when is not None else None,
                        text=f"set {stmt.target.name} = {ir.literal_text(stmt.value)}",
                        target=refs[stmt.target.name].code,
                        value=py_literal(stmt.value.value, leaf.type),
                        namespace=py_str(leaf.namespace),
                        leaf=py_str(leaf.name),
                        log=py_str(stmt.log) if stmt.log else None,
                    )
                )
            elif isinstance(stmt, ir.Check):
                stmts.append(self._check(stmt, scope, info.name))
            else:
                name = stmt.name.value
                local = namer.claim(name)
                chain = self.chain(stmt, local_types[name], local, scope)
                refs[name] = _Ref(local, local_types[name], False)
                stmts.append(Stmt("local", str(stmt.loc), chain=chain))
        return LaunchView(info.name, str(decl.loc), list(info.namespaces), params, reads, stmts, changes)

    def _check(self, stmt: ir.Check, scope: _Scope, rule: str) -> Stmt:
        cond = scope.cond(stmt.cond if stmt.kind == "forbid" else negate(stmt.cond))
        return Stmt(
            "check",
            str(stmt.loc),
            cond=cond,
            text=f"{stmt.kind} {interpreter.show_expr(stmt.cond)}",
            message=py_str(stmt.message),
            value=py_str(rule),
        )

    # ------------------------------------------------------------------ validate
    def validate(self, info: ValidateInfo) -> ValidateView:
        decl = info.decl
        fn = self.claim(f"validate_{snake_case(info.name)}", f"validate block `{info.name}`", decl.name.loc)
        if len(info.stamps) > 1:
            self.diags.append(
                error(
                    "validate-reads-two-stamps",
                    f"validate block `{info.name}` reads {len(info.stamps)} stamps; the generated validator "
                    "takes one",
                    decl.name.loc,
                    "split it into one validate block per stamp",
                )
            )
        stamp = self.model.stamps[info.stamps[0]] if info.stamps else None
        namer = _Namer(self.reserved())
        stamp_param = ""
        if stamp is not None:
            stamp_param = "stamp"
            self._param_name(namer, stamp_param, f"validate block `{info.name}`", decl.loc)
        params = [self.param_for(ns) for ns in info.namespaces]
        for p in params:
            self._param_name(namer, p.name, f"validate block `{info.name}`", decl.loc)
        param_of = {ns: p.name for ns, p in zip(info.namespaces, params)}
        names: list[str] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.Check):
                names += [r.name for r in ir.expr_refs(stmt.cond)]
            elif isinstance(stmt, ir.Fallback):
                names += [r.name for r in ir.expr_refs(stmt.when)]
        reads, refs = self.reads_for(namer, names, param_of)
        stamp_fields: dict[str, tuple[str, ...]] = {}
        if stamp is not None:
            stamp_fields[stamp.name] = tuple(f.name for f in stamp.fields)
            for f in stamp.fields:
                refs[f"{stamp.name}.{f.name}"] = _Ref(f"{stamp_param}.{f.name}", f.type, False)
        scope = _Scope(refs, stamp_fields)
        stmts: list[Stmt] = []
        for stmt in decl.stmts:
            if isinstance(stmt, ir.Check):
                stmts.append(self._check(stmt, scope, info.name))
            elif isinstance(stmt, ir.Fallback):
                ref = refs[stmt.field.name]
                field_name = stmt.field.name.split(".", 1)[1]
                is_from = f"{ref.code} is {py_literal(stmt.from_value.value, ref.type)}"
                if not isinstance(ref.type, (EnumT, BoolT)):
                    is_from = f"{ref.code} == {py_literal(stmt.from_value.value, ref.type)}"
                cond = f"{is_from} and {scope._wrap(stmt.when, _AND)}"
                stmts.append(
                    Stmt(
                        "fallback",
                        str(stmt.loc),
                        cond=cond,
                        text=(
                            f"fallback {stmt.field.name} {ir.literal_text(stmt.from_value)} -> "
                            f"{ir.literal_text(stmt.to_value)}"
                        ),
                        target=field_name,
                        value=py_literal(stmt.to_value.value, ref.type),
                        log=py_str(stmt.log),
                    )
                )
        positional = [Param(stamp_param, stamp.name)] if stamp else []
        return ValidateView(
            info.name,
            fn,
            str(decl.loc),
            stamp.name if stamp else None,
            stamp_param,
            positional,
            list(info.namespaces),
            params,
            reads,
            stmts,
        )

    # ------------------------------------------------------------------ parity
    def parity(self, decl: ir.ParityDecl) -> ParityView:
        name = decl.name.value
        upper = name.upper()
        fn = self.claim(f"check_{name}", f"parity `{name}`", decl.name.loc)
        consts = {}
        for suffix in ("REGISTRY", "AT_LEAST", "SOURCE"):
            consts[suffix] = self.claim(f"{upper}_{suffix}", f"parity `{name}`", decl.name.loc)
        for suffix in ("DRAFT", "TARGETS", "EXCLUDE", "HOOKS"):
            consts[suffix] = self.claim(f"_{upper}_{suffix}", f"parity `{name}`", None)
        exclude = sorted({n.value for n in decl.exclude})
        hooks = [h.value for h in decl.hooks]
        return ParityView(
            name,
            fn,
            str(decl.loc),
            py_str(decl.registry),
            consts["REGISTRY"],
            consts["AT_LEAST"],
            consts["SOURCE"],
            decl.at_least if decl.at_least is not None else 1,
            py_str(decl.draft or ""),
            consts["DRAFT"],
            _py_tuple(decl.targets),
            consts["TARGETS"],
            _py_tuple(exclude),
            consts["EXCLUDE"],
            _py_tuple(hooks),
            consts["HOOKS"],
            hooks,
            "",
            py_str(decl.registry.partition(":")[0]),
        )

    # ------------------------------------------------------------------ the module
    def build(self) -> ModuleView:
        model = self.model
        enums = self.enums()
        facts = self.facts()
        gates = {}
        for name in model.autos:
            self.claim(name, f"auto gate `{name}`", model.autos[name].decl.name.loc)
        for name in model.autos:
            gates[name] = self.gate(name)
        stamps = [self.stamp(info, gates) for info in model.stamps.values()]
        launches = [self.launch(info) for info in model.launches]
        validates = [self.validate(info) for info in model.validates]
        parities = [self.parity(decl) for decl in model.parities]
        if self.diags:
            raise RenderError(self.diags)

        imports = ["from __future__ import annotations", ""]
        stdlib = []
        if enums:
            stdlib.append("import enum")
        stdlib.append("import logging")
        if parities:
            stdlib.append("import re")
        from_stdlib = []
        if parities:
            from_stdlib.append("from collections.abc import Mapping")
        if gates or stamps or launches or validates:
            from_stdlib.append("from typing import Any")
        imports += stdlib + from_stdlib + ["", "import msgspec"]

        all_names = ["RULES_SOURCE", "RuleViolationError", "UnstampedRunnerError"]
        all_names += [e.name for e in enums] + [f.cls for f in facts]
        for s in stamps:
            all_names += [s.name, s.provenance_cls, s.resolve, s.resolve_provenance, s.stamp_fn, s.require]
        all_names += list(gates)
        all_names += [launch.name for launch in launches] + [v.fn for v in validates]
        for p in parities:
            all_names += [p.fn, p.registry_const, p.at_least_const, p.source_const]
        if parities:
            all_names.append("ParityReport")
        guards = [(c.value, g.module, g.stamp.value, str(g.loc)) for g in model.guards for c in g.consumers]
        return ModuleView(
            self.rules_source,
            self.module,
            imports,
            sorted(all_names),
            enums,
            facts,
            stamps,
            list(gates.values()),
            launches,
            validates,
            parities,
            {f.namespace: f.cls for f in facts},
            guards,
        )


def _py_tuple(items: Sequence[str]) -> str:
    inner = ", ".join(py_str(i) for i in items)
    return f"({inner},)" if len(items) == 1 else f"({inner})"


def wrap(text: str, width: int = 100, indent: str = "    ") -> str:
    """A paragraph of a docstring or comment, wrapped between words (never inside a name or a path)."""
    lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    return ("\n" + indent).join(lines)


def comment(text: str, indent: str = "    ", width: int = 106) -> str:
    """A `# ...` comment of one or more lines (text built from names and literals only, never strings)."""
    lines = textwrap.wrap(text, width=width - 2, break_long_words=False, break_on_hyphens=False)
    return ("\n" + indent).join("# " + line for line in lines)


def leaf_map(reads: Sequence[Read]) -> str:
    """{attribute: "namespace.leaf (rules line)"} as a Python literal, for the error of a missing leaf."""
    by_attribute: dict[str, list[str]] = {}
    for r in reads:
        by_attribute.setdefault(r.attribute, []).append(r.declared)
    items = [f"{py_str(a)}: {py_str(' or '.join(d))}" for a, d in by_attribute.items()]
    return "{" + ", ".join(items) + "}"


def signature(positional: Sequence[Param], keyword: Sequence[Param] = ()) -> str:
    """A parameter list: positional parameters, then `*` and the keyword-only ones (if any)."""
    parts = [str(p) for p in positional]
    if keyword:
        parts += ["*"] + [str(p) for p in keyword]
    return ", ".join(parts)


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py"] = py_str
    env.filters["pyrepr"] = repr
    env.filters["wrap"] = wrap
    env.filters["comment"] = comment
    env.globals["signature"] = signature
    env.globals["leaf_map"] = leaf_map
    return env


def build_view(model: Model, rules_source: str, module: str) -> ModuleView:
    """The view of one module; raises RenderError when a generated name would clash."""
    return _ModuleBuilder(model, rules_source, module).build()


def render_module(view: ModuleView) -> str:
    return environment().get_template(MODULE_TEMPLATE).render(m=view)


@dataclass(frozen=True)
class SuiteContext:
    package: str  # the package the module is imported from (`generated`)
    root_expr: str  # Python expression for the repository root, from the test file
    tables: dict[str, list[DecisionTable]]  # by stamp
    domains: dict[str, InputDomain]  # by the name of the generated function (`launch`: every launch block)
    fact_defaults: dict[str, str]  # facts namespace -> a Python dict literal of one value per fact
    launch_config: list[str]  # config namespaces the launch blocks read, in declaration order
    launch_sets: int  # how many `set` statements the launch blocks have


def tests_context(model: Model, view: ModuleView, package: str, root_expr: str) -> SuiteContext:
    tables = {info.name: decision_tables(model, info) for info in model.stamps.values()}
    domains: dict[str, InputDomain] = {}
    for info, s in zip(model.stamps.values(), view.stamps):
        domains[s.resolve] = stamp_domain(model, info)
        domains[s.stamp_fn] = stamping_domain(model, info)
    for name in model.autos:
        domains[name] = gate_domain(model, name)
    if model.launches:
        domains["launch"] = launch_domain(model)
    for info, v in zip(model.validates, view.validates):
        domains[v.fn] = validate_domain(model, info)
    fact_defaults = {}
    for ns, scope in model.namespaces.items():
        if scope != PROCESS:
            items = [f"{py_str(leaf.name)}: {domain(leaf.type)[0]!r}" for leaf in model.leaves_of(ns)]
            fact_defaults[ns] = "{" + ", ".join(items) + "}"
    launch_config = [
        ns
        for ns in model.namespaces
        if model.namespaces[ns] == PROCESS and any(ns in launch.namespaces for launch in model.launches)
    ]
    sets = sum(isinstance(s, ir.SetStmt) for launch in model.launches for s in launch.decl.stmts)
    return SuiteContext(package, root_expr, tables, domains, fact_defaults, launch_config, sets)


def render_tests(view: ModuleView, ctx: SuiteContext) -> str:
    return (
        environment()
        .get_template(TESTS_TEMPLATE)
        .render(m=view, t=ctx, sample_seed=SAMPLE_SEED, sample_rows=SAMPLE_ROWS)
    )
