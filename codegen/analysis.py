"""Dead-rule analysis: rules of a checked Model that can never decide anything, as warnings.

Run after a clean check (codegen/load.py). Every question it asks is "is there an input on which this rule
acts?" (a tier wins, a gate yields, a check fails, a fallback or a `set` applies) over the finite input
domain of the rule, where every config leaf, fact, slot and stamp field can take any value of its type
(and unset when it is optional): facts are not known at check time, and a stamp handed to a validator or a
slot handed to a resolver may hold anything its type allows. The warnings are claims about *every* input,
so they hold on the narrower set of inputs the other rules leave reachable too.

The domain is not enumerated row by row: even abstracted (codegen/domains.py) it is too large for `check`
to walk once per question (one gate of the shipped rules reads 14 inputs, 92,160 abstract rows).
Conditions become formulas over the inputs, where each atom says "this input takes one of these values"
(the classes of values a comparison treats alike, as in the abstract domain); a small solver intersects
the atoms on each input, splits a conjunction into parts that share no input, and branches on a
disjunction only where parts do share one, each branch narrowing the values the rest may take. A question
that needs more than MAX_STEPS branches is left undecided: no warning, never a guess. tests/test_analysis.py
holds every answer against the interpreter run on every input of random rules files.

Values that rules compute (a stamp field, a launch local, a config leaf after a `set`, a stamp field after
a `fallback`) are kept symbolic, as the first of several guarded cases, so that a condition on them becomes
a formula over the inputs again. Statement order is the generated code's: a launch block or a validator
raises at the first `forbid` / `require` that fails, so a later rule never acts on those inputs.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, Note, Severity
from stampgen.codegen.interpreter import show_expr, show_value
from stampgen.codegen.model import Model, domain

# Branches the solver may take for one question; past it the question is undecided (no warning). The
# shipped rules need at most 9; this bounds one question of a pathological file to a fraction of a second.
MAX_STEPS = 2_000

# Atoms in the formulas of one computed value (a field after its fallbacks, a leaf after its `set`s) past
# which the analysis treats it as free: see `_Analysis._bounded`.
MAX_VALUE_SIZE = 2_000  # the shipped rules' largest is 115

# Atoms in one question past which it is undecided (no warning), before it is even built: what walking
# the formulas costs grows with their size. The shipped rules' largest question has 235.
MAX_QUESTION_SIZE = 4_000

# How many of the checks just before a statement may pre-empt it (the analysis of a block stays linear in
# its length; the shipped rules' longest block has 16 checks).
MAX_PRE_EMPTERS = 32

# The work (formula nodes built or walked) the analysis of one file may do: WORK_PER_RULE for each tier,
# gate and statement, and WORK_BASE more; past it the analysis stops (the rules after that point get no
# warning), so that `check` stays linear in the file. The shipped rules (54 rules) use 10k of their 111k;
# a synthetic stamp of 7 tiers (benchmarks/language_bench.py) uses 60.
WORK_BASE = 100_000
WORK_PER_RULE = 200

# Past this many conjuncts, a condition that is never true is not searched for the pair that contradicts.
MAX_CORE_PARTS = 24


class Finding(str, enum.Enum):
    """The warning codes of this analysis (stable: golden tests pin their messages)."""

    TIER_NEVER_WINS = "tier-never-wins"
    GATE_NEVER_YIELDS = "gate-never-yields"
    GATE_ALWAYS_YIELDS = "gate-always-yields"
    GATES_OVERLAP = "gates-overlap"
    CHECK_NEVER_FIRES = "check-never-fires"
    CHECK_PRE_EMPTED = "check-pre-empted"
    CHECK_ALWAYS_FIRES = "check-always-fires"
    FALLBACK_NEVER_APPLIES = "fallback-never-applies"
    FALLBACK_PRE_EMPTED = "fallback-pre-empted"
    SET_NEVER_APPLIES = "set-never-applies"


# --------------------------------------------------------------------------------------------- formulas


@dataclass(frozen=True, slots=True, eq=False)
class Lit:
    """`var` takes one of `values`: a non-empty, strict subset of its domain."""

    var: str
    values: frozenset[Any]


@dataclass(frozen=True, slots=True, eq=False)
class AllOf:
    """A conjunction, kept normal by `Logic.conj`: at most one Lit per input, the rest AnyOf."""

    parts: tuple[Formula, ...]
    vars: frozenset[str]
    size: int  # atoms in the tree, counted once per occurrence: what walking it costs


@dataclass(frozen=True, slots=True, eq=False)
class AnyOf:
    parts: tuple[Formula, ...]
    vars: frozenset[str]
    size: int


Formula = Union[bool, Lit, AllOf, AnyOf]
Witness = dict[str, frozenset[Any]]  # per input, the values a satisfying input may take


class Undecided(Exception):
    """A question is too large to decide: MAX_STEPS, MAX_QUESTION_SIZE or the file's work budget."""


class _OutOfWork(Exception):
    """The file's work budget is spent: the analysis stops where it is."""


def _vars(f: Formula) -> frozenset[str]:
    if isinstance(f, bool):
        return frozenset()
    return frozenset((f.var,)) if isinstance(f, Lit) else f.vars


def size(f: Formula) -> int:
    if isinstance(f, bool):
        return 0
    return 1 if isinstance(f, Lit) else f.size


