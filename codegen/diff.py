"""`stampgen diff`: what two versions of the rules decide differently, rule by rule, input row by input row.

Every rule kind is compared by running the interpreter on both versions over that rule's finite input domain,
abstracted as for `stampgen table` (codegen/domains.py: one representative per class of values the rules treat
alike). Each version's classes are computed from its own rules and the two are refined against each other, so
a class the new rules split (a new literal, a new comparison, a new enum member) is seen. A config leaf whose
default changed gets one more class, `(default)`: not given by the operator, so each version reads its own
default.

The domain is explored depth first with the interpreter's three-valued logic: an input not assigned yet is
UNKNOWN, and a branch stops as soon as both versions decide it. Where they agree nothing below is enumerated;
where they differ the row is kept with `*` for every input still unassigned, and rows are merged afterwards as
the decision tables merge theirs (table.merge_rows). Which input to assign next is what the first undecided
tier, condition or statement reads, so a large domain is walked only where a decision depends on it.

Launch and validate blocks are compared statement by statement: the two statement lists are aligned, and only
the statements that differ, or that read what a differing statement writes, are evaluated (with what they read
from earlier statements). Guards, parity rules and declarations are compared structurally. Positions, comments
and layout never count: a change that only moves text reports nothing.
"""

from __future__ import annotations

import difflib
import enum
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, NamedTuple

import msgspec

from stampgen.codegen import domains, ir, table
from stampgen.codegen import interpreter as interp
from stampgen.codegen.model import EnumT, LeafInfo, Model, Scope, StampInfo, Type, domain, type_name

NO_CHANGE = "no decision changed"
BASE_ENV = "STAMPGEN_DIFF_BASE"
# A search that needs more nodes than this is refused (exit 2) rather than left running.
MAX_NODES = 200_000
DEFAULT = "(default)"  # the class label of "not given" for a config leaf whose default changed
ABSENT = "—"


class Kind(str, enum.Enum):
    ENUM = "enum"
    CONFIG = "config"
    FACTS = "facts"
    LAUNCH = "launch"
    AUTO = "auto"
    STAMP = "stamp"
    VALIDATE = "validate"
    GUARD = "guard"
    PARITY = "parity"


class Side(msgspec.Struct, frozen=True):
    """What one version does in a changed row, and the rule that decides it."""

    value: str  # `triton`, `← mamba.x`, `raises "..."`, `passes`, `declines`, `—` (absent)
    rule: str | None = None  # the deciding rule, briefly: a tier label, `forbid`, `set`, a false condition
    at: str | None = None  # its position, PATH:LINE:COL


class Change(msgspec.Struct, frozen=True):
    kind: Kind
    rule: str  # the rule's name: a stamp, gate, launch or validate block, enum, leaf, consumer, parity rule
    subject: str  # what in it changed: a field, `value`, `forbid`, `sets LEAF`, `member x`, `default`, ...
    inputs: dict[str, str]  # the input row (classes; `*` any value); empty for a structural change
    old: Side
    new: Side

    @property
    def title(self) -> str:
        if self.kind is Kind.STAMP and self.inputs:
            return f"{self.rule}.{self.subject}"
        head = f"{self.kind.value} {self.rule}"
        return f"{head}: {self.subject}" if self.subject else head


class DiffError(ValueError):
    """The two sides cannot be compared as asked (a usage error: exit 2)."""


# --------------------------------------------------------------------------------------------- entry


def diff_models(old: Model | None, new: Model | None) -> list[Change]:
    """Every change between two checked models (None: the file does not exist on that side)."""
    a, b = old or _empty(), new or _empty()
    changes: list[Change] = []
    _diff_enums(a, b, changes)
    renames = _diff_leaves(a, b, changes)
    _diff_launch(a, b, renames, changes)
    _diff_gates(a, b, renames, changes)
    _diff_stamps(a, b, renames, changes)
    _diff_validates(a, b, renames, changes)
    _diff_guards(a, b, changes)
    _diff_parities(a, b, changes)
    return changes


def _empty() -> Model:
    return Model("", {}, {}, {}, {}, {}, (), (), (), (), ir.RulesFile("", ()))


def _names(a: Iterable[str], b: Iterable[str]) -> list[str]:
    """The new version's names in its order, then those only the old one has."""
    seen = dict.fromkeys(b)
    return [*seen, *(n for n in a if n not in seen)]


def _presence(kind: Kind, name: str, old: ir.Loc | None, new: ir.Loc | None, what: str = "") -> Change:
    """A rule present on one side only."""
    shown = what or kind.value
    if old is None:
        return Change(kind, name, "added", {}, Side(ABSENT), Side(shown, None, _at(new)))
    return Change(kind, name, "removed", {}, Side(shown, None, _at(old)), Side(ABSENT))


def _at(loc: ir.Loc | None) -> str | None:
    return None if loc is None else str(loc)


# Every position as msgspec encodes an ir.Loc (its fields in order; strings and ints): blanked, what remains
# of a node's encoding is what it says. Built from Loc itself, so that a field added there is still matched.
_STRING, _INT = rb'"(?:[^"\\]|\\.)*"', rb"-?\d+"
_LOC = re.compile(
    rb"\{"
    + b",".join(f'"{f}":'.encode() + (_STRING if f == "path" else _INT) for f in ir.Loc.__struct_fields__)
    + rb"\}"
)
_LOG = re.compile(rb'"log":(?:null|' + _STRING + rb"),?")


def _key(node: Any, *, log: bool = True) -> bytes:
    """What a node says, without positions (and without the text it logs when log=False): two nodes with
    equal keys are the same rule. Compared often (every statement, field and gate of both versions), so
    it is msgspec's encoding with the positions blanked, not a walk in Python."""
    encoded = _LOC.sub(b"0", msgspec.json.encode(node))
    return encoded if log else _LOG.sub(b"", encoded)


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --------------------------------------------------------------------------------------------- declarations


def _enum_decls(model: Model) -> dict[str, ir.EnumDecl]:
    return {d.name.value: d for d in model.file.decls if isinstance(d, ir.EnumDecl)}


def _diff_enums(old: Model, new: Model, changes: list[Change]) -> None:
    decls_a, decls_b = _enum_decls(old), _enum_decls(new)
    for name in _names(old.enums, new.enums):
        a, b = old.enums.get(name), new.enums.get(name)
        da, db = decls_a.get(name), decls_b.get(name)
        if a is None or b is None:
            present = a or b
            what = "{ " + " ".join(present.members) + " }" if present else ""
            changes.append(_presence(Kind.ENUM, name, da.loc if da else None, db.loc if db else None, what))
            continue
        # a name one version does not know becomes its catch-all member (open), or is refused (closed)
        meaning_a = f"{a.open_member} (catch-all)" if a.open_member else f"{ABSENT} (not accepted)"
        meaning_b = f"{b.open_member} (catch-all)" if b.open_member else f"{ABSENT} (not accepted)"
        locs_a = {m.value: m.loc for m in da.members} if da else {}
        locs_b = {m.value: m.loc for m in db.members} if db else {}
        for m in b.members:
            if m not in a.members:
                changes.append(
                    Change(
                        Kind.ENUM, name, f"member {m}", {}, Side(meaning_a), Side(m, None, _at(locs_b.get(m)))
                    )
                )
        for m in a.members:
            if m not in b.members:
                changes.append(
                    Change(
                        Kind.ENUM, name, f"member {m}", {}, Side(m, None, _at(locs_a.get(m))), Side(meaning_b)
                    )
                )
        if a.open_member != b.open_member:
            shown_a = f"open({a.open_member})" if a.open_member else "closed"
            shown_b = f"open({b.open_member})" if b.open_member else "closed"
            changes.append(
                Change(
                    Kind.ENUM,
                    name,
                    "open",
                    {},
                    Side(shown_a, None, _at(da.loc if da else None)),
                    Side(shown_b, None, _at(db.loc if db else None)),
                )
            )


def _leaf_kind(leaf: LeafInfo) -> Kind:
    return Kind.CONFIG if leaf.scope == Scope.PROCESS else Kind.FACTS


