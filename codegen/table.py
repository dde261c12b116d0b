"""Decision tables: a stamp's behaviour over its whole finite input domain, and diffs between two versions.

The domain is abstracted as for the generated tests (codegen/domains.py): values the rules never single out
behave alike, so each input is enumerated as one representative per class — unset (if optional), every
member the rules name, `other` for the rest of an enum, and ints grouped by the comparisons the rules make
(`a|b`). Values copied from an input are shown by the input's name, which lets rows that differ only in
such a value merge; merged columns show `*` (any) or `set` (any but unset).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import msgspec

from stampgen.codegen import domains
from stampgen.codegen import interpreter as interp
from stampgen.codegen.model import Model, StampInfo

OTHER = "other"
ANY = "*"
SET = "set"


class Input(msgspec.Struct, frozen=True):
    name: str
    kind: str  # enum / int / bool
    classes: tuple[Any, ...]  # the label of each class: a value, None (unset), OTHER, or "a|b" for ints
    representatives: tuple[Any, ...]  # the concrete value evaluated for each class
    covers: tuple[tuple[Any, ...], ...]  # every value of each class
    optional: bool


class Row(msgspec.Struct, frozen=True):
    inputs: tuple[Any, ...]  # a class per input, or ANY / SET after merging
    outputs: tuple[Any, ...]


class Table(msgspec.Struct, frozen=True):
    stamp: str
    inputs: tuple[Input, ...]
    outputs: tuple[str, ...]
    rows: tuple[Row, ...]


def _label(kind: str, cover: tuple[Any, ...]) -> Any:
    if cover == (None,):
        return None
    if len(cover) == 1:
        return cover[0]
    return OTHER if kind == "enum" else "|".join(interp.show_value(v) for v in cover)


def _make_input(name: str, kind: str, covers: list[tuple[Any, ...]]) -> Input:
    return Input(
        name,
        kind,
        tuple(_label(kind, c) for c in covers),
        tuple(c[0] for c in covers),
        tuple(covers),
        (None,) in covers,
    )


def stamp_inputs(model: Model, stamp: StampInfo, fields: tuple[str, ...] | None = None) -> tuple[Input, ...]:
    """The abstract inputs of a stamp's resolver, or of the given fields (and the fields they read)."""
    whole = domains.stamp_domain(model, stamp, force_abstract=True).inputs
    keep = None if fields is None else set().union(*(interp.field_inputs(stamp, f) for f in fields))
    return tuple(
        _make_input(d.name, d.kind, [d.cover(i) for i in range(len(d.values))])
        for d in whole
        if keep is None or d.name in keep
    )


def short_names(names: list[str]) -> list[str]:
    """Column names: the last part of a dotted name when that is unique, else the whole name."""
    tails = [n.rsplit(".", 1)[-1] for n in names]
    return [t if tails.count(t) == 1 else n for n, t in zip(names, tails)]


def _display(outcome: interp.FieldOutcome) -> str:
    if outcome.origin is not None:
        return f"← {outcome.origin}"
    return interp.show_value(outcome.value)


# Past this many abstract rows a stamp gets one table per field (each over the inputs that field reads).
MAX_TABLE_ROWS = 100_000


class TableTooLarge(ValueError):
    """Even one field's table is too large to enumerate."""


def size(inputs: tuple[Input, ...]) -> int:
    return math.prod(len(i.classes) for i in inputs)


def stamp_table(
    model: Model, stamp_name: str, fields: tuple[str, ...] | None = None, max_rows: int = MAX_TABLE_ROWS
) -> Table:
    """The decision table of a stamp (or of some of its fields) over the abstract input domain; raises
    TableTooLarge past `max_rows` abstract rows (before merging)."""
    stamp = model.stamps[stamp_name]
    inputs = stamp_inputs(model, stamp, fields)
    shown = fields or tuple(f.name for f in stamp.fields)
    if size(inputs) > max_rows:
        raise TableTooLarge(f"{stamp_name} {', '.join(shown)}: {size(inputs):,} rows")
    rows = []
    # every input the shown fields read is set below; a field they do not show may read other leaves
    read = set().union(*(interp.field_inputs(stamp, f.name) for f in stamp.fields))
    base_env = {n: model.leaves[n].default for n in read if n in model.leaves}
    for combo in itertools.product(*(range(len(i.classes)) for i in inputs)):
        env = dict(base_env)
        env.update({inp.name: inp.representatives[k] for inp, k in zip(inputs, combo)})
        resolved = interp.resolve_stamp(model, stamp, env, explain=False)
        outputs = tuple((_display(resolved[f]), resolved[f].tier, resolved[f].source) for f in shown)
        rows.append(Row(tuple(inp.classes[k] for inp, k in zip(inputs, combo)), outputs))
    merged = merge_rows(rows, inputs)
    label = stamp.name if fields is None else f"{stamp.name}.{fields[0]}"
    return Table(label, inputs, shown, merged)