class Logic:
    """Formulas over inputs with finite domains: built simplified, negated, and solved."""

    def __init__(self, domain_of: Callable[[str], tuple[Any, ...]]):
        self._domain_of = domain_of
        self._domains: dict[str, tuple[tuple[Any, ...], frozenset[Any]]] = {}
        self._negated: dict[int, tuple[Formula, Formula]] = {}
        self.steps = 0
        self.work = 0  # formula nodes built or walked, over the whole analysis
        self.budget = 0  # past this much work, every question is undecided (set per file)

    def forget(self) -> None:
        """Drop the caches: between declarations, so that a large file does not keep every formula alive."""
        self._negated.clear()

    def domain(self, var: str) -> tuple[tuple[Any, ...], frozenset[Any]]:
        if var not in self._domains:
            values = self._domain_of(var)
            self._domains[var] = (values, frozenset(values))
        return self._domains[var]

    def lit(self, var: str, holds: Callable[[Any], bool]) -> Formula:
        values, _ = self.domain(var)
        return self._lit(var, frozenset(v for v in values if holds(v)))

    def _lit(self, var: str, values: frozenset[Any]) -> Formula:
        if not values:
            return False
        if len(values) == len(self.domain(var)[1]):
            return True
        return Lit(var, values)

    def conj(self, parts: Iterable[Formula]) -> Formula:
        """The conjunction, with each input's atoms intersected and pushed into the disjunctions (which
        may then collapse into atoms, pushed in turn): a contradiction shows up as False here already."""
        lits: dict[str, frozenset[Any]] = {}
        ors: list[AnyOf] = []
        queue = list(_flat(parts, AllOf))
        self.work += len(queue)
        fresh = 0  # ors[fresh:] have not been restricted by any atom yet
        while queue:
            narrowed: dict[str, frozenset[Any]] = {}
            for p in queue:
                if p is False:
                    return False
                if isinstance(p, Lit):
                    have = lits.get(p.var)
                    values = p.values if have is None else have & p.values
                    if not values:
                        return False
                    if values != have:
                        lits[p.var] = narrowed[p.var] = values
                elif isinstance(p, AnyOf):
                    ors.append(p)
            # the disjunctions restricted so far need only the atoms that narrowed; new ones need all
            queue, kept = [], []
            for i, o in enumerate(ors):
                r = self.restrict(o, lits if i >= fresh else narrowed)
                if isinstance(r, AnyOf):
                    kept.append(r)
                else:
                    queue += _flat([r], AllOf)
            ors, fresh = kept, len(kept)
        return self._join(AllOf, [*(Lit(v, s) for v, s in lits.items()), *ors])

    def disj(self, parts: Iterable[Formula]) -> Formula:
        lits: dict[str, frozenset[Any]] = {}
        rest: list[Formula] = []
        for p in _flat(parts, AnyOf):
            if p is True:
                return True
            if isinstance(p, Lit):
                values = lits.get(p.var, frozenset()) | p.values
                if len(values) == len(self.domain(p.var)[1]):
                    return True
                lits[p.var] = values
            elif isinstance(p, AllOf):
                rest.append(p)
        return self._join(AnyOf, [*(Lit(v, s) for v, s in lits.items()), *rest])

    @staticmethod
    def _join(kind: type[AllOf] | type[AnyOf], parts: list[Formula]) -> Formula:
        if not parts:
            return kind is AllOf
        if len(parts) == 1:
            return parts[0]
        return kind(tuple(parts), frozenset().union(*(_vars(p) for p in parts)), sum(map(size, parts)))

    def restrict(self, f: Formula, lits: Mapping[str, frozenset[Any]]) -> Formula:
        """`f` where each input in `lits` is known to take one of those values."""
        self.work += 1
        if isinstance(f, bool):
            return f
        if isinstance(f, Lit):
            allowed = lits.get(f.var)
            if allowed is None:
                return f
            inside = f.values & allowed
            if not inside:
                return False
            if inside == allowed:
                return True
            return f if inside == f.values else Lit(f.var, inside)
        if f.vars.isdisjoint(lits):
            return f
        parts = [self.restrict(p, lits) for p in f.parts]
        if all(new is old for new, old in zip(parts, f.parts)):
            return f
        return self.conj(parts) if isinstance(f, AllOf) else self.disj(parts)

    def neg(self, f: Formula) -> Formula:
        if isinstance(f, bool):
            return not f
        cached = self._negated.get(id(f))
        if cached is not None and cached[0] is f:
            return cached[1]
        if isinstance(f, Lit):
            result = self._lit(f.var, self.domain(f.var)[1] - f.values)
        elif isinstance(f, AllOf):
            result = self.disj(self.neg(p) for p in f.parts)
        else:
            result = self.conj(self.neg(p) for p in f.parts)
        self._negated[id(f)] = (f, result)  # holding `f` keeps its id from being reused
        return result

    def satisfiable(self, f: Formula) -> bool | None:
        """True or False, or None when the question is too large to decide."""
        try:
            return self.example(f) is not None
        except Undecided:
            return None

    def example(self, f: Formula) -> Witness | None:
        """The values of an input that satisfies `f` (for the inputs it constrains), None if none does;
        raises Undecided when the question is too large (MAX_QUESTION_SIZE, MAX_STEPS, the work budget)."""
        if size(f) > MAX_QUESTION_SIZE or self.work > self.budget:
            raise Undecided
        self.steps = 0
        return self._solve(f)

    def _solve(self, f: Formula) -> Witness | None:
        self.steps += 1
        if self.steps > MAX_STEPS or self.work > self.budget:
            raise Undecided
        if isinstance(f, bool):
            return {} if f else None
        if isinstance(f, Lit):
            return {f.var: f.values}
        if isinstance(f, AnyOf):
            for p in f.parts:
                found = self._solve(p)
                if found is not None:
                    return found
            return None
        # A normal conjunction: its atoms hold (they are non-empty and already pushed into the rest), and
        # disjunctions that share no input are solved on their own.
        witness: Witness = {p.var: p.values for p in f.parts if isinstance(p, Lit)}
        for group in _components([p for p in f.parts if isinstance(p, AnyOf)]):
            pick = min(group, key=lambda o: len(o.parts))
            others = [o for o in group if o is not pick]
            for option in pick.parts:
                found = self._solve(self.conj([option, *others]))
                if found is not None:
                    witness.update(found)
                    break
            else:
                return None
        return witness