def _type_sig(t: Type) -> list[Any]:
    """A type as what it admits: its name, its values, its catch-all."""
    return [type_name(t), list(domain(t)), t.open_member if isinstance(t, EnumT) else None]


def _leaf_sig(leaf: LeafInfo) -> list[Any]:
    return [leaf.scope, _type_sig(leaf.type), leaf.optional, leaf.default]


def _type_text(leaf: LeafInfo) -> str:
    return type_name(leaf.type) + ("?" if leaf.optional else "")


def _diff_leaves(old: Model, new: Model, changes: list[Change]) -> dict[str, str]:
    """Config leaves and facts added, removed, renamed or retyped; returns the renames (old name → new).

    A leaf removed and one added in the same block, with the same type, optionality and default, and no
    other candidate either way, is a rename: the rules that read it are then compared as reading one input.
    """
    removed = [n for n in old.leaves if n not in new.leaves]
    added = [n for n in new.leaves if n not in old.leaves]

    def candidates(name: str, model: Model, pool: list[str], other: Model) -> list[str]:
        leaf = model.leaves[name]
        return [
            n
            for n in pool
            if other.leaves[n].namespace == leaf.namespace
            and _same(_leaf_sig(other.leaves[n]), _leaf_sig(leaf))
        ]

    renames: dict[str, str] = {}
    for name in removed:
        found = candidates(name, old, added, new)
        if len(found) == 1 and candidates(found[0], new, removed, old) == [name]:
            renames[name] = found[0]
    for a_name, b_name in renames.items():
        a, b = old.leaves[a_name], new.leaves[b_name]
        changes.append(
            Change(
                _leaf_kind(b),
                b_name,
                "renamed",
                {},
                Side(a_name, None, _at(a.loc)),
                Side(b_name, None, _at(b.loc)),
            )
        )
    for name in removed:
        if name not in renames:
            leaf = old.leaves[name]
            changes.append(_presence(_leaf_kind(leaf), name, leaf.loc, None, _type_text(leaf)))
    for name in added:
        if name not in renames.values():
            leaf = new.leaves[name]
            changes.append(_presence(_leaf_kind(leaf), name, None, leaf.loc, _type_text(leaf)))
    pairs = [(n, n) for n in new.leaves if n in old.leaves] + list(renames.items())
    for a_name, b_name in pairs:
        a, b = old.leaves[a_name], new.leaves[b_name]
        kind, at_a, at_b = _leaf_kind(b), _at(a.loc), _at(b.loc)
        # an enum's members are the enum's change, reported once above
        same_type = type_name(a.type) == type_name(b.type) and (
            isinstance(a.type, EnumT) or _same(_type_sig(a.type), _type_sig(b.type))
        )
        if not same_type or a.optional != b.optional:
            changes.append(
                Change(
                    kind, b_name, "type", {}, Side(_type_text(a), None, at_a), Side(_type_text(b), None, at_b)
                )
            )
        if a.default != b.default:
            changes.append(
                Change(
                    kind,
                    b_name,
                    "default",
                    {},
                    Side(interp.show_value(a.default) if a.default is not None else "none", None, at_a),
                    Side(interp.show_value(b.default) if b.default is not None else "none", None, at_b),
                )
            )
    return renames


# --------------------------------------------------------------------------------------------- input domains


class _Invalid:
    """A value one version refuses (not a member of its closed enum, outside its int domain, unset where it
    may not be)."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Any = _Invalid()


class _Spec(NamedTuple):
    """One version's view of an input."""

    type: Type
    optional: bool
    default: Any  # a config leaf's default (None: none); what "not given" means
    config: bool  # a config leaf (a fact or a slot has no default)
    order: tuple[int, int] = (1 << 30, 0)  # where it is declared: inputs are shown in declaration order
    at: str | None = None  # its declaration, the rule that refuses a value outside its type


@dataclass(frozen=True)
class _Input:
    """One input of a search: its classes, and the value each version evaluates for each class."""

    name: str  # as the new version says it (a renamed leaf goes by its new name)
    kind: str
    keys: tuple[str | None, str | None]  # its name in each version's environment (None: not read there)
    labels: tuple[Any, ...]  # per class: a value, None (unset), `other`, `a|b`, or DEFAULT
    values: tuple[tuple[Any, Any], ...]  # per class: the value each version evaluates (or INVALID)
    raw: tuple[Any, ...]  # per class: the value a caller passes (DEFAULT for the default class)
    covers: tuple[tuple[Any, ...], ...]
    optional: bool
    declared: tuple[Side, Side]  # each version's declaration of it: what refuses a value it does not admit

    def as_table_input(self) -> table.Input:
        return table.Input(self.name, self.kind, self.labels, self.raw, self.covers, self.optional)


def _leaf_spec(leaf: LeafInfo) -> _Spec:
    order = (leaf.loc.line, leaf.loc.col)
    optional = leaf.optional and not leaf.is_fact
    return _Spec(leaf.type, optional, leaf.default, not leaf.is_fact, order, str(leaf.loc))


def _side_value(spec: _Spec, value: Any) -> Any:
    """The value a version evaluates for what a caller passes: coerced as the generated code does."""
    if value is DEFAULT:
        return spec.default
    if value is None:
        return None if spec.optional else INVALID
    try:
        return interp.coerce(spec.type, value)
    except ValueError:
        return INVALID


def _vkey(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)  # True and 1 are different values here


def _covers(
    specs: Mapping[str, _Spec], mentions: domains._Mentions
) -> dict[str, tuple[tuple[Any, ...], ...]]:
    """Each input's abstract classes in one version (domains.make_domain, always abstract)."""
    for name, spec in specs.items():
        if spec.config and spec.default is not None:
            mentions.set_value(name, spec.default)
    made = domains.make_domain(
        [(n, s.type, s.optional) for n, s in specs.items()], mentions, force_abstract=True
    )
    return {d.name: tuple(d.cover(i) for i in range(len(d.values))) for d in made.inputs}


def _joint_inputs(
    old: Mapping[str, _Spec],
    new: Mapping[str, _Spec],
    mentions: tuple[domains._Mentions, domains._Mentions],
    renames: Mapping[str, str],
) -> list[_Input]:
    """The inputs either version reads, each split into the classes both versions treat alike."""
    covers = (_covers(old, mentions[0]), _covers(new, mentions[1]))
    back = {b: a for a, b in renames.items()}
    names: dict[str, tuple[str | None, str | None]] = {}  # shown name -> (old key, new key)
    for key in new:
        old_key = back.get(key, key)
        names[key] = (old_key if old_key in old else None, key)
    for key in old:
        shown = renames.get(key, key)
        if shown not in names:
            names[shown] = (key, None)

    def position(keys: tuple[str | None, str | None]) -> tuple[int, int]:
        spec = new.get(keys[1]) if keys[1] else old.get(keys[0]) if keys[0] else None
        return spec.order if spec is not None else (1 << 30, 0)

    inputs = []
    for shown, keys in sorted(names.items(), key=lambda item: position(item[1])):  # a stable sort
        specs = (old.get(keys[0]) if keys[0] else None, new.get(keys[1]) if keys[1] else None)
        index: list[dict[tuple[str, Any], int]] = [{}, {}]
        for s, side_key in enumerate(keys):
            if side_key is not None:
                index[s] = {_vkey(v): i for i, cover in enumerate(covers[s][side_key]) for v in cover}
        universe: dict[tuple[str, Any], Any] = {}
        for spec in (specs[1], specs[0]):
            if spec is not None:
                for v in ((None,) if spec.optional else ()) + tuple(domain(spec.type)):
                    universe.setdefault(_vkey(v), v)
        # values alike in both versions share a class; a value a version evaluates as another (its open
        # enum's catch-all) is not alike the values it copies through, so it gets a class of its own
        groups: dict[tuple[Any, ...], list[Any]] = {}
        for v in universe.values():
            sig: list[Any] = []
            for s, spec in enumerate(specs):
                w = None if spec is None else _side_value(spec, v)
                sig += (
                    [0, None] if spec is None else [index[s].get(_vkey(w), -1), None if w == v else _vkey(w)]
                )
            groups.setdefault(tuple(sig), []).append(v)
        kind = domains.kind_of((specs[1] or specs[0]).type)  # type: ignore[union-attr]
        classes = [tuple(g) for g in groups.values()]
        labels: list[Any] = [table._label(kind, c) for c in classes]
        raw: list[Any] = [c[0] for c in classes]
        values = [tuple(INVALID if s is None else _side_value(s, c[0]) for s in specs) for c in classes]
        optional = any(s is not None and s.optional for s in specs)
        a, b = specs
        if a is not None and b is not None and a.config and b.config and a.default != b.default:
            # not given: each version reads its own default (a class of its own, never merged into `set`)
            classes.append(())
            labels.append(DEFAULT)
            raw.append(DEFAULT)
            values.append((a.default, b.default))
            optional = False
        declared = tuple(
            Side(ABSENT)
            if spec is None
            else Side("", f"{type_name(spec.type)}{'?' * spec.optional}", spec.at)
            for spec in specs
        )
        inputs.append(
            _Input(
                shown,
                kind,
                keys,
                tuple(labels),
                tuple((v[0], v[1]) for v in values),
                tuple(raw),
                tuple(classes),
                optional,
                (declared[0], declared[1]),
            )
        )
    return inputs


