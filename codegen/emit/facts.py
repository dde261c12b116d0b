"""facts declarations → frozen msgspec records a caller fills once (launch) or per runner; a record
refuses, when it is built, an int fact outside its declared domain."""

from __future__ import annotations

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.names import TopLevel, facts_class, py_str, type_ann
from stampgen.codegen.emit.positions import leaf_id
from stampgen.codegen.emit.reads import coerce_expr, int_refusal
from stampgen.codegen.model import EnumT, IntT, Model, Scope


class Coercion(msgspec.Struct, frozen=True, kw_only=True):
    """An enum field of a record: a name given to the constructor becomes the member."""

    name: str
    name_literal: str
    annotation: str
    expr: str


class Refusal(msgspec.Struct, frozen=True, kw_only=True):
    """An int field of a record: a value outside its declared domain is a ValueError."""

    cond: str
    error: str


class FactField(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    annotation: str


class FactsView(msgspec.Struct, frozen=True, kw_only=True):
    namespace: str
    cls: str
    doc: str
    fields: list[FactField]
    coercions: list[Coercion]
    refusals: list[Refusal]


def coercion(name: str, enum: EnumT, what: str) -> Coercion:
    return Coercion(
        name=name,
        name_literal=py_str(name),
        annotation=enum.name,
        expr=coerce_expr(enum, f"self.{name}", what),
    )


def refusal(name: str, t: IntT, what: str) -> Refusal:
    cond, error = int_refusal(t, f"self.{name}", what)
    return Refusal(cond=cond, error=error)


def emit_facts(model: Model, decl: ir.FactsDecl, top: TopLevel) -> FactsView:
    namespace = decl.name.value
    leaves = model.leaves_of(namespace)
    doc = (
        "What is known once per process, at launch, before any runner exists"
        if model.namespaces[namespace] == Scope.LAUNCH
        else "What the caller knows about one runner when it builds it"
    )
    return FactsView(
        namespace=namespace,
        cls=top.claim(facts_class(namespace), f"facts `{namespace}`", decl.name.loc),
        doc=f"{doc}. Enum facts accept members or their names.",
        fields=[FactField(name=leaf.name, annotation=type_ann(leaf.type)) for leaf in leaves],
        coercions=[
            coercion(leaf.name, leaf.type, leaf_id(leaf.full_name))
            for leaf in leaves
            if isinstance(leaf.type, EnumT)
        ],
        refusals=[
            refusal(leaf.name, leaf.type, leaf_id(leaf.full_name))
            for leaf in leaves
            if isinstance(leaf.type, IntT)
        ],
    )