def _flat(parts: Iterable[Formula], kind: type[AllOf] | type[AnyOf]) -> Iterator[Formula]:
    for p in parts:
        if isinstance(p, kind):
            yield from _flat(p.parts, kind)
        else:
            yield p


def _components(ors: list[AnyOf]) -> list[list[AnyOf]]:
    """The disjunctions grouped so that no two groups read a common input."""
    groups: list[tuple[set[str], list[AnyOf]]] = []
    for o in ors:
        merged: tuple[set[str], list[AnyOf]] = (set(o.vars), [o])
        for group in [g for g in groups if not g[0].isdisjoint(o.vars)]:
            groups.remove(group)
            merged[0].update(group[0])
            merged[1][:0] = group[1]
        groups.append(merged)
    return [g[1] for g in groups]


# --------------------------------------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Test:
    """A comparison a condition makes on a value, with the interpreter's meaning of unset (None)."""

    op: str  # == != < <= >= in | not in | unset | set | truthy
    arg: Any = None

    def holds(self, v: Any) -> bool:
        op, arg = self.op, self.arg
        if op == "==":
            return v is not None and v == arg
        if op == "!=":
            return v is None or v != arg
        if op in ("in", "not in"):
            return (v is not None and v in arg) == (op == "in")
        if op == "unset":
            return v is None
        if op == "set":
            return v is not None
        if op == "truthy":
            return bool(v)
        if v is None:
            return False
        return bool(v < arg if op == "<" else v <= arg if op == "<=" else v >= arg)


IS_SET = Test("set")


@dataclass(frozen=True, slots=True, eq=False)
class Input:
    var: str


@dataclass(frozen=True, slots=True, eq=False)
class Fixed:
    value: Any


class Cases:
    """A computed value: for each value it can take, the formula over the inputs where it takes it.

    The formulas exclude each other, so a `set` or a fallback changes only the entries of the values it
    moves (they grow by its condition, not by a copy of the value before it). Each entry is built the first
    time a condition asks about that value: most conditions ask about one or two."""

    __slots__ = ("values", "weight", "_entry", "_built")

    def __init__(self, values: Iterable[Any], entry: Callable[[Any], Formula], weight: int):
        self.values = tuple(dict.fromkeys(values))  # every value it may take, in a stable order
        self.weight = weight  # about how many atoms its entries hold, all built: see MAX_VALUE_SIZE
        self._entry = entry
        self._built: dict[Any, Formula] = {}

    def eq(self, v: Any) -> Formula:
        if v not in self._built:
            self._built[v] = self._entry(v) if v in self.values else False
        return self._built[v]


Value = Union[Input, Fixed, Cases]
Env = Callable[[str], Value]