def _cell(label: Any) -> str:
    return interp.show_value(label)


# --------------------------------------------------------------------------------------------- the search


class _Undecided:
    def __repr__(self) -> str:
        return "UNDECIDED"


_UNDECIDED: Any = _Undecided()


class _Slot(NamedTuple):
    """One output of one version for the inputs assigned so far."""

    key: Any  # compared between the versions; _UNDECIDED until the assigned inputs decide it
    shown: Side | None  # None until the assigned inputs decide what to show


# (version, environment, what the caller passed for each assigned input) -> (slots, the input to assign next)
Evaluate = Callable[[int, dict[str, Any], dict[str, Any]], tuple[list[_Slot], "str | None"]]


def _search(
    label: str, inputs: list[_Input], slots: int, evaluate: Evaluate, *, same_rules: bool = False
) -> list[table.Row]:
    """The rows (with `*` for inputs left unassigned) where the versions' outputs differ, depth first.

    same_rules: both versions evaluate the same rules (only what their inputs admit changed: an enum member,
    a default, a domain). Their outputs can then differ only where some input takes a class the versions
    evaluate differently, so the search covers just that: for each such input in turn, its differing
    classes, with the inputs before it held to the classes both evaluate alike.
    """
    index = [{inp.keys[s]: i for i, inp in enumerate(inputs) if inp.keys[s] is not None} for s in (0, 1)]
    assigned: dict[int, int] = {}
    allowed = [list(range(len(inp.labels))) for inp in inputs]
    rows: list[table.Row] = []
    nodes = 0

    def cell(i: int) -> Any:  # a cell the row stands for: its class, `*`, or the classes still allowed
        if i in assigned:
            return inputs[i].labels[assigned[i]]
        return table.ANY if len(allowed[i]) == len(inputs[i].labels) else frozenset(allowed[i])

    def run(side: int) -> tuple[list[_Slot], str | None]:
        env: dict[str, Any] = {}
        raw: dict[str, Any] = {}
        for i, k in assigned.items():
            key = inputs[i].keys[side]
            if key is None:
                continue
            value = inputs[i].values[k][side]
            if value is INVALID:  # this version does not admit the value: its declaration says why
                declared = inputs[i].declared[side]
                text = f"refused ({inputs[i].name}={_cell(inputs[i].labels[k])})"
                shown = Side(text, f"{inputs[i].name}: {declared.rule}", declared.at)
                return [_Slot(("refused", key), shown)] * slots, None
            env[key] = value
            raw[key] = inputs[i].raw[k]
        return evaluate(side, env, raw)

    def decided(out: list[_Slot]) -> bool:
        return all(x.key is not _UNDECIDED and x.shown is not None for x in out)

    def visit(known: tuple[list[_Slot] | None, list[_Slot] | None] = (None, None)) -> None:
        """`known`: a version's outcome the assignment so far decides (it holds below, as Kleene logic does:
        more inputs never change a decided value), so it is not run again."""
        nonlocal nodes
        nodes += 1
        if nodes > MAX_NODES:
            raise table.TableTooLarge(f"{label}: more than {MAX_NODES:,} rows")
        (a, need_a) = (known[0], None) if known[0] is not None else run(0)
        (b, need_b) = (known[1], None) if known[1] is not None else run(1)
        if all(x.key is not _UNDECIDED for x in a + b):
            differ = [x.key != y.key for x, y in zip(a, b)]
            if not any(differ):
                return  # the versions agree on every completion of this row
            if all(x.shown is not None and y.shown is not None for x, y, d in zip(a, b, differ) if d):
                cells = tuple(cell(i) for i in range(len(inputs)))
                outputs = tuple((x.shown, y.shown) if d else None for x, y, d in zip(a, b, differ))
                rows.append(table.Row(cells, outputs))
                return
        chosen = None
        for side, need in ((0, need_a), (1, need_b)):
            if need is not None and index[side].get(need) is not None and index[side][need] not in assigned:
                chosen = index[side][need]
                break
        if chosen is None:
            chosen = next((i for i in range(len(inputs)) if i not in assigned), None)
        if chosen is None:
            # every input assigned and still undecided: the interpreter reads something this module missed
            raise RuntimeError(f"{label}: a decision that no input decides")
        below = (a if decided(a) else None, b if decided(b) else None)
        for k in allowed[chosen]:
            assigned[chosen] = k
            visit(below)
        del assigned[chosen]

    if not same_rules or any(None in inp.keys for inp in inputs):
        visit()
        return rows
    for i, inp in enumerate(inputs):
        differing = [k for k, (a, b) in enumerate(inp.values) if a != b or (a is INVALID) != (b is INVALID)]
        for k in differing:
            assigned[i] = k
            visit()
        assigned.pop(i, None)
        allowed[i] = [k for k in allowed[i] if k not in differing]
        if not allowed[i]:
            break  # every later row would need this input in no class at all
    return rows


def _rows_to_changes(
    kind: Kind, slots: Sequence[tuple[str, str]], inputs: list[_Input], rows: list[table.Row]
) -> list[Change]:
    """The changed rows of each output, merged over that output alone (so that what decides another output
    does not split its rows); `slots` gives each output's (rule, subject)."""
    columns = tuple(i.as_table_input() for i in inputs)
    changes = []
    for n, (rule, subject) in enumerate(slots):
        mine = [table.Row(r.inputs, (r.outputs[n],)) for r in rows if r.outputs[n] is not None]
        if not mine:
            continue
        for classes, outputs in _merge_sets(list(table.merge_rows(mine, columns)), inputs):
            cells = {inp.name: _set_cell(inp, c) for inp, c in zip(inputs, classes)}
            old, new = outputs[0]
            changes.append(Change(kind, rule, subject, cells, old, new))
    return changes


BUT = "≠"  # a merged cell: any class of the input but these


def _merge_sets(rows: list[table.Row], inputs: list[_Input]) -> list[tuple[tuple[frozenset[int], ...], Any]]:
    """What `*` and `set` cannot say: rows that agree on every other input and on the outputs merge into one
    whose cell is the set of their classes (rows stay disjoint: they were)."""
    positions = [{repr(label): k for k, label in enumerate(inp.labels)} for inp in inputs]

    def as_set(col: int, cell: Any) -> frozenset[int]:
        labels = inputs[col].labels
        if cell == table.ANY:
            return frozenset(range(len(labels)))
        if cell == table.SET:
            return frozenset(k for k, label in enumerate(labels) if label is not None)
        if isinstance(cell, frozenset):  # the classes a restricted search left open
            return cell
        return frozenset({positions[col][repr(cell)]})

    cubes = [(tuple(as_set(c, cell) for c, cell in enumerate(row.inputs)), row.outputs) for row in rows]
    changed = True
    while changed:
        changed = False
        for col in range(len(inputs)):
            groups: dict[Any, list[tuple[tuple[frozenset[int], ...], Any]]] = {}
            for cells, out in cubes:
                groups.setdefault((cells[:col], cells[col + 1 :], repr(out)), []).append((cells, out))
            cubes = []
            for group in groups.values():
                if len(group) > 1:
                    cells, out = group[0]
                    union = frozenset().union(*(c[col] for c, _ in group))
                    cubes.append((cells[:col] + (union,) + cells[col + 1 :], out))
                    changed = True
                else:
                    cubes += group
    return sorted(cubes, key=lambda cube: [sorted(c) for c in cube[0]])


