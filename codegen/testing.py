"""What generated tests run: each generated function held against the interpreter, the executable
specification, over its finite input domain (codegen/domains.py), and the other invariants of the rules.

A generated test file (generated/test_NAME.py) holds one short test per rule and the decision tables
reviewers read; the checking itself lives here, once, so that every generated test runs the same code and
a fix reaches all of them. Each check raises AssertionError saying what differs, listing at most
MAX_REPORTED mismatches. Inputs are built the way a caller builds them: config namespaces as plain objects
with one attribute per leaf (enum values given by name), facts as the generated records.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import random
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import msgspec

from stampgen.codegen import checks, domains, interpreter, ir, table
from stampgen.codegen.emit import positions
from stampgen.codegen.emit.names import facts_class, facts_param
from stampgen.codegen.load import load_text
from stampgen.codegen.model import EnumT, IntT, Model, Scope, StampInfo, Type, domain
from stampgen.codegen.naming import snake_case

MAX_REPORTED = 10


class Rules(msgspec.Struct, frozen=True):
    """The rules as the interpreter reads them now, and the module generated from them."""

    model: Model
    module: ModuleType


def load_rules(root: Path, rules: str, module: ModuleType) -> Rules:
    """Parse and check `root/rules` (named `rules` in positions, as the generator names it)."""
    loaded = load_text((root / rules).read_text(encoding="utf-8"), rules, origin=str(root / rules))
    problems = "\n".join(f"{d.loc}: {d.severity}: {d.message}" for d in loaded.diagnostics)
    assert loaded.ok and loaded.model is not None, f"{rules} does not check:\n{problems}"
    return Rules(model=loaded.model, module=module)


# --------------------------------------------------------------------------------------------- inputs


def _rows(d: domains.InputDomain) -> Iterator[dict[str, Any]]:
    """Every row of the domain, or, for a sampled one, its rows drawn with a fixed seed."""
    names = [i.name for i in d.inputs]
    if d.mode == "sample":
        rng = random.Random(domains.SAMPLE_SEED)
        for _ in range(d.rows):
            yield {i.name: rng.choice(i.values) for i in d.inputs}
        return
    for values in itertools.product(*(i.values for i in d.inputs)):
        yield dict(zip(names, values))


def _namespace(row: Mapping[str, Any], namespace: str) -> SimpleNamespace:
    """A config namespace object holding the row's leaves of `namespace`."""
    prefix = namespace + "."
    return SimpleNamespace(**{n[len(prefix) :]: v for n, v in row.items() if n.startswith(prefix)})


def _facts(rules: Rules, namespace: str, row: Mapping[str, Any]) -> Any:
    """A facts record: the row's facts of `namespace`, and the first value of its type for the others
    (the function under test does not read them)."""
    model = rules.model
    values = {leaf.name: domain(leaf.type)[0] for leaf in model.leaves_of(namespace)}
    prefix = namespace + "."
    values.update({n[len(prefix) :]: v for n, v in row.items() if n.startswith(prefix)})
    return getattr(rules.module, facts_class(namespace))(**values)


def _argument(rules: Rules, namespace: str, row: Mapping[str, Any]) -> Any:
    if rules.model.namespaces[namespace] == Scope.PROCESS:
        return _namespace(row, namespace)
    return _facts(rules, namespace, row)


def _keyword(rules: Rules, namespace: str) -> str:
    return namespace if rules.model.namespaces[namespace] == Scope.PROCESS else facts_param(namespace)


def _env(model: Model, row: Mapping[str, Any]) -> dict[str, Any]:
    """The interpreter's inputs for a row: leaves left unset are not given (so their defaults apply)."""
    given = {n: v for n, v in row.items() if n in model.leaves and v is not None}
    return interpreter.config_env(model, given)


def _plain(value: Any) -> Any:
    """An enum member as its name; anything else as it is."""
    return getattr(value, "value", value)


def _won(outcome: interpreter.FieldOutcome) -> str:
    """The provenance the interpreter gives a field: the winning tier as written, and its rules line."""
    won = next(tier for tier in outcome.tiers if tier.status == "won")
    return f"{won.text} ({won.source})"


