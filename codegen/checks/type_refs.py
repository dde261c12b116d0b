"""Types: resolving a written type to a checked one, and whether a literal is a value of it."""

from __future__ import annotations

from stampgen.codegen import ir
from stampgen.codegen.checks.report import Report
from stampgen.codegen.checks.symbols import Symbols
from stampgen.codegen.diagnostics import did_you_mean
from stampgen.codegen.model import BoolT, EnumT, IntT, Type, type_name

BUILTIN_TYPES = ("bool",)


def resolve_type(ref: ir.TypeRef, symbols: Symbols, report: Report) -> Type | None:
    """The type a reference names (marking an enum used); reports an unknown name or a repeated value."""
    if isinstance(ref, ir.IntType):
        if len(set(ref.values)) != len(ref.values):
            report.error("duplicate-domain-value", "an int domain lists a value twice", ref.loc)
        return IntT(tuple(sorted(set(ref.values))))
    if ref.name == "bool":
        return BoolT()
    if ref.name in symbols.enums:
        symbols.used.add(ref.name)
        return symbols.enums[ref.name]
    report.error(
        "unknown-type",
        f"unknown type `{ref.name}`",
        ref.loc,
        did_you_mean(ref.name, [*symbols.enums, "bool"]),
    )
    return None


def literal_fits(lit: ir.Literal, t: Type, what: str, report: Report) -> bool:
    """Report (and return False) when a literal is not a value of the type."""
    if isinstance(t, EnumT):
        if not isinstance(lit, ir.NameLit):
            report.error("type-mismatch", f"{what} is of type `{t.name}`, not {lit_kind(lit)}", lit.loc)
            return False
        if lit.value not in t.members:
            report.error(
                "unknown-member",
                f"`{lit.value}` is not a member of enum `{t.name}`",
                lit.loc,
                did_you_mean(lit.value, t.members),
            )
            return False
        return True
    if isinstance(t, IntT):
        if not isinstance(lit, ir.IntLit):
            report.error("type-mismatch", f"{what} is an int, not {lit_kind(lit)}", lit.loc)
            return False
        if lit.value not in t.values:
            report.error(
                "out-of-domain",
                f"{lit.value} is outside the domain of {what} ({type_name(t)})",
                lit.loc,
            )
            return False
        return True
    if not isinstance(lit, ir.BoolLit):
        report.error("type-mismatch", f"{what} is a bool, not {lit_kind(lit)}", lit.loc)
        return False
    return True


def lit_kind(lit: ir.Literal) -> str:
    """A literal as a message names it: `the int 3`, `the bool true`, `the name `x``."""
    if isinstance(lit, ir.IntLit):
        return f"the int {lit.value}"
    if isinstance(lit, ir.BoolLit):
        return f"the bool {ir.literal_text(lit)}"
    return f"the name `{lit.value}`"
