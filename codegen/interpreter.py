"""The interpreter: evaluates a checked Model directly, explaining every decision.

It is the executable specification the generated code is held against (tests compare the two over the
whole finite input domain), and what `explain`, `table` and `diff` run. Values are plain Python: enum
members as their names (str), ints, bools; None means unset. A name that was not given (a fact in
`explain`) is UNKNOWN, and conditions use three-valued logic, so explain can say what it could not decide.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.model import EnumT, IntT, Model, StampInfo, Type, domain


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
UNDECIDED = "undecided"  # the status of an outcome the given inputs do not decide
NOT_REACHED = "not reached"


class RuleViolation(msgspec.Struct, frozen=True):
    """A forbid/require that failed: the message a user sees and the rule that says so."""

    message: str
    source: str
    rule: str


# --------------------------------------------------------------------------------------------- expressions


def show_expr(e: ir.Expr) -> str:
    """The expression as written in the rules (canonical spacing), for explanations."""
    if isinstance(e, ir.Truthy):
        return e.ref.name
    if isinstance(e, ir.Compare):
        return f"{e.ref.name} {e.op} {ir.literal_text(e.value)}"
    if isinstance(e, ir.Member):
        values = ", ".join(ir.literal_text(v) for v in e.values)
        return f"{e.ref.name} {'not in' if e.negated else 'in'} {{{values}}}"
    if isinstance(e, ir.AnyField):
        return f"{e.value.value} in {e.stamp.name}"
    if isinstance(e, ir.IsUnset):
        return f"{e.ref.name} is {'set' if e.negated else 'unset'}"
    if isinstance(e, ir.Const):
        return "true" if e.value else "false"
    if isinstance(e, ir.Not):
        inner = show_expr(e.operand)
        return f"not {inner}" if isinstance(e.operand, (ir.Truthy, ir.Not, ir.Const)) else f"not ({inner})"
    op = {ir.And: "and", ir.Or: "or", ir.Implies: "implies"}[type(e)]
    return f"{_paren(e.left, e)} {op} {_paren(e.right, e)}"


_PRECEDENCE = {ir.Implies: 1, ir.Or: 2, ir.And: 3}


def _paren(child: ir.Expr, parent: ir.And | ir.Or | ir.Implies) -> str:
    text = show_expr(child)
    if type(child) in _PRECEDENCE and _PRECEDENCE[type(child)] <= _PRECEDENCE[type(parent)]:
        if not (type(child) is type(parent) and type(parent) is not ir.Implies and child is parent.left):
            return f"({text})"
    return text


def show_value(value: Any) -> str:
    if value is None:
        return "unset"
    if value is UNKNOWN:
        return "undecided"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _lookup(env: Mapping[str, Any], name: str) -> Any:
    return env.get(name, UNKNOWN)


def eval_expr(e: ir.Expr, env: Mapping[str, Any], stamp_fields: Mapping[str, tuple[str, ...]] = {}) -> Any:
    """True, False or UNKNOWN (Kleene logic over names that were not given)."""
    if isinstance(e, ir.Const):
        return e.value
    if isinstance(e, ir.Not):
        v = eval_expr(e.operand, env, stamp_fields)
        return UNKNOWN if v is UNKNOWN else not v
    if isinstance(e, ir.And):
        left = eval_expr(e.left, env, stamp_fields)
        if left is False:
            return False
        right = eval_expr(e.right, env, stamp_fields)
        if right is False:
            return False
        return UNKNOWN if UNKNOWN in (left, right) else True
    if isinstance(e, ir.Or):
        left = eval_expr(e.left, env, stamp_fields)
        if left is True:
            return True
        right = eval_expr(e.right, env, stamp_fields)
        if right is True:
            return True
        return UNKNOWN if UNKNOWN in (left, right) else False
    if isinstance(e, ir.Implies):
        return eval_expr(ir.Or(ir.Not(e.left, e.loc), e.right, e.loc), env, stamp_fields)
    if isinstance(e, ir.AnyField):
        values = [_lookup(env, f"{e.stamp.name}.{f}") for f in stamp_fields.get(e.stamp.name, ())]
        if e.value.value in values:
            return True
        return UNKNOWN if UNKNOWN in values else False
    value = _lookup(env, e.ref.name)
    if value is UNKNOWN:
        return UNKNOWN
    if isinstance(e, ir.Truthy):
        return bool(value)
    if isinstance(e, ir.IsUnset):
        return (value is not None) if e.negated else (value is None)
    if isinstance(e, ir.Member):
        inside = value is not None and value in {v.value for v in e.values}
        return not inside if e.negated else inside
    assert isinstance(e, ir.Compare)
    lit = e.value.value
    if e.op == ir.CompareOp.EQ:
        return value is not None and value == lit
    if e.op == ir.CompareOp.NE:
        return value is None or value != lit
    if value is None:
        return False
    return {ir.CompareOp.LT: value < lit, ir.CompareOp.LE: value <= lit, ir.CompareOp.GE: value >= lit}[e.op]


def _expr_names(e: ir.Expr, stamp_fields: Mapping[str, tuple[str, ...]]) -> list[str]:
    """The names an expression reads, in order, once each (`value in Stamp` reads every field)."""
    names = []
    for ref in ir.expr_refs(e):
        if isinstance(e, ir.AnyField) or ref.name in stamp_fields:
            names += [f"{ref.name}.{f}" for f in stamp_fields.get(ref.name, ())]
        else:
            names.append(ref.name)
    return list(dict.fromkeys(names))


def shown(env: Mapping[str, Any], name: str) -> str:
    """A name's value for an explanation: "not given" for an input absent from `env`."""
    return show_value(env[name]) if name in env else "not given"