def _set_cell(inp: _Input, classes: frozenset[int]) -> str:
    """A merged cell, by the values it stands for (never a class name like `other`, whose meaning depends on
    what the rules name): `*` any, `set` any but unset, `v`, `a|b`, or `≠a|b` (any but these)."""

    def tokens(k: int) -> list[str]:
        return [DEFAULT] if inp.labels[k] == DEFAULT else [_cell(v) for v in inp.covers[k]]

    every = [t for k in range(len(inp.labels)) for t in tokens(k)]
    chosen = [t for k in sorted(classes) for t in tokens(k)]
    if len(chosen) == len(every):
        return table.ANY
    rest = [t for t in every if t not in chosen]
    if rest == ["unset"]:
        return table.SET
    if len(chosen) == 1:
        return chosen[0]
    if inp.kind != "int" and len(rest) < len(chosen):
        return BUT + "|".join(rest)
    return "|".join(chosen)


def _first_missing(names: Iterable[str], env: Mapping[str, Any]) -> str | None:
    return next((n for n in names if n not in env), None)


def _display(value: Any, origin: str | None, raw: Mapping[str, Any], shown: Mapping[str, str]) -> str:
    """A value copied from an input shows as `← input` (so rows merge over it), unless this version
    evaluates something else than the caller passed (its default, its open enum's catch-all)."""
    if origin is not None and origin in raw and raw[origin] == value:
        return f"← {shown.get(origin, origin)}"
    return interp.show_value(value)


# --------------------------------------------------------------------------------------------- stamps


def _field_closure(stamp: StampInfo, name: str) -> list[str]:
    """A field and every field it reads, transitively, in the order first read."""
    fields = {f.name for f in stamp.fields}
    order: list[str] = []

    def visit(n: str) -> None:
        if n in order:
            return
        order.append(n)
        for tier in stamp.field(n).decl.tiers:
            for ref in _tier_refs(tier):
                if ref in fields:
                    visit(ref)

    visit(name)
    return order


def _tier_refs(tier: ir.Tier) -> list[str]:
    """What a tier reads, in evaluation order: its condition, then the value it copies."""
    names = [r.name for r in ir.expr_refs(tier.when)] if tier.when is not None else []
    return names + ([tier.ref.name] if tier.ref is not None else [])


def _expand_fields(stamp: StampInfo, names: Iterable[str], seen: set[str] | None = None) -> list[str]:
    """Inputs behind names, a field standing for what it reads."""
    fields = {f.name for f in stamp.fields}
    seen = set() if seen is None else seen
    out: list[str] = []
    for n in names:
        if n in fields:
            if n not in seen:
                seen.add(n)
                for tier in stamp.field(n).decl.tiers:
                    out += _expand_fields(stamp, _tier_refs(tier), seen)
        else:
            out.append(n)
    return list(dict.fromkeys(out))


def _stamp_specs(model: Model, stamp: StampInfo, field_name: str) -> dict[str, _Spec]:
    slots = {s.name: s for s in stamp.slots}
    specs: dict[str, _Spec] = {}
    for n in _expand_fields(stamp, [field_name]):
        if n in model.leaves:
            specs[n] = _leaf_spec(model.leaves[n])
        elif n in slots:
            specs[n] = _Spec(slots[n].type, True, None, False, at=str(slots[n].decl.loc))
    return specs


def _field_fingerprint(model: Model, stamp: StampInfo, field_name: str) -> str:
    """What a field's value depends on: its chain, the chains it follows, its inputs' types and defaults."""
    specs = _stamp_specs(model, stamp, field_name)
    chains = [_key(stamp.field(n).decl).decode() for n in sorted(_field_closure(stamp, field_name))]
    inputs = {n: [_type_sig(s.type), s.optional, s.default] for n, s in specs.items()}
    return json.dumps([chains, inputs], sort_keys=True)


def _stamp_fingerprint(model: Model, stamp: StampInfo) -> bytes:
    """What every field of a stamp depends on (equal: no field can differ, none needs a closer look)."""
    names = {n for f in stamp.fields for t in f.decl.tiers for n in _tier_refs(t)}
    sigs = [[n, _leaf_sig(model.leaves[n])] for n in sorted(names) if n in model.leaves]
    sigs += [[s.name, _type_sig(s.type)] for s in stamp.slots]  # a slot's enum may change alone
    return _key(stamp.decl, log=False) + msgspec.json.encode(sigs)


def _diff_stamps(old: Model, new: Model, renames: Mapping[str, str], changes: list[Change]) -> None:
    for name in _names(old.stamps, new.stamps):
        a, b = old.stamps.get(name), new.stamps.get(name)
        if a is None or b is None:
            present = a or b
            what = f"on {present.decl.target.name}" if present else ""
            changes.append(
                _presence(Kind.STAMP, name, a.decl.loc if a else None, b.decl.loc if b else None, what)
            )
            continue
        if a.decl.target.name != b.decl.target.name:
            changes.append(
                Change(
                    Kind.STAMP,
                    name,
                    "on",
                    {},
                    Side(a.decl.target.name, None, _at(a.decl.target.loc)),
                    Side(b.decl.target.name, None, _at(b.decl.target.loc)),
                )
            )
        _diff_slots(a, b, changes)
        if _stamp_fingerprint(old, a) == _stamp_fingerprint(new, b):
            continue
        fields_a = {f.name: f for f in a.fields}
        fields_b = {f.name: f for f in b.fields}
        for f in _names(fields_a, fields_b):
            if f not in fields_a or f not in fields_b:
                fa, fb = fields_a.get(f), fields_b.get(f)
                changes.append(
                    _presence(
                        Kind.STAMP,
                        name,
                        fa.decl.loc if fa else None,
                        fb.decl.loc if fb else None,
                        f"field {f}",
                    )
                )
            elif _field_fingerprint(old, a, f) != _field_fingerprint(new, b, f):
                changes += _diff_field(old, a, new, b, f, renames)


def _diff_slots(a: StampInfo, b: StampInfo, changes: list[Change]) -> None:
    slots_a = {s.name: s for s in a.slots}
    slots_b = {s.name: s for s in b.slots}

    def text(slot: Any) -> str:
        return (
            f"{type_name(slot.type)} from {', '.join(slot.sources)}" if slot.sources else type_name(slot.type)
        )

    for s in _names(slots_a, slots_b):
        sa, sb = slots_a.get(s), slots_b.get(s)
        if sa is None or sb is None or text(sa) != text(sb):
            changes.append(
                Change(
                    Kind.STAMP,
                    a.name,
                    f"slot {s}",
                    {},
                    Side(text(sa), None, _at(sa.decl.loc)) if sa else Side(ABSENT),
                    Side(text(sb), None, _at(sb.decl.loc)) if sb else Side(ABSENT),
                )
            )