def stamp_tables(model: Model, stamp_name: str) -> list[Table]:
    """One table for the whole stamp, or one per field when the whole one would be too large."""
    stamp = model.stamps[stamp_name]
    if size(stamp_inputs(model, stamp)) <= MAX_TABLE_ROWS:
        return [stamp_table(model, stamp_name)]
    return [stamp_table(model, stamp_name, (f.name,)) for f in stamp.fields]


def merge_rows(rows: list[Row], inputs: tuple[Input, ...]) -> tuple[Row, ...]:
    """Merge rows that differ in one input only and agree on every output, until nothing merges."""
    current = list(rows)
    changed = True
    while changed:
        changed = False
        for col, inp in enumerate(inputs):
            full = set(map(_key, inp.classes))
            set_only = {_key(c) for c in inp.classes if c is not None}
            groups: dict[tuple, list[Row]] = {}
            for row in current:
                key = (row.inputs[:col], row.inputs[col + 1 :], row.outputs)
                groups.setdefault(_hashable(key), []).append(row)
            merged: list[Row] = []
            for group in groups.values():
                present = {_key(r.inputs[col]) for r in group}
                if len(group) > 1 and present == full:
                    merged.append(_with(group[0], col, ANY))
                    changed = True
                elif inp.optional and len(group) > 1 and set_only <= present and len(set_only) > 1:
                    rest = [r for r in group if r.inputs[col] is not None and _key(r.inputs[col]) in set_only]
                    merged.append(_with(rest[0], col, SET))
                    merged += [r for r in group if r not in rest]
                    changed = True
                else:
                    merged += group
            current = merged
    return tuple(sorted(current, key=lambda r: tuple(map(_sort_key, r.inputs))))


def _key(value: Any) -> Any:
    return ("__none__",) if value is None else value


def _hashable(key: Any) -> Any:
    return repr(key)


def _with(row: Row, col: int, value: Any) -> Row:
    return Row(row.inputs[:col] + (value,) + row.inputs[col + 1 :], row.outputs)


def _sort_key(value: Any) -> tuple[int, str]:
    if value is None:
        return (0, "")
    if value in (ANY, SET):
        return (3, str(value))
    if value == OTHER:
        return (2, "")
    return (1, f"{value:>12}" if isinstance(value, int) else str(value))


def _cell(value: Any) -> str:
    return "unset" if value is None else interp.show_value(value) if not isinstance(value, str) else value


