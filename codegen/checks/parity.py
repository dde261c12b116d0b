"""What a parity declaration means over a registry: its draft pattern and the (draft, target) pairs it
checks. One definition for `check` (codegen/checks/imports.py) and for the generated tests (testing.py)."""

from __future__ import annotations

import re
from collections.abc import Mapping

from stampgen.codegen import ir


def draft_pattern(decl: ir.ParityDecl) -> re.Pattern[str] | None:
    """The draft regex of a parity, or None when it has none or it does not compile (reported elsewhere)."""
    if decl.draft is None:
        return None
    try:
        return re.compile(decl.draft)
    except re.error:
        return None


def is_registry(value: object) -> bool:
    """A mapping of names to classes, as a parity check reads its registry."""
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, type) for k, v in value.items()
    )


def parity_pairs(
    decl: ir.ParityDecl, archs: Mapping[str, type]
) -> tuple[list[tuple[str, str]], dict[str, list[str]]]:
    """The (draft, target) pairs a parity checks over a registry, and per offending draft the hooks that
    only one of the pair has: what the generated check_NAME() computes, for `check` and for its tests."""
    pattern = draft_pattern(decl)
    excluded = {n.value for n in decl.exclude}
    pairs: list[tuple[str, str]] = []
    offences: dict[str, list[str]] = {}
    for draft in sorted(archs):
        match = pattern.search(draft) if pattern is not None and draft not in excluded else None
        if match is None:
            continue
        base = draft[: match.start()]
        target = next((base + s for s in decl.targets if base + s in archs and base + s != draft), None)
        if target is None:
            continue
        pairs.append((draft, target))
        hooks = [
            h.value for h in decl.hooks if hasattr(archs[draft], h.value) != hasattr(archs[target], h.value)
        ]
        if hooks:
            offences[draft] = hooks
    return pairs, offences
