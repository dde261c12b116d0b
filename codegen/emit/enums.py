"""enum declarations → `str` Enums with `is_<member>()` helpers and a coercer from names."""

from __future__ import annotations

import keyword

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import error
from stampgen.codegen.emit.names import TopLevel, by_value_name, coercer_name, member_const, py_str
from stampgen.codegen.model import Model


class EnumMember(msgspec.Struct, frozen=True, kw_only=True):
    const: str
    value: str  # a Python literal
    is_method: str


class EnumView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    members: list[EnumMember]
    open_const: str | None  # the member unknown names become, for an open enum
    by_value: str  # the lookup table's name
    coercer: str
    listing: str  # the members, for error messages (a Python literal)


def emit_enum(model: Model, decl: ir.EnumDecl, top: TopLevel) -> EnumView:
    enum = model.enums[decl.name.value]
    top.claim(enum.name, f"enum `{enum.name}`", decl.name.loc)
    consts: dict[str, str] = {}
    members = []
    for member, name in zip(enum.members, decl.members):
        const = member_const(member)
        if const in consts or not const.isidentifier() or keyword.iskeyword(const):
            why = f"`{consts[const]}` becomes too" if const in consts else "is not a Python name"
            top.diagnostics.append(
                error(
                    "generated-name-clash",
                    f"enum member `{member}` becomes `{enum.name}.{const}`, which {why}",
                    name.loc,
                    "enum members are emitted in UPPER_CASE; rename one of them",
                )
            )
        consts[const] = member
        members.append(EnumMember(const=const, value=py_str(member), is_method=f"is_{member}"))
    return EnumView(
        name=enum.name,
        members=members,
        open_const=member_const(enum.open_member) if enum.open_member else None,
        by_value=top.claim(by_value_name(enum.name), f"enum `{enum.name}`", None),
        coercer=top.claim(coercer_name(enum), f"enum `{enum.name}`", None),
        listing=py_str(", ".join(enum.members)),
    )
