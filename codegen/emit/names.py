"""Names and literals of generated code: the top-level names of a module (no two rules may claim one), the
local names of one function, and values of the rules as Python source.

Strings from the rules reach generated code only through `py_str` (a literal made by `repr`); names were
validated by the checker (`model.is_valid_identifier`) and are checked here for clashes with the names the
generator emits itself.
"""

from __future__ import annotations

import builtins
import keyword
from collections.abc import Iterable
from typing import Any

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, error
from stampgen.codegen.model import BoolT, EnumT, IntT, Model, Scope, Type
from stampgen.codegen.naming import camel_case, snake_case

# Names every generated module defines or imports itself; rules names must not clash with them.
MODULE_NAMES = (
    "annotations",
    "enum",
    "logging",
    "re",
    "sys",
    "threading",
    "types",
    "msgspec",
    "Any",
    "Callable",
    "Mapping",
    "Sequence",
    "logger",
    "RULES_SOURCE",
    "RULE_POSITIONS",
    "CONFIG_LEAVES",
    "ConfigLeaf",
    "RuleViolationError",
    "UnstampedRunnerError",
    "StampConflictError",
    "StampMismatchError",
    "ParityReport",
)


class RenderError(Exception):
    """The model cannot be rendered (a generated name would clash); carries diagnostics with positions."""

    def __init__(self, diagnostics: list[Diagnostic]):
        super().__init__("; ".join(d.message for d in diagnostics))
        self.diagnostics = diagnostics


class TopLevel:
    """The module's top-level names: who claimed each, and the clashes found (reported all at once)."""

    def __init__(self, rules_source: str) -> None:
        self.rules_source = rules_source
        self.owners: dict[str, str] = {name: "the generated module itself" for name in MODULE_NAMES}
        self.diagnostics: list[Diagnostic] = []

    def claim(self, name: str, what: str, loc: ir.Loc | None) -> str:
        if name in self.owners:
            self.diagnostics.append(
                error(
                    "generated-name-clash",
                    f"{what} would generate `{name}`, which is already {self.owners[name]}",
                    loc or ir.Loc(self.rules_source, 1, 1, 1, 1),
                    "rename it in the rules",
                )
            )
        else:
            self.owners[name] = f"generated for {what}" + (f" ({loc})" if loc else "")
        return name

    def locals(self, *params: str, what: str = "", loc: ir.Loc | None = None) -> Locals:
        """The local namespace of one function whose parameters are `params` (a clash is an error)."""
        names = Locals(self)
        for param in params:
            names.param(param, what, loc)
        return names


class Locals:
    """The local names of one generated function: readable, unique, never shadowing a top-level name."""

    _FIXED = frozenset(dir(builtins)) | frozenset(keyword.kwlist)

    def __init__(self, top: TopLevel) -> None:
        self.top = top
        self.taken: set[str] = set()

    def _free(self, name: str) -> bool:
        return name not in self.taken and name not in self.top.owners and name not in self._FIXED

    def claim(self, wanted: str) -> str:
        name = wanted
        while not self._free(name):
            name += "_"
        self.taken.add(name)
        return name

    def param(self, name: str, what: str, loc: ir.Loc | None) -> str:
        """A parameter must keep its name: a clash with a name the module uses is an error."""
        if not self._free(name):
            self.top.diagnostics.append(
                error(
                    "generated-name-clash",
                    f"{what}: the parameter `{name}` would clash with a name the generated module uses",
                    loc or ir.Loc(self.top.rules_source, 1, 1, 1, 1),
                    "rename it in the rules",
                )
            )
        self.taken.add(name)
        return name

    def child(self) -> Locals:
        """A namespace that starts with every name taken here (for a second function over the same names)."""
        other = Locals(self.top)
        other.taken = set(self.taken)
        return other


# --------------------------------------------------------------------------------------------- literals


def member_const(member: str) -> str:
    """The Python name of an enum member: `flashinfer` → `FLASHINFER`."""
    return member.upper()


def py_str(text: str) -> str:
    """A string from the rules as a Python literal (never spliced into code as it stands)."""
    return repr(str(text))


def py_tuple(items: Iterable[str]) -> str:
    """A tuple of strings as a Python literal."""
    items = list(items)
    inner = ", ".join(py_str(i) for i in items)
    return f"({inner},)" if len(items) == 1 else f"({inner})"


def py_literal(value: Any, t: Type) -> str:
    """A value of a type as Python source: enum members by name, never by string."""
    if value is None:
        return "None"
    if isinstance(t, EnumT):
        return f"{t.name}.{member_const(value)}"
    if isinstance(t, BoolT):
        return "True" if value else "False"
    return repr(int(value))


def type_ann(t: Type) -> str:
    if isinstance(t, EnumT):
        return t.name
    if isinstance(t, IntT):
        return "int"
    return "bool"


def coercer_name(enum: EnumT) -> str:
    return f"_as_{snake_case(enum.name)}"


def by_value_name(enum: str) -> str:
    """The enum's lookup table from member names to members."""
    return f"_{snake_case(enum).upper()}_BY_VALUE"


def facts_class(namespace: str) -> str:
    return f"{camel_case(namespace)}Facts"


def facts_param(namespace: str) -> str:
    return f"{namespace}_facts"


def param_for(model: Model, namespace: str) -> tuple[str, str]:
    """(name, annotation) of the parameter through which a function reads a namespace: config objects are
    duck-typed (`Any`), facts come as their frozen record."""
    if model.namespaces[namespace] == Scope.PROCESS:
        return namespace, "Any"
    return facts_param(namespace), facts_class(namespace)