def _diff_field(
    old: Model, a: StampInfo, new: Model, b: StampInfo, field_name: str, renames: Mapping[str, str]
) -> list[Change]:
    sides = ((old, a), (new, b))
    mentions = []
    specs = []
    for model, stamp in sides:
        m = domains._Mentions()
        for n in _field_closure(stamp, field_name):
            m.chain(stamp.field(n).decl)
        mentions.append(m)
        specs.append(_stamp_specs(model, stamp, field_name))
    inputs = _joint_inputs(specs[0], specs[1], (mentions[0], mentions[1]), renames)
    shown = ({k: renames.get(k, k) for k in specs[0]}, {k: k for k in specs[1]})
    tiers = [{str(t.loc): (f.name, t) for f in stamp.fields for t in f.decl.tiers} for _, stamp in sides]

    def evaluate(side: int, env: dict[str, Any], raw: dict[str, Any]) -> tuple[list[_Slot], str | None]:
        model, stamp = sides[side]
        outcome = interp.resolve_stamp(model, stamp, env, explain=False)[field_name]
        if outcome.value is interp.UNKNOWN or outcome.tier is None:
            for t in outcome.tiers:
                if t.status not in ("won", "lost", "not reached") and t.source in tiers[side]:
                    reads = _expand_fields(stamp, _tier_refs(tiers[side][t.source][1]))
                    need = _first_missing(reads, env)
                    if need is not None:
                        return [_Slot(_UNDECIDED, None)], need
            return [_Slot(_UNDECIDED, None)], _first_missing(_expand_fields(stamp, [field_name]), env)
        text = _display(outcome.value, outcome.origin, raw, shown[side])
        return [_Slot((outcome.value, outcome.tier), Side(text, outcome.tier, outcome.source))], None

    same = [_key(a.field(n).decl) for n in sorted(_field_closure(a, field_name))] == [
        _key(b.field(n).decl) for n in sorted(_field_closure(b, field_name))
    ]
    rows = _search(f"{b.name}.{field_name}", inputs, 1, evaluate, same_rules=same)
    return _rows_to_changes(Kind.STAMP, [(b.name, field_name)], inputs, rows)


# --------------------------------------------------------------------------------------------- gates


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    return _conjuncts(e.left) + _conjuncts(e.right) if isinstance(e, ir.And) else [e]


def _refs(e: ir.Expr | None) -> list[str]:
    return list(dict.fromkeys(r.name for r in ir.expr_refs(e))) if e is not None else []


def _diff_gates(old: Model, new: Model, renames: Mapping[str, str], changes: list[Change]) -> None:
    for name in _names(old.autos, new.autos):
        a, b = old.autos.get(name), new.autos.get(name)
        if a is None or b is None:
            present = a or b
            what = f"{type_name(present.type)} = {ir.literal_text(present.decl.value)}" if present else ""
            changes.append(
                _presence(Kind.AUTO, name, a.decl.loc if a else None, b.decl.loc if b else None, what)
            )
            continue
        if a.decl.log != b.decl.log:
            changes.append(_log_change(Kind.AUTO, name, a.decl.log, a.decl.loc, b.decl.log, b.decl.loc))
        specs = [{n: _leaf_spec(m.leaves[n]) for n in _refs(g.decl.when)} for m, g in ((old, a), (new, b))]
        fingerprints = [
            _key(g.decl, log=False) + msgspec.json.encode({n: _leaf_sig(m.leaves[n]) for n in sp})
            for m, g, sp in ((old, a, specs[0]), (new, b, specs[1]))
        ]
        if fingerprints[0] == fingerprints[1]:
            continue
        mentions = (domains._Mentions(), domains._Mentions())
        mentions[0].expr(a.decl.when)
        mentions[1].expr(b.decl.when)
        inputs = _joint_inputs(specs[0], specs[1], mentions, renames)
        evaluate = _gate_evaluator((a.decl, b.decl))
        same = _key(a.decl, log=False) == _key(b.decl, log=False)
        rows = _search(name, inputs, 1, evaluate, same_rules=same)
        changes += _rows_to_changes(Kind.AUTO, [(name, "value")], inputs, rows)


def _gate_evaluator(decls: tuple[ir.AutoDecl, ir.AutoDecl]) -> Evaluate:
    def evaluate(side: int, env: dict[str, Any], raw: dict[str, Any]) -> tuple[list[_Slot], str | None]:
        decl = decls[side]
        holds = interp.eval_expr(decl.when, env)
        for c in _conjuncts(decl.when):
            value = interp.eval_expr(c, env)
            if value is True:
                continue
            if value is interp.UNKNOWN:  # an earlier condition may still be the one that declines
                key = _UNDECIDED if holds is interp.UNKNOWN else ("declines",)
                return [_Slot(key, None)], _first_missing(_refs(c), env)
            why = f"`{interp.show_expr(c)}` is false"
            return [_Slot(("declines",), Side("declines", why, str(c.loc)))], None
        value = decl.value.value
        shown = Side(interp.show_value(value), "every condition holds", str(decl.loc))
        return [_Slot(("yields", value), shown)], None

    return evaluate


def _log_change(kind: Kind, rule: str, a: str | None, at_a: ir.Loc, b: str | None, at_b: ir.Loc) -> Change:
    shown_a = json.dumps(a) if a is not None else "none"
    shown_b = json.dumps(b) if b is not None else "none"
    return Change(kind, rule, "log", {}, Side(shown_a, None, str(at_a)), Side(shown_b, None, str(at_b)))


# --------------------------------------------------------------------------------------------- launch and validate blocks


Statement = Any  # ir.SetStmt | ir.FieldDecl | ir.Check | ir.Fallback


@dataclass
class _Stmt:
    """A launch or validate statement, with what it reads and writes for the dependency analysis."""

    node: Statement
    block: str
    place: tuple[int, int]  # (block, statement) in its version
    key: str  # what it says, without positions or log text: equal keys are the same rule
    text: str  # the same without the types of what it reads: equal texts evaluate alike on equal values
    reads: tuple[str, ...]  # leaves, facts, `Stamp.field`, and `block:local` for a launch local
    writes: str | None  # a leaf, a `Stamp.field`, or `block:local`
    inputs: tuple[str, ...]  # what it reads with locals expanded to what they read: inputs only


@dataclass
class _Block:
    """One version's statements of the launch blocks together, or of one validate block."""

    model: Model
    stmts: list[_Stmt] = field(default_factory=list)
    stamp: StampInfo | None = None  # validate: the stamp it reads


def _names_in(e: ir.Expr | None, stamp_fields: Mapping[str, Sequence[str]]) -> list[str]:
    """What an expression reads; `value in Stamp` (and a bare stamp name) reads every field."""
    names: list[str] = []
    for ref in ir.expr_refs(e) if e is not None else []:
        if ref.name in stamp_fields:
            names += [f"{ref.name}.{f}" for f in stamp_fields[ref.name]]
        else:
            names.append(ref.name)
    return list(dict.fromkeys(names))


def _sig_of(model: Model, stamp: StampInfo | None, name: str) -> Any:
    if name in model.leaves:
        return _leaf_sig(model.leaves[name])
    if stamp is not None and name.startswith(f"{stamp.name}."):
        fields = {f.name: f for f in stamp.fields}
        f = fields.get(name.split(".", 1)[1])
        return _type_sig(f.type) if f is not None else None
    return None


def _launch_block(model: Model) -> _Block:
    block = _Block(model)
    for bi, launch in enumerate(model.launches):
        locals_: dict[str, _Stmt] = {}
        for si, stmt in enumerate(launch.decl.stmts):
            if isinstance(stmt, ir.SetStmt):
                names, writes = _refs(stmt.when), stmt.target.name
            elif isinstance(stmt, ir.FieldDecl):  # a local, or a stamp field a `use` made one
                names = list(dict.fromkeys(n for t in stmt.tiers for n in _tier_refs(t)))
                writes = f"{launch.name}:{stmt.name.value}"
            elif isinstance(stmt, ir.Check):
                names, writes = _refs(stmt.cond), None
            else:  # `use`: the checked model holds it expanded into the stamp's own FieldDecls
                continue
            reads = tuple(f"{launch.name}:{n}" if n in locals_ else n for n in names)
            inputs = [i for n in names for i in (locals_[n].inputs if n in locals_ else (n,))]
            sigs = [_sig_of(model, None, n) for n in names if n not in locals_]
            text = json.dumps([launch.name, _key(stmt, log=False).decode(), reads])
            key = json.dumps([text, sigs])
            item = _Stmt(stmt, launch.name, (bi, si), key, text, reads, writes, tuple(dict.fromkeys(inputs)))
            if isinstance(stmt, ir.FieldDecl):
                locals_[stmt.name.value] = item
            block.stmts.append(item)
    return block


