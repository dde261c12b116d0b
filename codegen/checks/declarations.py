"""Layer 1, each declaration on its own: names declared twice, identifiers Python cannot take, enums, config
and facts blocks (leaf types, defaults, scopes), a stamp's target, slots and fields, statements without a
message, parity clauses, guards' modules and consumers, and the shape of every waiver.

What it learns goes into the Symbols that the next layer (codegen/checks/references.py) looks names up in.
"""

from __future__ import annotations

import datetime
import re
from keyword import iskeyword

from stampgen.codegen import ir
from stampgen.codegen.checks.report import Report
from stampgen.codegen.checks.symbols import StampShape, Symbols
from stampgen.codegen.checks.type_refs import BUILTIN_TYPES, literal_fits, resolve_type
from stampgen.codegen.checks.waivers import check_waivers, stale_parity_waivers, stale_validate_waivers
from stampgen.codegen.diagnostics import Note
from stampgen.codegen.model import EnumT, LeafInfo, Scope, SlotInfo, Type, is_valid_identifier

FACT_SCOPES = {"launch": Scope.LAUNCH, "runner": Scope.RUNNER}  # the names a facts block may have
_REGISTRY_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")
_MODULE_PATH = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def declare(rules: ir.RulesFile, today: datetime.date, report: Report) -> Symbols:
    """Check every declaration of one file on its own; `today` is the date waivers expire against."""
    declarations = _Declarations(report, today)
    declarations.run(rules)
    return declarations.symbols


