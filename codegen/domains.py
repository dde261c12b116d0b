"""Input domains for the generated differential tests, and the decision tables reviewers read.

For each generated function: which inputs it reads and which values to run it on. The whole finite domain
when it is small; else the abstract domain (enum members the rules never single out behave alike, and
so do int values that agree on every comparison the rules make, so one representative stands for each
class); else a fixed-seed sample of the abstract domain. Used by codegen/render.py; reads only the Model.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stampgen.codegen import interpreter, ir
from stampgen.codegen.model import EnumT, IntT, LaunchInfo, Model, StampInfo, Type, ValidateInfo, domain

# Differential tests: the whole finite domain when it has at most this many rows; else the abstract domain
# (see `_abstract_classes`); else this many rows drawn from the abstract domain with a fixed seed.
EXHAUSTIVE_LIMIT = 250_000
SAMPLE_ROWS = 20_000
SAMPLE_SEED = 20260815


# --------------------------------------------------------------------------------------------- test domains


class _Mentions:
    """Which values the rules single out for each input of one generated function.

    Enum members a function never mentions (directly, or on a field or local its value flows into) behave
    identically, and so do int values that agree on every comparison it makes: one representative of each
    such class exercises the same code as all of them.
    """

    def __init__(self) -> None:
        self.values: dict[str, list[Any]] = {}
        self.compares: dict[str, list[tuple[str, Any]]] = {}
        self.flows: dict[str, list[str]] = {}  # field/local -> the inputs it copies

    def _add(self, name: str, value: Any) -> None:
        bucket = self.values.setdefault(name, [])
        if value not in bucket:
            bucket.append(value)

    def _cmp(self, name: str, op: str, value: Any) -> None:
        bucket = self.compares.setdefault(name, [])
        if (op, value) not in bucket:
            bucket.append((op, value))

    def expr(self, e: ir.Expr | None, stamp_fields: Mapping[str, Sequence[str]] = {}) -> None:
        if e is None:
            return
        if isinstance(e, ir.Compare):
            self._add(e.ref.name, e.value.value)
            self._cmp(e.ref.name, e.op, e.value.value)
        elif isinstance(e, ir.Member):
            values = tuple(v.value for v in e.values)
            for v in values:
                self._add(e.ref.name, v)
            self._cmp(e.ref.name, "in", values)
        elif isinstance(e, ir.AnyField):
            for f in stamp_fields.get(e.stamp.name, ()):
                self._add(f"{e.stamp.name}.{f}", e.value.value)
                self._cmp(f"{e.stamp.name}.{f}", "==", e.value.value)
        elif isinstance(e, ir.Not):
            self.expr(e.operand, stamp_fields)
        elif isinstance(e, (ir.And, ir.Or, ir.Implies)):
            self.expr(e.left, stamp_fields)
            self.expr(e.right, stamp_fields)

    def chain(self, decl: ir.FieldDecl) -> None:
        name = decl.name.value
        for tier in decl.tiers:
            self.expr(tier.when)
            if isinstance(tier, ir.ConstTier):
                self._add(name, tier.value.value)
            else:
                self.flows.setdefault(name, []).append(tier.ref.name)

    def set_value(self, name: str, value: Any) -> None:
        self._add(name, value)

    def close(self) -> None:
        """Push what is said about a field or local back to the inputs it copies (to a fixpoint)."""
        changed = True
        while changed:
            changed = False
            for target, sources in self.flows.items():
                for source in sources:
                    for v in self.values.get(target, []):
                        if v not in self.values.get(source, []):
                            self._add(source, v)
                            changed = True
                    for c in self.compares.get(target, []):
                        if c not in self.compares.get(source, []):
                            self._cmp(source, *c)
                            changed = True


def _compare(value: Any, op: str, lit: Any) -> bool:
    if value is None:
        return op == "!="
    if op == "in":
        return value in lit
    return {
        "==": value == lit,
        "!=": value != lit,
        "<": value < lit,
        "<=": value <= lit,
        ">=": value >= lit,
    }[op]


def _abstract_classes(
    t: Type,
    optional: bool,
    mentioned: Sequence[Any],
    compares: Sequence[tuple[str, Any]],
    mentioned_anywhere: Sequence[Any] = (),
) -> list[tuple[Any, ...]]:
    """The classes of values that behave alike, each as a tuple of the values in it, representative first."""
    head: list[tuple[Any, ...]] = [(None,)] if optional else []
    if isinstance(t, EnumT):
        named = [m for m in t.members if m in mentioned]
        others = [m for m in t.members if m not in mentioned]
        # The stand-in for the unmentioned members: an open enum's catch-all member when the rules do not
        # mention it (it stands for "any other name"), else one that no input mentions, so that tables
        # read clearly and stay put when the rules start mentioning another member.
        quiet = [m for m in others if m not in mentioned_anywhere] or others
        if t.open_member in quiet:
            quiet = [t.open_member]
        rest = [(quiet[0], *(m for m in others if m != quiet[0]))] if others else []
        return head + [(m,) for m in named] + rest
    if isinstance(t, IntT):
        groups: dict[tuple[bool, ...], list[int]] = {}
        for v in t.values:
            groups.setdefault(tuple(_compare(v, op, lit) for op, lit in compares), []).append(v)
        return head + [tuple(group) for group in groups.values()]
    return head + [(False,), (True,)]


@dataclass(frozen=True)
class DomainInput:
    name: str  # as the rules say it: `mamba.linear_attn_backend`, `runner.sm`, `prefill_default`, `S.f`
    kind: str  # enum / int / bool
    values: tuple[Any, ...]  # the values a test runs: one representative per class
    covers: tuple[tuple[Any, ...], ...] = ()  # per value, every value of its class (itself when empty)

    def cover(self, index: int) -> tuple[Any, ...]:
        return self.covers[index] if self.covers else (self.values[index],)


def kind_of(t: Type) -> str:
    return "enum" if isinstance(t, EnumT) else "int" if isinstance(t, IntT) else "bool"


def cell(value: Any) -> str:
    """A value as a table cell: `-` for unset, `true`/`false`, ints and enum members as written."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class InputDomain:
    inputs: list[DomainInput]
    mode: str  # exhaustive / abstract / sample
    rows: int  # how many rows the test runs
    full_rows: int  # the size of the whole finite domain

    @property
    def text(self) -> str:
        """One line per input: its name, its kind, its values (`-` is unset); aligned."""
        width = max((len(i.name) for i in self.inputs), default=0)
        lines = [
            f"{i.name.ljust(width)}  {i.kind.ljust(4)}  {' '.join(cell(v) for v in i.values)}"
            for i in self.inputs
        ]
        return "\n".join(lines) + "\n"

    @property
    def description(self) -> str:
        if self.mode == "exhaustive":
            return f"every one of the {self.full_rows:,} rows of the whole finite input domain"
        if self.mode == "abstract":
            return (
                f"all {self.rows:,} rows of the abstract domain (the whole domain has {self.full_rows:,}): "
                "enum members the rules never mention behave identically, so one of them stands for all, "
                "and so does one int value per class of values that agree on every comparison the rules make"
            )
        return (
            f"{self.rows:,} rows drawn with a fixed seed from the abstract domain (the whole domain has "
            f"{self.full_rows:,} rows, too many to enumerate): enum members the rules never mention behave "
            "identically, so one of them stands for all, and so does one int value per class of values that "
            "agree on every comparison the rules make"
        )