def _inputs_note(e: ir.Expr, env: Mapping[str, Any], stamp_fields: Mapping[str, tuple[str, ...]]) -> str:
    return ", ".join(f"{n} = {shown(env, n)}" for n in _expr_names(e, stamp_fields))


def _missing(e: ir.Expr | None, env: Mapping[str, Any], stamp_fields: Mapping[str, tuple[str, ...]] = {}):
    """The names `e` reads whose value is UNKNOWN (not given, or undecided), in order."""
    if e is None:
        return ()
    return tuple(n for n in _expr_names(e, stamp_fields) if _lookup(env, n) is UNKNOWN)


# --------------------------------------------------------------------------------------------- chains


class TierOutcome(msgspec.Struct):
    tier: ir.TierKind  # the label
    text: str  # the tier as written
    source: str
    status: str  # won / lost / not reached / undecided
    reason: str
    value: Any = None
    missing: tuple[str, ...] = ()  # undecided: the names it read whose value is UNKNOWN
    # explain fills these after enumerating the inputs not given (codegen/explain.py)
    possible: tuple[str, ...] = ()  # undecided: the statuses it takes over them
    decided_by: tuple[str, ...] = ()  # the inputs not given that decide it


class FieldOutcome(msgspec.Struct):
    value: Any
    tier: ir.TierKind | None  # the deciding tier's label
    source: str | None
    tiers: list[TierOutcome]
    origin: str | None = None  # the input the value was copied from (flag/base/auto), for symbolic tables
    # explain fills these for a value the given inputs leave UNKNOWN (codegen/explain.py)
    candidates: list[Any] = []  # every value it takes over the inputs not given
    decided_by: list[str] = []  # the inputs not given that decide it


def tier_text(tier: ir.Tier) -> str:
    head = ir.literal_text(tier.value) if isinstance(tier, ir.ConstTier) else f"{tier.kind} {tier.ref.name}"
    return f"{head} when {show_expr(tier.when)}" if tier.when is not None else head