class Formulas(Logic):
    """Conditions of the rules (ir.Expr) as formulas over the inputs, through the values rules compute."""

    def __init__(
        self, domain_of: Callable[[str], tuple[Any, ...]], stamp_fields: Mapping[str, Sequence[str]]
    ):
        super().__init__(domain_of)
        self.stamp_fields = stamp_fields

    def atom(self, value: Value, test: Test) -> Formula:
        if isinstance(value, Fixed):
            return test.holds(value.value)
        if isinstance(value, Input):
            return self.lit(value.var, test.holds)
        # the entries partition the inputs: ask about the fewer values (`is set` is "not unset")
        holding = [v for v in value.values if test.holds(v)]
        if 2 * len(holding) <= len(value.values):
            return self.disj(value.eq(v) for v in holding)
        return self.neg(self.disj(value.eq(v) for v in value.values if not test.holds(v)))

    def possible(self, value: Value) -> tuple[Any, ...]:
        if isinstance(value, Fixed):
            return (value.value,)
        return self.domain(value.var)[0] if isinstance(value, Input) else value.values

    def entry(self, value: Value, v: Any) -> Formula:
        """Where `value` is `v`."""
        if isinstance(value, Fixed):
            return bool(value.value == v)
        if isinstance(value, Input):
            return self._lit(value.var, frozenset((v,)) & self.domain(value.var)[1])
        return value.eq(v)

    def first_of(self, cases: Sequence[tuple[Formula, Value]]) -> Value:
        """The value of the first case whose guard holds (a precedence chain); unset when none does."""
        chosen: list[tuple[Formula, Value]] = []  # (where this case is the first whose guard holds, case)
        none_before: Formula = True
        for guard, case in cases:
            chosen.append((self.conj([none_before, guard]), case))
            none_before = self.conj([none_before, self.neg(guard)])

        def entry(v: Any) -> Formula:
            found = [self.conj([here, self.entry(case, v)]) for here, case in chosen]
            return self.disj([*found, none_before if v is None else False])

        values = [v for _, case in chosen for v in self.possible(case)] + [None] * (none_before is not False)
        weight = sum(size(here) + _value_size(case) for here, case in chosen) + size(none_before)
        return Cases(values, entry, weight)

    def assign(self, value: Value, when: Formula, new: Any) -> Value:
        """`value`, or `new` where `when` holds (a `set`)."""
        otherwise = self.neg(when)

        def entry(v: Any) -> Formula:
            kept = self.conj([otherwise, self.entry(value, v)])
            return self.disj([when, kept]) if v == new else kept

        return Cases([*self.possible(value), new], entry, _value_size(value) + 2 * size(when))

    def replace(self, value: Value, old: Any, new: Any, when: Formula) -> tuple[Value, Formula]:
        """`value` with `old` replaced by `new` where `when` holds (a fallback), and where it applies."""
        applies = self.conj([self.entry(value, old), when])
        stays = self.neg(when)

        def entry(v: Any) -> Formula:
            if v == old:
                return self.conj([self.entry(value, old), stays])
            return self.disj([self.entry(value, v), applies]) if v == new else self.entry(value, v)

        return Cases([*self.possible(value), new], entry, _value_size(value) + 2 * size(applies)), applies

    def expr(self, e: ir.Expr, env: Env) -> Formula:
        if isinstance(e, ir.Const):
            return e.value
        if isinstance(e, ir.Not):
            return self.neg(self.expr(e.operand, env))
        if isinstance(e, ir.And):
            return self.conj([self.expr(e.left, env), self.expr(e.right, env)])
        if isinstance(e, ir.Or):
            return self.disj([self.expr(e.left, env), self.expr(e.right, env)])
        if isinstance(e, ir.Implies):
            return self.disj([self.neg(self.expr(e.left, env)), self.expr(e.right, env)])
        if isinstance(e, ir.AnyField):
            test = Test("==", e.value.value)
            return self.disj(
                self.atom(env(f"{e.stamp.name}.{f}"), test) for f in self.stamp_fields[e.stamp.name]
            )
        return self.atom(env(e.ref.name), _test(e))


def _test(e: ir.Truthy | ir.Compare | ir.Member | ir.IsUnset) -> Test:
    if isinstance(e, ir.Truthy):
        return Test("truthy")
    if isinstance(e, ir.IsUnset):
        return Test("set" if e.negated else "unset")
    if isinstance(e, ir.Member):
        return Test("not in" if e.negated else "in", frozenset(v.value for v in e.values))
    return Test(e.op, e.value.value)


def _conjuncts(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.And):
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


# --------------------------------------------------------------------------------------------- the analysis


def analyze(model: Model, reported: Sequence[Diagnostic] = ()) -> list[Diagnostic]:
    """The dead-rule warnings of a checked model. `reported` are the checker's own diagnostics, not said
    again: a tier it reported as shadowed (`when false`, after an unconditional tier), and a rule that holds
    an `is set` / `is unset` it reported as constant (`never-unset`)."""
    return _Analysis(model, reported).run()


