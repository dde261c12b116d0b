"""Conditions of the rules as Python expressions, inside one generated function.

A `Scope` knows what each name of the rules is called in that function (a local read from config, a fact
on its record, a field computed earlier); `Scope.cond` turns an `ir.Expr` into one Python expression.
Enum members and booleans are singletons and compare by identity; an unset (None) value is never below or
above anything, as in the interpreter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.names import py_literal
from stampgen.codegen.model import BoolT, EnumT, Type


class Ref(msgspec.Struct, frozen=True, kw_only=True):
    code: str  # how the generated code reads it
    type: Type
    optional: bool  # may be None


# precedence of the Python operators produced: 0 atom/comparison, 1 not, 2 and, 3 or
_ATOM, _NOT, _AND, _OR = 0, 1, 2, 3


class Scope:
    """What each name of the rules is called inside one generated function."""

    def __init__(self, refs: Mapping[str, Ref], stamp_fields: Mapping[str, Sequence[str]] | None = None):
        self.refs = dict(refs)
        self.stamp_fields = stamp_fields or {}  # stamp name -> its field names (for `value in Stamp`)

    def ref(self, name: str) -> Ref:
        return self.refs[name]

    def cond(self, e: ir.Expr) -> str:
        """The condition as one Python expression."""
        return self._expr(e)[0]

    def operand(self, e: ir.Expr) -> str:
        """The condition as an operand of `and` (parenthesised when it is an `or`)."""
        return self._wrap(e, _AND)

    def _wrap(self, e: ir.Expr, limit: int) -> str:
        code, prec = self._expr(e)
        return f"({code})" if prec > limit else code

    def _expr(self, e: ir.Expr) -> tuple[str, int]:
        if isinstance(e, ir.Const):
            return ("True" if e.value else "False"), _ATOM
        if isinstance(e, ir.Not):
            flipped = _negated(e.operand)
            if flipped is not None:
                return self._expr(flipped)
            return f"not {self._wrap(e.operand, _NOT)}", _NOT
        if isinstance(e, ir.And):
            parts = _conjuncts(self._wrap(e.left, _AND)) + _conjuncts(self._wrap(e.right, _AND))
            return " and ".join(dict.fromkeys(parts)), _AND
        if isinstance(e, ir.Or):
            return f"{self._or_operand(e.left)} or {self._or_operand(e.right)}", _OR
        if isinstance(e, ir.Implies):
            return self._expr(ir.Or(ir.Not(e.left, e.loc), e.right, e.loc))
        if isinstance(e, ir.AnyField):
            return self._any_field(e)
        ref = self.ref(e.ref.name)
        if isinstance(e, ir.Truthy):
            return ref.code, _ATOM
        if isinstance(e, ir.IsUnset):
            return f"{ref.code} is {'not ' if e.negated else ''}None", _ATOM
        if isinstance(e, ir.Member):
            values = [py_literal(v.value, ref.type) for v in e.values]
            if len(values) == 1 and isinstance(ref.type, (EnumT, BoolT)):
                return f"{ref.code} is {'not ' if e.negated else ''}{values[0]}", _ATOM
            inside = f"({', '.join(values)}{',' if len(values) == 1 else ''})"
            return f"{ref.code} {'not in' if e.negated else 'in'} {inside}", _ATOM
        assert isinstance(e, ir.Compare)
        lit = py_literal(e.value.value, ref.type)
        if isinstance(ref.type, (EnumT, BoolT)):
            op = {ir.CompareOp.EQ: "is", ir.CompareOp.NE: "is not"}[e.op]
            return f"{ref.code} {op} {lit}", _ATOM
        if e.op in (ir.CompareOp.EQ, ir.CompareOp.NE):
            return f"{ref.code} {e.op} {lit}", _ATOM
        if ref.optional:  # unset is never below or above anything
            return f"{ref.code} is not None and {ref.code} {e.op} {lit}", _AND
        return f"{ref.code} {e.op} {lit}", _ATOM

    def _or_operand(self, e: ir.Expr) -> str:
        """An operand of `or`; an `and` inside one is parenthesised, though Python would not need it."""
        code, prec = self._expr(e)
        return f"({code})" if prec == _AND else code

    def _any_field(self, e: ir.AnyField) -> tuple[str, int]:
        name = e.value.value
        refs = [self.ref(f"{e.stamp.name}.{f}") for f in self.stamp_fields[e.stamp.name]]
        hits = [r for r in refs if isinstance(r.type, EnumT) and name in r.type.members]
        if not hits:
            return "False", _ATOM
        if len(hits) == len(refs) and len({r.type.name for r in hits if isinstance(r.type, EnumT)}) == 1:
            member = py_literal(name, hits[0].type)
            return f"{member} in ({', '.join(r.code for r in hits)}{',' if len(hits) == 1 else ''})", _ATOM
        parts = [f"{r.code} is {py_literal(name, r.type)}" for r in hits]
        return " or ".join(parts), (_OR if len(parts) > 1 else _ATOM)


def _negated(e: ir.Expr) -> ir.Expr | None:
    """`not e` with the negation pushed inwards (De Morgan; `==` ↔ `!=`, `in` ↔ `not in`, `is unset` ↔
    `is set`), where that reads better and says the same for every value, None included; else None."""
    if isinstance(e, ir.Const):
        return ir.Const(not e.value, e.loc)
    if isinstance(e, ir.Compare) and e.op in (ir.CompareOp.EQ, ir.CompareOp.NE):
        op = ir.CompareOp.NE if e.op == ir.CompareOp.EQ else ir.CompareOp.EQ
        return ir.Compare(e.ref, op, e.value, e.loc)
    if isinstance(e, ir.Member):
        return ir.Member(e.ref, e.values, not e.negated, e.loc)
    if isinstance(e, ir.IsUnset):
        return ir.IsUnset(e.ref, not e.negated, e.loc)
    if isinstance(e, ir.Not):
        return e.operand
    if isinstance(e, ir.And):
        return ir.Or(negate(e.left), negate(e.right), e.loc)
    if isinstance(e, ir.Or):
        return ir.And(negate(e.left), negate(e.right), e.loc)
    if isinstance(e, ir.Implies):
        return ir.And(e.left, negate(e.right), e.loc)
    return None


def negate(e: ir.Expr) -> ir.Expr:
    return _negated(e) or ir.Not(e, e.loc)


def _conjuncts(code: str) -> list[str]:
    """Split `a and b and (c or d)` at its top-level `and`s (conditions hold no string literals), so that
    a conjunct said twice is emitted once."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(code):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and code.startswith(" and ", i):
            parts.append(code[start:i])
            start = i + 5
    parts.append(code[start:])
    return parts