def resolve_chain(
    field: ir.FieldDecl,
    env: Mapping[str, Any],
    origins: Mapping[str, str | None] = {},
    stamp_fields: Mapping[str, tuple[str, ...]] = {},
    *,
    explain: bool = True,
) -> FieldOutcome:
    """First tier whose condition holds and which yields a value wins. With explain=False the outcome
    carries no tier texts or reasons (decision tables ask for thousands of rows, and read none of them).

    A tier the inputs cannot decide (its condition, or the value it copies, is UNKNOWN) is UNDECIDED, and
    the tiers after it are still evaluated: the first one that surely yields ends the chain. The value is
    UNKNOWN unless every tier that may win gives the same value; the deciding tier is then None.
    """
    outcomes: list[TierOutcome] = []
    winner: FieldOutcome | None = None
    maybe: list[Any] = []  # the values of the undecided tiers before the winner
    for tier in field.tiers:
        text, source = (tier_text(tier) if explain else ""), str(tier.loc)
        if winner is not None:
            if explain:
                reason = "a tier above wins" if maybe else f"the {winner.tier} tier won"
                outcomes.append(TierOutcome(tier.kind, text, source, NOT_REACHED, reason))
            continue
        holds: Any = True
        if tier.when is not None:
            holds = eval_expr(tier.when, env, stamp_fields)
            if holds is False:
                if explain:
                    note = _inputs_note(tier.when, env, stamp_fields)
                    outcomes.append(
                        TierOutcome(
                            tier.kind, text, source, "lost", f"`{show_expr(tier.when)}` is false ({note})"
                        )
                    )
                continue
        ref = tier.ref.name if tier.ref is not None else ""  # every tier but a constant copies a name
        if isinstance(tier, ir.ConstTier):
            value, origin, why = tier.value.value, None, "the constant"
        else:
            value = _lookup(env, ref)
            origin = origins.get(ref, ref) if isinstance(tier, ir.FollowTier) else ref
            why = f"{ref} = {shown(env, ref)}" if explain else ""
        if value is None:
            if explain:
                outcomes.append(TierOutcome(tier.kind, text, source, "lost", f"{ref} is unset"))
            continue
        if holds is UNKNOWN or value is UNKNOWN:
            missing = _missing(tier.when, env, stamp_fields)
            if value is UNKNOWN:
                missing += (ref,)
            reason = ""
            if explain:
                cond = "" if tier.when is None else f"`{show_expr(tier.when)}`"
                note = "" if tier.when is None else _inputs_note(tier.when, env, stamp_fields)
                if holds is UNKNOWN:
                    reason = f"yields {show_value(value)} if {cond} holds ({note})"
                else:
                    reason = why + (f", and {cond} holds ({note})" if cond else "")
            outcomes.append(TierOutcome(tier.kind, text, source, UNDECIDED, reason, value, missing))
            maybe.append(value)
            continue
        if tier.when is not None and explain:
            why += f", and `{show_expr(tier.when)}` holds ({_inputs_note(tier.when, env, stamp_fields)})"
        if maybe:
            why += "; it wins unless a tier above yields" if explain else ""
            outcomes.append(TierOutcome(tier.kind, text, source, UNDECIDED, why, value))
        else:
            outcomes.append(TierOutcome(tier.kind, text, source, "won", why, value))
        winner = FieldOutcome(value, tier.kind, source, outcomes, origin)
    if maybe:
        values = [*maybe, winner.value] if winner is not None else maybe
        decided = winner is not None and all(v is not UNKNOWN and v == values[0] for v in values)
        return FieldOutcome(values[0] if decided else UNKNOWN, None, None, outcomes)
    if winner is None:  # unreachable for a checked model: every chain is total
        return FieldOutcome(None, None, None, outcomes)
    winner.tiers = outcomes
    return winner


# --------------------------------------------------------------------------------------------- stamps


def coerce(t: Type, value: Any) -> Any:
    """A given value as the interpreter represents it; an open enum maps unknown names to its fallback."""
    if value is None or value is UNKNOWN:
        return value
    if isinstance(t, EnumT):
        value = getattr(value, "value", value)
        if value in t.members:
            return value
        if t.open_member is not None:
            return t.open_member
        raise ValueError(f"{value!r} is not a member of {t.name} ({', '.join(t.members)})")
    if isinstance(t, IntT):
        if isinstance(value, bool) or not isinstance(value, int) or value not in t.values:
            raise ValueError(f"{value!r} is not one of {', '.join(map(str, t.values))}")
        return value
    if not isinstance(value, bool):
        raise ValueError(f"{value!r} is not true or false")
    return value


def config_env(model: Model, given: Mapping[str, Any]) -> dict[str, Any]:
    """Every config leaf: the given value, else its default (None when it has none). Facts only if given."""
    env: dict[str, Any] = {}
    for name, leaf in model.leaves.items():
        if name in given:
            env[name] = coerce(leaf.type, given[name])
        elif not leaf.is_fact:
            env[name] = leaf.default
    return env


def resolve_stamp(
    model: Model, stamp: StampInfo, env: Mapping[str, Any], *, explain: bool = True
) -> dict[str, FieldOutcome]:
    """Resolve every field of a stamp; `env` holds config leaves and slots (None = not given)."""
    env = dict(env)
    origins: dict[str, str | None] = {}
    fields: dict[str, FieldOutcome] = {}
    for name in stamp.eval_order:
        outcome = resolve_chain(stamp.field(name).decl, env, origins, explain=explain)
        fields[name] = outcome
        env[name] = outcome.value
        origins[name] = outcome.origin
    return {f.name: fields[f.name] for f in stamp.fields}


