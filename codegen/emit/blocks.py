"""launch and validate declarations → process-level normalisation and per-consumer validation.

Their statements run in order: `set` writes a config leaf (launch only; returned to the caller, never
applied here), `forbid` / `require` raise RuleViolationError naming the rule, a local field is computed
as a stamp's field is, and `fallback` replaces a stamp field (logged, never silent).
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import error
from stampgen.codegen.emit.exprs import Ref, Scope, negate
from stampgen.codegen.emit.names import TopLevel, param_for, py_literal, py_str
from stampgen.codegen.emit.parities import WaiverView, waiver_views
from stampgen.codegen.emit.positions import launch_id, statement_ids, statement_text, validate_id
from stampgen.codegen.emit.reads import Chain, Reads, chain, read_leaves
from stampgen.codegen.model import BoolT, EnumT, LaunchInfo, Model, ValidateInfo
from stampgen.codegen.naming import snake_case


class SetView(msgspec.Struct, frozen=True, kw_only=True):
    kind: ClassVar[str] = "set"
    identity: str  # a Python literal: its key in RULE_POSITIONS
    text: str  # the statement as written, for a comment
    cond: str | None  # when it applies (None: always)
    target: str  # the local it writes
    value: str
    namespace: str  # a Python literal
    leaf: str  # a Python literal
    log: str | None  # a Python literal


class CheckView(msgspec.Struct, frozen=True, kw_only=True):
    kind: ClassVar[str] = "check"
    identity: str
    text: str
    cond: str  # when it fails
    message: str  # a Python literal
    block: str  # a Python literal: the block's name, for the error


class LocalView(msgspec.Struct, frozen=True, kw_only=True):
    kind: ClassVar[str] = "local"
    chain: Chain


class FallbackView(msgspec.Struct, frozen=True, kw_only=True):
    kind: ClassVar[str] = "fallback"
    identity: str
    text: str
    cond: str  # when it applies
    field: str
    value: str
    log: str  # a Python literal


class LaunchView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    identity: str
    signature: str
    reads: Reads
    stmts: list[SetView | CheckView | LocalView]
    changes: str  # the local collecting what it sets


class WaiverLocals(msgspec.Struct, frozen=True, kw_only=True):
    """The local names a validator with waivers uses (claimed, so that no leaf's local is overwritten)."""

    datetime: str  # the datetime module
    waived_for: str  # the consumer's class name
    waiver: str  # the waiver that applies to this call, or None
    error: str
    until: str
    reason: str
    identity: str


class ValidateView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    fn: str
    identity: str
    stamp: str | None  # the stamp class it validates, or None
    stamp_param: str
    signature: str
    reads: Reads
    stmts: list[CheckView | FallbackView]
    waivers: list[WaiverView]  # consumer classes whose failures are logged, not raised, until a date
    waivers_const: str | None  # None without waivers
    local: WaiverLocals | None  # None without waivers


def _check(stmt: ir.Check, identity: str, scope: Scope, block: str) -> CheckView:
    return CheckView(
        identity=py_str(identity),
        text=statement_text(stmt),
        cond=scope.cond(stmt.cond if stmt.kind == ir.CheckKind.FORBID else negate(stmt.cond)),
        message=py_str(stmt.message),
        block=py_str(block),
    )


def _statement_refs(stmts: tuple[ir.SetStmt | ir.Check | ir.Fallback | ir.FieldDecl, ...]) -> list[str]:
    names: list[str] = []
    for stmt in stmts:
        if isinstance(stmt, ir.SetStmt):
            names.append(stmt.target.name)
            names += [r.name for r in ir.expr_refs(stmt.when)] if stmt.when else []
        elif isinstance(stmt, ir.Check):
            names += [r.name for r in ir.expr_refs(stmt.cond)]
        elif isinstance(stmt, ir.Fallback):
            names += [r.name for r in ir.expr_refs(stmt.when)]
        else:
            for tier in stmt.tiers:
                names += [tier.ref.name] if tier.ref else []
                names += [r.name for r in ir.expr_refs(tier.when)] if tier.when else []
    return names


def emit_launch(model: Model, info: LaunchInfo, top: TopLevel) -> LaunchView:
    decl = info.decl
    top.claim(info.name, f"launch block `{info.name}`", decl.name.loc)
    params = [param_for(model, ns) for ns in info.namespaces]
    names = top.locals(*(p for p, _ in params), what=f"launch block `{info.name}`", loc=decl.loc)
    changes = names.claim("changes")
    reads, refs = read_leaves(
        model, names, _statement_refs(info.stmts), {ns: p for ns, (p, _) in zip(info.namespaces, params)}
    )
    local_types = {f.name: f.type for f in info.locals}
    plain = tuple(s for s in info.stmts if isinstance(s, (ir.SetStmt, ir.Check)))
    identities = dict(zip(map(id, plain), statement_ids(info.name, plain)))
    stmts: list[SetView | CheckView | LocalView] = []
    for stmt in info.stmts:
        scope = Scope(refs)
        if isinstance(stmt, ir.SetStmt):
            leaf = model.leaves[stmt.target.name]
            stmts.append(
                SetView(
                    identity=py_str(identities[id(stmt)]),
                    text=statement_text(stmt).split(" when ", 1)[0],
                    cond=scope.cond(stmt.when) if stmt.when is not None else None,
                    target=refs[stmt.target.name].code,
                    value=py_literal(stmt.value.value, leaf.type),
                    namespace=py_str(leaf.namespace),
                    leaf=py_str(leaf.name),
                    log=py_str(stmt.log) if stmt.log else None,
                )
            )
        elif isinstance(stmt, ir.Check):
            stmts.append(_check(stmt, identities[id(stmt)], scope, info.name))
        else:
            name = stmt.name.value
            local = names.claim(name)
            stmts.append(LocalView(chain=chain(stmt, local_types[name], local, scope)))
            refs[name] = Ref(code=local, type=local_types[name], optional=False)
    return LaunchView(
        name=info.name,
        identity=py_str(launch_id(info.name)),
        signature=", ".join(f"{p}: {ann}" for p, ann in params),
        reads=reads,
        stmts=stmts,
        changes=changes,
    )


def emit_validate(model: Model, info: ValidateInfo, top: TopLevel) -> ValidateView:
    decl = info.decl
    what = f"validate block `{info.name}`"
    fn = top.claim(f"validate_{snake_case(info.name)}", what, decl.name.loc)
    if len(info.stamps) > 1:
        top.diagnostics.append(
            error(
                "validate-reads-two-stamps",
                f"validate block `{info.name}` reads {len(info.stamps)} stamps; the generated validator "
                "takes one",
                decl.name.loc,
                "split it into one validate block per stamp",
            )
        )
    stamp = model.stamps[info.stamps[0]] if info.stamps else None
    stamp_param = "stamp" if stamp is not None else ""
    params = [param_for(model, ns) for ns in info.namespaces]
    # a block with waivers is told which consumer calls it (and, for tests, the date); without them, as before
    waiver_params = (
        [("consumer", "type | None = None"), ("today", "str | None = None")] if decl.waivers else []
    )
    names = top.locals(
        *([stamp_param] if stamp else []), *(p for p, _ in params + waiver_params), what=what, loc=decl.loc
    )
    waivers_const = (
        top.claim(f"_{snake_case(info.name).upper()}_WAIVERS", what, None) if decl.waivers else None
    )
    local = None
    if decl.waivers:
        local = WaiverLocals(**{n: names.claim(n) for n in WaiverLocals.__struct_fields__})
    reads, refs = read_leaves(
        model, names, _statement_refs(decl.stmts), {ns: p for ns, (p, _) in zip(info.namespaces, params)}
    )
    stamp_fields: dict[str, tuple[str, ...]] = {}
    if stamp is not None:
        stamp_fields[stamp.name] = tuple(f.name for f in stamp.fields)
        for f in stamp.fields:
            refs[f"{stamp.name}.{f.name}"] = Ref(code=f"{stamp_param}.{f.name}", type=f.type, optional=False)
    scope = Scope(refs, stamp_fields)
    # reading a second stamp is refused above: its fields have no code to emit, so emit no statement
    plain = tuple(s for s in decl.stmts if isinstance(s, (ir.Check, ir.Fallback)) and len(info.stamps) < 2)
    stmts: list[CheckView | FallbackView] = []
    for stmt, identity in zip(plain, statement_ids(info.name, plain)):
        if isinstance(stmt, ir.Check):
            stmts.append(_check(stmt, identity, scope, info.name))
            continue
        ref = refs[stmt.field.name]
        from_value = py_literal(stmt.from_value.value, ref.type)
        is_from = f"{ref.code} {'is' if isinstance(ref.type, (EnumT, BoolT)) else '=='} {from_value}"
        stmts.append(
            FallbackView(
                identity=py_str(identity),
                text=statement_text(stmt).split(" when ", 1)[0],
                cond=f"{is_from} and {scope.operand(stmt.when)}",
                field=stmt.field.name.split(".", 1)[1],
                value=py_literal(stmt.to_value.value, ref.type),
                log=py_str(stmt.log),
            )
        )
    signature = ", ".join(f"{p}: {ann}" for p, ann in params + waiver_params)
    if stamp is not None:
        signature = f"{stamp_param}: {stamp.name}" + (f", *, {signature}" if signature else "")
    elif signature:
        signature = f"*, {signature}"
    return ValidateView(
        name=info.name,
        fn=fn,
        identity=py_str(validate_id(info.name)),
        stamp=stamp.name if stamp else None,
        stamp_param=stamp_param,
        signature=signature,
        reads=reads,
        stmts=stmts,
        waivers=waiver_views(validate_id(info.name), decl.waivers),
        waivers_const=waivers_const,
        local=local,
    )