@contextlib.contextmanager
def _quiet(module: ModuleType) -> Iterator[None]:
    """Loops call the generated functions many times: keep their log lines out of the report."""
    logger = logging.getLogger(module.__name__)
    was = logger.disabled
    logger.disabled = True
    try:
        yield
    finally:
        logger.disabled = was


class _Mismatches:
    def __init__(self, what: str) -> None:
        self.what = what
        self.items: list[str] = []

    def add(self, text: str) -> bool:
        """Record one; True when enough are recorded to stop."""
        self.items.append(text)
        return len(self.items) >= MAX_REPORTED

    def check(self) -> None:
        assert not self.items, f"{self.what}:\n  " + "\n  ".join(self.items)


def _stamp(rules: Rules, name: str) -> tuple[StampInfo, str]:
    info = rules.model.stamps[name]
    return info, snake_case(name)


def _resolver_args(rules: Rules, info: StampInfo, row: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    args = [_argument(rules, ns, row) for ns in info.config_namespaces]
    return args, {slot.name: row[slot.name] for slot in info.slots}


# --------------------------------------------------------------------------------------------- positions


def check_positions(rules: Rules) -> None:
    """RULE_POSITIONS names every rule of the rules file and of the vocabulary it imports, at the position
    the parser gives it."""
    located = positions.rule_locations(rules.model, imported=True)
    want = {identity: str(loc) for identity, loc in located.items()}
    got = dict(rules.module.RULE_POSITIONS)
    assert want, "the rules file declares nothing: there is no rule to hold the module against"
    stale = sorted(set(want) ^ set(got)) + sorted(k for k in want if k in got and want[k] != got[k])
    assert not stale, "RULE_POSITIONS is stale (run `make codegen`): " + ", ".join(stale[:MAX_REPORTED])


# --------------------------------------------------------------------------------------------- parity, guards


def _import_or_fail(module_name: str, what: str) -> ModuleType:
    """The module a rule names; a module that does not import fails the test (a skip would let the rule
    hold nothing, and pass)."""
    module, why = checks.import_module(module_name)
    assert module is not None, f"{what}: the module {module_name} does not import ({why})"
    return module


def _offending_draft(offence: str) -> str:
    """The draft an offence of a generated parity check is about (each starts `draft NAME ...`)."""
    return offence.split()[1]


def check_parity(rules: Rules, name: str) -> None:
    """Every draft of the registry answers exactly the hooks its target answers, over enough pairs.

    Never vacuous: the registry must import and be a mapping of names to classes, and each hook must be on
    some class (a misspelt hook would find no offender, ever). The generated check_NAME() must find the
    pairs the rules define; an offence a waiver covers passes until the waiver's date (STAMPGEN_TODAY
    stands in for today) and is listed as waived."""
    module = rules.module
    decl = next(p for p in rules.model.parities if p.name.value == name)
    upper = name.upper()
    source = module.RULE_POSITIONS[positions.parity_id(name)]
    what = f"parity {name} ({source})"
    registry_path: str = getattr(module, f"{upper}_REGISTRY")
    module_name, _, attribute = registry_path.partition(":")
    archs = getattr(_import_or_fail(module_name, what), attribute, None)
    assert archs is not None and checks.is_registry(archs), (
        f"{what}: {registry_path} is not a mapping of names to classes ({type(archs).__name__})"
    )
    missing = [h.value for h in decl.hooks if not any(hasattr(cls, h.value) for cls in archs.values())]
    assert not missing, (
        f"{what}: no class of {registry_path} has {', '.join(missing)}: is it misspelt? The check would pass "
        "for any draft"
    )
    check = getattr(module, f"check_{name}")
    # an expired waiver no longer applies (and load_rules has refused the rules already)
    report = check(archs, today=checks.current_date().isoformat()) if decl.waivers else check(archs)
    pairs, offences = checks.parity_pairs(decl, archs)
    assert report.pairs == tuple(pairs), f"{what}: check_{name} checked {report.pairs}, the rules say {pairs}"
    waived: tuple[str, ...] = getattr(report, "waived", ())  # absent from modules generated before waivers
    reported = {_offending_draft(text) for text in (*report.offenders, *waived)}
    assert reported == set(offences), (
        f"{what}: check_{name} finds offences in {sorted(reported)}, the rules in {sorted(offences)}"
    )
    assert not report.offenders, (
        f"{what} fails for {len(report.offenders)} of {len(report.pairs)} draft/target pairs:\n  "
        + "\n  ".join(report.offenders)
    )
    waivers = {w.cls.value for w in decl.waivers}
    assert {_offending_draft(text) for text in waived} <= waivers, f"{what}: waived {waived}"
    at_least = getattr(module, f"{upper}_AT_LEAST")
    assert len(report.pairs) >= at_least, (
        f"{what} checked {len(report.pairs)} draft/target pairs in {registry_path}, fewer than the {at_least} "
        f"it requires: {report.pairs}"
    )


def check_guard(rules: Rules, consumer: str) -> None:
    """A consumer the rules guard, built on a runner without its stamp, raises the guard's error. A consumer
    module that does not import fails the test, never skips it."""
    import pytest

    decl = next(g for g in rules.model.guards if any(c.value == consumer for c in g.consumers))
    attribute = rules.model.stamps[decl.stamp.value].attribute
    source = rules.module.RULE_POSITIONS[positions.guard_id(consumer)]
    module = _import_or_fail(decl.module, f"guard {consumer} ({source})")
    cls = getattr(module, consumer, None)
    assert isinstance(cls, type), f"{decl.module} has no class {consumer}, which {source} guards"
    with pytest.raises(rules.module.UnstampedRunnerError) as excinfo:
        cls(SimpleNamespace())
    assert attribute in str(excinfo.value), f"{consumer} on an unstamped runner: {excinfo.value}"


# --------------------------------------------------------------------------------------------- stamps


def check_require(rules: Rules, stamp: str) -> None:
    """The guard names the attribute, the rules line and the fix, and returns the stamp of a stamped runner."""
    info, snake = _stamp(rules, stamp)
    module = rules.module
    require = getattr(module, f"require_{snake}")
    source = module.RULE_POSITIONS[positions.stamp_id(stamp)]
    for runner in (SimpleNamespace(), SimpleNamespace(**{info.attribute: info.fields[0].name})):
        try:
            require(runner)
        except module.UnstampedRunnerError as exc:
            message = str(exc)
            assert isinstance(exc, AttributeError), type(exc)
            for part in (info.attribute, source, f"stamp_{snake}(runner"):
                assert part in message, f"the guard's error does not say {part!r}: {message}"
        else:
            raise AssertionError(f"require_{snake}({runner}) did not fail closed")
    row = next(_rows(domains.stamp_domain(rules.model, info)))
    args, kwargs = _resolver_args(rules, info, row)
    stamped = getattr(module, f"resolve_{snake}")(*args, **kwargs)
    assert require(SimpleNamespace(**{info.attribute: stamped})) is stamped
    for field in info.fields:  # a stamp with a field unset is no stamp
        incomplete = msgspec.structs.replace(stamped)
        msgspec.structs.force_setattr(incomplete, field.name, None)
        try:
            require(SimpleNamespace(**{info.attribute: incomplete}))
        except module.UnstampedRunnerError as exc:
            for part in (info.attribute, source, field.name):
                assert part in str(exc), (
                    f"the guard's error on an unset {field.name} does not say {part!r}: {exc}"
                )
        else:
            raise AssertionError(
                f"require_{snake} accepted a {stamp} whose {field.name} is unset: {incomplete!r}"
            )


def check_resolver(rules: Rules, stamp: str) -> None:
    """resolve_X() and resolve_X_with_provenance() against the interpreter, over the stamp's domain."""
    info, snake = _stamp(rules, stamp)
    model, module = rules.model, rules.module
    resolve = getattr(module, f"resolve_{snake}")
    resolve_provenance = getattr(module, f"resolve_{snake}_with_provenance")
    fields = [f.name for f in info.fields]
    mismatches = _Mismatches(f"resolve_{snake} != the interpreter")
    for row in _rows(domains.stamp_domain(model, info)):
        env = _env(model, row)
        env.update({slot.name: row[slot.name] for slot in info.slots})
        outcome = interpreter.resolve_stamp(model, info, env)
        want = {f: outcome[f].value for f in fields}
        want_provenance = {f: _won(outcome[f]) for f in fields}
        args, kwargs = _resolver_args(rules, info, row)
        got_stamp = resolve(*args, **kwargs)
        twin, provenance = resolve_provenance(*args, **kwargs)
        got = {f: _plain(getattr(got_stamp, f)) for f in fields}
        got_provenance = {f: getattr(provenance, f) for f in fields}
        if got != want or twin != got_stamp or got_provenance != want_provenance:
            text = f"{row}: generated {got} {got_provenance}, interpreter {want} {want_provenance}"
            if mismatches.add(text):
                break
    mismatches.check()


def check_stamping(rules: Rules, stamp: str) -> None:
    """stamp_X(): its gates and its resolver against the interpreter; it writes no config."""
    info, snake = _stamp(rules, stamp)
    model, module = rules.model, rules.module
    stamp_fn = getattr(module, f"stamp_{snake}")
    fields = [f.name for f in info.fields]
    gateless = [slot.name for slot in info.slots if not slot.sources]
    used = set(info.config_namespaces)
    for slot in info.slots:
        for gate in slot.sources:
            used.update(model.autos[gate].namespaces)
    namespaces = [ns for ns in model.namespaces if ns in used]
    mismatches = _Mismatches(f"stamp_{snake} != the interpreter")
    with _quiet(module):
        for row in _rows(domains.stamping_domain(model, info)):
            env = _env(model, row)
            values, _ = interpreter.slot_values(model, info, env, {s: row[s] for s in gateless})
            env.update(values)
            outcome = interpreter.resolve_stamp(model, info, env)
            want = {f: outcome[f].value for f in fields}
            runner = SimpleNamespace()
            arguments = {_keyword(rules, ns): _argument(rules, ns, row) for ns in namespaces}
            config = {k: v for k, v in arguments.items() if isinstance(v, SimpleNamespace)}
            before = {k: dict(vars(v)) for k, v in config.items()}
            result = stamp_fn(runner, **arguments, **{s: row[s] for s in gateless})
            got = {f: _plain(getattr(result, f)) for f in fields}
            after = {k: dict(vars(v)) for k, v in config.items()}
            if got != want or getattr(runner, info.attribute) is not result or after != before:
                text = f"{row}: generated {got}, interpreter {want}, config {before} -> {after}"
                if mismatches.add(text):
                    break
    mismatches.check()


def _stamped_once(rules: Rules, info: StampInfo) -> tuple[Callable[[Any], Any], Any]:
    """stamp_X bound to the first row of its stamping domain, and the stamp it gives that row."""
    model, module = rules.model, rules.module
    stamp_fn = getattr(module, f"stamp_{snake_case(info.name)}")
    gateless = [slot.name for slot in info.slots if not slot.sources]
    used = set(info.config_namespaces)
    for slot in info.slots:
        for gate in slot.sources:
            used.update(model.autos[gate].namespaces)
    row = next(_rows(domains.stamping_domain(model, info)))
    arguments = {_keyword(rules, ns): _argument(rules, ns, row) for ns in model.namespaces if ns in used}
    arguments.update({s: row[s] for s in gateless})

    def stamp_runner(runner: Any) -> Any:
        return stamp_fn(runner, **arguments)

    with _quiet(module):
        return stamp_runner, stamp_runner(SimpleNamespace())


def _another(rules: Rules, stamp: Any, field: str, t: Type) -> Any:
    """`stamp` with `field` set to another value of its type."""
    current = _plain(getattr(stamp, field))
    value = next(v for v in domain(t) if v != current)
    if isinstance(t, EnumT):
        value = getattr(rules.module, t.name)(value)
    return msgspec.structs.replace(stamp, **{field: value})


def check_stamp_once(rules: Rules, stamp: str) -> None:
    """stamp_X() stamps a runner once: the same stamp again returns the one the runner holds; a runner
    holding another stamp, or something else, is refused with StampConflictError naming the attribute, the
    differing field and the rules line, and keeps what it holds."""
    info, snake = _stamp(rules, stamp)
    module = rules.module
    source = module.RULE_POSITIONS[positions.stamp_id(stamp)]
    stamp_runner, stamped = _stamped_once(rules, info)
    runner = SimpleNamespace()
    with _quiet(module):
        first = stamp_runner(runner)
        again = stamp_runner(runner)
    assert again is first is getattr(runner, info.attribute), f"stamp_{snake} stamped the same runner twice"
    field = info.fields[0]
    other = _another(rules, stamped, field.name, field.type)
    for held in (other, {field.name: _plain(getattr(stamped, field.name))}):
        runner = SimpleNamespace(**{info.attribute: held})
        try:
            with _quiet(module):
                stamp_runner(runner)
        except module.StampConflictError as exc:
            assert isinstance(exc, RuntimeError), type(exc)
            for part in (info.attribute, source, field.name):
                assert part in str(exc), f"stamp_{snake}'s conflict does not say {part!r}: {exc}"
        else:
            raise AssertionError(f"stamp_{snake} replaced {held!r} on runner.{info.attribute}")
        assert getattr(runner, info.attribute) is held, f"stamp_{snake} replaced runner.{info.attribute}"


def check_ranks_agree(rules: Rules, stamp: str) -> None:
    """ensure_X_agree() returns the runner's stamp when every rank holds it, and raises StampMismatchError
    naming the rank and the field that differ when one does not; without a process group or an
    all_gather it returns the stamp unchecked."""
    info, snake = _stamp(rules, stamp)
    module = rules.module
    ensure = getattr(module, f"ensure_{snake}_agree")
    _, stamped = _stamped_once(rules, info)
    runner = SimpleNamespace(**{info.attribute: stamped})
    assert ensure(runner) is stamped, f"ensure_{snake}_agree without a process group did not return the stamp"
    assert ensure(runner, all_gather=lambda local: [local, local]) is stamped
    field = info.fields[0]
    other = msgspec.to_builtins(_another(rules, stamped, field.name, field.type))
    try:
        ensure(runner, all_gather=lambda local: [local, local, other])
    except module.StampMismatchError as exc:
        assert (exc.ranks, exc.fields) == ((2,), (field.name,)), f"named {exc.ranks} {exc.fields}: {exc}"
        assert "rank 2" in str(exc) and field.name in str(exc), str(exc)
        assert isinstance(exc, RuntimeError), type(exc)
    else:
        raise AssertionError(f"ensure_{snake}_agree accepted rank 2's {other}")


def check_table(rules: Rules, stamp: str, text: str) -> None:
    """The decision table a reviewer read still says what the rules and the generated resolver do.

    Each row is expanded over the classes it merges (`*` any, `set` any but unset) and run through the
    generated resolver and the interpreter; both must give the row's value (`←x`: the value of input x)
    and deciding tier for every field.
    """
    info, snake = _stamp(rules, stamp)
    model, module = rules.model, rules.module
    resolve_provenance = getattr(module, f"resolve_{snake}_with_provenance")
    lines = [line for line in text.strip("\n").splitlines() if line.strip()]
    header = lines[0].split()
    columns, shown = header[: header.index("|")], header[header.index("|") + 1 :]
    inputs = {i.name: i for i in table.stamp_inputs(model, info)}
    by_column = dict(zip(table.short_names(list(inputs)), inputs.values()))
    assert columns == list(by_column), f"the table's inputs {columns} are not the stamp's {list(by_column)}"
    mismatches = _Mismatches(f"the decision table of {stamp} is stale (run `make codegen` and review it)")
    for line in lines[1:]:
        cells = line.split()
        bar = cells.index("|")
        choices = [_classes(by_column[c], cell) for c, cell in zip(columns, cells[:bar])]
        expected = cells[bar + 1 :]
        for combo in itertools.product(*choices):
            row = dict(zip(inputs, combo))
            env = _env(model, row)
            env.update({slot.name: row[slot.name] for slot in info.slots})
            outcome = interpreter.resolve_stamp(model, info, env)
            args, kwargs = _resolver_args(rules, info, row)
            got, provenance = resolve_provenance(*args, **kwargs)
            for i, field in enumerate(shown):
                cell, tier = expected[2 * i], expected[2 * i + 1].strip("[]")
                value = row[by_column[cell[1:]].name] if cell.startswith("←") else _cell_value(cell)
                generated = _plain(getattr(got, field))
                interpreted = (outcome[field].value, outcome[field].tier)
                if (
                    generated != value
                    or interpreted != (value, tier)
                    or getattr(provenance, field) != _won(outcome[field])
                ):
                    text = (
                        f"{row}: {field}: the table says {value!r} [{tier}], the interpreter "
                        f"{interpreted[0]!r} [{interpreted[1]}], the generated resolver {generated!r} "
                        f"({getattr(provenance, field)})"
                    )
                    if mismatches.add(text):
                        mismatches.check()
    mismatches.check()


def _classes(inp: table.Input, cell: str) -> list[Any]:
    """The representatives a table cell stands for."""
    if cell == table.ANY:
        return list(inp.representatives)
    if cell == table.SET:
        return [r for c, r in zip(inp.classes, inp.representatives) if c is not None]
    for label, representative in zip(inp.classes, inp.representatives):
        if _cell_text(label) == cell:
            return [representative]
    raise AssertionError(f"{cell!r} is not a class of {inp.name} ({[_cell_text(c) for c in inp.classes]})")


def _cell_text(value: Any) -> str:
    """A value as a table cell: `-` unset, `true`/`false`, members and ints as written."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _cell_value(cell: str) -> Any:
    if cell == "-":
        return None
    if cell in ("true", "false"):
        return cell == "true"
    try:
        return int(cell)
    except ValueError:
        return cell


def table_text(model: Model, stamp: str, limit: int) -> str | None:
    """A stamp's decision table as generated tests embed it, or None when it would have more than
    `limit` rows (the differential tests still check every row; `stampgen table` prints it)."""
    try:  # past `limit * 64` rows, merging would rarely leave `limit`: not worth enumerating
        t = table.stamp_table(model, stamp, max_rows=limit * 64)
    except table.TableTooLarge:
        return None
    if len(t.rows) > limit:
        return None
    names = [i.name for i in t.inputs]
    short = dict(zip(names, table.short_names(names)))
    header = [*short.values(), "|"]
    for field in t.outputs:
        header += [field, ""]
    body = []
    for row in t.rows:
        cells = [_cell_text(v) for v in row.inputs] + ["|"]
        for shown, tier, _ in row.outputs:
            if shown.startswith("← "):
                shown = "←" + short.get(shown[2:], shown[2:])
            cells += [shown, f"[{tier}]"]
        body.append(cells)
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    return (
        "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *body]) + "\n"
    )


# --------------------------------------------------------------------------------------------- gates, blocks


def check_gate(rules: Rules, gate: str) -> None:
    """auto GATE against the interpreter, over its domain."""
    model, module = rules.model, rules.module
    info = model.autos[gate]
    fn = getattr(module, gate)
    mismatches = _Mismatches(f"{gate} != the interpreter")
    for row in _rows(domains.gate_domain(model, gate)):
        holds = interpreter.eval_expr(info.decl.when, _env(model, row))
        want = info.decl.value.value if holds is True else None
        got = _plain(fn(*(_argument(rules, ns, row) for ns in info.namespaces)))
        if got != want and mismatches.add(f"{row}: generated {got!r}, interpreter {want!r}"):
            break
    mismatches.check()


def check_launch(rules: Rules) -> None:
    """The launch blocks, run in order as a caller does (each block's writes applied before the next),
    against the interpreter: the leaves set and their values, or the first rule violation."""
    model, module = rules.model, rules.module
    statements = [stmt for launch in model.launches for stmt in launch.stmts]
    config_namespaces = [
        ns
        for ns in model.namespaces
        if model.namespaces[ns] == Scope.PROCESS and any(ns in launch.namespaces for launch in model.launches)
    ]
    mismatches = _Mismatches("the launch blocks != the interpreter")
    with _quiet(module):
        for row in _rows(domains.launch_domain(model)):
            normalised, outcomes, violations = interpreter.run_launch(model, _env(model, row))
            applied = [
                stmt.target.name
                for stmt, outcome in zip(statements, outcomes)
                if isinstance(stmt, ir.SetStmt) and outcome.kind == "set" and outcome.status == "applied"
            ]
            want: Any = {n: normalised[n] for n in applied}
            if violations:
                want = (violations[0].message, violations[0].source, violations[0].rule)
            config = {ns: _namespace(row, ns) for ns in config_namespaces}
            got: Any = {}
            try:
                for launch in model.launches:
                    args = [
                        config[ns] if ns in config else _facts(rules, ns, row) for ns in launch.namespaces
                    ]
                    for namespace, leaves in getattr(module, launch.name)(*args).items():
                        for leaf, value in leaves.items():
                            setattr(config[namespace], leaf, value)
                            got[f"{namespace}.{leaf}"] = _plain(value)
            except module.RuleViolationError as exc:
                got = (exc.message, exc.source, exc.rule)
                if exc.source not in str(exc):
                    mismatches.add(f"{row}: the error does not name its rules line: {exc}")
            if got != want and mismatches.add(f"{row}: generated {got!r}, interpreter {want!r}"):
                break
    mismatches.check()


def check_validate(rules: Rules, block: str) -> None:
    """validate BLOCK against the interpreter: the fallbacks applied, or the first violation."""
    model, module = rules.model, rules.module
    info = next(v for v in model.validates if v.name == block)
    fn = getattr(module, f"validate_{snake_case(block)}")
    stamp = model.stamps[info.stamps[0]] if info.stamps else None
    fields = [f.name for f in stamp.fields] if stamp else []
    mismatches = _Mismatches(f"validate {block} != the interpreter")
    with _quiet(module):
        for row in _rows(domains.validate_domain(model, info)):
            env = _env(model, row)
            values = {f: row[f"{stamp.name}.{f}"] for f in fields} if stamp else {}
            replaced, _, violations = interpreter.run_validate(model, block, stamp, values, env)
            want: Any = replaced if stamp else None
            if violations:
                want = (violations[0].message, violations[0].source, violations[0].rule)
            kwargs = {_keyword(rules, ns): _argument(rules, ns, row) for ns in info.namespaces}
            got: Any
            try:
                if stamp is not None:
                    record = msgspec.convert(values, getattr(module, stamp.name))
                    result = fn(record, **kwargs)
                    got = {f: _plain(getattr(result, f)) for f in fields}
                else:
                    got = fn(**kwargs)
            except module.RuleViolationError as exc:
                got = (exc.message, exc.source, exc.rule)
            if got != want and mismatches.add(f"{row}: generated {got!r}, interpreter {want!r}"):
                break
    mismatches.check()


# --------------------------------------------------------------------------------------------- refusals


def _by_namespaces(rules: Rules, fn: Any, namespaces: tuple[str, ...]) -> Callable[[Mapping[str, Any]], Any]:
    """A call of `fn` on one row, passing one argument per namespace (as gates and launch blocks take)."""

    def call(row: Mapping[str, Any]) -> Any:
        return fn(*(_argument(rules, ns, row) for ns in namespaces))

    return call


def _readers(rules: Rules) -> Iterator[tuple[str, domains.InputDomain, Callable[[Mapping[str, Any]], Any]]]:
    """Each generated function that reads config leaves: (what it is, its domain, a call on one row)."""
    model, module = rules.model, rules.module
    for name, gate in model.autos.items():
        fn = getattr(module, name)
        yield f"auto {name}", domains.gate_domain(model, name), _by_namespaces(rules, fn, gate.namespaces)
    for stamp in model.stamps:
        info, snake = _stamp(rules, stamp)
        resolve = getattr(module, f"resolve_{snake}")

        def call_resolver(row: Mapping[str, Any], info: StampInfo = info, resolve: Any = resolve) -> Any:
            args, kwargs = _resolver_args(rules, info, row)
            return resolve(*args, **kwargs)

        yield f"resolve_{snake}", domains.stamp_domain(model, info), call_resolver
    for launch in model.launches:
        fn = getattr(module, launch.name)
        call = _by_namespaces(rules, fn, launch.namespaces)
        yield f"launch {launch.name}", domains.launch_block_domain(model, launch), call
    for block in model.validates:
        fn = getattr(module, f"validate_{snake_case(block.name)}")
        stamp_info = model.stamps[block.stamps[0]] if block.stamps else None

        def call_validate(
            row: Mapping[str, Any], fn: Any = fn, block: Any = block, info: Any = stamp_info
        ) -> Any:
            kwargs = {_keyword(rules, ns): _argument(rules, ns, row) for ns in block.namespaces}
            if info is None:
                return fn(**kwargs)
            values = {f.name: row[f"{info.name}.{f.name}"] for f in info.fields}
            return fn(msgspec.convert(values, getattr(module, info.name)), **kwargs)

        yield f"validate {block.name}", domains.validate_domain(model, block), call_validate


def _refuses(call: Callable[[Any], Any], argument: Any, leaf: str, source: str) -> str | None:
    """None when `call(argument)` raises the ValueError of an input outside its domain, naming `leaf` and
    its rules line; else what it did."""
    try:
        result = call(argument)
    except ValueError as exc:
        message = str(exc)
        if type(exc).__name__ == "RuleViolationError" or leaf not in message or source not in message:
            return f"raised {type(exc).__name__}: {message}"
        return None
    return f"accepted it, giving {result!r}"


def check_config_leaves(rules: Rules) -> None:
    """CONFIG_LEAVES, what an engine builds its flags from, is every config leaf the checker read, with its
    type, allowed values, optionality, default, openness and comment."""
    model, module = rules.model, rules.module
    want = [leaf for leaf in model.leaves.values() if leaf.scope == Scope.PROCESS]
    assert want, "the rules declare no config leaf: CONFIG_LEAVES would describe nothing"
    got = dict(module.CONFIG_LEAVES)
    assert list(got) == [leaf.full_name for leaf in want], f"CONFIG_LEAVES is stale: {list(got)}"
    for leaf in want:
        entry, t = got[leaf.full_name], leaf.type
        expected = tuple(domain(t)) if not isinstance(t, EnumT) else tuple(t.members)
        assert tuple(_plain(v) for v in entry.values) == expected, (leaf.full_name, entry.values)
        assert (entry.optional, _plain(entry.default), entry.doc) == (
            leaf.optional,
            leaf.default,
            leaf.doc,
        ), (
            leaf.full_name,
            entry,
        )
        assert entry.open == (isinstance(t, EnumT) and t.open_member is not None), (leaf.full_name, entry)


def check_refusals(rules: Rules) -> None:
    """An int input outside its declared domain is refused by both sides, so that they never disagree
    (and `stampgen explain` refuses it as bad input): for each int config leaf a generated function
    reads and each int fact of a facts record, each of domains.refused_values (an int it does not list,
    a listed one as a string, a bool) makes the generated code raise a ValueError naming the input and
    its rules line, and makes the interpreter refuse it too."""
    model, module = rules.model, rules.module
    mismatches = _Mismatches("values outside a declared int domain are not refused by both sides")
    checked = set()
    with _quiet(module):
        for what, d, call in _readers(rules):
            base = next(_rows(d))
            for inp in d.inputs:
                leaf = model.leaves.get(inp.name)
                if leaf is None or leaf.is_fact or not isinstance(leaf.type, IntT):
                    continue
                checked.add(inp.name)
                source = module.RULE_POSITIONS[positions.leaf_id(inp.name)]
                for bad in domains.refused_values(leaf.type):
                    row = {**base, inp.name: bad}
                    found = _refuses(call, row, inp.name, source)
                    if found and mismatches.add(f"{what} with {inp.name} = {bad!r}: {found}"):
                        mismatches.check()
        for namespace in model.namespaces:

            def build(row: Mapping[str, Any], namespace: str = namespace) -> Any:
                return _facts(rules, namespace, row)

            for leaf in model.leaves_of(namespace):
                if not leaf.is_fact or not isinstance(leaf.type, IntT):
                    continue
                checked.add(leaf.full_name)
                source = module.RULE_POSITIONS[positions.leaf_id(leaf.full_name)]
                for bad in domains.refused_values(leaf.type):
                    found = _refuses(build, {leaf.full_name: bad}, leaf.full_name, source)
                    if found and mismatches.add(
                        f"{facts_class(namespace)} with {leaf.name} = {bad!r}: {found}"
                    ):
                        mismatches.check()
    for name in sorted(checked):
        int_type = model.leaves[name].type
        assert isinstance(int_type, IntT)
        for bad in domains.refused_values(int_type):
            try:
                interpreter.config_env(model, {name: bad})
            except ValueError:
                continue
            if mismatches.add(f"the interpreter accepts {name} = {bad!r}"):
                break
    mismatches.check()