class _Analysis:
    def __init__(self, model: Model, reported: Sequence[Diagnostic]):
        self.model = model
        self.shadowed = {d.loc for d in reported if d.code == "shadowed-tier"}
        self.constant = [d.loc for d in reported if d.code == "never-unset"]
        self.found: list[Diagnostic] = []
        # the `set`s or fallbacks so far in the block being analysed, by what they write
        self.writers: dict[str, list[ir.SetStmt | ir.Fallback]] = {}
        self.domains: dict[str, tuple[Any, ...]] = {}
        for name, leaf in model.leaves.items():
            self.domains[name] = ((None,) if leaf.optional and not leaf.is_fact else ()) + tuple(
                domain(leaf.type)
            )
        for stamp in model.stamps.values():
            for f in stamp.fields:  # as a validator reads them: a stamp always has every field
                self.domains[f"{stamp.name}.{f.name}"] = tuple(domain(f.type))
            for s in stamp.slots:  # as a resolver reads them: the caller may give any value, or none
                self.domains[_slot_var(stamp.name, s.name)] = (None, *domain(s.type))
        fields = {s.name: tuple(f.name for f in s.fields) for s in model.stamps.values()}
        self.f = Formulas(self.domains.__getitem__, fields)
        self.f.budget = WORK_BASE + WORK_PER_RULE * _rule_count(model)

    def run(self) -> list[Diagnostic]:
        try:
            for stamp in self.model.stamps.values():
                self._stamp(stamp.name)
                self.f.forget()
            self._gates()
            self.f.forget()
            self._launches()
            for info in self.model.validates:
                self.f.forget()
                # a waived consumer logs its failures and goes on: an earlier check pre-empts nothing there
                self._validate(info.decl, pre_emption=not getattr(info.decl, "waivers", ()))
        except _OutOfWork:  # every question left would be undecided: stop building their formulas too
            pass
        return self.found

    def _next_rule(self) -> None:
        if self.f.work > self.f.budget:
            raise _OutOfWork

    def warn(
        self,
        code: Finding,
        message: str,
        loc: ir.Loc,
        notes: Iterable[Note] = (),
        hint: str | None = None,
        span: ir.Loc | None = None,
    ) -> None:
        """Report, unless the rule (`span`, default `loc`) holds a part the checker already reported as
        constant (`x is unset` on a leaf that is never unset): that warning says the same, where it is."""
        if any(_inside(c, span or loc) for c in self.constant):
            return
        self.found.append(Diagnostic(Severity.WARNING, code.value, message, loc, hint, tuple(notes)))

    def never(self, f: Formula) -> bool:
        """True when no input satisfies `f`, decided (an undecided question is no finding)."""
        return self.f.satisfiable(f) is False

    def can(self, f: Formula) -> bool:
        return self.f.satisfiable(f) is True

    def _example(self, f: Formula) -> Witness | None:
        """An input satisfying `f`; None when none does or the question is undecided."""
        try:
            return self.f.example(f)
        except Undecided:
            return None

    # ------------------------------------------------------------------ precedence chains

    def _stamp(self, name: str) -> None:
        info = self.model.stamps[name]
        slots = {s.name for s in info.slots}
        fields = _Computed()

        def env(ref: str) -> Value:
            value = fields.get(ref)
            if value is not None:
                return value
            return Input(_slot_var(name, ref) if ref in slots else ref)

        for field in info.eval_order:
            self._next_rule()
            decl = info.field(field).decl
            fields.put(
                field, self._value_of(self._chain(decl, env), field, decl.loc, domain(info.field(field).type))
            )

    def _value_of(
        self, cases: list[tuple[Formula, Value]], name: str, at: ir.Loc, values: Sequence[Any] | None
    ) -> Callable[[], Value]:
        """How to build a chain's value from its tiers, when a rule first reads it."""

        def build() -> Value:
            value = self.f.first_of(cases)
            return value if values is None else self._bounded(value, name, at, values)

        return build

    def _bounded(self, value: Value, name: str, at: ir.Loc, values: Sequence[Any]) -> Value:
        """`value`, or past MAX_VALUE_SIZE a fresh input that may take any of `values`: a free input
        stands for a superset of what the value can be, so every warning (a claim about all inputs) still
        holds; only some are lost. (A long run of `set`s or fallbacks on one value gets there.)"""
        if _value_size(value) <= MAX_VALUE_SIZE:
            return value
        var = f"{name}@{at.line}:{at.col}"
        self.domains[var] = tuple(values)
        return Input(var)

    def _chain(self, decl: ir.FieldDecl, env: Env, report: bool = True) -> list[tuple[Formula, Value]]:
        """The field's tiers as (where it would yield, what), reporting each tier that never wins on the
        way (unless not `report`)."""
        tiers: list[tuple[ir.Tier, Formula, Formula]] = []  # tier, its condition, "it would yield"
        cases: list[tuple[Formula, Value]] = []
        for tier in decl.tiers:
            source = _tier_source(tier, env)
            when = self.f.expr(tier.when, env) if tier.when is not None else True
            yields = self.f.conj([when, self.f.atom(source, IS_SET)])
            if report and tier.loc not in self.shadowed:
                if self.never(self.f.conj([yields, *(self.f.neg(g) for _, _, g in tiers)])):
                    self._tier_never_wins(tier, when, yields, tiers, env)
            tiers.append((tier, when, yields))
            cases.append((yields, source))
        return cases

    def _tier_never_wins(
        self,
        tier: ir.Tier,
        when: Formula,
        yields: Formula,
        earlier: list[tuple[ir.Tier, Formula, Formula]],
        env: Env,
    ) -> None:
        what = f"this `{tier.kind}` tier can never win"
        if self.never(yields):
            if tier.when is not None and self.never(when):
                notes = self._never_true(tier.when, env)
                self.warn(Finding.TIER_NEVER_WINS, f"{what}: its condition is never true", tier.loc, notes)
            else:
                source = tier.ref.name if tier.ref is not None else "its source"
                message = f"{what}: `{source}` is unset whenever its condition holds"
                notes = [Note("this condition", tier.when.loc)] if tier.when is not None else []
                self.warn(Finding.TIER_NEVER_WINS, message, tier.loc, notes)
            return
        # It would yield on some input, and an earlier tier wins on each of them: name one that yields on
        # all of them if there is one, else every earlier tier that wins on some.
        for before, _, before_yields in earlier:
            if self.never(self.f.conj([yields, self.f.neg(before_yields)])):
                note = Note(
                    f"shadowed by this `{before.kind}` tier: it yields whenever the later one would",
                    before.loc,
                )
                self.warn(
                    Finding.TIER_NEVER_WINS,
                    f"{what}: an earlier tier yields a value whenever it would",
                    tier.loc,
                    [note],
                )
                return
        notes = []
        for i, (before, _, before_yields) in enumerate(earlier):
            wins = self.f.conj([before_yields, *(self.f.neg(g) for _, _, g in earlier[:i])])
            if self.can(self.f.conj([yields, wins])):
                notes.append(
                    Note(
                        f"this `{before.kind}` tier wins on some of the inputs where it would yield",
                        before.loc,
                    )
                )
        self.warn(
            Finding.TIER_NEVER_WINS,
            f"{what}: on every input where it would yield a value, an earlier tier wins",
            tier.loc,
            notes,
        )

    def _never_true(self, e: ir.Expr, env: Env) -> list[Note]:
        """Why a condition is never true: a part that is never true, or two parts that cannot both hold,
        or else the whole condition; and the earlier `set`s or fallbacks that made it so, if any."""
        core, notes = [e], [Note("this condition is never true", e.loc)]
        parts = _conjuncts(e)
        if 1 < len(parts) <= MAX_CORE_PARTS:
            formulas = [self.f.expr(p, env) for p in parts]
            lone = next((i for i, f in enumerate(formulas) if self.never(f)), None)
            pairs = ((i, j) for i in range(len(parts)) for j in range(i + 1, len(parts)))
            pair = (
                None
                if lone is not None
                else next(
                    ((i, j) for i, j in pairs if self.never(self.f.conj([formulas[i], formulas[j]]))), None
                )
            )
            if lone is not None:
                core = [parts[lone]]
                notes = [Note(f"`{show_expr(parts[lone])}` is never true here", parts[lone].loc)]
            elif pair is not None:
                a, b = parts[pair[0]], parts[pair[1]]
                core = [a, b]
                notes = [
                    Note(f"`{show_expr(a)}` and `{show_expr(b)}` cannot both hold", a.loc),
                    Note(f"`{show_expr(b)}` is here", b.loc),
                ]
        return notes + self._blame_writes(core, env)

    def _blame_writes(self, core: list[ir.Expr], env: Env, negated: bool = False) -> list[Note]:
        """The earlier statements that write what `core` reads, when `core` (or with `negated`, its
        negation) could hold before them."""
        read = {n for p in core for n in self._names(p)}
        written = sorted(read & self.writers.keys())
        if not written:
            return []

        def before(ref: str) -> Value:
            return Input(ref) if ref in self.writers else env(ref)

        could = self.f.conj([self.f.expr(p, before) for p in core])
        if not self.can(self.f.neg(could) if negated else could):
            return []
        return [
            Note(
                f"this {'`set`' if isinstance(w, ir.SetStmt) else 'fallback'} writes `{name}` before it",
                w.loc,
            )
            for name in written
            for w in self.writers[name]
        ]

    def _names(self, e: ir.Expr) -> list[str]:
        if isinstance(e, ir.AnyField):
            return [f"{e.stamp.name}.{f}" for f in self.f.stamp_fields[e.stamp.name]]
        if isinstance(e, ir.Not):
            return self._names(e.operand)
        if isinstance(e, (ir.And, ir.Or, ir.Implies)):
            return self._names(e.left) + self._names(e.right)
        return [r.name for r in ir.expr_refs(e)]

    # ------------------------------------------------------------------ gates

    def _gates(self) -> None:
        conditions: dict[str, Formula] = {}
        for name, info in self.model.autos.items():
            self._next_rule()
            decl = info.decl
            when = conditions[name] = self.f.expr(decl.when, Input)
            if self.never(when):
                notes = self._never_true(decl.when, Input)
                self.warn(
                    Finding.GATE_NEVER_YIELDS,
                    f"auto gate `{name}` can never yield: its condition is never true",
                    decl.name.loc,
                    notes,
                    span=decl.loc,
                )
            elif not isinstance(decl.when, ir.Const) and self.never(self.f.neg(when)):
                self.warn(
                    Finding.GATE_ALWAYS_YIELDS,
                    f"auto gate `{name}` always yields: its condition holds on every input",
                    decl.name.loc,
                    [Note("this condition always holds", decl.when.loc)],
                    hint="write `when true` if it should always yield; else the condition misses a case",
                    span=decl.loc,
                )
        for stamp in self.model.stamps.values():
            for slot in stamp.slots:
                self._slot(f"{stamp.name}.{slot.name}", list(dict.fromkeys(slot.sources)), conditions)

    def _slot(self, slot: str, gates: list[str], conditions: Mapping[str, Formula]) -> None:
        """The first gate that yields fills the slot: a later gate loses wherever an earlier one yields."""
        autos = self.model.autos
        for j, later in enumerate(gates):
            self._next_rule()
            if j == 0 or not self.can(conditions[later]):
                continue
            earlier = gates[:j]
            fills = self.f.conj([conditions[later], *(self.f.neg(conditions[g]) for g in earlier)])
            overlapping = [
                (g, self._example(self.f.conj([conditions[g], conditions[later]]))) for g in earlier
            ]
            if self.never(fills):
                notes = [
                    Note(f"`{g}` yields first", autos[g].decl.name.loc)
                    for g, w in overlapping
                    if w is not None
                ]
                self.warn(
                    Finding.GATES_OVERLAP,
                    f"auto gate `{later}` never fills slot `{slot}`: whenever it yields, a gate listed before it "
                    "yields first",
                    autos[later].decl.name.loc,
                    notes,
                )
                continue
            for g, w in overlapping:
                if w is not None:
                    self.warn(
                        Finding.GATES_OVERLAP,
                        f"auto gates `{g}` and `{later}` both yield on some inputs (e.g. {self._show(w)}); "
                        f"slot `{slot}` takes the first one listed, `{g}`",
                        autos[later].decl.name.loc,
                        [Note(f"`{g}` is listed before `{later}` and yields too", autos[g].decl.name.loc)],
                        hint="make the conditions exclusive, or drop the gate that adds nothing",
                    )

    def _show(self, witness: Witness) -> str:
        """An input from a witness: each constrained input at its first allowed value, in the rules' order."""
        shown = []
        for var in sorted(witness, key=lambda v: list(self.domains).index(v)):
            first = next(v for v in self.domains[var] if v in witness[var])
            shown.append(f"{var} = {show_value(first)}")
        return ", ".join(shown)

    # ------------------------------------------------------------------ statements in order

    def _launches(self) -> None:
        config: dict[str, Value] = {}  # config leaves as the `set`s so far left them
        self.writers = {}
        checks: list[tuple[ir.Check, Formula]] = []  # every check so far, across blocks, and when it fails
        stamp_fields = {f.decl.loc for s in self.model.stamps.values() for f in s.fields}
        for launch in self.model.launches:
            local = _Computed()
            types = {f.name: f.type for f in launch.locals}

            def env(ref: str, local: _Computed = local) -> Value:
                value = local.get(ref)
                return value if value is not None else config[ref] if ref in config else Input(ref)

            for stmt in launch.stmts:
                self._next_rule()
                if isinstance(stmt, ir.SetStmt):
                    applies = self.f.expr(stmt.when, env) if stmt.when is not None else True
                    self._set(stmt, applies, checks, env)
                    target = stmt.target.name
                    after = self.f.assign(env(target), applies, stmt.value.value)
                    config[target] = self._bounded(after, target, stmt.loc, self.domains[target])
                    self.writers.setdefault(stmt.target.name, []).append(stmt)
                elif isinstance(stmt, ir.Check):
                    checks.append((stmt, self._check(stmt, env, checks, pre_emption=True)))
                elif isinstance(stmt, ir.FieldDecl):  # the checked model holds `use` expanded into these
                    # a stamp's own chain (`use Stamp.field`) is reported where the stamp resolves it: a
                    # tier that never wins on the config as launch has it so far may win in the resolver
                    cases = self._chain(stmt, env, report=stmt.loc not in stamp_fields)
                    name = stmt.name.value
                    # the type of a local the checker could not type is unknown: such a value is never bounded
                    values = domain(types[name]) if name in types else None
                    local.put(name, self._value_of(cases, name, stmt.loc, values))

    def _validate(self, decl: ir.ValidateDecl, pre_emption: bool) -> None:
        values: dict[str, Value] = {}  # stamp fields (`Stamp.field`) as the fallbacks so far left them
        checks: list[tuple[ir.Check, Formula]] = []
        self.writers = {}

        def env(ref: str) -> Value:
            return values[ref] if ref in values else Input(ref)

        fallbacks: list[ir.Fallback] = []
        for stmt in decl.stmts:
            self._next_rule()
            if isinstance(stmt, ir.Check):
                checks.append((stmt, self._check(stmt, env, checks, pre_emption)))
            elif isinstance(stmt, ir.Fallback):
                field = stmt.field.name
                current = env(field)
                is_from = self.f.atom(current, Test("==", stmt.from_value.value))
                when = self.f.expr(stmt.when, env)
                after, applies = self.f.replace(current, stmt.from_value.value, stmt.to_value.value, when)
                self._fallback(stmt, is_from, when, applies, checks, fallbacks, env, pre_emption)
                values[field] = self._bounded(after, field, stmt.loc, self.domains[field])
                fallbacks.append(stmt)
                self.writers.setdefault(field, []).append(stmt)

    def _pre_empting(self, acts: Formula, checks: list[tuple[ir.Check, Formula]]) -> list[Note] | None:
        """When every input on which a statement would act fails an earlier check (the generated code
        raises there first): a note for each earlier check that fails on some of them. Else None."""
        if not self._all_fail(acts, checks):
            return None
        return [
            Note(f"this `{c.kind}` fails first", c.loc)
            for c, f in checks[-MAX_PRE_EMPTERS:]
            if self.can(self.f.conj([acts, f]))
        ]

    def _all_fail(self, where: Formula, checks: list[tuple[ir.Check, Formula]]) -> bool:
        """True when every input where `where` holds fails one of the MAX_PRE_EMPTERS checks just before
        (decided). Leaving out checks further back is sound, only less complete: a statement is reported
        pre-empted only when the checks kept fail on all of its inputs."""
        near = checks[-MAX_PRE_EMPTERS:]
        if not near or self.f.work > self.f.budget:
            return False
        if size(where) + sum(size(f) for _, f in near) > MAX_QUESTION_SIZE:
            # too large as one question: keep only the checks that may fail where it holds (the others
            # pass on all those inputs, so they cannot pre-empt it)
            kept = []
            for c, f in near:
                self._next_rule()  # each of these questions may be large: stop as soon as the budget is spent
                if self.f.satisfiable(self.f.conj([where, f])) is not False:
                    kept.append((c, f))
            near = kept
            if not near or size(where) + sum(size(f) for _, f in near) > MAX_QUESTION_SIZE:
                return False
        return self.never(self.f.conj([where, *(self.f.neg(f) for _, f in near)]))

    def _check(
        self, stmt: ir.Check, env: Env, checks: list[tuple[ir.Check, Formula]], pre_emption: bool
    ) -> Formula:
        """Report a check that never fails, never fails first, or always fails; returns when it fails."""
        cond = self.f.expr(stmt.cond, env)
        fails = cond if stmt.kind == ir.CheckKind.FORBID else self.f.neg(cond)
        what = f"this `{stmt.kind}`"
        if self.never(fails):
            if stmt.kind == ir.CheckKind.FORBID:
                message, notes = (
                    f"{what} can never fail: its condition is never true",
                    self._never_true(stmt.cond, env),
                )
            else:
                message = f"{what} can never fail: its condition always holds"
                notes = self._blame_writes([stmt.cond], env, negated=True)
            self.warn(Finding.CHECK_NEVER_FIRES, message, stmt.loc, notes)
            return fails
        pre_empted = self._pre_empting(fails, checks) if pre_emption else None
        if pre_empted is not None:
            self.warn(
                Finding.CHECK_PRE_EMPTED,
                f"{what} can never fail first: every input on which it would fail fails an earlier check",
                stmt.loc,
                pre_empted,
                hint="its message is never shown; remove it, or move it before the checks that pre-empt it",
            )
            return fails
        if self.never(self.f.neg(fails)):
            notes = self._never_true(stmt.cond, env) if stmt.kind == ir.CheckKind.REQUIRE else []
            self.warn(
                Finding.CHECK_ALWAYS_FIRES, f"{what} always fails: it fails on every input", stmt.loc, notes
            )
        elif pre_emption:
            passes = self.f.neg(fails)
            if self._all_fail(passes, checks):
                message = f"{what} always fails: every input that passes the checks before it fails it"
                self.warn(Finding.CHECK_ALWAYS_FIRES, message, stmt.loc)
        return fails

    def _set(
        self, stmt: ir.SetStmt, applies: Formula, checks: list[tuple[ir.Check, Formula]], env: Env
    ) -> None:
        if stmt.when is not None and self.never(applies):
            notes = self._never_true(stmt.when, env)
            self.warn(
                Finding.SET_NEVER_APPLIES,
                "this `set` never applies: its condition is never true",
                stmt.loc,
                notes,
            )
            return
        pre_empted = self._pre_empting(applies, checks)
        if pre_empted is not None:
            self.warn(
                Finding.SET_NEVER_APPLIES,
                "this `set` never applies: on every input where its condition holds, an earlier check fails first",
                stmt.loc,
                pre_empted,
            )

    def _fallback(
        self,
        stmt: ir.Fallback,
        is_from: Formula,
        when: Formula,
        applies: Formula,
        checks: list[tuple[ir.Check, Formula]],
        earlier: list[ir.Fallback],
        env: Env,
        pre_emption: bool,
    ) -> None:
        field, from_value = stmt.field.name, ir.literal_text(stmt.from_value)
        what = "this fallback never applies"
        if self.never(applies):
            if self.never(is_from):
                message = f"{what}: an earlier fallback always replaces `{field}` {from_value} first"
                notes = [
                    Note(f"this fallback replaces {from_value}", f.loc)
                    for f in earlier
                    if f.field.name == field and f.from_value.value == stmt.from_value.value
                ]
            elif self.never(when):
                message, notes = f"{what}: its condition is never true", self._never_true(stmt.when, env)
            else:
                message = f"{what}: its condition never holds while `{field}` is {from_value}"
                notes = [Note("this condition", stmt.when.loc)]
            self.warn(Finding.FALLBACK_NEVER_APPLIES, message, stmt.loc, notes)
            return
        pre_empted = self._pre_empting(applies, checks) if pre_emption else None
        if pre_empted is not None:
            self.warn(
                Finding.FALLBACK_PRE_EMPTED,
                "this fallback never takes effect: on every input where it would apply, an earlier check fails first",
                stmt.loc,
                pre_empted,
                hint="move it before the checks, if the replaced value should pass them",
            )


