"""The checked model: the IR plus what the checker resolved (types, scopes, evaluation order).

Built only by codegen/checks/ from an IR that passed every check; the interpreter, the templates and the
CLI read it and never look back at the parser.
"""

from __future__ import annotations

import keyword
from typing import Any, Union

import msgspec

from stampgen.codegen import ir


class EnumT(msgspec.Struct, frozen=True, tag="enum"):
    name: str
    members: tuple[str, ...]
    open_member: str | None


class IntT(msgspec.Struct, frozen=True, tag="int"):
    values: tuple[int, ...]


class BoolT(msgspec.Struct, frozen=True, tag="bool"):
    pass


Type = Union[EnumT, IntT, BoolT]


def type_name(t: Type) -> str:
    if isinstance(t, EnumT):
        return t.name
    if isinstance(t, IntT):
        return "int in {" + ", ".join(str(v) for v in t.values) + "}"
    return "bool"


def domain(t: Type) -> tuple[Any, ...]:
    """Every value of a type, in declaration order (enum members as their names)."""
    if isinstance(t, EnumT):
        return t.members
    if isinstance(t, IntT):
        return t.values
    return (False, True)


class Scope(ir.TextEnum):
    """When a leaf's value is known, and so which rules may read it."""

    PROCESS = "process"  # config leaves: operator intent, resolved at launch
    LAUNCH = "launch"  # launch facts: known once per process
    RUNNER = "runner"  # runner facts: known per runner


class LeafInfo(msgspec.Struct, frozen=True):
    """A config leaf (`mamba.linear_attn_backend`) or a fact (`runner.sm`)."""

    namespace: str
    name: str
    scope: Scope
    type: Type
    optional: bool
    default: Any  # None when the leaf has no default
    loc: ir.Loc
    doc: str = ""  # its comment in the rules

    @property
    def full_name(self) -> str:
        return f"{self.namespace}.{self.name}"

    @property
    def is_fact(self) -> bool:
        return self.scope != Scope.PROCESS


class FieldInfo(msgspec.Struct, frozen=True):
    name: str
    type: Type
    decl: ir.FieldDecl


class SlotInfo(msgspec.Struct, frozen=True):
    name: str
    type: Type
    sources: tuple[str, ...]
    decl: ir.SlotDecl


class StampInfo(msgspec.Struct, frozen=True):
    name: str
    attribute: str  # the runner attribute it is stamped on
    fields: tuple[FieldInfo, ...]  # declared order (the Struct's field order)
    eval_order: tuple[str, ...]  # fields ordered so that every field comes after those it reads
    slots: tuple[SlotInfo, ...]
    config_namespaces: tuple[str, ...]  # config blocks its resolver reads, in declaration order
    decl: ir.StampDecl

    def field(self, name: str) -> FieldInfo:
        return next(f for f in self.fields if f.name == name)


class LaunchInfo(msgspec.Struct, frozen=True):
    name: str
    locals: tuple[FieldInfo, ...]
    namespaces: tuple[str, ...]  # config blocks and `launch` facts it reads or writes
    decl: ir.LaunchDecl  # its statements with every `use` expanded into the stamp's own FieldDecls

    @property
    def stmts(self) -> tuple[ir.LocalStmt, ...]:
        """The block's statements, in order, as they run (the checker expanded every `use`)."""
        return tuple(s for s in self.decl.stmts if not isinstance(s, ir.UseStmt))


class AutoInfo(msgspec.Struct, frozen=True):
    name: str
    type: Type
    namespaces: tuple[str, ...]
    decl: ir.AutoDecl


class ValidateInfo(msgspec.Struct, frozen=True):
    name: str
    stamps: tuple[str, ...]  # stamps it reads (at most one in practice)
    namespaces: tuple[str, ...]  # config blocks and fact blocks it reads
    decl: ir.ValidateDecl


class Model(msgspec.Struct, frozen=True):
    path: str
    enums: dict[str, EnumT]
    leaves: dict[str, LeafInfo]  # by full name
    namespaces: dict[str, Scope]  # config/facts block name -> scope
    autos: dict[str, AutoInfo]
    stamps: dict[str, StampInfo]
    launches: tuple[LaunchInfo, ...]
    validates: tuple[ValidateInfo, ...]
    guards: tuple[ir.GuardDecl, ...]
    parities: tuple[ir.ParityDecl, ...]
    file: ir.RulesFile

    def config_namespaces(self) -> tuple[str, ...]:
        return tuple(ns for ns, scope in self.namespaces.items() if scope == Scope.PROCESS)

    def leaves_of(self, namespace: str) -> tuple[LeafInfo, ...]:
        return tuple(leaf for leaf in self.leaves.values() if leaf.namespace == namespace)


def is_valid_identifier(name: str) -> bool:
    """Names from the rules become Python identifiers: no keywords, nothing private or magic."""
    return name.isidentifier() and not keyword.iskeyword(name) and not name.startswith("_")