def _validate_block(model: Model, name: str) -> _Block:
    info = next((v for v in model.validates if v.name == name), None)
    if info is None:
        return _Block(model)
    stamp = model.stamps.get(info.stamps[0]) if info.stamps else None
    stamp_fields = {stamp.name: tuple(f.name for f in stamp.fields)} if stamp else {}
    block = _Block(model, stamp=stamp)
    for si, stmt in enumerate(info.decl.stmts):
        if isinstance(stmt, ir.Fallback):
            names = [stmt.field.name, *_names_in(stmt.when, stamp_fields)]
            writes: str | None = stmt.field.name
        elif isinstance(stmt, ir.Check):
            names, writes = _names_in(stmt.cond, stamp_fields), None
        else:  # a `set` in a validate block never passes the checker
            continue
        names = list(dict.fromkeys(names))
        sigs = [_sig_of(model, stamp, n) for n in names]
        # the names read are part of what it says: `value in S` reads every field S has in this version
        text = json.dumps([name, _key(stmt, log=False).decode(), names])
        key = json.dumps([text, sigs])
        block.stmts.append(_Stmt(stmt, name, (0, si), key, text, tuple(names), writes, tuple(names)))
    return block


def _align(a: _Block, b: _Block) -> tuple[dict[int, int], set[int], set[int]]:
    """Matched statements (old index → new), and the statements of each side whose outcome may differ: those
    without a match, and those reading what such a statement wrote before them (on either side)."""
    matcher = difflib.SequenceMatcher(
        None, [s.key for s in a.stmts], [s.key for s in b.stmts], autojunk=False
    )
    pairs = {m.a + k: m.b + k for m in matcher.get_matching_blocks() for k in range(m.size)}
    back = {j: i for i, j in pairs.items()}
    affected = (
        {i for i in range(len(a.stmts)) if i not in pairs},
        {j for j in range(len(b.stmts)) if j not in back},
    )
    changed = True
    while changed:
        changed = False
        for side, block in ((0, a), (1, b)):
            written: set[str] = set()
            for i, stmt in enumerate(block.stmts):
                if i not in affected[side] and any(r in written for r in stmt.reads):
                    affected[side].add(i)
                    changed = True
                if i in affected[side] and stmt.writes is not None:
                    written.add(stmt.writes)
        for i in list(affected[0]):
            if i in pairs and pairs[i] not in affected[1]:
                affected[1].add(pairs[i])
                changed = True
        for j in list(affected[1]):
            if j in back and back[j] not in affected[0]:
                affected[0].add(back[j])
                changed = True
    return pairs, affected[0], affected[1]


def _is_local(name: str) -> bool:
    return ":" in name


def _relevant(block: _Block, keep: set[int]) -> list[int]:
    """The statements to run for one output: its own, and what they read from earlier statements."""
    keep = set(keep)
    for i in range(len(block.stmts) - 1, -1, -1):
        if i in keep:
            for j in range(i):
                if block.stmts[j].writes is not None and block.stmts[j].writes in block.stmts[i].reads:
                    keep.add(j)
    return sorted(keep)


_DECIDED = ("applied", "skipped", "ok", "violated")


def _diff_block(
    kind: Kind, a: _Block, b: _Block, renames: Mapping[str, str], label: str, changes: list[Change]
) -> None:
    """Each output a differing statement may change, compared on its own: a check's outcome (by message),
    or the value the block leaves in a leaf (launch) or a stamp field (validate) it writes."""
    pairs, aff_a, aff_b = _align(a, b)
    for i, j in pairs.items():  # the same rule, but what it logs changed
        na, nb = a.stmts[i].node, b.stmts[j].node
        if getattr(na, "log", None) != getattr(nb, "log", None):
            changes.append(_log_change(kind, b.stmts[j].block, na.log, na.loc, nb.log, nb.loc))
    blocks, affected = (a, b), (aff_a, aff_b)
    outputs: dict[tuple[str, str], str] = {}  # ("check", kind\0message) / ("write", name) -> its block
    for side in (0, 1):
        for i in sorted(affected[side]):
            stmt = blocks[side].stmts[i]
            if isinstance(stmt.node, ir.Check):
                outputs.setdefault(("check", f"{stmt.node.kind}\0{stmt.node.message}"), stmt.block)
            elif stmt.writes is not None and not _is_local(stmt.writes):
                outputs.setdefault(("write", stmt.writes), stmt.block)
    per_output = {}
    for what, which in outputs:
        own = []
        for side, blk in enumerate(blocks):
            if what == "check":
                own.append({i for i in affected[side] if _check_key(blk.stmts[i]) == which})
            else:
                own.append({i for i, stmt in enumerate(blk.stmts) if stmt.writes == which})
        per_output[what, which] = [_relevant(blk, own[side]) for side, blk in enumerate(blocks)]
    for (what, which), block_name in outputs.items():
        subject = (
            which.split("\0", 1)[0] if what == "check" else f"sets {which}" if kind is Kind.LAUNCH else which
        )
        relevant = per_output[what, which]
        changes += _diff_output(kind, blocks, relevant, renames, label, (what, which), block_name, subject)


def _check_key(stmt: _Stmt) -> str | None:
    return f"{stmt.node.kind}\0{stmt.node.message}" if isinstance(stmt.node, ir.Check) else None


def _diff_output(
    kind: Kind,
    blocks: tuple[_Block, _Block],
    relevant: list[list[int]],
    renames: Mapping[str, str],
    label: str,
    output: tuple[str, str],
    rule: str,
    subject: str,
) -> list[Change]:
    """One output of a block, searched over what its own statements read; each version runs only those
    statements (the interpreter on a copy of the model restricted to them)."""
    specs: list[dict[str, _Spec]] = [{}, {}]
    mentions = (domains._Mentions(), domains._Mentions())
    for side, blk in enumerate(blocks):
        stamp_fields = {blk.stamp.name: tuple(f.name for f in blk.stamp.fields)} if blk.stamp else {}
        for i in relevant[side]:
            stmt = blk.stmts[i]
            _mention(mentions[side], stmt.node, stamp_fields)
            for n in stmt.inputs:
                spec = _input_spec(blk, n)
                if spec is not None:
                    specs[side].setdefault(n, spec)
    inputs = _joint_inputs(specs[0], specs[1], mentions, renames)
    shown = ({k: renames.get(k, k) for k in specs[0]}, {k: k for k in specs[1]})
    runnable = [_restricted(kind, blk, relevant[s], label) for s, blk in enumerate(blocks)]
    what, which = output

    def evaluate(side: int, env: dict[str, Any], raw: dict[str, Any]) -> tuple[list[_Slot], str | None]:
        blk = blocks[side]
        stmts = [blk.stmts[i] for i in relevant[side]]
        for stmt in stmts:  # a fallback on a field not assigned yet: the interpreter cannot tell
            if isinstance(stmt.node, ir.Fallback) and stmt.node.field.name not in env:
                return [_Slot(_UNDECIDED, None)], stmt.node.field.name
        log = _run(kind, runnable[side], blk, label, env) if stmts else []
        need = None
        for stmt, entry in zip(stmts, log):  # the first statement the assigned inputs leave undecided
            if entry.status not in _DECIDED:
                need = _first_missing(stmt.inputs, env)
                if need is not None:
                    break
        if what == "check":
            return [_check_slot(stmts, log, which)], need
        return [_write_slot(kind, stmts, log, which, env, raw, shown[side])], need

    texts = [[blk.stmts[i].text for i in relevant[side]] for side, blk in enumerate(blocks)]
    rows = _search(f"{label}: {subject}", inputs, 1, evaluate, same_rules=texts[0] == texts[1])
    return _rows_to_changes(kind, [(rule, subject)], inputs, rows)


def _mention(mentions: domains._Mentions, node: Statement, stamp_fields: Mapping[str, Sequence[str]]) -> None:
    if isinstance(node, ir.SetStmt):
        mentions.expr(node.when)
        mentions.set_value(node.target.name, node.value.value)
    elif isinstance(node, ir.FieldDecl):
        mentions.chain(node)
    elif isinstance(node, ir.Check):
        mentions.expr(node.cond, stamp_fields)
    elif isinstance(node, ir.Fallback):
        mentions.expr(node.when, stamp_fields)
        mentions.set_value(node.field.name, node.from_value.value)
        mentions.set_value(node.field.name, node.to_value.value)


