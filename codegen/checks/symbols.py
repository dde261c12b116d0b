"""The symbol table: what the declarations layer found declared, as the later layers look it up."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.model import EnumT, LeafInfo, Scope, SlotInfo, Type


class StampShape(msgspec.Struct, frozen=True):
    """One stamp declaration as checked on its own: the runner attribute it lives on, its slots whose type
    resolved, and its fields (the first of each name; a repeat is an error already reported)."""

    decl: ir.StampDecl
    attribute: str
    slots: dict[str, Type]
    slot_infos: tuple[SlotInfo, ...]
    fields: dict[str, ir.FieldDecl]


@dataclass
class Symbols:
    """Names the declarations declare, and what the checks of one file learn about them on the way (the
    layers after the first only add to `used`)."""

    enums: dict[str, EnumT] = field(default_factory=dict)
    leaves: dict[str, LeafInfo] = field(default_factory=dict)  # config leaves and facts, by full name
    namespaces: dict[str, Scope] = field(default_factory=dict)  # config/facts block name -> scope
    stamp_decls: dict[str, ir.StampDecl] = field(default_factory=dict)  # the first declaration of each name
    auto_decls: dict[str, ir.AutoDecl] = field(default_factory=dict)  # the first declaration of each name
    stamps: list[StampShape] = field(default_factory=list)  # every stamp declaration, in order
    used: set[str] = field(default_factory=set)  # full names of leaves and names of enums/autos that are read
    duplicates: set[ir.Loc] = field(default_factory=set)  # leaves declared again (reported at the repeat)
    untyped: set[str] = field(default_factory=set)  # leaves whose type did not resolve (reported at the type)

    def config_leaves(self) -> list[str]:
        """The full names of the config leaves (what `set`, `flag` and `base` may name)."""
        return [n for n, leaf in self.leaves.items() if leaf.scope == Scope.PROCESS]