def _product(sizes: Iterable[int]) -> int:
    return functools.reduce(lambda a, b: a * b, sizes, 1)


def make_domain(
    inputs: Sequence[tuple[str, Type, bool]], mentions: _Mentions, *, force_abstract: bool = False
) -> InputDomain:
    mentions.close()
    full = [DomainInput(n, kind_of(t), (None,) * opt + tuple(domain(t))) for n, t, opt in inputs]
    full_rows = _product(len(i.values) for i in full)
    if full_rows <= EXHAUSTIVE_LIMIT and not force_abstract:
        return InputDomain(full, "exhaustive", full_rows, full_rows)
    anywhere = [v for values in mentions.values.values() for v in values]
    abstract = []
    for n, t, opt in inputs:
        classes = _abstract_classes(
            t, opt, mentions.values.get(n, []), mentions.compares.get(n, []), anywhere
        )
        abstract.append(DomainInput(n, kind_of(t), tuple(c[0] for c in classes), tuple(classes)))
    rows = _product(len(i.values) for i in abstract)
    mode = "abstract" if rows <= EXHAUSTIVE_LIMIT else "sample"
    return InputDomain(abstract, mode, rows if mode == "abstract" else SAMPLE_ROWS, full_rows)


def _leaf_inputs(model: Model, names: Iterable[str]) -> list[tuple[str, Type, bool]]:
    wanted = set(names)
    return [
        (n, leaf.type, leaf.optional and not leaf.is_fact) for n, leaf in model.leaves.items() if n in wanted
    ]


def _mention_defaults(model: Model, mentions: _Mentions, names: Iterable[str]) -> None:
    for n in names:
        leaf = model.leaves.get(n)
        if leaf is not None and leaf.default is not None:
            mentions.set_value(n, leaf.default)


