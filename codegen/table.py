"""Decision tables: a stamp's behaviour over its whole finite input domain (the behaviour diff between two
versions of the rules, which merges its rows the same way, is codegen/diff.py).

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
