"""stamp declarations → the frozen record, its resolver (one body, with or without provenance), the
function that stamps a runner once, the fail-closed guard that reads the stamp back, and the check that
every rank of a process group holds the same stamp."""

from __future__ import annotations

import msgspec

from stampgen.codegen.emit.exprs import Ref, Scope
from stampgen.codegen.emit.facts import Coercion, coercion
from stampgen.codegen.emit.gates import GateView
from stampgen.codegen.emit.names import TopLevel, param_for, py_str, py_tuple, type_ann
from stampgen.codegen.emit.positions import field_id, slot_id, stamp_id
from stampgen.codegen.emit.reads import Chain, Reads, chain, coerce_expr, read_leaves
from stampgen.codegen.interpreter import stamp_inputs, tier_text
from stampgen.codegen.model import EnumT, Model, StampInfo
from stampgen.codegen.naming import snake_case


class StampField(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    annotation: str
    local: str  # the resolver's local holding it
    tiers: str  # a Python tuple literal: its tiers as written, for provenance
    tier_value: str  # the deciding tier's index in the resolver: a local, or a constant


class SlotFill(msgspec.Struct, frozen=True, kw_only=True):
    """How stamp_X computes a slot: the first of its gates that yields (none: the caller's keyword)."""

    local: str
    gates: list[GateView]


class StampView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    identity: str  # a Python literal: its key in RULE_POSITIONS
    attribute: str
    fields: list[StampField]  # declared order
    coercions: list[Coercion]
    provenance_cls: str
    tiers_const: str
    body: str  # the one resolver body, private
    resolve: str
    resolve_provenance: str
    stamp_fn: str
    require: str
    ensure: str  # ensure_X_agree: every rank holds the same stamp
    field_types_const: str  # the guard's table of each field and the class its value must have
    field_types: list[tuple[str, str]]  # (field as a Python literal, class)
    body_signature: str  # positional: config namespaces, then slots
    signature: str  # the public resolvers': config namespaces, then `*` and the slots
    call_args: str  # how the public resolvers call the body
    slot_coercions: list[tuple[str, str]]  # (slot, coercion expression)
    reads: Reads
    chains: list[Chain]  # in evaluation order
    stamp_signature: str  # stamp_X's keyword parameters
    slot_fills: list[SlotFill]
    resolve_call: str  # stamp_X's call of resolve_provenance
    stamp_local: str  # stamp_X's locals
    provenance_local: str
    current_local: str
    agree_stamp: str  # ensure_X_agree's locals
    agree_gathered: str
    public_stamp: str  # resolve_provenance's locals
    public_tiers: str
    log_format: str  # a Python literal
    log_args: str
    consumers: list[str]  # the guarded consumers that read it
    unstamped_message: str  # a Python expression


def emit_stamp(model: Model, info: StampInfo, gates: dict[str, GateView], top: TopLevel) -> StampView:
    name, decl = info.name, info.decl
    snake = snake_case(name)
    what, loc = f"stamp `{name}`", decl.name.loc
    top.claim(name, what, loc)
    view_names = {
        key: top.claim(text, what, loc if not text.startswith("_") else None)
        for key, text in (
            ("provenance_cls", f"{name}Provenance"),
            ("tiers_const", f"_{snake.upper()}_TIERS"),
            ("body", f"_resolve_{snake}"),
            ("resolve", f"resolve_{snake}"),
            ("resolve_provenance", f"resolve_{snake}_with_provenance"),
            ("stamp_fn", f"stamp_{snake}"),
            ("require", f"require_{snake}"),
            ("ensure", f"ensure_{snake}_agree"),
            ("field_types_const", f"_{snake.upper()}_FIELD_TYPES"),
        )
    }

    # the body: config namespaces and slots in, the stamp and each field's deciding tier out
    params = [param_for(model, ns) for ns in info.config_namespaces]
    names = top.locals(*(p for p, _ in params), what=what, loc=decl.loc)
    refs: dict[str, Ref] = {}
    slot_params = []
    slot_coercions = []
    for slot in info.slots:
        names.param(slot.name, f"slot `{slot.name}`", slot.decl.name.loc)
        ann = type_ann(slot.type)
        slot_params.append(
            f"{slot.name}: {ann} | str | None"
            if isinstance(slot.type, EnumT)
            else f"{slot.name}: {ann} | None"
        )
        if isinstance(slot.type, EnumT):
            slot_coercions.append((slot.name, coerce_expr(slot.type, slot.name, slot_id(name, slot.name))))
        refs[slot.name] = Ref(code=slot.name, type=slot.type, optional=True)
    inputs = [n for n, _, _ in stamp_inputs(model, info) if n in model.leaves]
    reads, leaf_refs = read_leaves(model, names, inputs, {ns: ns for ns in info.config_namespaces})
    refs.update(leaf_refs)
    locals_ = {f.name: names.claim(f.name) for f in info.fields}
    for f in info.fields:
        refs[f.name] = Ref(code=locals_[f.name], type=f.type, optional=False)
    scope = Scope(refs)
    chains = []
    tier_values = {}
    for field_name in info.eval_order:
        f = info.field(field_name)
        tier_local = names.claim(f"{field_name}_tier")
        c = chain(f.decl, f.type, locals_[field_name], scope, tier_local)
        if len(c.branches) == 1:
            c = msgspec.structs.replace(c, tier_local="")
            tier_values[field_name] = str(c.branches[0].index)
        else:
            tier_values[field_name] = tier_local
        chains.append(c)
    fields = [
        StampField(
            name=f.name,
            annotation=type_ann(f.type),
            local=locals_[f.name],
            tiers=py_tuple(tier_text(t) for t in f.decl.tiers),
            tier_value=tier_values[f.name],
        )
        for f in info.fields
    ]

    # stamp_X: the runner, then every namespace its gates and its resolver read, then gateless slots
    used = set(info.config_namespaces)
    for slot in info.slots:
        for gate in slot.sources:
            used.update(model.autos[gate].namespaces)
    stamp_params = [param_for(model, ns) for ns in model.namespaces if ns in used]
    stamp_names = top.locals("runner", *(p for p, _ in stamp_params), what=what, loc=decl.loc)
    keyword = [f"{p}: {ann}" for p, ann in stamp_params]
    fills = []
    for slot, slot_param in zip(info.slots, slot_params):
        if slot.sources:
            fills.append(SlotFill(local=stamp_names.claim(slot.name), gates=[gates[g] for g in slot.sources]))
        else:
            stamp_names.param(slot.name, f"slot `{slot.name}`", slot.decl.name.loc)
            keyword.append(f"{slot_param} = None")
    stamp_local, provenance_local = stamp_names.claim("stamp"), stamp_names.claim("provenance")
    current_local = stamp_names.claim("current")
    agree_names = top.locals("runner", "all_gather", what=what, loc=decl.loc)
    positional = [p for p, _ in params]
    resolve_call = (
        f"{view_names['resolve_provenance']}("
        + ", ".join(positional + [f"{s.name}={s.name}" for s in info.slots])
        + ")"
    )
    log_parts = ", ".join(f"{f.name}=%s [%s]" for f in info.fields)
    log_args = ", ".join(f"{stamp_local}.{f.name}, {provenance_local}.{f.name}" for f in info.fields)
    call = f"{view_names['stamp_fn']}(runner, " + ", ".join(f"{p}=..." for p, _ in stamp_params) + ")"
    public_names = top.locals(*positional, *(s.name for s in info.slots), what=what, loc=decl.loc)
    public = ", ".join(f"{p}: {ann}" for p, ann in params)
    if slot_params:
        public += (", " if public else "") + "*, " + ", ".join(f"{s} = None" for s in slot_params)
    return StampView(
        name=name,
        identity=py_str(stamp_id(name)),
        attribute=info.attribute,
        fields=fields,
        coercions=[
            coercion(f.name, f.type, field_id(name, f.name)) for f in info.fields if isinstance(f.type, EnumT)
        ],
        body_signature=", ".join([f"{p}: {ann}" for p, ann in params] + slot_params),
        signature=public,
        call_args=", ".join(positional + [s.name for s in info.slots]),
        slot_coercions=slot_coercions,
        reads=reads,
        chains=chains,
        stamp_signature=", ".join(keyword),
        slot_fills=fills,
        resolve_call=resolve_call,
        stamp_local=stamp_local,
        provenance_local=provenance_local,
        current_local=current_local,
        agree_stamp=agree_names.claim("stamp"),
        agree_gathered=agree_names.claim("gathered"),
        field_types=[(py_str(f.name), type_ann(f.type)) for f in info.fields],
        public_stamp=public_names.claim("stamp"),
        public_tiers=public_names.claim("tiers"),
        log_format=py_str(f"runner.{info.attribute} = {name}({log_parts})"),
        log_args=log_args,
        consumers=[c.value for g in model.guards if g.stamp.value == name for c in g.consumers],
        unstamped_message=(
            f"{py_str(f'this runner has no `{info.attribute}`: it was never stamped with {name} (')}"
            f" + RULE_POSITIONS[{py_str(stamp_id(name))}] + "
            f"{py_str(f'). Call {call} before building a consumer that reads it; consumers never guess a backend')}"
        ),
        **view_names,
    )