def _input_spec(block: _Block, name: str) -> _Spec | None:
    if name in block.model.leaves:
        return _leaf_spec(block.model.leaves[name])
    stamp = block.stamp
    if stamp is not None and name.startswith(f"{stamp.name}."):
        fields = {f.name: f for f in stamp.fields}
        f = fields.get(name.split(".", 1)[1])
        return _Spec(f.type, False, None, False, at=str(f.decl.loc)) if f is not None else None
    return None


def _restricted(kind: Kind, block: _Block, keep: list[int], label: str) -> Model:
    """The version's model with only the statements to run: the interpreter runs them as it runs all."""
    places = {block.stmts[i].place for i in keep}
    replace = msgspec.structs.replace
    model = block.model
    if kind is Kind.LAUNCH:
        launches = tuple(
            replace(
                info,
                decl=replace(
                    info.decl, stmts=tuple(s for si, s in enumerate(info.decl.stmts) if (bi, si) in places)
                ),
            )
            for bi, info in enumerate(model.launches)
        )
        return replace(model, launches=launches)
    validates = tuple(
        replace(
            info,
            decl=replace(
                info.decl, stmts=tuple(s for si, s in enumerate(info.decl.stmts) if (0, si) in places)
            ),
        )
        if info.name == label
        else info
        for info in model.validates
    )
    return replace(model, validates=validates)


def _run(
    kind: Kind, model: Model, block: _Block, label: str, env: dict[str, Any]
) -> list[interp.LaunchOutcome]:
    if kind is Kind.LAUNCH:
        return interp.run_launch(model, dict(env))[1]
    stamp = block.stamp
    values = {}
    if stamp is not None:
        values = {f.name: env.get(f"{stamp.name}.{f.name}", interp.UNKNOWN) for f in stamp.fields}
    return interp.run_validate(model, label, stamp, values, env)[1]


def _check_slot(stmts: list[_Stmt], log: list[interp.LaunchOutcome], which: str) -> _Slot:
    """Whether a check (of this kind and message) raises, and the one that does: the first to raise, every
    one before it decided not to (so that what is shown holds for every completion of the inputs)."""
    kind, message = which.split("\0", 1)
    mine = [(stmt, entry.status) for stmt, entry in zip(stmts, log) if _check_key(stmt) == which]
    for stmt, status in mine:
        if status == "violated":
            return _Slot(message, Side(f"raises {json.dumps(message)}", kind, str(stmt.node.loc)))
        if status != "ok":  # undecided: it raises for sure only if a later one surely does
            return _Slot(message if any(st == "violated" for _, st in mine) else _UNDECIDED, None)
    at = str(mine[0][0].node.loc) if mine else None
    return _Slot(None, Side("passes", kind if mine else None, at))


def _write_slot(
    kind: Kind,
    stmts: list[_Stmt],
    log: list[interp.LaunchOutcome],
    name: str,
    env: Mapping[str, Any],
    raw: Mapping[str, Any],
    shown: Mapping[str, str],
) -> _Slot:
    """The value a launch leaves in a config leaf, or a validate block in a stamp field, and who wrote it."""
    state: Any = None  # None: not written; else (value, statement)
    for stmt, entry in zip(stmts, log):
        if stmt.writes != name:
            continue
        if entry.status == "applied":
            node = stmt.node
            state = (node.value.value if isinstance(node, ir.SetStmt) else node.to_value.value, node)
        elif entry.status != "skipped":
            return _Slot(_UNDECIDED, None)
    if state is not None:
        value, node = state
        rule = "set" if isinstance(node, ir.SetStmt) else "fallback"
        return _Slot(("written", value), Side(interp.show_value(value), rule, str(node.loc)))
    if kind is Kind.LAUNCH:
        return _Slot(("kept",), Side("(not written)"))
    # kept: what the consumer gets is the stamp's value; a change in that value is the stamp's to report
    return _Slot(("kept",), Side(_display(env.get(name), name, raw, shown)))


def _diff_launch(old: Model, new: Model, renames: Mapping[str, str], changes: list[Change]) -> None:
    blocks_a = {x.name: x for x in old.launches}
    blocks_b = {x.name: x for x in new.launches}
    for name in _names(blocks_a, blocks_b):
        if name not in blocks_a or name not in blocks_b:
            la, lb = blocks_a.get(name), blocks_b.get(name)
            changes.append(
                _presence(Kind.LAUNCH, name, la.decl.loc if la else None, lb.decl.loc if lb else None)
            )
    # every launch block runs, in order, before any runner: they are compared as one sequence
    label = next(iter(_names(blocks_a, blocks_b)), "launch")
    _diff_block(Kind.LAUNCH, _launch_block(old), _launch_block(new), renames, label, changes)


def _diff_validates(old: Model, new: Model, renames: Mapping[str, str], changes: list[Change]) -> None:
    infos_a = {v.name: v for v in old.validates}
    infos_b = {v.name: v for v in new.validates}
    for name in _names(infos_a, infos_b):
        va, vb = infos_a.get(name), infos_b.get(name)
        # a consumer without a block accepts every stamp: a block on one side only is compared with that
        if va is None or vb is None:
            changes.append(
                _presence(Kind.VALIDATE, name, va.decl.loc if va else None, vb.decl.loc if vb else None)
            )
        elif _key(getattr(va.decl, "waivers", ())) != _key(getattr(vb.decl, "waivers", ())):
            changes.append(_waiver_change(Kind.VALIDATE, name, va.decl, vb.decl))
        _diff_block(
            Kind.VALIDATE, _validate_block(old, name), _validate_block(new, name), renames, name, changes
        )


def _waiver_change(kind: Kind, name: str, a: Any, b: Any) -> Change:
    def text(decl: Any) -> Side:
        waivers = getattr(decl, "waivers", ())
        shown = ", ".join(f"{w.cls.value} until {w.until}" for w in waivers) or "none"
        return Side(shown, None, str(waivers[0].loc) if waivers else str(decl.loc))

    return Change(kind, name, "waivers", {}, text(a), text(b))


# --------------------------------------------------------------------------------------------- guards, parity


def _consumers(model: Model) -> dict[str, tuple[str, str, ir.Loc]]:
    return {c.value: (g.module, g.stamp.value, c.loc) for g in model.guards for c in g.consumers}


def _diff_guards(old: Model, new: Model, changes: list[Change]) -> None:
    a, b = _consumers(old), _consumers(new)
    for name in _names(a, b):
        ga, gb = a.get(name), b.get(name)
        shown_a = Side(f'from "{ga[0]}" reads {ga[1]}', None, str(ga[2])) if ga else Side(ABSENT)
        shown_b = Side(f'from "{gb[0]}" reads {gb[1]}', None, str(gb[2])) if gb else Side(ABSENT)
        if ga is None or gb is None or ga[:2] != gb[:2]:
            subject = "added" if ga is None else "removed" if gb is None else "changed"
            changes.append(Change(Kind.GUARD, name, subject, {}, shown_a, shown_b))


def _parity_clauses(decl: ir.ParityDecl) -> dict[str, tuple[str, ir.Loc]]:
    locs = dict(decl.clause_locs)
    targets = " | ".join("base" if t == "" else f'base "{t}"' for t in decl.targets)
    clauses = {
        "over": (f'"{decl.registry}"', decl.registry_loc),
        "draft": (f"/{decl.draft}/" if decl.draft is not None else "none", locs.get("draft", decl.loc)),
        "target": (targets or "none", locs.get("target", decl.loc)),
        "exclude": (", ".join(n.value for n in decl.exclude) or "none", locs.get("exclude", decl.loc)),
        "hooks": (", ".join(n.value for n in decl.hooks) or "none", locs.get("hooks", decl.loc)),
        "at_least": (
            str(decl.at_least) if decl.at_least is not None else "none",
            locs.get("at_least", decl.loc),
        ),
    }
    waivers = getattr(decl, "waivers", ())
    shown = ", ".join(f"{w.cls.value} until {w.until}: {w.reason}" for w in waivers) or "none"
    clauses["waive"] = (shown, waivers[0].loc if waivers else decl.loc)
    return clauses