class _Declarations:
    def __init__(self, report: Report, today: datetime.date) -> None:
        self.report = report
        self.today = today
        self.symbols = Symbols()

    def ident(self, name: ir.Name, what: str) -> None:
        """Names from the rules become Python identifiers: no keywords, nothing that starts with `_`."""
        if not is_valid_identifier(name.value):
            reason = "it is a Python keyword" if iskeyword(name.value) else "it starts with `_`"
            self.report.error(
                "bad-identifier",
                f"{what} `{name.value}` cannot be used: {reason}",
                name.loc,
                "rename it; names from the rules become Python identifiers",
            )

    def resolve_type(self, ref: ir.TypeRef) -> Type | None:
        return resolve_type(ref, self.symbols, self.report)

    def run(self, rules: ir.RulesFile) -> None:
        # an imported file's vocabulary comes first, as if declared here (it was checked in its own file)
        # (once each: a file imported both directly and through another import is one vocabulary)
        imported = tuple(dict.fromkeys(d for f in rules.imported for d in f.decls))
        own = tuple(d for d in rules.decls if not isinstance(d, ir.ImportDecl))
        decls = imported + own
        if not own:
            self.report.error(
                "empty-rules-file",
                "this rules file declares nothing: its generated tests would hold nothing",
                ir.Loc(rules.path, 1, 1, 1, 1),
                "declare the rules it is for, or delete the file",
            )
        self._names(decls)
        # enums first: leaf types refer to them
        for decl in decls:
            if isinstance(decl, ir.EnumDecl):
                self._enum(decl)
        for decl in decls:
            if isinstance(decl, (ir.ConfigDecl, ir.FactsDecl)):
                self._leaves(decl)
            elif isinstance(decl, ir.StampDecl):
                self.symbols.stamp_decls.setdefault(decl.name.value, decl)
            elif isinstance(decl, ir.AutoDecl):
                self.symbols.auto_decls.setdefault(decl.name.value, decl)
        for decl in decls:
            if isinstance(decl, ir.StampDecl):
                self.symbols.stamps.append(self._stamp(decl))
            elif isinstance(decl, ir.LaunchDecl):
                self._launch(decl)
            elif isinstance(decl, ir.ValidateDecl):
                self._validate(decl)
            elif isinstance(decl, ir.ParityDecl):
                self._parity(decl)
        self._guards(tuple(d for d in decls if isinstance(d, ir.GuardDecl)))

    # ------------------------------------------------------------------ names, enums, leaves
    def _names(self, decls: tuple[ir.Decl, ...]) -> None:
        """Every declared name once (validate blocks have names of their own), each an identifier."""
        seen: dict[str, ir.Name] = {}
        validate_names: dict[str, ir.Name] = {}
        for decl in decls:
            if isinstance(decl, (ir.GuardDecl, ir.ImportDecl)):
                continue  # a guard has no name; an import names a file
            name = decl.name
            table = validate_names if isinstance(decl, ir.ValidateDecl) else seen
            if name.value in table:
                first = table[name.value].loc
                self.report.error(
                    "duplicate-declaration",
                    f"`{name.value}` is declared twice"
                    if first.path == name.loc.path
                    else f"`{name.value}` is already declared in {first.path}, which this file imports",
                    name.loc,
                    notes=(Note("first declared here", table[name.value].loc),),
                )
                continue
            table[name.value] = name
            self.ident(name, "name")

    def _enum(self, decl: ir.EnumDecl) -> None:
        if decl.name.value in BUILTIN_TYPES or decl.name.value == "int":
            self.report.error(
                "builtin-type-shadowed", f"enum `{decl.name.value}` shadows a built-in type", decl.name.loc
            )
            return
        members: dict[str, ir.Name] = {}
        for member in decl.members:
            if member.value in members:
                self.report.error(
                    "duplicate-member",
                    f"enum `{decl.name.value}` lists `{member.value}` twice",
                    member.loc,
                    f"first listed at {members[member.value].loc}",
                )
                continue
            members[member.value] = member
            self.ident(member, "enum member")
        if not members:
            self.report.error("empty-enum", f"enum `{decl.name.value}` has no members", decl.loc)
        open_member = None
        if decl.open_member is not None:
            open_member = decl.open_member.value
            if open_member not in members:
                self.report.error(
                    "open-member-missing",
                    f"`open({open_member})` names a member that enum `{decl.name.value}` does not list",
                    decl.open_member.loc,
                    f"add `{open_member}` to the members",
                )
        if decl.name.value not in self.symbols.enums:
            self.symbols.enums[decl.name.value] = EnumT(decl.name.value, tuple(members), open_member)

    def _leaves(self, decl: ir.ConfigDecl | ir.FactsDecl) -> None:
        ns = decl.name.value
        if isinstance(decl, ir.FactsDecl):
            if ns not in FACT_SCOPES:
                self.report.error(
                    "bad-facts-scope",
                    f"facts block `{ns}` must be named `launch` (once per process) or `runner` (per runner)",
                    decl.name.loc,
                )
                return
            scope = FACT_SCOPES[ns]
        else:
            if ns in FACT_SCOPES:
                self.report.error(
                    "bad-facts-scope",
                    f"`{ns}` is reserved for facts; name this config block otherwise",
                    decl.name.loc,
                )
                return
            scope = Scope.PROCESS
        if ns in self.symbols.namespaces:
            return  # duplicate declaration, already reported
        self.symbols.namespaces[ns] = scope
        seen: dict[str, ir.Name] = {}
        for leaf in decl.leaves:
            if leaf.name.value in seen:
                self.report.error(
                    "duplicate-leaf",
                    f"`{ns}` declares `{leaf.name.value}` twice",
                    leaf.name.loc,
                    notes=(Note("first declared here", seen[leaf.name.value].loc),),
                )
                self.symbols.duplicates.add(leaf.name.loc)
                continue
            seen[leaf.name.value] = leaf.name
            self.ident(leaf.name, "leaf")
            t = self.resolve_type(leaf.type)
            if scope != Scope.PROCESS and (leaf.optional or leaf.default is not None):
                self.report.error(
                    "fact-not-total",
                    f"fact `{ns}.{leaf.name.value}` cannot be optional or have a default: facts are always known",
                    leaf.loc,
                    "model an unknown value as a member of its domain",
                )
            default = None
            if leaf.default is not None and t is not None:
                if literal_fits(leaf.default, t, f"`{ns}.{leaf.name.value}`", self.report):
                    default = leaf.default.value
            if t is not None:
                self.symbols.leaves[f"{ns}.{leaf.name.value}"] = LeafInfo(
                    ns, leaf.name.value, scope, t, leaf.optional, default, leaf.loc, leaf.doc
                )
            else:
                self.symbols.untyped.add(f"{ns}.{leaf.name.value}")

    # ------------------------------------------------------------------ stamps
    def _stamp(self, decl: ir.StampDecl) -> StampShape:
        """A stamp's target, its slots (each typed, once) and its fields (each once); none of what they read."""
        head, _, attribute = decl.target.name.partition(".")
        if head != "runner" or "." in attribute or not is_valid_identifier(attribute):
            self.report.error(
                "bad-stamp-target",
                f"a stamp lives on a runner attribute: `on runner.NAME`, not `on {decl.target.name}`",
                decl.target.loc,
            )
        slots: dict[str, Type] = {}
        slot_infos: list[SlotInfo] = []
        for slot in decl.slots:
            self.ident(slot.name, "slot")
            if slot.name.value in slots:
                self.report.error(
                    "duplicate-field", f"stamp declares `{slot.name.value}` twice", slot.name.loc
                )
                continue
            t = self.resolve_type(slot.type)
            if t is None:
                continue
            slots[slot.name.value] = t
            slot_infos.append(SlotInfo(slot.name.value, t, tuple(s.value for s in slot.sources), slot))
        fields: dict[str, ir.FieldDecl] = {}
        for field in decl.fields:
            self.ident(field.name, "field")
            if field.name.value in fields or field.name.value in slots:
                self.report.error(
                    "duplicate-field",
                    f"stamp `{decl.name.value}` declares `{field.name.value}` twice",
                    field.name.loc,
                )
                continue
            fields[field.name.value] = field
        if not fields:
            self.report.error("empty-stamp", f"stamp `{decl.name.value}` has no fields", decl.loc)
        return StampShape(decl, attribute, slots, tuple(slot_infos), fields)

    # ------------------------------------------------------------------ blocks of statements
    def _launch(self, decl: ir.LaunchDecl) -> None:
        for stmt in decl.stmts:
            if isinstance(stmt, ir.FieldDecl):
                self.ident(stmt.name, "local")
            elif isinstance(stmt, ir.Check):
                self._message(stmt)

    def _validate(self, decl: ir.ValidateDecl) -> None:
        check_waivers(decl.waivers, self.today, self.report)
        stale_validate_waivers(decl, self.report)
        for stmt in decl.stmts:
            if isinstance(stmt, ir.Check):
                self._message(stmt)
            elif isinstance(stmt, ir.Fallback) and not stmt.log.strip():
                self.report.error(
                    "empty-message", "a fallback's `log` message must say what was replaced and why", stmt.loc
                )

    def _message(self, stmt: ir.Check) -> None:
        if not stmt.message.strip():
            self.report.error("empty-message", f"`{stmt.kind}` needs a message a user can act on", stmt.loc)

    # ------------------------------------------------------------------ guards and parities
    def _guards(self, guards: tuple[ir.GuardDecl, ...]) -> None:
        seen: dict[str, ir.Name] = {}
        for guard in guards:
            if not _MODULE_PATH.match(guard.module):
                self.report.error(
                    "bad-module-path",
                    f'guard module "{guard.module}" is not a dotted module path',
                    guard.module_loc,
                    'e.g. from "myengine.backends"',
                )
            for consumer in guard.consumers:
                self.ident(consumer, "consumer")
                if consumer.value in seen:
                    self.report.error(
                        "duplicate-guard",
                        f"`{consumer.value}` is guarded twice",
                        consumer.loc,
                        f"first guarded at {seen[consumer.value].loc}",
                    )
                seen[consumer.value] = consumer

    def _parity(self, decl: ir.ParityDecl) -> None:
        if not _REGISTRY_PATH.match(decl.registry):
            self.report.error(
                "bad-registry-path",
                f'registry "{decl.registry}" must be "package.module:NAME" (a module path, a colon, a mapping)',
                decl.registry_loc,
                'e.g. over "myengine.models:ARCHS"',
            )
        seen: dict[str, ir.Loc] = {}
        for keyword, loc in decl.clause_locs:
            if keyword in seen:
                self.report.error(
                    "duplicate-clause", f"`{keyword}` is given twice in parity `{decl.name.value}`", loc
                )
            seen[keyword] = loc
        for required in ("draft", "target", "hooks"):
            if required not in seen:
                self.report.error(
                    "missing-clause", f"parity `{decl.name.value}` needs a `{required}` clause", decl.loc
                )
        if decl.draft is not None:
            try:
                pattern = re.compile(decl.draft)
                if pattern.groups > 1:
                    raise re.error("use one group: the suffix that marks a draft")
            except re.error as exc:
                assert decl.draft_loc is not None  # the parser positions every draft pattern
                self.report.error(
                    "bad-regex", f"draft pattern /{decl.draft}/ does not compile: {exc}", decl.draft_loc
                )
        if decl.at_least is not None and decl.at_least < 1:
            self.report.error(
                "bad-at-least", "`at_least` must be 1 or more", dict(decl.clause_locs)["at_least"]
            )
        for name in (*decl.exclude, *decl.hooks):
            if not name.value.isidentifier():
                self.report.error("bad-identifier", f"`{name.value}` is not an identifier", name.loc)
        check_waivers(decl.waivers, self.today, self.report)
        stale_parity_waivers(decl, self.report)