def to_markdown(table: Table) -> str:
    head = [i.name for i in table.inputs] + [f"→ {o}" for o in table.outputs]
    lines = [
        f"Decision table of `{table.stamp}` ({len(table.rows)} rows; `*` any value, `set` any but unset, "
        f"`other` any member the rules do not name, `← x` the value of x)",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for row in table.rows:
        cells = [_cell(v) for v in row.inputs]
        cells += [f"{value} ({tier})" for value, tier, _ in row.outputs]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_json(table: Table) -> dict[str, Any]:
    return {
        "stamp": table.stamp,
        "inputs": [{"name": i.name, "classes": [_cell(c) for c in i.classes]} for i in table.inputs],
        "rows": [
            {
                "inputs": {i.name: _cell(v) for i, v in zip(table.inputs, row.inputs)},
                "fields": {
                    name: {"value": value, "tier": tier, "source": source}
                    for name, (value, tier, source) in zip(table.outputs, row.outputs)
                },
            }
            for row in table.rows
        ],
    }


# --------------------------------------------------------------------------------------------- behaviour diff


class Change(msgspec.Struct, frozen=True):
    stamp: str
    inputs: dict[str, Any]
    field: str
    old: str
    new: str
    old_rule: str | None
    new_rule: str | None


def diff_models(old: Model | None, new: Model | None) -> list[Change]:
    """Input rows (abstracted, merged) whose decision changed between two models, stamp by stamp."""
    changes: list[Change] = []
    names = sorted(set(old.stamps if old else ()) | set(new.stamps if new else ()))
    for name in names:
        a = old.stamps.get(name) if old else None
        b = new.stamps.get(name) if new else None
        if a is None or b is None:  # a stamp added or removed: every field changes as a whole
            present = b if a is None else a
            for f in present.fields:
                changes.append(
                    Change(
                        name,
                        {},
                        f.name,
                        "(no stamp)" if a is None else "(as in the old table)",
                        "(no stamp)" if b is None else "(as in the new table)",
                        None if a is None else str(a.decl.loc),
                        None if b is None else str(b.decl.loc),
                    )
                )
            continue
        changes += _diff_stamp(old, a, new, b)
    return changes


def _diff_stamp(old: Model, a: StampInfo, new: Model, b: StampInfo) -> list[Change]:
    """Changed rows over the joint inputs, or field by field when the joint domain is too large."""
    kept = {f.name for f in b.fields}
    changes = [
        Change(b.name, {}, f.name, "(field)", "(no field)", str(f.decl.loc), None)
        for f in a.fields
        if f.name not in kept
    ]
    whole = _diff_inputs(old, a, new, b, None)
    if size(whole) <= MAX_TABLE_ROWS:
        return changes + _diff_fields(old, a, new, b, [f.name for f in b.fields], whole)
    for f in b.fields:
        inputs = _diff_inputs(old, a, new, b, f.name)
        if size(inputs) > MAX_TABLE_ROWS:
            raise TableTooLarge(f"{b.name}.{f.name}: {size(inputs):,} rows")
        changes += _diff_fields(old, a, new, b, [f.name], inputs)
    return changes


def _diff_inputs(old: Model, a: StampInfo, new: Model, b: StampInfo, field: str | None) -> tuple[Input, ...]:
    """The inputs of either version, each split into the classes both versions agree behave alike."""
    versions: dict[str, list[Input]] = {}
    for model, stamp in ((old, a), (new, b)):
        if field is not None and field not in {f.name for f in stamp.fields}:
            continue
        for inp in stamp_inputs(model, stamp, None if field is None else (field,)):
            versions.setdefault(inp.name, []).append(inp)
    return tuple(_refine(name, ins) for name, ins in versions.items())


def _refine(name: str, versions: list[Input]) -> Input:
    """The common refinement of each version's classes (values only one version has keep their class)."""
    covers = list(versions[0].covers)
    for other in versions[1:]:
        mine = {v for c in covers for v in c}
        theirs = {v for c in other.covers for v in c}
        covers = (
            [tuple(v for v in c if v in d) for c in covers for d in other.covers]
            + [tuple(v for v in c if v not in theirs) for c in covers]
            + [tuple(v for v in d if v not in mine) for d in other.covers]
        )
        covers = [c for c in covers if c]
    return _make_input(name, versions[0].kind, covers)


def _diff_fields(
    old: Model, a: StampInfo, new: Model, b: StampInfo, fields: list[str], inputs: tuple[Input, ...]
) -> list[Change]:
    rows = []
    env_a, env_b = interp.config_env(old, {}), interp.config_env(new, {})
    for combo in itertools.product(*(range(len(i.classes)) for i in inputs)):
        given = {inp.name: inp.representatives[k] for inp, k in zip(inputs, combo)}
        ra = interp.resolve_stamp(old, a, {**env_a, **given})
        rb = interp.resolve_stamp(new, b, {**env_b, **given})
        outs = []
        for f in fields:
            fa, fb = ra.get(f), rb[f]
            old_key = (fa.value, fa.tier) if fa else None
            if old_key == (fb.value, fb.tier):
                outs.append(None)
            else:
                outs.append(
                    (
                        _display(fa) if fa else "(no field)",
                        _display(fb),
                        f"{fa.tier} {fa.source}" if fa else None,
                        f"{fb.tier} {fb.source}",
                    )
                )
        if any(o is not None for o in outs):
            rows.append(Row(tuple(inp.classes[k] for inp, k in zip(inputs, combo)), tuple(outs)))
    # merge only over rows that changed; unchanged rows are not shown
    merged = merge_rows(rows, inputs) if rows else ()
    changes = []
    for row in merged:
        for f, out in zip(fields, row.outputs):
            if out is None:
                continue
            old_v, new_v, old_rule, new_rule = out
            changes.append(
                Change(
                    b.name,
                    {i.name: _cell(v) for i, v in zip(inputs, row.inputs)},
                    f,
                    old_v,
                    new_v,
                    old_rule,
                    new_rule,
                )
            )
    return changes


def changes_to_markdown(changes: list[Change]) -> str:
    if not changes:
        return "No behaviour change.\n"
    lines = [f"{len(changes)} decision(s) changed:", ""]
    by_stamp: dict[str, list[Change]] = {}
    for c in changes:
        by_stamp.setdefault(c.stamp, []).append(c)
    for stamp, items in by_stamp.items():
        cols = list(items[0].inputs)
        lines += [
            f"### `{stamp}`",
            "",
            "| " + " | ".join(cols + ["field", "old → new", "deciding rule (new)"]) + " |",
        ]
        lines.append("|" + "---|" * (len(cols) + 3))
        for c in items:
            cells = [str(c.inputs.get(k, "")) for k in cols]
            lines.append("| " + " | ".join(cells + [c.field, f"{c.old} → {c.new}", str(c.new_rule)]) + " |")
        lines.append("")
    return "\n".join(lines)


def changes_to_text(changes: list[Change]) -> str:
    if not changes:
        return "no behaviour change\n"
    out = []
    for c in changes:
        when = ", ".join(f"{k}={v}" for k, v in c.inputs.items() if v != ANY) or "every input"
        out.append(
            f"{c.stamp}.{c.field}: {c.old} → {c.new}  when {when}\n    rule: {c.old_rule} → {c.new_rule}"
        )
    return "\n".join(out) + "\n"
