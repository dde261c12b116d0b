"""Rule identities and the position table of a generated module.

Generated code never spells a `rules:LINE:COL`: it names a rule by a stable identity (`auto
gdn_flashinfer_prefill`, `LinearAttnBackends.verify follow decode when decode == flashinfer`, `validate
GDNAttnBackend`, `normalize_linear_attn forbid mamba.linear_attn_decode_backend == flashkda`), and one
table per module, `RULE_POSITIONS`, maps each identity to its position. The table lists its entries in
source order, each line as an offset from the entry before it, so an edit of the rules moves the one entry
after it and a one-line edit reads as a few lines of generated diff.

An identity is made from what the rule says, never from where it is: a rule keeps its identity when lines
are added around it. Statements of a block are named by their text (canonical spacing, shortened with a
digest when long); a text said twice in one block gets `#2`, `#3`.
"""

from __future__ import annotations

import hashlib

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.emit.names import py_str
from stampgen.codegen.interpreter import show_expr, tier_text
from stampgen.codegen.model import Model

_LONGEST = 64  # longer identities are cut, with a digest of the whole text to keep them apart (and
# each entry of the position table on one line)


def enum_id(name: str) -> str:
    return f"enum {name}"


def namespace_id(decl: ir.ConfigDecl | ir.FactsDecl) -> str:
    return f"{'config' if isinstance(decl, ir.ConfigDecl) else 'facts'} {decl.name.value}"


def leaf_id(full_name: str) -> str:
    return full_name


def auto_id(name: str) -> str:
    return f"auto {name}"


def stamp_id(name: str) -> str:
    return f"stamp {name}"


def slot_id(stamp: str, slot: str) -> str:
    return f"{stamp}.{slot}"


def field_id(owner: str, field: str) -> str:
    return f"{owner}.{field}"


def tier_id(owner: str, field: str, tier: ir.Tier) -> str:
    return f"{owner}.{field} {tier_text(tier)}"


def launch_id(name: str) -> str:
    return f"launch {name}"


def validate_id(name: str) -> str:
    return f"validate {name}"


def guard_id(consumer: str) -> str:
    return f"guard {consumer}"


def parity_id(name: str) -> str:
    return f"parity {name}"


def waiver_id(owner: str, cls: str) -> str:
    """A waiver of a parity (`owner` = `parity NAME`) or of a validate block (`validate NAME`)."""
    return f"{owner} waive {cls}"


def statement_text(stmt: ir.SetStmt | ir.Check | ir.Fallback) -> str:
    """A statement as written (canonical spacing), without its message or log line."""
    if isinstance(stmt, ir.SetStmt):
        text = f"set {stmt.target.name} = {ir.literal_text(stmt.value)}"
        return text + (f" when {show_expr(stmt.when)}" if stmt.when is not None else "")
    if isinstance(stmt, ir.Check):
        return f"{stmt.kind} {show_expr(stmt.cond)}"
    return (
        f"fallback {stmt.field.name} {ir.literal_text(stmt.from_value)} -> {ir.literal_text(stmt.to_value)}"
        f" when {show_expr(stmt.when)}"
    )


def _short(text: str) -> str:
    if len(text) <= _LONGEST:
        return text
    digest = hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]
    return f"{text[: _LONGEST - 12].rstrip()}... {digest}"


def statement_ids(block: str, stmts: tuple[ir.SetStmt | ir.Check | ir.Fallback, ...]) -> list[str]:
    """The identity of each statement of a block, in order."""
    seen: dict[str, int] = {}
    ids = []
    for stmt in stmts:
        text = _short(f"{block} {statement_text(stmt)}")
        seen[text] = seen.get(text, 0) + 1
        ids.append(text if seen[text] == 1 else f"{text} #{seen[text]}")
    return ids


def rule_locations(model: Model, *, imported: bool = False) -> dict[str, ir.Loc]:
    """Every rule of the model's own file by identity, in source order: what its RULE_POSITIONS table
    lists. With `imported`, first the vocabulary of the files it imports (which the generated module merges
    into RULE_POSITIONS from their modules), each at its own position."""
    found: dict[str, ir.Loc] = {}

    def vocabulary(decl: ir.Vocabulary) -> None:
        if isinstance(decl, ir.EnumDecl):
            found[enum_id(decl.name.value)] = decl.loc
            return
        found[namespace_id(decl)] = decl.loc
        for leaf in decl.leaves:
            found[leaf_id(f"{decl.name.value}.{leaf.name.value}")] = leaf.loc

    if imported:
        for shared in (d for f in model.file.imported for d in f.decls):
            vocabulary(shared)

    def chain(owner: str, decl: ir.FieldDecl) -> None:
        found[field_id(owner, decl.name.value)] = decl.loc
        for tier in decl.tiers:
            found.setdefault(tier_id(owner, decl.name.value, tier), tier.loc)

    for decl in model.file.decls:
        if isinstance(decl, (ir.EnumDecl, ir.ConfigDecl, ir.FactsDecl)):
            vocabulary(decl)
        elif isinstance(decl, ir.AutoDecl):
            found[auto_id(decl.name.value)] = decl.loc
        elif isinstance(decl, ir.StampDecl):
            name = decl.name.value
            found[stamp_id(name)] = decl.loc
            for slot in decl.slots:
                found[slot_id(name, slot.name.value)] = slot.loc
            for fdecl in decl.fields:
                chain(name, fdecl)
        elif isinstance(decl, ir.LaunchDecl):
            name = decl.name.value
            found[launch_id(name)] = decl.loc
            plain = tuple(s for s in decl.stmts if isinstance(s, (ir.SetStmt, ir.Check)))
            for identity, statement in zip(statement_ids(name, plain), plain):
                found[identity] = statement.loc
            for stmt in decl.stmts:
                if isinstance(stmt, ir.FieldDecl):
                    chain(name, stmt)
                elif isinstance(stmt, ir.UseStmt):
                    for ref in stmt.fields:
                        found[f"{name} use {ref.name}"] = ref.loc
        elif isinstance(decl, ir.ValidateDecl):
            name = decl.name.value
            found[validate_id(name)] = decl.loc
            runs = tuple(s for s in decl.stmts if isinstance(s, (ir.Check, ir.Fallback)))
            for identity, run in zip(statement_ids(name, runs), runs):
                found[identity] = run.loc
            for waiver in decl.waivers:
                found[waiver_id(validate_id(name), waiver.cls.value)] = waiver.loc
        elif isinstance(decl, ir.GuardDecl):
            for consumer in decl.consumers:
                found.setdefault(guard_id(consumer.value), decl.loc)
        elif isinstance(decl, ir.ParityDecl):
            found[parity_id(decl.name.value)] = decl.loc
            for waiver in decl.waivers:
                found[waiver_id(parity_id(decl.name.value), waiver.cls.value)] = waiver.loc
    return dict(sorted(found.items(), key=lambda item: (item[1].line, item[1].col)))


class TableEntry(msgspec.Struct, frozen=True, kw_only=True):
    identity: str  # a Python literal
    offset: int  # lines after the entry before it
    col: int


def table_entries(model: Model) -> list[TableEntry]:
    """The position table as emitted: source order, each line an offset from the one before."""
    entries = []
    line = 0
    for identity, loc in rule_locations(model).items():
        entries.append(TableEntry(identity=py_str(identity), offset=loc.line - line, col=loc.col))
        line = loc.line
    return entries