def field_inputs(info: StampInfo, field_name: str) -> set[str]:
    """The inputs (config leaves, slots) one field's value depends on, through the fields it reads."""
    fields = {f.name for f in info.fields}
    found: set[str] = set()
    seen: set[str] = set()

    def visit(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for tier in info.field(name).decl.tiers:
            refs = [tier.ref.name] if tier.ref is not None else []
            refs += [r.name for r in ir.expr_refs(tier.when)] if tier.when is not None else []
            for ref in refs:
                if ref in fields:
                    visit(ref)
                else:
                    found.add(ref)

    visit(field_name)
    return found


def leaves_in_order(model: Model, names: Iterable[str]) -> list[str]:
    """The config leaves and facts among `names`, in declaration order (without a pass over every leaf
    of the model: a large rules file asks this once per rule)."""
    found = [n for n in set(names) if n in model.leaves]
    return sorted(found, key=lambda n: (model.leaves[n].loc.line, model.leaves[n].loc.col))


def stamp_inputs(model: Model, stamp: StampInfo) -> list[tuple[str, Type, bool]]:
    """(name, type, may be unset) of every input a stamp's resolver reads: config leaves, then slots."""
    names: set[str] = set().union(*(field_inputs(stamp, f.name) for f in stamp.fields))
    ordered = leaves_in_order(model, names)
    inputs = [(n, model.leaves[n].type, model.leaves[n].optional) for n in ordered]
    return inputs + [(s.name, s.type, True) for s in stamp.slots]


def input_domain(t: Type, optional: bool) -> tuple[Any, ...]:
    return ((None,) if optional else ()) + tuple(domain(t))


# --------------------------------------------------------------------------------------------- gates, launch, validate


class Condition(msgspec.Struct, frozen=True):
    """One top-level condition of a gate (a conjunct of its `when`), and its value for the inputs."""

    text: str
    value: str  # true / false / undecided
    note: str  # the values it read


class GateOutcome(msgspec.Struct):
    gate: str
    source: str
    status: str  # yields / declines / undecided
    reason: str
    value: Any = None  # what it yields (undecided: what it yields if it does)
    missing: tuple[str, ...] = ()  # undecided: the names it read whose value is UNKNOWN
    conditions: tuple[Condition, ...] = ()  # with run_gate(conditions=True)
    # explain fills these after enumerating the inputs not given (codegen/explain.py)
    possible: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    """The top-level conditions of `a and b and c`."""
    if isinstance(e, ir.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _truth(value: Any) -> str:
    return UNDECIDED if value is UNKNOWN else "true" if value else "false"


def run_gate(model: Model, name: str, env: Mapping[str, Any], *, conditions: bool = False) -> GateOutcome:
    """A gate's outcome; with conditions=True it also lists the value of each top-level condition."""
    info = model.autos[name]
    decl = info.decl
    listed: tuple[Condition, ...] = ()
    if conditions:
        listed = tuple(
            Condition(show_expr(c), _truth(eval_expr(c, env)), _inputs_note(c, env, {}))
            for c in _conjuncts(decl.when)
        )
    holds = eval_expr(decl.when, env)
    if holds is True:
        return GateOutcome(
            name, str(decl.loc), "yields", "every condition holds", decl.value.value, conditions=listed
        )
    failed = _first_failing(decl.when, env)
    if holds is UNKNOWN:
        return GateOutcome(
            name,
            str(decl.loc),
            UNDECIDED,
            f"cannot decide without {failed}",
            decl.value.value,
            _missing(decl.when, env),
            listed,
        )
    return GateOutcome(name, str(decl.loc), "declines", failed, conditions=listed)


def _first_failing(
    e: ir.Expr, env: Mapping[str, Any], stamp_fields: Mapping[str, tuple[str, ...]] = {}
) -> str:
    """The first conjunct that is not true, with the values it read (the `why` of a declined gate)."""
    unknown = None
    for c in _conjuncts(e):
        v = eval_expr(c, env, stamp_fields)
        if v is False:
            return f"`{show_expr(c)}` is false ({_inputs_note(c, env, stamp_fields)})"
        if v is UNKNOWN and unknown is None:
            unknown = ", ".join(_missing(c, env, stamp_fields))
    return unknown or "nothing"


def slot_values(
    model: Model,
    stamp: StampInfo,
    env: Mapping[str, Any],
    given: Mapping[str, Any],
    *,
    conditions: bool = False,
):
    """Each slot's value: given directly, else the first of its gates that yields (None when none does).

    A gate the inputs cannot decide may or may not yield: the gates after it are asked too, and the slot
    is UNKNOWN unless every way it can go gives the same value.
    """
    values: dict[str, Any] = {}
    outcomes: dict[str, list[GateOutcome]] = {}
    for slot in stamp.slots:
        outcomes[slot.name] = []
        if slot.name in given:
            values[slot.name] = coerce(slot.type, given[slot.name])
            continue
        possible: list[Any] = []
        for gate in slot.sources:
            result = run_gate(model, gate, env, conditions=conditions)
            outcomes[slot.name].append(result)
            if result.status != "declines":
                possible.append(result.value)
            if result.status == "yields":
                break
        else:
            possible.append(None)
        values[slot.name] = possible[0] if all(v == possible[0] for v in possible) else UNKNOWN
    return values, outcomes


class LaunchOutcome(msgspec.Struct):
    kind: str  # set / local / check / fallback
    text: str
    source: str
    status: str  # applied / skipped / undecided / ok / violated / not reached
    reason: str
    missing: tuple[str, ...] = ()  # undecided: the names it read whose value is UNKNOWN
    # explain fills these after enumerating the inputs not given (codegen/explain.py)
    possible: tuple[str, ...] = ()
    decided_by: tuple[str, ...] = ()


def _statement(stmt: ir.SetStmt | ir.FieldDecl | ir.Check | ir.Fallback) -> tuple[str, str]:
    """(kind, text) of a launch or validate statement, as its outcome names it."""
    if isinstance(stmt, ir.SetStmt):
        return "set", f"set {stmt.target.name} = {ir.literal_text(stmt.value)}"
    if isinstance(stmt, ir.FieldDecl):
        return "local", stmt.name.value
    if isinstance(stmt, ir.Fallback):
        text = f"{stmt.field.name} {ir.literal_text(stmt.from_value)} -> {ir.literal_text(stmt.to_value)}"
        return "fallback", f"fallback {text}"
    return "check", f"{stmt.kind} {show_expr(stmt.cond)}"


def _not_reached(
    stmt: ir.SetStmt | ir.FieldDecl | ir.Check | ir.Fallback, stop: RuleViolation
) -> LaunchOutcome:
    kind, text = _statement(stmt)
    return LaunchOutcome(kind, text, str(stmt.loc), NOT_REACHED, f"{stop.rule} raises at {stop.source}")


def run_launch(
    model: Model, env: dict[str, Any], *, stop_at_violation: bool = False
) -> tuple[dict[str, Any], list[LaunchOutcome], list[RuleViolation]]:
    """Apply every launch block in order; returns the normalised config, what happened, and violations.

    A `set` the inputs cannot decide leaves its leaf UNKNOWN (unless it already holds that value). With
    stop_at_violation, as the generated code does, the first violation ends it: every statement after it,
    in its block and the later ones, is not reached (and applies nothing).
    """
    env = dict(env)
    log: list[LaunchOutcome] = []
    violations: list[RuleViolation] = []
    stop: RuleViolation | None = None
    for launch in model.launches:
        local_names = []
        for stmt in launch.stmts:
            if stop is not None:
                log.append(_not_reached(stmt, stop))
                continue
            if isinstance(stmt, ir.SetStmt):
                _, text = _statement(stmt)
                holds = True if stmt.when is None else eval_expr(stmt.when, env)
                if holds is True:
                    env[stmt.target.name] = stmt.value.value
                    log.append(LaunchOutcome("set", text, str(stmt.loc), "applied", stmt.log or ""))
                else:
                    assert stmt.when is not None  # a set without `when` always applies
                    why = _first_failing(stmt.when, env)
                    if holds is UNKNOWN:
                        missing = _missing(stmt.when, env)
                        why = _cannot(missing, env)
                        if env.get(stmt.target.name) != stmt.value.value:
                            env[stmt.target.name] = UNKNOWN
                        log.append(LaunchOutcome("set", text, str(stmt.loc), UNDECIDED, why, missing))
                    else:
                        log.append(LaunchOutcome("set", text, str(stmt.loc), "skipped", why))
            elif isinstance(stmt, ir.FieldDecl):
                outcome = resolve_chain(stmt, env)
                env[stmt.name.value] = outcome.value
                local_names.append(stmt.name.value)
                status = UNDECIDED if outcome.value is UNKNOWN else "applied"
                missing = tuple(dict.fromkeys(n for t in outcome.tiers for n in t.missing))
                log.append(
                    LaunchOutcome(
                        "local",
                        stmt.name.value,
                        str(stmt.loc),
                        status,
                        f"= {show_value(outcome.value)}",
                        missing,
                    )
                )
            else:
                log.append(_run_check(stmt, env, {}, violations, launch.name))
                if stop_at_violation and log[-1].status == "violated":
                    stop = violations[-1]
        for name in local_names:  # launch locals are not config: they do not leak out
            env.pop(name, None)
    return env, log, violations


def _cannot(missing: tuple[str, ...], env: Mapping[str, Any]) -> str:
    """Why an outcome is undecided: each name it read that is not given or undecided."""
    return "cannot decide: " + ", ".join(f"{n} {shown(env, n)}" for n in missing)


def _run_check(
    stmt: ir.Check, env, stamp_fields, violations: list[RuleViolation], rule: str
) -> LaunchOutcome:
    holds = eval_expr(stmt.cond, env, stamp_fields)
    _, text = _statement(stmt)
    if holds is UNKNOWN:
        missing = _missing(stmt.cond, env, stamp_fields)
        return LaunchOutcome("check", text, str(stmt.loc), UNDECIDED, _cannot(missing, env), missing)
    failed = holds if stmt.kind == ir.CheckKind.FORBID else not holds
    if failed:
        violations.append(RuleViolation(stmt.message, str(stmt.loc), rule))
        return LaunchOutcome("check", text, str(stmt.loc), "violated", stmt.message)
    return LaunchOutcome("check", text, str(stmt.loc), "ok", "")


def run_validate(
    model: Model,
    name: str,
    stamp: StampInfo | None,
    values: Mapping[str, Any],
    env: Mapping[str, Any],
    *,
    stop_at_violation: bool = False,
) -> tuple[dict[str, Any], list[LaunchOutcome], list[RuleViolation]]:
    """One validate block against a resolved stamp: fallbacks replace values (logged), checks may fail.

    A block that reads no stamp takes `stamp=None` and empty `values`. A fallback the inputs cannot decide
    leaves its field UNKNOWN. With stop_at_violation, as the generated code does, the first violation ends
    the block: the statements after it are not reached (and replace nothing).
    """
    info = next(v for v in model.validates if v.name == name)
    values = dict(values)
    stamp_fields = {stamp.name: tuple(f.name for f in stamp.fields)} if stamp is not None else {}
    log: list[LaunchOutcome] = []
    violations: list[RuleViolation] = []
    stop: RuleViolation | None = None
    for stmt in info.decl.stmts:
        if stop is not None:
            log.append(_not_reached(stmt, stop))
            continue
        scope = dict(env)
        if stamp is not None:
            scope.update({f"{stamp.name}.{k}": v for k, v in values.items()})
        if isinstance(stmt, ir.Fallback):
            field = stmt.field.name.split(".", 1)[1]
            _, text = _statement(stmt)
            current = values.get(field)
            if current is UNKNOWN:
                log.append(
                    LaunchOutcome(
                        "fallback",
                        text,
                        str(stmt.loc),
                        UNDECIDED,
                        _cannot((stmt.field.name,), scope),
                        (stmt.field.name,),
                    )
                )
                continue
            if current != stmt.from_value.value:
                log.append(
                    LaunchOutcome("fallback", text, str(stmt.loc), "skipped", f"{field} is not that value")
                )
                continue
            holds = eval_expr(stmt.when, scope, stamp_fields)
            if holds is True:
                values[field] = stmt.to_value.value
                log.append(LaunchOutcome("fallback", text, str(stmt.loc), "applied", stmt.log))
            else:
                why = _first_failing(stmt.when, scope, stamp_fields)
                if holds is UNKNOWN:
                    missing = _missing(stmt.when, scope, stamp_fields)
                    why = _cannot(missing, scope)
                    if stmt.from_value.value != stmt.to_value.value:
                        values[field] = UNKNOWN
                    log.append(LaunchOutcome("fallback", text, str(stmt.loc), UNDECIDED, why, missing))
                else:
                    log.append(LaunchOutcome("fallback", text, str(stmt.loc), "skipped", why))
        elif isinstance(stmt, ir.Check):
            log.append(_run_check(stmt, scope, stamp_fields, violations, name))
            if stop_at_violation and log[-1].status == "violated":
                stop = violations[-1]
    return values, log, violations