def _diff_parities(old: Model, new: Model, changes: list[Change]) -> None:
    a = {p.name.value: p for p in old.parities}
    b = {p.name.value: p for p in new.parities}
    for name in _names(a, b):
        pa, pb = a.get(name), b.get(name)
        if pa is None or pb is None:
            present = pa or pb
            what = f'over "{present.registry}"' if present else ""
            changes.append(_presence(Kind.PARITY, name, pa.loc if pa else None, pb.loc if pb else None, what))
            continue
        ca, cb = _parity_clauses(pa), _parity_clauses(pb)
        for clause, (text_a, loc_a) in ca.items():
            text_b, loc_b = cb[clause]
            if text_a != text_b:
                changes.append(
                    Change(
                        Kind.PARITY,
                        name,
                        clause,
                        {},
                        Side(text_a, None, str(loc_a)),
                        Side(text_b, None, str(loc_b)),
                    )
                )


# --------------------------------------------------------------------------------------------- versions


@dataclass
class Version:
    """One side of a diff: the rules files of a revision, of the working tree, or one file named."""

    label: str  # how the output names it
    files: dict[str, Any]  # key (the path relative to the project root; a single file: its name) -> Loaded
    commit: str | None = None  # the commit its files are at, for links (None: files not committed as read)
    single: bool = False  # one .rules file named on the command line


def pair(old: Version, new: Version) -> list[tuple[str, Any, Any]]:
    """(key, old Loaded or None, new Loaded or None) for each rules file either side has; a single file
    named on one side is compared with the file of the same name on the other (or its only file)."""
    if old.single != new.single:
        one, many = (old, new) if old.single else (new, old)
        [(name, loaded)] = one.files.items()
        found = [k for k in many.files if PurePosixPath(k).name == name] or (
            list(many.files) if len(many.files) == 1 else []
        )
        if len(found) != 1:
            have = ", ".join(sorted(many.files)) or "no rules files"
            raise DiffError(
                f"which rules file to compare {loaded.path} with? {many.label} has {have}; name both files"
            )
        other = many.files[found[0]]
        return [(found[0], loaded, other) if old.single else (found[0], other, loaded)]
    if old.single:
        [a] = old.files.values()
        [b] = new.files.values()
        return [("", a, b)]
    return [(k, old.files.get(k), new.files.get(k)) for k in sorted(set(old.files) | set(new.files))]


DEFAULT_BRANCHES = ("main", "origin/main", "master", "origin/master")


def default_base(git: Callable[..., str]) -> tuple[str, str]:
    """(base revision, how it was found): $STAMPGEN_DIFF_BASE, else the merge-base of HEAD with the remote's
    default branch (origin/HEAD), else with main, else master (each also as origin's, as CI checkouts have
    them). `git(*argv)` returns git's output, or "" when it fails."""
    given = os.environ.get(BASE_ENV, "").strip()
    if given:
        return given, f"${BASE_ENV}"
    remote_head = git("symbolic-ref", "-q", "refs/remotes/origin/HEAD").strip()
    candidates = [remote_head.removeprefix("refs/remotes/")] if remote_head else []
    candidates += [c for c in DEFAULT_BRANCHES if c not in candidates]
    for candidate in candidates:
        base = git("merge-base", "HEAD", candidate).strip()
        if base:
            return base, f"merge-base of HEAD and {candidate}"
    raise DiffError(
        f"no base revision: HEAD shares no history with {', '.join(['origin/HEAD', *DEFAULT_BRANCHES])} "
        f"(a shallow clone needs fetch-depth: 0); name one: stampgen diff REV, --base REV or {BASE_ENV}=REV"
    )


_GITHUB_REMOTE = re.compile(
    r"^(?:https?://(?:[^@/]+@)?github\.com/|ssh://(?:[^@/]+@)?github\.com(?::\d+)?/|[\w.-]+@github\.com:)"
    r"(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$"
)


def github_blob_base(remote: str, commit: str | None) -> str | None:
    """`https://github.com/OWNER/REPO/blob/COMMIT/` for a github.com remote (https or ssh), else None.
    Credentials in the remote URL never reach the output."""
    found = _GITHUB_REMOTE.match(remote.strip())
    if found is None or commit is None:
        return None
    return f"https://github.com/{found['owner']}/{found['repo']}/blob/{commit}/"


# --------------------------------------------------------------------------------------------- output


def _when(inputs: Mapping[str, str]) -> str:
    shown = ", ".join(
        f"{k}{v}" if v.startswith(BUT) else f"{k}={v}" for k, v in inputs.items() if v != table.ANY
    )
    return shown or ("every input" if inputs else "")


def _rule_text(side: Side) -> str:
    return " ".join(x for x in (side.rule, side.at) if x) or ABSENT


def to_text(changes: list[Change]) -> str:
    if not changes:
        return NO_CHANGE + "\n"
    lines = []
    for c in changes:
        when = _when(c.inputs)
        lines.append(f"{c.title}: {c.old.value} → {c.new.value}" + (f"  when {when}" if when else ""))
        lines.append(f"    rule: {_rule_text(c.old)} → {_rule_text(c.new)}")
    return "\n".join(lines) + "\n"


def _split_at(at: str) -> tuple[str, int, int]:
    path, line, col = at.rsplit(":", 2)
    return path, int(line), int(col)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(
    changes: list[Change], base: str, head: str, links: tuple[str | None, str | None] = (None, None)
) -> str:
    """A summary line, then per rule its structural changes as a list and its changed rows as a table;
    positions link to the file at each side's commit when `links` has its blob URL prefix."""
    if not changes:
        return NO_CHANGE + "\n"

    def rule(side: Side, which: int) -> str:
        if side.at is None:
            return _md(side.rule or ABSENT)
        path, line, _ = _split_at(side.at)
        pos = f"[{side.at}]({links[which]}{path}#L{line})" if links[which] else f"`{side.at}`"
        return f"{_md(side.rule)} {pos}" if side.rule else pos

    lines = [f"**{len(changes)} change(s)** in what the rules decide, `{base}` → `{head}`", ""]
    groups: dict[tuple[Kind, str], list[Change]] = {}
    for c in changes:
        groups.setdefault((c.kind, c.rule), []).append(c)
    for (kind, name), items in groups.items():
        lines += [f"#### {kind.value} `{name}`", ""]
        for c in (c for c in items if not c.inputs):
            lines.append(
                f"- {_md(c.subject)}: {_md(c.old.value)} → {_md(c.new.value)} ({rule(c.old, 0)} → {rule(c.new, 1)})"
            )
        rows = [c for c in items if c.inputs]
        if rows:
            if len(rows) < len(items):
                lines.append("")
            cols = list(dict.fromkeys(k for c in rows for k in c.inputs))
            lines.append("| " + " | ".join([*cols, "what", "old → new", "rule (old → new)"]) + " |")
            lines.append("|" + "---|" * (len(cols) + 3))
            for c in rows:
                cells = [_md(c.inputs.get(k, table.ANY)) for k in cols]
                cells += [
                    _md(c.subject),
                    f"{_md(c.old.value)} → {_md(c.new.value)}",
                    f"{rule(c.old, 0)} → {rule(c.new, 1)}",
                ]
                lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def to_github(changes: list[Change], present: Iterable[str]) -> str:
    """Workflow commands: a notice at each changed rule's line on the new side; a removed rule's at its old
    line when that file is still there (`present`: the new side's file names)."""
    if not changes:
        return f"::notice title=stampgen diff::{NO_CHANGE}\n"
    files = set(present)
    lines = []
    for c in changes:
        at = c.new.at
        if at is None and c.old.at is not None and _split_at(c.old.at)[0] in files:
            at = c.old.at
        when = _when(c.inputs)
        message = f"{c.old.value} → {c.new.value}" + (f" when {when}" if when else "")
        message += f" (before: {_rule_text(c.old)})"
        where = ""
        if at is not None:
            path, line, col = _split_at(at)
            where = f"file={_escape_property(path)},line={line},col={col},"
        lines.append(f"::notice {where}title={_escape_property(c.title)}::{_escape_data(message)}")
    return "\n".join(lines) + "\n"


def to_json(changes: list[Change], base: str, head: str) -> dict[str, Any]:
    return {
        "base": base,
        "head": head,
        "changes": [{"title": c.title, **msgspec.to_builtins(c)} for c in changes],
    }
