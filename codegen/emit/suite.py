"""The view of one generated test module: one short test per rule, run by stampgen.codegen.testing, and
the decision tables reviewers read in a diff (each bounded: a larger one is left to `stampgen table`)."""

from __future__ import annotations

import msgspec

from stampgen.codegen.emit.names import py_str
from stampgen.codegen.model import Model, Scope
from stampgen.codegen.naming import snake_case
from stampgen.codegen.testing import table_text

# A decision table embedded in the generated tests has at most this many (merged) rows.
TABLE_ROWS_EMBEDDED = 200


class SuiteStamp(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    literal: str
    snake: str
    table_const: str
    table: str | None  # the decision table as text, None when it is too large to embed


class SuiteView(msgspec.Struct, frozen=True, kw_only=True):
    rules_source: str
    rules_literal: str
    package: str
    module: str
    root_expr: str
    parities: list[tuple[str, str]]  # (name, literal)
    guards: list[str]  # consumer literals
    stamps: list[SuiteStamp]
    gates: list[tuple[str, str]]
    launches: bool
    validates: list[tuple[str, str]]  # (the validator's name, the block's name as a literal)
    config_leaves: bool  # the module has CONFIG_LEAVES
    table_limit: int


def build_suite(model: Model, rules_source: str, module: str, package: str, root_expr: str) -> SuiteView:
    stamps = []
    for name in model.stamps:
        snake = snake_case(name)
        stamps.append(
            SuiteStamp(
                name=name,
                literal=py_str(name),
                snake=snake,
                table_const=f"{snake.upper()}_TABLE",
                table=table_text(model, name, TABLE_ROWS_EMBEDDED),
            )
        )
    return SuiteView(
        rules_source=rules_source,
        rules_literal=py_str(rules_source),
        package=package,
        module=module,
        root_expr=root_expr,
        parities=[(p.name.value, py_str(p.name.value)) for p in model.parities],
        guards=[py_str(c.value) for g in model.guards for c in g.consumers],
        stamps=stamps,
        gates=[(name, py_str(name)) for name in model.autos],
        launches=bool(model.launches),
        validates=[(f"validate_{snake_case(v.name)}", py_str(v.name)) for v in model.validates],
        config_leaves=any(leaf.scope == Scope.PROCESS for leaf in model.leaves.values()),
        table_limit=TABLE_ROWS_EMBEDDED,
    )