def stamp_domain(model: Model, info: StampInfo, *, force_abstract: bool = False) -> InputDomain:
    """The inputs of resolve_X: its config leaves, then its slots."""
    mentions = _Mentions()
    for f in info.fields:
        mentions.chain(f.decl)
    inputs = interpreter.stamp_inputs(model, info)
    _mention_defaults(model, mentions, [n for n, _, _ in inputs])
    return make_domain(inputs, mentions, force_abstract=force_abstract)


def gate_domain(model: Model, name: str) -> InputDomain:
    decl = model.autos[name].decl
    mentions = _Mentions()
    mentions.expr(decl.when)
    names = [r.name for r in ir.expr_refs(decl.when)]
    _mention_defaults(model, mentions, names)
    return make_domain(_leaf_inputs(model, names), mentions)


def stamping_domain(model: Model, info: StampInfo) -> InputDomain:
    """The inputs of stamp_X: what its gates and its resolver read, and the slots no gate computes."""
    mentions = _Mentions()
    for f in info.fields:
        mentions.chain(f.decl)
    names = [n for n, _, _ in interpreter.stamp_inputs(model, info) if n in model.leaves]
    for slot in info.slots:
        for gate in slot.sources:
            decl = model.autos[gate].decl
            mentions.expr(decl.when)
            names += [r.name for r in ir.expr_refs(decl.when)]
    _mention_defaults(model, mentions, names)
    inputs = _leaf_inputs(model, names)
    inputs += [(s.name, s.type, True) for s in info.slots if not s.sources]
    return make_domain(inputs, mentions)


def _launch_names(launch: LaunchInfo, mentions: _Mentions) -> list[str]:
    """What one launch block reads (and writes), noting what it says about each input in `mentions`."""
    names: list[str] = []
    for stmt in launch.stmts:
        if isinstance(stmt, ir.SetStmt):
            mentions.expr(stmt.when)
            mentions.set_value(stmt.target.name, stmt.value.value)
            names.append(stmt.target.name)
            names += [r.name for r in ir.expr_refs(stmt.when)] if stmt.when else []
        elif isinstance(stmt, ir.Check):
            mentions.expr(stmt.cond)
            names += [r.name for r in ir.expr_refs(stmt.cond)]
        else:
            mentions.chain(stmt)
            for tier in stmt.tiers:
                names += [tier.ref.name] if tier.ref else []
                names += [r.name for r in ir.expr_refs(tier.when)] if tier.when else []
    return names


def launch_domain(model: Model) -> InputDomain:
    """The inputs of every launch block together (they run in order, each seeing the last one's writes)."""
    mentions = _Mentions()
    names: list[str] = []
    for launch in model.launches:
        names += _launch_names(launch, mentions)
    _mention_defaults(model, mentions, names)
    return make_domain(_leaf_inputs(model, names), mentions)


def launch_block_domain(model: Model, launch: LaunchInfo) -> InputDomain:
    """The inputs of one launch block on its own."""
    mentions = _Mentions()
    names = _launch_names(launch, mentions)
    _mention_defaults(model, mentions, names)
    return make_domain(_leaf_inputs(model, names), mentions)


def validate_domain(model: Model, info: ValidateInfo) -> InputDomain:
    """The inputs of validate_X: the stamp's fields (as `Stamp.field`), then what its conditions read."""
    stamp = model.stamps[info.stamps[0]] if info.stamps else None
    stamp_fields = {stamp.name: tuple(f.name for f in stamp.fields)} if stamp else {}
    mentions = _Mentions()
    names: list[str] = []
    for stmt in info.decl.stmts:
        if isinstance(stmt, ir.Check):
            mentions.expr(stmt.cond, stamp_fields)
            names += [r.name for r in ir.expr_refs(stmt.cond)]
        elif isinstance(stmt, ir.Fallback):
            mentions.expr(stmt.when, stamp_fields)
            mentions.set_value(stmt.field.name, stmt.from_value.value)
            mentions.set_value(stmt.field.name, stmt.to_value.value)
            names += [r.name for r in ir.expr_refs(stmt.when)]
    inputs: list[tuple[str, Type, bool]] = []
    if stamp is not None:
        inputs += [(f"{stamp.name}.{f.name}", f.type, False) for f in stamp.fields]
    inputs += _leaf_inputs(model, names)
    return make_domain(inputs, mentions)


# --------------------------------------------------------------------------------------------- refusals


def refused_values(t: IntT) -> tuple[Any, ...]:
    """Values an input of `t` must refuse (the generated code and the interpreter alike): an int outside
    its domain, a domain value written as a string, and a bool (which Python would compare as 0 or 1)."""
    return (max(t.values) + 1, str(t.values[0]), True)
