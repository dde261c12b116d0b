"""`stampgen explain`: resolve one stamp for given inputs and say why, Kconfig-style.

The pipeline is the engine's, in order: launch-level normalisation (process-wide), the runner's auto-default
gates (filling the stamp's slots), the stamp's precedence chains, then every validate block that reads the
stamp. Inputs not given are unset (config leaves take their defaults); facts not given are unknown, and
whatever depends on them is reported as not decided rather than guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from stampgen.codegen import interpreter as interp
from stampgen.codegen.model import EnumT, Model, StampInfo


class InputError(ValueError):
    """A bad --set: unknown name or value (usage error, exit 2)."""


def parse_settings(
    model: Model, stamp: StampInfo, settings: list[str], notes: list[str] | None = None
) -> dict[str, Any]:
    """`NAME=VALUE` strings → typed values; names are the rules' dotted names or the stamp's slots.

    Notes on values an open enum mapped to its fallback member are appended to `notes`.
    """
    notes = notes if notes is not None else []
    types = {name: leaf.type for name, leaf in model.leaves.items()}
    types.update({slot.name: slot.type for slot in stamp.slots})
    given: dict[str, Any] = {}
    for item in settings:
        name, sep, raw = item.partition("=")
        name, raw = name.strip(), raw.strip()
        if not sep or not name:
            raise InputError(f"--set expects NAME=VALUE, got {item!r}")
        if name not in types:
            from stampgen.codegen.diagnostics import did_you_mean

            hint = did_you_mean(name, types)
            raise InputError(f"unknown name {name!r}" + (f"; {hint}" if hint else ""))
        t = types[name]
        if raw in ("unset", "none", "None", ""):
            leaf = model.leaves.get(name)
            if leaf is not None and (leaf.is_fact or not leaf.optional):
                raise InputError(f"{name} cannot be unset")
            given[name] = None
            continue
        value: Any = raw
        if raw in ("true", "false"):
            value = raw == "true"
        elif raw.lstrip("-").isdigit():
            value = int(raw)
        if isinstance(t, EnumT) and not isinstance(value, str):
            raise InputError(f"{name}: {raw!r} is not a member of {t.name} ({', '.join(t.members)})")
        try:
            given[name] = interp.coerce(t, value)
        except ValueError as exc:
            raise InputError(f"{name}: {exc}") from None
        if isinstance(t, EnumT) and given[name] != value:
            notes.append(f"{name}={raw}: not a member of {t.name}; the open enum maps it to {given[name]}")
    return given


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


def explain(
    model: Model, stamp_name: str, given: Mapping[str, Any], notes: list[str] | None = None
) -> Explanation:
    stamp = model.stamps[stamp_name]
    slot_names = {s.name for s in stamp.slots}
    env = interp.config_env(model, {k: v for k, v in given.items() if k not in slot_names})
    env, launch_log, violations = interp.run_launch(model, env)
    slots, gates = interp.slot_values(model, stamp, env, {k: v for k, v in given.items() if k in slot_names})
    fields = interp.resolve_stamp(model, stamp, {**env, **slots})
    values = {name: outcome.value for name, outcome in fields.items()}
    validations: dict[str, list[interp.LaunchOutcome]] = {}
    after: dict[str, dict[str, Any]] = {}
    for info in model.validates:
        if stamp.name not in info.stamps:
            continue
        new_values, log, broken = interp.run_validate(model, info.name, stamp, values, env)
        validations[info.name] = log
        violations += broken
        if new_values != values:
            after[info.name] = new_values
    return Explanation(
        stamp=stamp.name,
        source=str(stamp.decl.loc),
        attribute=stamp.attribute,
        fields=fields,
        launch=launch_log,
        slots=slots,
        gates=gates,
        validations=validations,
        violations=violations,
        after_validation=after,
        notes=list(notes or []),
    )


def _json_value(value: Any) -> Any:
    return None if value is None else ("<not given>" if value is interp.UNKNOWN else value)


def to_json(ex: Explanation) -> dict[str, Any]:
    fields = {}
    for name, f in ex.fields.items():
        fields[name] = {
            "value": _json_value(f.value),
            "tier": f.tier,
            "source": f.source,
            "tiers": [
                {"tier": t.tier, "text": t.text, "source": t.source, "status": t.status, "reason": t.reason}
                for t in f.tiers
            ],
        }
    return {
        "stamp": ex.stamp,
        "source": ex.source,
        "attribute": f"runner.{ex.attribute}",
        "fields": fields,
        "slots": {k: _json_value(v) for k, v in ex.slots.items()},
        "gates": {
            slot: [
                msgspec.to_builtins({**msgspec.structs.asdict(g), "value": _json_value(g.value)})
                for g in outs
            ]
            for slot, outs in ex.gates.items()
        },
        "launch": [msgspec.to_builtins(o) for o in ex.launch],
        "validations": {k: [msgspec.to_builtins(o) for o in v] for k, v in ex.validations.items()},
        "after_validation": {
            k: {f: _json_value(v) for f, v in vals.items()} for k, vals in ex.after_validation.items()
        },
        "violations": [msgspec.to_builtins(v) for v in ex.violations],
        "notes": ex.notes,
    }


_MARK = {"won": "✓", "lost": "✗", "not reached": "·", "unknown": "?"}


def to_text(ex: Explanation) -> str:
    out = [f"{ex.stamp}  (stamp at {ex.source}, on runner.{ex.attribute})", ""]
    out += [f"note: {note}" for note in ex.notes] + ([""] if ex.notes else [])
    applied = [o for o in ex.launch if o.status in ("applied", "violated") and o.kind != "local"]
    if applied:
        out.append("Launch (process-wide, before any runner):")
        for o in applied:
            out.append(f"  {o.text}  [{o.status}]  {o.source}" + (f"\n      {o.reason}" if o.reason else ""))
        out.append("")
    for slot, outcomes in ex.gates.items():
        value = interp.show_value(ex.slots.get(slot))
        out.append(f"slot {slot} = {value}")
        if not outcomes:
            out.append("  given directly")
        for g in outcomes:
            out.append(f"  gate {g.gate} {g.status}: {g.reason}  ({g.source})")
        out.append("")
    for name, f in ex.fields.items():
        out.append(f"{name} = {interp.show_value(f.value)}")
        if f.tier is not None:
            won = next((t for t in f.tiers if t.status in ("won", "unknown")), None)
            out.append(f"  Selected by: {won.text}  [{won.reason}]  {won.source}" if won else "")
        for t in f.tiers:
            out.append(f"    {_MARK.get(t.status, ' ')} {t.text:<48} {t.status}: {t.reason}")
        out.append("")
    for consumer, log in ex.validations.items():
        out.append(f"validate {consumer}:")
        shown = [o for o in log if o.status in ("applied", "violated", "unknown")]
        if not shown:
            out.append("  every check passes; no fallback applies")
        for o in shown:
            out.append(f"  {o.text}  [{o.status}]  {o.source}" + (f"\n      {o.reason}" if o.reason else ""))
        if consumer in ex.after_validation:
            vals = ", ".join(f"{k}={interp.show_value(v)}" for k, v in ex.after_validation[consumer].items())
            out.append(f"  {consumer} runs with: {vals}")
        out.append("")
    if ex.violations:
        out.append("errors:")
        for v in ex.violations:
            out.append(f"  {v.source}: {v.message}  (in {v.rule})")
    return "\n".join(out).rstrip() + "\n"
