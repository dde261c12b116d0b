"""The data model: a frozen IR of one .rules file, every node carrying its position.

The parser builds it, the checker resolves it (codegen/checks/), the interpreter evaluates it and the
templates render it. Nothing here knows about Lark or Jinja. Names are plain strings; `Ref.name` is the
dotted name exactly as written in the rules (`mamba.linear_attn_backend`, `decode`, `runner.sm`). Every
closed set of words (tier kinds, comparison operators, check kinds) is a TextEnum.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar, Union

import msgspec


class TextEnum(str, enum.Enum):
    """A closed set of words. Each member is the str the rules and the reports spell it (it prints, compares,
    hashes and encodes as that word), so the output reads the same while a misspelt kind is an error that
    mypy, or the first run, reports."""

    def __str__(self) -> str:
        return str(self.value)


class _Tagged(msgspec.Struct, frozen=True, tag_field="node"):
    """Base of the nodes that stand in a union; the tag names the node kind in JSON."""


class Loc(msgspec.Struct, frozen=True):
    """A span in a .rules file; lines and columns count from 1, as editors show them."""

    path: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"


class Name(msgspec.Struct, frozen=True):
    """An identifier at a position (a declaration's name, a list entry)."""

    value: str
    loc: Loc


# --------------------------------------------------------------------------------------------- literals


class NameLit(_Tagged, frozen=True, tag="name"):
    """A bare name used as a value: an enum member."""

    value: str
    loc: Loc


class IntLit(_Tagged, frozen=True, tag="int"):
    value: int
    loc: Loc


class BoolLit(_Tagged, frozen=True, tag="bool"):
    value: bool
    loc: Loc


Literal = Union[NameLit, IntLit, BoolLit]


def literal_text(lit: Literal) -> str:
    if isinstance(lit, BoolLit):
        return "true" if lit.value else "false"
    return str(lit.value)


# --------------------------------------------------------------------------------------------- types


class NamedType(_Tagged, frozen=True, tag="named"):
    """`bool` or the name of an enum."""

    name: str
    loc: Loc


class IntType(_Tagged, frozen=True, tag="int"):
    """`int in {...}`: an integer with a finite domain."""

    values: tuple[int, ...]
    loc: Loc


TypeRef = Union[NamedType, IntType]


# --------------------------------------------------------------------------------------------- expressions


class Ref(msgspec.Struct, frozen=True):
    name: str
    loc: Loc


class Truthy(_Tagged, frozen=True, tag="truthy"):
    """A boolean leaf or fact used as a condition."""

    ref: Ref
    loc: Loc


class CompareOp(TextEnum):
    """The comparisons a condition makes (`>` separates tiers, so it is not one of them)."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GE = ">="


class Compare(_Tagged, frozen=True, tag="compare"):
    ref: Ref
    op: CompareOp
    value: Literal
    loc: Loc


class Member(_Tagged, frozen=True, tag="member"):
    """`ref in {a, b}` or, negated, `ref not in {a, b}`."""

    ref: Ref
    values: tuple[Literal, ...]
    negated: bool
    loc: Loc


class AnyField(_Tagged, frozen=True, tag="any_field"):
    """`value in Stamp`: some field of the stamp has this value."""

    value: NameLit
    stamp: Ref
    loc: Loc


class IsUnset(_Tagged, frozen=True, tag="is_unset"):
    """`ref is unset` or, negated, `ref is set`."""

    ref: Ref
    negated: bool
    loc: Loc


class Const(_Tagged, frozen=True, tag="const"):
    value: bool
    loc: Loc


class Not(_Tagged, frozen=True, tag="not"):
    operand: Expr
    loc: Loc


class And(_Tagged, frozen=True, tag="and"):
    left: Expr
    right: Expr
    loc: Loc


class Or(_Tagged, frozen=True, tag="or"):
    left: Expr
    right: Expr
    loc: Loc


class Implies(_Tagged, frozen=True, tag="implies"):
    left: Expr
    right: Expr
    loc: Loc


Expr = Union[Truthy, Compare, Member, AnyField, IsUnset, Const, Not, And, Or, Implies]


def expr_refs(expr: Expr) -> list[Ref]:
    """Every reference an expression reads, in source order."""
    if isinstance(expr, (Truthy, Compare, Member, IsUnset)):
        return [expr.ref]
    if isinstance(expr, AnyField):
        return [expr.stamp]
    if isinstance(expr, Not):
        return expr_refs(expr.operand)
    if isinstance(expr, (And, Or, Implies)):
        return expr_refs(expr.left) + expr_refs(expr.right)
    return []


def expr_literals(expr: Expr) -> list[tuple[Ref, Literal]]:
    """(reference, literal) pairs an expression compares; `value in Stamp` pairs with the stamp ref."""
    if isinstance(expr, Compare):
        return [(expr.ref, expr.value)]
    if isinstance(expr, Member):
        return [(expr.ref, v) for v in expr.values]
    if isinstance(expr, AnyField):
        return [(expr.stamp, expr.value)]
    if isinstance(expr, Not):
        return expr_literals(expr.operand)
    if isinstance(expr, (And, Or, Implies)):
        return expr_literals(expr.left) + expr_literals(expr.right)
    return []


# --------------------------------------------------------------------------------------------- declarations


class EnumDecl(_Tagged, frozen=True, tag="enum"):
    name: Name
    members: tuple[Name, ...]
    open_member: Name | None
    loc: Loc


class Leaf(msgspec.Struct, frozen=True):
    """A config leaf or a fact: `name: Type`, `?` when it may be unset, an optional default."""

    name: Name
    type: TypeRef
    optional: bool
    default: Literal | None
    loc: Loc
    # its comment: the comment lines right above it and the one at the end of its line, `#` and spacing
    # dropped (an engine's flag help)
    doc: str = ""


class ConfigDecl(_Tagged, frozen=True, tag="config"):
    name: Name
    leaves: tuple[Leaf, ...]
    loc: Loc


class FactsDecl(_Tagged, frozen=True, tag="facts"):
    name: Name
    leaves: tuple[Leaf, ...]
    loc: Loc


class SetStmt(_Tagged, frozen=True, tag="set"):
    """`set config.leaf = value when cond log "..."`: a write to process config (launch blocks only)."""

    target: Ref
    value: Literal
    when: Expr | None
    log: str | None
    loc: Loc


class CheckKind(TextEnum):
    FORBID = "forbid"  # fails when its condition holds
    REQUIRE = "require"  # fails when its condition does not hold


class Check(_Tagged, frozen=True, tag="check"):
    """`forbid cond "message"` (fails when cond holds) or `require cond "message"` (fails when it does not)."""

    kind: CheckKind
    cond: Expr
    message: str
    loc: Loc


class TierKind(TextEnum):
    """The label of a precedence chain's step, as the rules and every explanation spell it."""

    FLAG = "flag"
    AUTO = "auto"
    BASE = "base"
    FOLLOW = "follow"
    CONST = "const"


class FlagTier(_Tagged, frozen=True, tag="flag_tier"):
    """`flag config.leaf`: the leaf's value, when it is set (the operator's explicit choice)."""

    kind: ClassVar[TierKind] = TierKind.FLAG
    ref: Ref  # a config leaf
    when: Expr | None
    loc: Loc


class AutoTier(_Tagged, frozen=True, tag="auto_tier"):
    """`auto slot`: the stamp's slot, when the caller gave it (a runner's auto-default)."""

    kind: ClassVar[TierKind] = TierKind.AUTO
    ref: Ref  # a slot of the stamp
    when: Expr | None
    loc: Loc


class BaseTier(_Tagged, frozen=True, tag="base_tier"):
    """`base config.leaf`: the leaf's value or its default."""

    kind: ClassVar[TierKind] = TierKind.BASE
    ref: Ref  # a config leaf
    when: Expr | None
    loc: Loc


class FollowTier(_Tagged, frozen=True, tag="follow_tier"):
    """`follow field`: another field of the same record."""

    kind: ClassVar[TierKind] = TierKind.FOLLOW
    ref: Ref  # a field of the same stamp or launch block
    when: Expr | None
    loc: Loc


class ConstTier(_Tagged, frozen=True, tag="const_tier"):
    """A literal."""

    kind: ClassVar[TierKind] = TierKind.CONST
    ref: ClassVar[None] = None  # a constant copies no name
    value: Literal
    when: Expr | None
    loc: Loc


Tier = Union[FlagTier, AutoTier, BaseTier, FollowTier, ConstTier]  # one labelled step of a precedence chain


class FieldDecl(_Tagged, frozen=True, tag="field"):
    name: Name
    tiers: tuple[Tier, ...]
    loc: Loc
    declared: TypeRef | None = None  # `name: Type = ...`; else the tiers tell the type


class UseStmt(_Tagged, frozen=True, tag="use"):
    """`use STAMP.FIELD, ...` in a launch block: each field's chain, as the stamp states it, evaluated at
    that statement on the config as normalised so far, as a local named like the field. One source for
    each chain: the launch checks read what the stamp resolves, not a copy of its rules."""

    fields: tuple[Ref, ...]
    loc: Loc


LaunchStmt = Union[SetStmt, Check, FieldDecl, UseStmt]  # a statement of a launch block, as written
LocalStmt = Union[SetStmt, Check, FieldDecl]  # one, as every stage after the checker sees it (`use` expanded)


class LaunchDecl(_Tagged, frozen=True, tag="launch"):
    """Process-level normalisation, run once at launch: sets, local derived fields and checks, in order.

    As parsed, `stmts` may hold `UseStmt`s; the checked model's LaunchInfo.decl holds them expanded into
    the stamp's own FieldDecls (the same nodes), so every later stage sees locals only."""

    name: Name
    stmts: tuple[LaunchStmt, ...]
    loc: Loc


class AutoDecl(_Tagged, frozen=True, tag="auto"):
    """A per-runner auto-default gate: yields `value` when `when` holds, else nothing."""

    name: Name
    type: TypeRef
    value: Literal
    when: Expr
    log: str | None
    loc: Loc


class SlotDecl(msgspec.Struct, frozen=True):
    """A value the caller hands the resolver (an auto-default), optionally computed by gates."""

    name: Name
    type: TypeRef
    sources: tuple[Name, ...]
    loc: Loc


class StampDecl(_Tagged, frozen=True, tag="stamp"):
    name: Name
    target: Ref  # runner.<attribute>
    slots: tuple[SlotDecl, ...]
    fields: tuple[FieldDecl, ...]
    writes: tuple[SetStmt, ...]  # always an error: kept so the checker can say where
    loc: Loc


class Fallback(_Tagged, frozen=True, tag="fallback"):
    """`fallback Stamp.field a -> b when cond log "..."`: an explicit, logged replacement."""

    field: Ref
    from_value: Literal
    to_value: Literal
    when: Expr
    log: str
    loc: Loc


class Waiver(_Tagged, frozen=True, tag="waiver"):
    """`waive CLASS until YYYY-MM-DD "reason"`: a dated, reasoned exception inside a parity or validate block.

    In a parity block CLASS is a draft class the check lets pass until the date; in a validate block it is a
    consumer class whose validation failures are logged, not raised, until the date. `until` is the date as
    written (the checker validates it); `reason` is None when it was left out (an error, with this position).
    """

    cls: Name
    until: str
    until_loc: Loc
    reason: str | None
    loc: Loc


class ValidateDecl(_Tagged, frozen=True, tag="validate"):
    name: Name
    stmts: tuple[Check | Fallback | SetStmt, ...]
    loc: Loc
    waivers: tuple[Waiver, ...] = ()  # kept apart from stmts: they are not rules the block runs


class GuardDecl(_Tagged, frozen=True, tag="guard"):
    consumers: tuple[Name, ...]
    module: str
    module_loc: Loc
    stamp: Name
    loc: Loc


class ParityDecl(_Tagged, frozen=True, tag="parity"):
    """Over a registry (name -> class), drafts must have exactly the hooks their targets have."""

    name: Name
    registry: str
    registry_loc: Loc
    draft: str | None  # the regex between the slashes
    draft_loc: Loc | None
    targets: tuple[str, ...]  # suffixes appended to the draft's base name; "" = the base itself
    exclude: tuple[Name, ...]
    hooks: tuple[Name, ...]
    at_least: int | None
    clause_locs: tuple[tuple[str, Loc], ...]  # (clause keyword, where), to report repeats and omissions
    loc: Loc
    waivers: tuple[Waiver, ...] = ()  # drafts allowed to differ from their targets until a date


class ImportDecl(_Tagged, frozen=True, tag="import"):
    """`import "other.rules"`: the vocabulary (enums, config and facts blocks) of another rules file, as if
    declared here; `path` is as written, relative to the importing file."""

    path: str
    path_loc: Loc
    loc: Loc


Decl = Union[
    ImportDecl,
    EnumDecl,
    ConfigDecl,
    FactsDecl,
    LaunchDecl,
    AutoDecl,
    StampDecl,
    ValidateDecl,
    GuardDecl,
    ParityDecl,
]

# What an import brings in: a file's vocabulary, the declarations other files may share.
Vocabulary = Union[EnumDecl, ConfigDecl, FactsDecl]


class ImportedFile(msgspec.Struct, frozen=True):
    """A file this one imports, resolved by codegen/load.py: its name as positions give it, the module it
    generates, and its vocabulary (its own and what it imports, each declaration with its own positions)."""

    path: str
    module: str
    decls: tuple[Vocabulary, ...]


class RulesFile(msgspec.Struct, frozen=True):
    path: str
    decls: tuple[Decl, ...]
    imported: tuple[ImportedFile, ...] = ()  # filled by the loader; empty for a file that imports nothing


def without_positions(node: Any) -> Any:
    """A node as plain data with every position (and every leaf's doc comment) left out: what two texts
    say, not where they say it."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            kept = {
                k: strip(v)
                for k, v in value.items()
                if not k.endswith(("loc", "locs")) and k not in ("path", "doc")
            }
            if "clause_locs" in value:  # the clauses in order, without where they are
                kept["clauses"] = [keyword for keyword, _ in value["clause_locs"]]
            return kept
        if isinstance(value, (list, tuple)):
            return [strip(v) for v in value]
        return value

    return strip(msgspec.to_builtins(node))
