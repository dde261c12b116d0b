"""parity declarations → a check over a registry that drafts answer exactly the hooks their targets do."""

from __future__ import annotations

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.names import TopLevel, py_str, py_tuple
from stampgen.codegen.emit.positions import parity_id, waiver_id


class WaiverView(msgspec.Struct, frozen=True, kw_only=True):
    """One `waive CLASS until DATE "reason"`, as Python literals."""

    cls: str
    until: str  # YYYY-MM-DD: ISO dates compare as strings
    reason: str
    identity: str  # its key in RULE_POSITIONS


def waiver_views(owner: str, waivers: tuple[ir.Waiver, ...]) -> list[WaiverView]:
    """The waivers of a block named `owner` (its identity: `parity NAME`, `validate NAME`)."""
    return [
        WaiverView(
            cls=py_str(w.cls.value),
            until=py_str(w.until),
            reason=py_str(w.reason or ""),
            identity=py_str(waiver_id(owner, w.cls.value)),
        )
        for w in waivers
    ]


class ParityView(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    fn: str
    identity: str  # a Python literal: its key in RULE_POSITIONS
    registry: str  # a Python literal
    registry_const: str
    at_least: int
    at_least_const: str
    pattern: str  # a Python literal
    pattern_const: str
    targets: str  # a Python tuple literal
    targets_const: str
    exclude: str  # a Python tuple literal
    exclude_const: str
    hooks: str  # a Python tuple literal
    hooks_const: str
    waivers: list[WaiverView]  # drafts allowed to differ from their target until a date
    waivers_const: str | None  # None without waivers


def emit_parity(decl: ir.ParityDecl, top: TopLevel) -> ParityView:
    name = decl.name.value
    upper = name.upper()
    what = f"parity `{name}`"
    return ParityView(
        name=name,
        fn=top.claim(f"check_{name}", what, decl.name.loc),
        identity=py_str(parity_id(name)),
        registry=py_str(decl.registry),
        registry_const=top.claim(f"{upper}_REGISTRY", what, decl.name.loc),
        at_least=decl.at_least if decl.at_least is not None else 1,
        at_least_const=top.claim(f"{upper}_AT_LEAST", what, decl.name.loc),
        pattern=py_str(decl.draft or ""),
        pattern_const=top.claim(f"_{upper}_DRAFT", what, None),
        targets=py_tuple(decl.targets),
        targets_const=top.claim(f"_{upper}_TARGETS", what, None),
        exclude=py_tuple(sorted({n.value for n in decl.exclude})),
        exclude_const=top.claim(f"_{upper}_EXCLUDE", what, None),
        hooks=py_tuple(h.value for h in decl.hooks),
        hooks_const=top.claim(f"_{upper}_HOOKS", what, None),
        waivers=waiver_views(parity_id(name), decl.waivers),
        waivers_const=top.claim(f"_{upper}_WAIVERS", what, None) if decl.waivers else None,
    )
