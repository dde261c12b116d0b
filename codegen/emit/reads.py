"""What a generated function reads: config leaves read once into typed locals at its top (enum names
become members, a default fills an unset leaf, an int outside its declared domain is refused), facts read
from their frozen record (which refuses such ints when it is built), and the precedence chains of fields
computed from them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.exprs import Ref, Scope
from stampgen.codegen.emit.names import Locals, coercer_name, py_literal, py_str, py_tuple, type_ann
from stampgen.codegen.emit.positions import leaf_id
from stampgen.codegen.interpreter import leaves_in_order, tier_text
from stampgen.codegen.model import EnumT, IntT, LeafInfo, Model, Type


class Read(msgspec.Struct, frozen=True, kw_only=True):
    """One config leaf read (once) into a local at the top of a function."""

    local: str
    annotation: str
    expr: str
    default: str | None  # used when the leaf is unset
    required: str | None  # the error (a Python literal) when a leaf the rules say is always set is unset
    refused: str | None  # an int leaf: the condition under which its value is outside its domain
    refusal: str | None  # ... and the error raised then


class Reads(msgspec.Struct, frozen=True, kw_only=True):
    """The reads of one function, and the leaves it names when a config object lacks one."""

    items: list[Read]
    leaves: str  # a Python tuple literal of leaf identities, for `_missing_leaf`


def coerce_expr(enum: EnumT, raw: str, what: str) -> str:
    """The coercion of a raw value to an enum member; a closed enum's error names `what` (an identity)."""
    if enum.open_member is not None:
        return f"{coercer_name(enum)}({raw})"
    return f"{coercer_name(enum)}({raw}, {py_str(what)})"


def int_refusal(t: IntT, value: str, what: str) -> tuple[str, str]:
    """(condition, error) refusing `value` (an expression) when it is not an int of `t`'s domain, as the
    interpreter refuses it (a bool is not an int here); the error names `what` (an identity) and its
    rules line."""
    allowed = "(" + ", ".join(map(str, t.values)) + ("," if len(t.values) == 1 else "") + ")"
    listing = ", ".join(map(str, t.values))
    cond = f"{value} not in {allowed} or not isinstance({value}, int) or isinstance({value}, bool)"
    error = (
        f'ValueError(f"{what} ({{RULE_POSITIONS[{py_str(what)}]}}): {{{value}!r}} is not one of {listing}")'
    )
    return cond, error


def _read(leaf: LeafInfo, param: str, local: str) -> Read:
    raw = f"{param}.{leaf.name}"
    expr = coerce_expr(leaf.type, raw, leaf_id(leaf.full_name)) if isinstance(leaf.type, EnumT) else raw
    required = None
    if not leaf.optional and leaf.default is None:
        required = f"_unset_leaf({py_str(leaf_id(leaf.full_name))})"
    default = py_literal(leaf.default, leaf.type) if leaf.default is not None else None
    refused = refusal = None
    if isinstance(leaf.type, IntT):
        refused, refusal = int_refusal(leaf.type, local, leaf_id(leaf.full_name))
        if default is None and required is None:  # else it is an `elif` of the unset branch
            refused = f"{local} is not None and ({refused})"
    return Read(
        local=local,
        annotation=f"{type_ann(leaf.type)} | None",
        expr=expr,
        default=default,
        required=required,
        refused=refused,
        refusal=refusal,
    )


def read_leaves(
    model: Model, names: Locals, wanted: Iterable[str], params: Mapping[str, str]
) -> tuple[Reads, dict[str, Ref]]:
    """Config leaves read once at the top (declaration order); facts are read from their record."""
    ordered = leaves_in_order(model, wanted)
    config = [n for n in ordered if not model.leaves[n].is_fact]
    short = [model.leaves[n].name for n in config]
    items: list[Read] = []
    refs: dict[str, Ref] = {}
    for name in config:
        leaf = model.leaves[name]
        local = names.claim(leaf.name if short.count(leaf.name) == 1 else f"{leaf.namespace}_{leaf.name}")
        items.append(_read(leaf, params[leaf.namespace], local))
        refs[name] = Ref(code=local, type=leaf.type, optional=leaf.optional and leaf.default is None)
    for name in ordered:
        leaf = model.leaves[name]
        if leaf.is_fact:
            refs[name] = Ref(code=f"{params[leaf.namespace]}.{leaf.name}", type=leaf.type, optional=False)
    return Reads(items=items, leaves=py_tuple(leaf_id(n) for n in config)), refs


class Branch(msgspec.Struct, frozen=True, kw_only=True):
    cond: str | None  # None: always taken (the chain's last branch)
    value: str
    index: int  # the tier's place in its chain (provenance records it)
    comment: str  # the tier as written


class Chain(msgspec.Struct, frozen=True, kw_only=True):
    """A field's precedence chain as if/elif branches, in tier order."""

    local: str
    annotation: str
    text: str  # the chain as written, for a comment
    branches: list[Branch]
    tier_local: str  # the local recording the deciding tier's index ("" when not recorded)


def chain(decl: ir.FieldDecl, ftype: Type, local: str, scope: Scope, tier_local: str = "") -> Chain:
    """The branches of a chain; tiers after one that always yields are left out (the checker warned)."""
    branches: list[Branch] = []
    for index, tier in enumerate(decl.tiers):
        when = scope.operand(tier.when) if tier.when is not None else None
        if isinstance(tier.when, ir.Const) and tier.when.value:
            when = None
        if isinstance(tier, ir.ConstTier):
            value, maybe_none = py_literal(tier.value.value, ftype), False
        else:
            ref = scope.ref(tier.ref.name)
            value, maybe_none = ref.code, ref.optional
        conds = [c for c in (when, f"{value} is not None" if maybe_none else None) if c]
        branches.append(
            Branch(
                cond=" and ".join(conds) if conds else None,
                value=value,
                index=index,
                comment=tier_text(tier),
            )
        )
        if not conds:
            break
    text = f"{decl.name.value} = " + " > ".join(tier_text(t) for t in decl.tiers)
    return Chain(local=local, annotation=type_ann(ftype), text=text, branches=branches, tier_local=tier_local)