class _Computed:
    """Fields and locals by name, each value built the first time a rule reads it: most are never read
    (a value is a formula per value it can take, costly for a field that copies a leaf)."""

    def __init__(self) -> None:
        self._build: dict[str, Callable[[], Value]] = {}
        self._built: dict[str, Value] = {}

    def put(self, name: str, build: Callable[[], Value]) -> None:
        self._build[name] = build
        self._built.pop(name, None)

    def get(self, name: str) -> Value | None:
        if name not in self._built and name in self._build:
            self._built[name] = self._build[name]()
        return self._built.get(name)


def _rule_count(model: Model) -> int:
    tiers = sum(len(f.decl.tiers) for s in model.stamps.values() for f in s.fields)
    statements = sum(len(launch.decl.stmts) for launch in model.launches)
    statements += sum(len(v.decl.stmts) for v in model.validates)
    return tiers + statements + len(model.autos)


def _value_size(value: Value) -> int:
    return value.weight if isinstance(value, Cases) else 1


def _inside(inner: ir.Loc, outer: ir.Loc) -> bool:
    return (
        inner.path == outer.path
        and (outer.line, outer.col) <= (inner.line, inner.col)
        and (inner.end_line, inner.end_col) <= (outer.end_line, outer.end_col)
    )


def _tier_source(tier: ir.Tier, env: Env) -> Value:
    if isinstance(tier, ir.ConstTier):
        return Fixed(tier.value.value)
    return env(tier.ref.name)  # every other tier copies a name


def _slot_var(stamp: str, slot: str) -> str:
    """The input a slot is, in the formulas (slot names are per stamp; `Stamp.slot` is never a field)."""
    return f"{stamp}.{slot}"
