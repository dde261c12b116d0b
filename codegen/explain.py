"""`stampgen explain`: resolve one stamp for given inputs and say why, Kconfig-style.

The pipeline is the engine's, in order: launch-level normalisation (process-wide), the runner's auto-default
gates (filling the stamp's slots), the stamp's precedence chains, then every validate block that reads the
stamp. Config leaves not given take their defaults; facts not given are unknown. Nothing is guessed: the
story is told three-valued once (codegen/interpreter.py), and whatever it leaves undecided is settled by
enumerating the finite domains of the facts not given, branching only on a fact some undecided outcome
reads, until every outcome is decided. An undecided field is then reported with every value it takes
(its candidates) and the facts that decide it. A forbid or require that fires ends its story as the
generated code does (it raises there): nothing after it is applied, and after a launch violation no
validation runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from stampgen.codegen import interpreter as interp
from stampgen.codegen.model import EnumT, IntT, Model, StampInfo, Type, domain

UNDECIDED = interp.UNDECIDED
NOT_REACHED = interp.NOT_REACHED

# The most stories one explanation runs while enumerating the facts not given; past it, what is still
# open is reported as undecided with every value of its type as candidates.
MAX_STORIES = 20_000


class InputError(ValueError):
    """A bad --set, --facts or --config: unknown name, bad value, unreadable file (usage error, exit 2)."""


# --------------------------------------------------------------------------------------------- inputs


def _names(model: Model, stamp: StampInfo) -> dict[str, tuple[Type, str]]:
    """Every name an input may give: config leaves and facts (the rules' dotted names), the stamp's
    slots; with the type and where the rules declare it."""
    names = {name: (leaf.type, str(leaf.loc)) for name, leaf in model.leaves.items()}
    names.update({slot.name: (slot.type, str(slot.decl.loc)) for slot in stamp.slots})
    return names


def _unknown_name(name: str, names: Mapping[str, Any]) -> InputError:
    from stampgen.codegen.diagnostics import did_you_mean

    hint = did_you_mean(name, names)
    return InputError(f"unknown name {name!r}" + (f"; {hint}" if hint else ""))


def _given(model: Model, stamp: StampInfo, name: str, value: Any, raw: str, notes: list[str]) -> Any:
    """A value for `name` as the interpreter holds it (None = unset); `raw` is how the user wrote it."""
    names = _names(model, stamp)
    if name not in names:
        raise _unknown_name(name, names)
    t, declared = names[name]
    if value is None:
        leaf = model.leaves.get(name)
        if leaf is not None and (leaf.is_fact or not leaf.optional):
            raise InputError(f"{name} cannot be unset")
        return None
    if isinstance(t, EnumT) and not isinstance(value, str):
        raise InputError(f"{name}: {raw} is not a member of {t.name} ({', '.join(t.members)})")
    try:
        coerced = interp.coerce(t, value)
    except ValueError as exc:
        raise InputError(f"{name} ({declared}): {exc}") from None
    if isinstance(t, EnumT) and coerced != value:
        notes.append(f"{name}={raw}: not a member of {t.name}; the open enum maps it to {coerced}")
    return coerced


def parse_settings(
    model: Model, stamp: StampInfo, settings: list[str], notes: list[str] | None = None
) -> dict[str, Any]:
    """`NAME=VALUE` strings → typed values; names are the rules' dotted names or the stamp's slots.

    Notes on values an open enum mapped to its fallback member are appended to `notes`.
    """
    notes = notes if notes is not None else []
    given: dict[str, Any] = {}
    for item in settings:
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise InputError(f"--set expects NAME=VALUE, got {item!r}")
        value: Any = raw
        if raw in ("unset", "none", "None", ""):
            value = None
        elif raw in ("true", "false"):
            value = raw == "true"
        elif raw.lstrip("-").isdigit():
            value = int(raw)
        given[name] = _given(model, stamp, name, value, repr(raw), notes)
    return given


FACTS, CONFIG = "facts", "config"  # what an input file holds


def load_inputs(
    model: Model, stamp: StampInfo, path: str, holds: str, notes: list[str] | None = None
) -> dict[str, Any]:
    """A --facts or --config file (JSON or TOML, by its extension) → typed values.

    It maps the rules' dotted names to values, flat (`{"runner.sm": 9}`) or nested (`{"runner": {"sm":
    9}}`); enum members are strings, null (JSON) is unset. A facts file holds facts only, a config file
    config leaves only.
    """
    notes = notes if notes is not None else []
    data = _read_mapping(path)
    given: dict[str, Any] = {}
    for name, value in _flatten(path, data).items():
        leaf = model.leaves.get(name)
        if leaf is not None and leaf.is_fact and holds == CONFIG:
            raise InputError(
                f"{path}: {name} is a fact, not a config leaf; give it in a --facts file or with --set"
            )
        if leaf is not None and not leaf.is_fact and holds == FACTS:
            raise InputError(
                f"{path}: {name} is a config leaf, not a fact; give it in a --config file or with --set"
            )
        if leaf is None and any(name == slot.name for slot in stamp.slots):
            raise InputError(f"{path}: {name} is a slot of {stamp.name}; give it with --set")
        t = leaf.type if leaf is not None else None
        if t is not None and value is not None and not _json_typed(t, value):
            raise InputError(f"{path}: {name}: {_expected(t)}, not {json.dumps(value)}")
        try:
            given[name] = _given(model, stamp, name, value, json.dumps(value), notes)
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None
    return given


def _read_mapping(path: str) -> dict[str, Any]:
    suffix = Path(path).suffix.lower()
    if suffix not in (".json", ".toml"):
        raise InputError(f"{path}: expected a .json or .toml file")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"cannot read {path}: not UTF-8 text") from None
    try:
        if suffix == ".json":
            data = json.loads(text)
        else:
            try:
                import tomllib
            except ModuleNotFoundError:  # Python 3.10
                import tomli as tomllib  # type: ignore[no-redef, import-not-found, unused-ignore]
            data = tomllib.loads(text)
    except ValueError as exc:  # json.JSONDecodeError and tomllib.TOMLDecodeError are ValueErrors
        raise InputError(f"{path}: not valid {suffix[1:].upper()}: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping of the rules' dotted names to values")
    return data


def _flatten(path: str, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        inner = _flatten(path, value, f"{name}.") if isinstance(value, dict) else {name: value}
        for n, v in inner.items():
            if n in flat:
                raise InputError(f"{path}: {n} is given twice")
            flat[n] = v
    return flat


def _json_typed(t: Type, value: Any) -> bool:
    if isinstance(t, EnumT):
        return isinstance(value, str)
    if isinstance(t, IntT):
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, bool)


def _expected(t: Type) -> str:
    if isinstance(t, EnumT):
        return f"expected a member of {t.name} (a string)"
    if isinstance(t, IntT):
        return f"expected an int in {{{', '.join(map(str, t.values))}}}"
    return "expected true or false"


# --------------------------------------------------------------------------------------------- one story


class Story(msgspec.Struct):
    """The pipeline run once, three-valued, for one set of inputs."""

    launch: list[interp.LaunchOutcome]
    slots: dict[str, Any]
    gates: dict[str, list[interp.GateOutcome]]
    fields: dict[str, interp.FieldOutcome]
    validations: dict[str, list[interp.LaunchOutcome]]
    violations: list[interp.RuleViolation]
    after_validation: dict[str, dict[str, Any]]
    refused: interp.RuleViolation | None  # the launch violation that keeps every runner from being built
    given_slots: list[str]  # the slots given directly (no gate asked)


def _tell(model: Model, stamp: StampInfo, given: Mapping[str, Any]) -> Story:
    slot_names = {s.name for s in stamp.slots}
    env = interp.config_env(model, {k: v for k, v in given.items() if k not in slot_names})
    env, launch_log, violations = interp.run_launch(model, env, stop_at_violation=True)
    refused = violations[0] if violations else None
    given_slots = {k: v for k, v in given.items() if k in slot_names}
    slots, gates = interp.slot_values(model, stamp, env, given_slots, conditions=True)
    fields = interp.resolve_stamp(model, stamp, {**env, **slots})
    values = {name: outcome.value for name, outcome in fields.items()}
    validations: dict[str, list[interp.LaunchOutcome]] = {}
    after: dict[str, dict[str, Any]] = {}
    for info in model.validates:
        if stamp.name not in info.stamps:
            continue
        new_values, log, broken = interp.run_validate(
            model, info.name, stamp, values, env, stop_at_violation=True
        )
        if refused is not None:  # the engine builds no consumer: launch raised first
            reason = f"launch refuses these inputs ({refused.rule} raises at {refused.source})"
            log = [msgspec.structs.replace(o, status=NOT_REACHED, reason=reason, missing=()) for o in log]
            new_values, broken = values, []
        validations[info.name] = log
        violations += broken
        if new_values != values:
            after[info.name] = new_values
    return Story(launch_log, slots, gates, fields, validations, violations, after, refused, list(given_slots))


# What an outcome is called when every story is compared: (section, *where); its value is a status, or
# for fields, slots and the values a consumer runs with, the value.
Key = tuple[str, ...]


def _outcomes(stamp: StampInfo, story: Story) -> Iterator[tuple[Key, Any, tuple[str, ...]]]:
    """(key, status or value, the names it read whose value is UNKNOWN), in the order the engine runs."""
    for i, o in enumerate(story.launch):
        yield ("launch", str(i)), o.status, o.missing
    for slot in stamp.slots:
        if slot.name not in story.given_slots:
            asked = {g.gate: g for g in story.gates[slot.name]}
            for gate in slot.sources:
                g = asked.get(gate)
                yield ("gate", slot.name, gate), (g.status if g else NOT_REACHED), (g.missing if g else ())
        yield ("slot", slot.name), story.slots[slot.name], ()
    for name, f in story.fields.items():
        for i, t in enumerate(f.tiers):
            yield ("tier", name, str(i)), t.status, t.missing
        yield ("field", name), f.value, ()
    values = {name: f.value for name, f in story.fields.items()}
    for block, log in story.validations.items():
        for i, o in enumerate(log):
            yield ("validate", block, str(i)), o.status, o.missing
        for field, value in story.after_validation.get(block, values).items():
            yield ("runs", block, field), value, ()


def _open(value: Any) -> bool:
    return value is interp.UNKNOWN or value == UNDECIDED


def _winner(f: interp.FieldOutcome) -> int | None:
    return next((i for i, t in enumerate(f.tiers) if t.status == "won"), None)


class Completions(msgspec.Struct):
    """Every story over the facts not given (one per class of their values that decides everything)."""

    seen: dict[Key, list[Any]]  # key -> every status or value it takes
    winners: dict[str, list[int | None]]  # field -> every tier that wins it
    decided_by: dict[Key, list[str]]  # key -> the facts not given whose value changes it
    complete: bool  # False when MAX_STORIES ran out first


class _OutOfStories(Exception):
    pass


def _complete(model: Model, stamp: StampInfo, given: Mapping[str, Any], root: Story) -> Completions:
    """Branch on a fact not given that an undecided outcome reads, until every outcome is decided.

    A fact decides an outcome when, at some branching on it, the outcome's values differ between its
    branches (a fact read on the way but irrelevant to the outcome is not listed).
    """
    free = {n for n, leaf in model.leaves.items() if leaf.is_fact and n not in given}
    found = Completions({}, {}, {}, complete=True)
    told = [1]

    def explore(inputs: dict[str, Any], story: Story) -> dict[Key, set[Any]]:
        outcomes = list(_outcomes(stamp, story))
        undecided = [(key, missing) for key, value, missing in outcomes if _open(value)]
        branch = next((n for _, missing in undecided for n in missing if n in free and n not in inputs), None)
        if branch is None:  # a leaf: everything decided (or nothing not given is left to decide it)
            for key, value, _ in outcomes:
                bucket = found.seen.setdefault(key, [])
                if value not in bucket:
                    bucket.append(value)
            for name, f in story.fields.items():
                bucket = found.winners.setdefault(name, [])
                if _winner(f) not in bucket:
                    bucket.append(_winner(f))
            return {key: {value} for key, value, _ in outcomes}
        values = domain(model.leaves[branch].type)
        told[0] += len(values)
        if told[0] > MAX_STORIES:
            raise _OutOfStories()
        children = []
        for value in values:
            more = {**inputs, branch: value}
            children.append(explore(more, _tell(model, stamp, more)))
        for key, _ in undecided:
            if len({frozenset(child.get(key, ())) for child in children}) > 1:
                names = found.decided_by.setdefault(key, [])
                if branch not in names:
                    names.append(branch)
        union: dict[Key, set[Any]] = {}
        for child in children:
            for key, seen in child.items():
                union.setdefault(key, set()).update(seen)
        return union

    try:
        explore(dict(given), root)
    except _OutOfStories:
        found.complete = False
    order = {name: i for i, name in enumerate(model.leaves)}
    for names in found.decided_by.values():
        names.sort(key=order.__getitem__)
    return found


# --------------------------------------------------------------------------------------------- the explanation


class Waived(msgspec.Struct, frozen=True):
    """A waiver of a validate block: its failures are logged, not raised, for CLASS until the date."""

    cls: str
    until: str
    reason: str
    source: str
    expired: bool


def waivers_of(model: Model, blocks: Iterable[str]) -> dict[str, list[Waived]]:
    """The waivers of the named validate blocks (expired ones included: `check` refuses those)."""
    from stampgen.codegen.checks import current_date, parse_date

    today = current_date()
    found: dict[str, list[Waived]] = {}
    for info in model.validates:
        if info.name not in blocks:
            continue
        for w in info.decl.waivers:
            until = parse_date(w.until)
            found.setdefault(info.name, []).append(
                Waived(w.cls.value, w.until, w.reason or "", str(w.loc), until is not None and until < today)
            )
    return found


class Explanation(msgspec.Struct):
    stamp: str
    source: str
    attribute: str
    fields: dict[str, interp.FieldOutcome]
    launch: list[interp.LaunchOutcome]
    slots: dict[str, Any]
    gates: dict[str, list[interp.GateOutcome]]
    validations: dict[str, list[interp.LaunchOutcome]]
    violations: list[interp.RuleViolation]
    after_validation: dict[str, dict[str, Any]]
    notes: list[str] = []
    slot_candidates: dict[str, list[Any]] = {}  # an undecided slot's every value (None = unset)
    not_given: list[str] = []  # the facts not given that decide something undecided, in declaration order
    refused: interp.RuleViolation | None = None  # a launch violation: no runner is built
    given_slots: list[str] = []
    complete: bool = True  # False when the facts not given had too many combinations to enumerate
    waivers: dict[str, list[Waived]] = {}  # per validate block shown: its waivers, as the consumer sees them


def explain(
    model: Model, stamp_name: str, given: Mapping[str, Any], notes: list[str] | None = None
) -> Explanation:
    stamp = model.stamps[stamp_name]
    root = _tell(model, stamp, given)
    ex = Explanation(
        stamp=stamp.name,
        source=str(stamp.decl.loc),
        attribute=stamp.attribute,
        fields=root.fields,
        launch=root.launch,
        slots=root.slots,
        gates=root.gates,
        validations=root.validations,
        violations=root.violations,
        after_validation=root.after_validation,
        notes=list(notes or []),
        waivers=waivers_of(model, root.validations),
        refused=root.refused,
        given_slots=root.given_slots,
    )
    if any(_open(value) for _, value, _ in _outcomes(stamp, root)):
        _settle(model, stamp, ex, _complete(model, stamp, given, root))
    return ex


def _ordered(values: list[Any], t: Type | None) -> list[Any]:
    """Candidate values in the order of their type (unset first), without UNKNOWN."""
    order = {v: i for i, v in enumerate((None, *domain(t)))} if t is not None else {}
    known = [v for v in values if v is not interp.UNKNOWN]
    return sorted(known, key=lambda v: order.get(v, len(order)))


def _settle(model: Model, stamp: StampInfo, ex: Explanation, found: Completions) -> None:
    """Replace what the three-valued story left undecided by what every completion says."""

    def settled(key: Key, o: Any) -> Any:
        if o.status != UNDECIDED:
            return o
        by = tuple(found.decided_by.get(key, ()))
        statuses = [s for s in found.seen.get(key, []) if s != UNDECIDED] if found.complete else []
        if len(statuses) == 1 and len(found.seen[key]) == 1:
            status = statuses[0]
            reason = f"{status} for every value of {', '.join(by) or 'the facts not given'}"
            if status == "won":  # with what it copies, which may still be undecided
                reason += f"; {o.reason}"
            return msgspec.structs.replace(o, status=status, reason=reason, decided_by=by)
        return msgspec.structs.replace(o, possible=tuple(statuses), decided_by=by)

    ex.launch = [settled(("launch", str(i)), o) for i, o in enumerate(ex.launch)]
    ex.gates = {
        slot: [settled(("gate", slot, g.gate), g) for g in outcomes] for slot, outcomes in ex.gates.items()
    }
    for slot in stamp.slots:
        if ex.slots.get(slot.name) is interp.UNKNOWN:
            values = found.seen.get(("slot", slot.name), [])
            if found.complete and len(values) == 1 and values[0] is not interp.UNKNOWN:
                ex.slots[slot.name] = values[0]
            else:
                ex.slot_candidates[slot.name] = _candidates(values, slot.type, found.complete)
    for name, f in ex.fields.items():
        f.tiers = [settled(("tier", name, str(i)), t) for i, t in enumerate(f.tiers)]
        if f.value is not interp.UNKNOWN and f.tier is not None:
            continue
        values = found.seen.get(("field", name), [])
        winners = found.winners.get(name, [])
        if found.complete and len(values) == 1 and values[0] is not interp.UNKNOWN:
            f.value = values[0]
        else:
            f.value = interp.UNKNOWN
            f.candidates = _candidates(values, stamp.field(name).type, found.complete)
            f.decided_by = list(found.decided_by.get(("field", name), ()))
        if found.complete and len(winners) == 1 and winners[0] is not None:
            won = f.tiers[winners[0]]
            f.tier, f.source = won.tier, won.source
    ex.validations = {
        block: [settled(("validate", block, str(i)), o) for i, o in enumerate(log)]
        for block, log in ex.validations.items()
    }
    for block, replaced in ex.after_validation.items():
        for field in replaced:
            seen = found.seen.get(("runs", block, field), [])
            if replaced[field] is interp.UNKNOWN and found.complete and len(seen) == 1:
                replaced[field] = seen[0]
    ex.complete = found.complete
    deciding = {n for names in found.decided_by.values() for n in names}
    ex.not_given = [n for n in model.leaves if n in deciding]


def _candidates(values: list[Any], t: Type, complete: bool) -> list[Any]:
    return _ordered(values, t) if complete else list(domain(t))


# --------------------------------------------------------------------------------------------- JSON


def _json_value(value: Any) -> Any:
    return None if value is None or value is interp.UNKNOWN else value


def _json_status(o: Any, **extra: Any) -> dict[str, Any]:
    """An outcome with a status: the keys every one has, and what explain found about an undecided one."""
    data: dict[str, Any] = {**extra, "source": o.source, "status": o.status, "reason": o.reason}
    if o.status == UNDECIDED:
        data["possible"] = list(o.possible)
        data["missing"] = list(o.missing)
    if o.decided_by:
        data["decided_by"] = list(o.decided_by)
    return data


def to_json(ex: Explanation) -> dict[str, Any]:
    fields = {}
    for name, f in ex.fields.items():
        fields[name] = {
            "value": _json_value(f.value),
            "tier": f.tier,
            "source": f.source,
            "tiers": [_json_status(t, tier=t.tier, text=t.text) for t in f.tiers],
        }
        if f.value is interp.UNKNOWN:
            fields[name].update(undecided=True, candidates=f.candidates, decided_by=f.decided_by)
    slots = {}
    for slot, value in ex.slots.items():
        slots[slot] = _json_value(value)
    return {
        "stamp": ex.stamp,
        "source": ex.source,
        "attribute": f"runner.{ex.attribute}",
        "fields": fields,
        "slots": slots,
        "undecided_slots": {
            slot: {"candidates": values, "decided_by": _slot_deciders(ex, slot)}
            for slot, values in ex.slot_candidates.items()
        },
        "gates": {
            slot: [
                _json_status(
                    g,
                    gate=g.gate,
                    value=_json_value(g.value),
                    conditions=[msgspec.to_builtins(c) for c in g.conditions],
                )
                for g in outcomes
            ]
            for slot, outcomes in ex.gates.items()
        },
        "launch": [_json_status(o, kind=o.kind, text=o.text) for o in ex.launch],
        "validations": {
            block: [_json_status(o, kind=o.kind, text=o.text) for o in log]
            for block, log in ex.validations.items()
        },
        "after_validation": {
            k: {f: _json_value(v) for f, v in vals.items()} for k, vals in ex.after_validation.items()
        },
        "violations": [msgspec.to_builtins(v) for v in ex.violations],
        "not_given": ex.not_given,
        "complete": ex.complete,
        "notes": ex.notes,
        "waivers": {block: [msgspec.to_builtins(w) for w in ws] for block, ws in ex.waivers.items()},
    }


def _slot_deciders(ex: Explanation, slot: str) -> list[str]:
    return list(dict.fromkeys(n for g in ex.gates.get(slot, []) for n in g.decided_by))


# --------------------------------------------------------------------------------------------- text


_MARK = {"won": "✓", "lost": "✗", NOT_REACHED: "·", UNDECIDED: "?"}
_CHECK_MARK = {"ok": "✓", "violated": "✗", "applied": "✓", NOT_REACHED: "·", UNDECIDED: "?", "skipped": "-"}
_TRUTH_MARK = {"true": "✓", "false": "✗", UNDECIDED: "?"}


def _shown(value: Any, candidates: list[Any]) -> str:
    if value is not interp.UNKNOWN:
        return interp.show_value(value)
    return "undecided (" + " or ".join(interp.show_value(v) for v in candidates) + ")"


def _doubt(o: Any) -> str:
    """What an undecided outcome may be, and what it depends on."""
    may = " or ".join(o.possible) if o.possible else "undecided"
    on = f", depending on {', '.join(o.decided_by)} (not given)" if o.decided_by else ""
    return f"{may}{on}; {o.reason}" if o.reason else f"{may}{on}"


def _statement_lines(o: interp.LaunchOutcome) -> list[str]:
    head = f"  {_CHECK_MARK.get(o.status, ' ')} {o.text}  [{o.status}]  {o.source}"
    reason = _doubt(o) if o.status == UNDECIDED else o.reason
    return [head] + ([f"      {reason}"] if reason else [])


def _shows(o: interp.LaunchOutcome) -> bool:
    """Every check and every statement that did (or may do, or never got to do) something is shown; a
    set or fallback that is skipped, and a launch local that is decided, are not."""
    if o.kind == "check":
        return True
    if o.kind == "local":
        return o.status == UNDECIDED
    return o.status != "skipped"


def to_text(ex: Explanation) -> str:
    out = [f"{ex.stamp}  (stamp at {ex.source}, on runner.{ex.attribute})", ""]
    out += [f"note: {note}" for note in ex.notes] + ([""] if ex.notes else [])
    if ex.not_given:
        out += [f"Not given, and deciding what is undecided below: {', '.join(ex.not_given)}", ""]
    if not ex.complete:
        out += [
            f"note: the facts not given have more than {MAX_STORIES:,} combinations that matter; "
            "candidates are every value of a field's type",
            "",
        ]
    shown = [o for o in ex.launch if _shows(o)]
    if shown:
        out.append("Launch (process-wide, before any runner):")
        for o in shown:
            out += _statement_lines(o)
        out.append("")
    if ex.refused is not None:
        out += [
            f"not reached: launch refuses these inputs ({ex.refused.rule} raises at {ex.refused.source}),",
            "so no runner is stamped; below is what the resolver gives for them, and no consumer is built.",
            "",
        ]
    for slot, outcomes in ex.gates.items():
        out.append(f"slot {slot} = {_shown(ex.slots.get(slot), ex.slot_candidates.get(slot, []))}")
        if not outcomes:
            out.append("  given directly" if slot in ex.given_slots else "  not given, and no gate fills it")
        for g in outcomes:
            # an undecided gate's conditions below say what it cannot decide
            reason = _doubt(msgspec.structs.replace(g, reason="")) if g.status == UNDECIDED else g.reason
            out.append(f"  gate {g.gate} {g.status}: {reason}  ({g.source})")
            for c in g.conditions:
                out.append(f"      {_TRUTH_MARK[c.value]} {c.value:<9} {c.text}  ({c.note})")
        out.append("")
    for name, f in ex.fields.items():
        out.append(f"{name} = {_shown(f.value, f.candidates)}")
        if f.value is interp.UNKNOWN:
            by = ", ".join(f.decided_by) or "the facts not given"
            out.append(f"  Decided by: {by} (not given)")
        elif f.tier is not None:
            won = next((t for t in f.tiers if t.source == f.source), None)
            if won is not None:
                out.append(f"  Selected by: {won.text}  [{won.reason}]  {won.source}")
        for t in f.tiers:
            reason = _doubt(t) if t.status == UNDECIDED else t.reason
            out.append(f"    {_MARK.get(t.status, ' ')} {t.text:<48} {t.status}: {reason}")
        out.append("")
    for consumer, log in ex.validations.items():
        out.append(f"validate {consumer}:")
        shown = [o for o in log if _shows(o)]
        if not shown:
            out.append("  no check; no fallback applies")
        for o in shown:
            out += _statement_lines(o)
        if consumer in ex.after_validation:
            vals = ", ".join(f"{k}={interp.show_value(v)}" for k, v in ex.after_validation[consumer].items())
            out.append(f"  {consumer} runs with: {vals}")
        for w in ex.waivers.get(consumer, []):
            state = "EXPIRED" if w.expired else "until " + w.until
            out.append(f"  waived for {w.cls} {state}: {w.reason}  {w.source}")
        out.append("")
    if ex.violations:
        out.append("errors:")
        for v in ex.violations:
            out.append(f"  {v.source}: {v.message}  (in {v.rule})")
    return "\n".join(out).rstrip() + "\n"
