"""auto declarations → per-runner auto-default gates: a function that yields its value when every
condition holds, else None. Its value reaches a resolver as a slot; it is never written to config."""

from __future__ import annotations

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.exprs import Scope
from stampgen.codegen.emit.names import TopLevel, param_for, py_literal, py_str, type_ann
from stampgen.codegen.emit.positions import auto_id
from stampgen.codegen.emit.reads import Reads, read_leaves
from stampgen.codegen.model import Model


class GateView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    identity: str  # a Python literal: its key in RULE_POSITIONS
    signature: str
    call_args: str  # how stamp_X passes its namespaces on
    reads: Reads
    cond: str
    value: str
    annotation: str
    log: str  # a Python literal: what stamp_X logs when the gate yields


def emit_gate(model: Model, name: str, top: TopLevel) -> GateView:
    info = model.autos[name]
    decl = info.decl
    params = [param_for(model, ns) for ns in info.namespaces]
    names = top.locals(*(p for p, _ in params), what=f"auto `{name}`", loc=decl.loc)
    reads, refs = read_leaves(
        model,
        names,
        [r.name for r in ir.expr_refs(decl.when)],
        {ns: p for ns, (p, _) in zip(info.namespaces, params)},
    )
    return GateView(
        name=name,
        identity=py_str(auto_id(name)),
        signature=", ".join(f"{p}: {ann}" for p, ann in params),
        call_args=", ".join(p for p, _ in params),
        reads=reads,
        cond=Scope(refs).cond(decl.when),
        value=py_literal(decl.value.value, info.type),
        annotation=type_ann(info.type),
        log=py_str(decl.log if decl.log else f"auto {name} yields {ir.literal_text(decl.value)}"),
    )
