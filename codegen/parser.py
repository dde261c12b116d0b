"""Parse .rules text into the IR (codegen/ir.py), reporting syntax errors as diagnostics.

The grammar is grammar/stampgen.lark (LALR, positions propagated). One Transformer turns the tree into IR.
On a syntax error the file is re-parsed declaration by declaration, so one run reports the first error of
every broken declaration instead of stopping at the first.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import re
from pathlib import Path

import msgspec
from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from stampgen.codegen import ir
from stampgen.codegen.diagnostics import Diagnostic, did_you_mean, error

GRAMMAR_PATH = Path(__file__).resolve().parent.parent / "grammar" / "stampgen.lark"

# What a user reads instead of a terminal's internal name.
_TERMINAL_NAMES = {
    "NAME": "a name",
    "DOTTED": "a dotted name",
    "INT": "an integer",
    "STRING": 'a "message"',
    "REGEX": "a /regex/",
    "DATE": "a date (YYYY-MM-DD)",
    "COMPARE": "a comparison (==, !=, <, <=, >=)",
    "OPTIONAL": "`?`",
    "$END": "the end of the file",
}

DECL_KEYWORDS = (
    "import",
    "enum",
    "config",
    "facts",
    "launch",
    "auto",
    "stamp",
    "validate",
    "guard",
    "parity",
)
_DECL_START = re.compile(r"^(?:%s)\b" % "|".join(DECL_KEYWORDS), re.MULTILINE)


@functools.lru_cache(maxsize=1)
def grammar_parser() -> Lark:
    return Lark(
        GRAMMAR_PATH.read_text(encoding="utf-8"),
        parser="lalr",
        propagate_positions=True,
        maybe_placeholders=False,
    )


def _loc(path: str, obj) -> ir.Loc:
    """A Loc from a Token or a tree's meta (both carry line/column/end_line/end_column)."""
    return ir.Loc(path, obj.line, obj.column, obj.end_line, obj.end_column)


def _unquote(token: Token) -> str:
    body = str(token)[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


class _ToIR(Transformer):
    """Lark tree → IR. Each method gets the children already transformed."""

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def _l(self, obj) -> ir.Loc:
        return _loc(self.path, obj)

    def _name(self, token: Token) -> ir.Name:
        return ir.Name(str(token), self._l(token))

    # ------------------------------------------------------------------ literals, refs, types
    @v_args(meta=True)
    def name_literal(self, meta, children):
        return ir.NameLit(str(children[0]), self._l(meta))

    @v_args(meta=True)
    def int_literal(self, meta, children):
        return ir.IntLit(int(children[0]), self._l(meta))

    @v_args(meta=True)
    def true_literal(self, meta, children):
        return ir.BoolLit(True, self._l(meta))

    @v_args(meta=True)
    def false_literal(self, meta, children):
        return ir.BoolLit(False, self._l(meta))

    @v_args(meta=True)
    def ref(self, meta, children):
        return ir.Ref(str(children[0]), self._l(meta))

    @v_args(meta=True)
    def named_type(self, meta, children):
        return ir.NamedType(str(children[0]), self._l(meta))

    @v_args(meta=True)
    def int_type(self, meta, children):
        return ir.IntType(children[0], self._l(meta))

    def int_list(self, children):
        return tuple(int(t) for t in children)

    def literal_list(self, children):
        return tuple(children)

    # ------------------------------------------------------------------ expressions
    @v_args(meta=True)
    def truthy(self, meta, children):
        return ir.Truthy(children[0], self._l(meta))

    @v_args(meta=True)
    def compare(self, meta, children):
        ref, op, value = children
        return ir.Compare(ref, ir.CompareOp(str(op)), value, self._l(meta))

    @v_args(meta=True)
    def member(self, meta, children):
        return ir.Member(children[0], children[1], False, self._l(meta))

    @v_args(meta=True)
    def not_member(self, meta, children):
        return ir.Member(children[0], children[1], True, self._l(meta))

    @v_args(meta=True)
    def any_field(self, meta, children):
        value_ref, stamp = children
        return ir.AnyField(ir.NameLit(value_ref.name, value_ref.loc), stamp, self._l(meta))

    @v_args(meta=True)
    def is_unset(self, meta, children):
        return ir.IsUnset(children[0], False, self._l(meta))

    @v_args(meta=True)
    def is_set(self, meta, children):
        return ir.IsUnset(children[0], True, self._l(meta))

    @v_args(meta=True)
    def true_(self, meta, children):
        return ir.Const(True, self._l(meta))

    @v_args(meta=True)
    def false_(self, meta, children):
        return ir.Const(False, self._l(meta))

    @v_args(meta=True)
    def not_(self, meta, children):
        return ir.Not(children[0], self._l(meta))

    @v_args(meta=True)
    def and_(self, meta, children):
        return ir.And(children[0], children[1], self._l(meta))

    @v_args(meta=True)
    def or_(self, meta, children):
        return ir.Or(children[0], children[1], self._l(meta))

    @v_args(meta=True)
    def implies(self, meta, children):
        return ir.Implies(children[0], children[1], self._l(meta))

    def when(self, children):
        return ("when", children[0])

    def log(self, children):
        return ("log", _unquote(children[0]))

    @staticmethod
    def _tail(children) -> dict:
        """Collect the optional ("when", expr) / ("log", text) clauses at the end of a statement."""
        return {
            c[0]: c[1] for c in children if isinstance(c, tuple) and len(c) == 2 and c[0] in ("when", "log")
        }

    # ------------------------------------------------------------------ declarations
    @v_args(meta=True)
    def enum_decl(self, meta, children):
        name = self._name(children[0])
        open_member = None
        members = []
        for child in children[1:]:
            if isinstance(child, ir.Name):
                open_member = child
            else:
                members.append(self._name(child))
        return ir.EnumDecl(name, tuple(members), open_member, self._l(meta))

    def open_clause(self, children):
        return self._name(children[0])

    @v_args(meta=True)
    def leaf(self, meta, children):
        name = self._name(children[0])
        type_ref = children[1]
        optional = any(isinstance(c, Token) and c.type == "OPTIONAL" for c in children[2:])
        default = next((c[1] for c in children[2:] if isinstance(c, tuple) and c[0] == "default"), None)
        return ir.Leaf(name, type_ref, optional, default, self._l(meta))

    def default(self, children):
        return ("default", children[0])

    @v_args(meta=True)
    def config_decl(self, meta, children):
        return ir.ConfigDecl(self._name(children[0]), tuple(children[1:]), self._l(meta))

    @v_args(meta=True)
    def facts_decl(self, meta, children):
        return ir.FactsDecl(self._name(children[0]), tuple(children[1:]), self._l(meta))

    @v_args(meta=True)
    def set_stmt(self, meta, children):
        tail = self._tail(children)
        target = ir.Ref(str(children[0]), self._l(children[0]))
        return ir.SetStmt(target, children[1], tail.get("when"), tail.get("log"), self._l(meta))

    @v_args(meta=True)
    def forbid_stmt(self, meta, children):
        return ir.Check(ir.CheckKind.FORBID, children[0], _unquote(children[1]), self._l(meta))

    @v_args(meta=True)
    def require_stmt(self, meta, children):
        return ir.Check(ir.CheckKind.REQUIRE, children[0], _unquote(children[1]), self._l(meta))

    @v_args(meta=True)
    def use_stmt(self, meta, children):
        return ir.UseStmt(tuple(ir.Ref(str(c), self._l(c)) for c in children), self._l(meta))

    @v_args(meta=True)
    def launch_decl(self, meta, children):
        return ir.LaunchDecl(self._name(children[0]), tuple(children[1:]), self._l(meta))

    @v_args(meta=True)
    def auto_decl(self, meta, children):
        tail = self._tail(children)
        return ir.AutoDecl(
            self._name(children[0]), children[1], children[2], tail["when"], tail.get("log"), self._l(meta)
        )

    @v_args(meta=True)
    def slot_decl(self, meta, children):
        sources = children[2] if len(children) > 2 else ()
        return ir.SlotDecl(self._name(children[0]), children[1], sources, self._l(meta))

    def slot_source(self, children):
        return tuple(self._name(t) for t in children)

    def _tier_when(self, children) -> ir.Expr | None:
        """A tier's `when` condition, None when it has none."""
        return self._tail(children).get("when")

    @v_args(meta=True)
    def flag_tier(self, meta, children):
        return ir.FlagTier(children[0], self._tier_when(children), self._l(meta))

    @v_args(meta=True)
    def base_tier(self, meta, children):
        return ir.BaseTier(children[0], self._tier_when(children), self._l(meta))

    @v_args(meta=True)
    def auto_tier(self, meta, children):
        slot = ir.Ref(str(children[0]), self._l(children[0]))
        return ir.AutoTier(slot, self._tier_when(children), self._l(meta))

    @v_args(meta=True)
    def follow_tier(self, meta, children):
        field = ir.Ref(str(children[0]), self._l(children[0]))
        return ir.FollowTier(field, self._tier_when(children), self._l(meta))

    @v_args(meta=True)
    def const_tier(self, meta, children):
        return ir.ConstTier(children[0], self._tier_when(children), self._l(meta))

    @v_args(meta=True)
    def field_decl(self, meta, children):
        declared = children[1] if isinstance(children[1], (ir.NamedType, ir.IntType)) else None
        tiers = tuple(children[2:] if declared is not None else children[1:])
        return ir.FieldDecl(self._name(children[0]), tiers, self._l(meta), declared)

    @v_args(meta=True)
    def stamp_decl(self, meta, children):
        name = self._name(children[0])
        target = ir.Ref(str(children[1]), self._l(children[1]))
        body = children[2:]
        return ir.StampDecl(
            name,
            target,
            tuple(c for c in body if isinstance(c, ir.SlotDecl)),
            tuple(c for c in body if isinstance(c, ir.FieldDecl)),
            tuple(c for c in body if isinstance(c, ir.SetStmt)),
            self._l(meta),
        )

    @v_args(meta=True)
    def fallback_stmt(self, meta, children):
        tail = self._tail(children)
        field = ir.Ref(str(children[0]), self._l(children[0]))
        return ir.Fallback(field, children[1], children[2], tail["when"], tail["log"], self._l(meta))

    @v_args(meta=True)
    def validate_decl(self, meta, children):
        body = children[1:]
        return ir.ValidateDecl(
            self._name(children[0]),
            tuple(c for c in body if not isinstance(c, ir.Waiver)),
            self._l(meta),
            waivers=tuple(c for c in body if isinstance(c, ir.Waiver)),
        )

    @v_args(meta=True)
    def waive_stmt(self, meta, children):
        cls, until, *reason = children
        return ir.Waiver(
            self._name(cls),
            str(until),
            self._l(until),
            _unquote(reason[0]) if reason else None,
            self._l(meta),
        )

    @v_args(meta=True)
    def import_decl(self, meta, children):
        return ir.ImportDecl(_unquote(children[0]), self._l(children[0]), self._l(meta))

    @v_args(meta=True)
    def guard_decl(self, meta, children):
        *consumers, module, stamp = children
        return ir.GuardDecl(
            tuple(self._name(c) for c in consumers),
            _unquote(module),
            self._l(module),
            self._name(stamp),
            self._l(meta),
        )

    # parity clauses become (keyword, value, loc) triples, assembled in parity_decl
    @v_args(meta=True)
    def draft_clause(self, meta, children):
        return ("draft", str(children[0])[1:-1], self._l(meta))

    @v_args(meta=True)
    def target_clause(self, meta, children):
        return ("target", tuple(children), self._l(meta))

    def target_candidate(self, children):
        return _unquote(children[0]) if children else ""

    @v_args(meta=True)
    def exclude_clause(self, meta, children):
        return ("exclude", tuple(self._name(c) for c in children), self._l(meta))

    @v_args(meta=True)
    def hooks_clause(self, meta, children):
        return ("hooks", tuple(self._name(c) for c in children), self._l(meta))

    @v_args(meta=True)
    def at_least_clause(self, meta, children):
        return ("at_least", int(children[0]), self._l(meta))

    @v_args(meta=True)
    def parity_decl(self, meta, children):
        name, registry, *body = children
        clauses = [c for c in body if not isinstance(c, ir.Waiver)]
        values = {kw: (value, loc) for kw, value, loc in clauses}  # a repeat is reported by the checker
        draft = values.get("draft")
        return ir.ParityDecl(
            name=self._name(name),
            registry=_unquote(registry),
            registry_loc=self._l(registry),
            draft=draft[0] if draft else None,
            draft_loc=draft[1] if draft else None,
            targets=values.get("target", ((),))[0],
            exclude=values.get("exclude", ((),))[0],
            hooks=values.get("hooks", ((),))[0],
            at_least=values.get("at_least", (None,))[0],
            clause_locs=tuple((kw, loc) for kw, _, loc in clauses),
            loc=self._l(meta),
            waivers=tuple(c for c in body if isinstance(c, ir.Waiver)),
        )

    def start(self, children):
        return tuple(children)


def _describe_expected(expected: set[str], parser: Lark) -> str:
    names = []
    for term in sorted(expected):
        if term in _TERMINAL_NAMES:
            names.append(_TERMINAL_NAMES[term])
            continue
        try:
            pattern = parser.get_terminal(term).pattern
            names.append(f"`{pattern.value}`" if pattern.type == "str" else term.lower())
        except KeyError:
            names.append(term.lower())
    names = sorted(set(names))
    if len(names) > 8:
        return "one of " + ", ".join(names[:8]) + ", ..."
    return "one of " + ", ".join(names) if len(names) > 1 else names[0] if names else "nothing"


def _keywords(expected: set[str], parser: Lark) -> list[str]:
    """The keywords among the terminals the parser accepts here."""
    words = []
    for term in expected:
        try:
            pattern = parser.get_terminal(term).pattern
        except KeyError:
            continue
        if pattern.type == "str" and pattern.value.isidentifier():
            words.append(pattern.value)
    return words


def _token_text(token: Token) -> str:
    if token.type == "$END":
        return "end of the file"
    return f"`{token}`"


def _expected(exc: UnexpectedToken) -> set[str]:
    """The terminals the parser accepts here. Lark's own `expected` is the lexer's view when the contextual
    lexer raised the error, in which keywords (`flag`, `and`, `when`) are folded into NAME; ask the parser."""
    interactive = getattr(exc, "interactive_parser", None)
    if interactive is not None:
        try:
            return set(interactive.accepts())
        except Exception:  # pragma: no cover - fall back to lark's view rather than fail to report
            pass
    return set(exc.expected)


def _parse_stack(exc: UnexpectedToken) -> list:
    """What the parser had read when it failed: tokens and finished subtrees (empty if unknown)."""
    state = getattr(getattr(exc, "interactive_parser", None), "parser_state", None)
    return list(getattr(state, "value_stack", None) or [])


def _hint_for(token_text: str, expected: set[str], line: str, row: int, col: int, stack: list) -> str | None:
    """Friendly hints for the mistakes people actually make."""
    if token_text == "`>`":
        return (
            "`>` only separates the tiers of a precedence chain; to compare, write `>=` (x >= 11, not x > 10)"
        )
    if token_text == "`=`" and "COMPARE" in expected:
        return "compare with `==`; a single `=` assigns"
    if "STRING" in expected and stack and not isinstance(stack[-1], Token):  # a finished condition
        return 'forbid and require end with the message a user sees, in double quotes: forbid cond "message"'
    if "STRING" in expected and len(expected) == 1:
        return 'a string in double quotes is missing here: "..."'
    if token_text.strip("`") in DECL_KEYWORDS:
        return "a declaration starts here: is a `}` missing above?"
    # a block opened on an earlier line is still open where a declaration starts
    open_above = any(
        isinstance(v, Token) and v.type == "LBRACE" and v.line is not None and v.line < row for v in stack
    )
    if col > 1 and open_above and _DECL_START.match(line):
        return "a declaration starts on this line: is a `}` missing above?"
    if {"FLAG", "AUTO", "BASE", "FOLLOW"} <= expected:
        return "a tier is missing: flag LEAF, auto SLOT, base LEAF, follow FIELD or a constant"
    if token_text == "end of the file":
        return "is a `}` missing?"
    return None


def _source_lines(text: str) -> list[str]:
    """Lines as Lark counts them (at \n only; str.splitlines also splits at \f, \x1c, U+2028, ...)."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def _syntax_diagnostic(exc: UnexpectedInput, path: str, text: str, parser: Lark) -> Diagnostic:
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        where = ir.Loc(path, exc.line if exc.line > 0 else 1, exc.column if exc.column > 0 else 1, 0, 0)
        if token.type != "$END":
            where = _loc(path, token)
        else:
            lines = _source_lines(text)
            where = ir.Loc(path, len(lines), len(lines[-1]) + 1, len(lines), len(lines[-1]) + 1)
        found = _token_text(token)
        expected = _expected(exc)
        message = f"unexpected {found}; expected {_describe_expected(expected, parser)}"
        lines = _source_lines(text)
        line = lines[where.line - 1] if 1 <= where.line <= len(lines) else ""
        hint = _hint_for(found, expected, line, where.line, where.col, _parse_stack(exc))
        if hint is None and token.type == "NAME":
            hint = did_you_mean(str(token), _keywords(expected, parser))  # `confg`, `forbd`, `stmap`
        return error("syntax", message, where, hint)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream
        assert pos is not None  # the lexer says where it stopped
        char = text[pos] if pos < len(text) else ""
        where = ir.Loc(path, exc.line, exc.column, exc.line, exc.column + 1)
        hint = None
        if char == "'":
            hint = 'strings use double quotes: "message"'
        elif char in "&|" and text[pos : pos + 2] in ("&&", "||"):
            hint = "use `and` / `or`"
        elif char == "!":
            hint = "use `not` to negate, `!=` to compare"
        elif char == '"':
            hint = "is a string missing its closing quote?"
        elif char in _LOOK_ALIKES:
            name, ascii_text = _LOOK_ALIKES[char]
            hint = f"{name} (U+{ord(char):04X}) looks like `{ascii_text}` but is not: type `{ascii_text}`"
        return error("syntax-char", f"unexpected character {char!r}", where, hint)
    if isinstance(exc, UnexpectedEOF):
        lines = _source_lines(text)
        where = ir.Loc(path, len(lines), len(lines[-1]) + 1, len(lines), len(lines[-1]) + 1)
        return error("syntax", "unexpected end of the file", where, "is a `}` missing?")
    raise exc  # pragma: no cover - every UnexpectedInput is one of the above


# Characters that editors, word processors and chat tools put where the language wants ASCII.
_LOOK_ALIKES = {
    "\u2265": ("a greater-than-or-equal sign", ">="),
    "\u2264": ("a less-than-or-equal sign", "<="),
    "\u2260": ("a not-equal sign", "!="),
    "\u2192": ("an arrow", "->"),
    "\u201c": ("a curly quote", '"'),
    "\u201d": ("a curly quote", '"'),
    "\u2018": ("a curly quote", '"'),
    "\u2019": ("a curly quote", '"'),
    "\u00a0": ("a no-break space", " "),
    "\u2009": ("a thin space", " "),
    "\u200b": ("a zero-width space", ""),
    "\u2013": ("an en dash", "-"),
    "\u2014": ("an em dash", "-"),
    "\u2212": ("a minus sign", "-"),
    "\uff1d": ("a full-width equals sign", "="),
}


def _chunks(text: str) -> list[tuple[int, str]]:
    """Split at lines that start (in column 1) with a declaration keyword: (lines before it, its text).

    Chunks are not padded with the lines before them (that made recovery quadratic in the file's length);
    positions found in a chunk are shifted back by `_shifted`."""
    starts = [m.start() for m in _DECL_START.finditer(text)]
    if not starts or starts[0] != 0:
        starts = [0] + starts
    return [
        (text.count("\n", 0, begin), text[begin:end]) for begin, end in zip(starts, starts[1:] + [len(text)])
    ]


def _shifted(diag: Diagnostic, lines: int) -> Diagnostic:
    loc = diag.loc
    moved = ir.Loc(
        loc.path, loc.line + lines, loc.col, loc.end_line + lines if loc.end_line else 0, loc.end_col
    )
    return msgspec.structs.replace(diag, loc=moved)


def _at_end(exc: UnexpectedInput) -> bool:
    return isinstance(exc, UnexpectedEOF) or getattr(getattr(exc, "token", None), "type", None) == "$END"


@contextlib.contextmanager
def _no_cyclic_gc():
    """Parse trees hold no reference cycles, but building one triggers ever longer full collections
    (parse time grew quadratically with the file); reference counting frees them all the same."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def parse(text: str, path: str) -> tuple[ir.RulesFile | None, list[Diagnostic]]:
    """Parse one .rules file. Returns the IR (None on syntax errors) and the syntax diagnostics."""
    parser = grammar_parser()
    try:
        with _no_cyclic_gc():
            tree = parser.parse(text)
    except UnexpectedInput as first:
        diags = [_syntax_diagnostic(first, path, text, parser)]
        seen = {(diags[0].loc.line, diags[0].loc.col)}
        for lines_before, chunk in _chunks(text):
            try:
                parser.parse(chunk)
            except UnexpectedInput as exc:
                if isinstance(exc, (UnexpectedEOF, UnexpectedToken)) and _at_end(exc):
                    # an unclosed declaration: the full parse already reported the token after it
                    continue
                diag = _shifted(_syntax_diagnostic(exc, path, chunk, parser), lines_before)
                if (diag.loc.line, diag.loc.col) not in seen:
                    seen.add((diag.loc.line, diag.loc.col))
                    diags.append(diag)
        diags.sort(key=lambda d: (d.loc.line, d.loc.col))
        return None, diags
    too_deep = _too_deep(tree, path)
    if too_deep is not None:
        return None, [too_deep]
    try:
        with _no_cyclic_gc():
            decls = _ToIR(path).transform(tree)
    except VisitError as exc:  # pragma: no cover - a transformer bug, not bad input
        raise exc.orig_exc from exc
    return ir.RulesFile(path, _with_leaf_docs(decls, text)), []


def _with_leaf_docs(decls: list[ir.Decl], text: str) -> tuple[ir.Decl, ...]:
    """`decls` with each config leaf's and fact's comment (what an engine shows as its flag's help): the
    comment lines right above it, then the comment at the end of its line."""
    if not any(isinstance(d, (ir.ConfigDecl, ir.FactsDecl)) for d in decls):
        return tuple(decls)
    comments: dict[int, str] = {}
    code: set[int] = set()
    for tok in lex_with_comments(text):
        line = tok.line or 0  # the lexer gives every token its line
        if tok.type == "COMMENT":
            comments[line] = str(tok)[1:].strip()
        elif str(tok).strip():  # not the whitespace and newlines fmt keeps
            code.update(range(line, (tok.end_line or line) + 1))

    def doc(line: int) -> str:
        above = []
        row = line - 1
        while row in comments and row not in code:
            above.append(comments[row])
            row -= 1
        parts = [*reversed(above), comments.get(line, "") if line in code else ""]
        return " ".join(p for p in parts if p)

    def documented(decl: ir.Decl) -> ir.Decl:
        if not isinstance(decl, (ir.ConfigDecl, ir.FactsDecl)):
            return decl
        leaves = tuple(msgspec.structs.replace(leaf, doc=doc(leaf.loc.line)) for leaf in decl.leaves)
        return msgspec.structs.replace(decl, leaves=leaves)

    return tuple(documented(d) for d in decls)


# Every later stage walks expressions recursively; real conditions nest a dozen levels, so refuse the
# pathological ones here, with a position, instead of failing with a RecursionError further down.
MAX_NESTING = 100


_EXPRESSION_NODES = {"and_", "or_", "implies", "not_"}


def _too_deep(tree: Tree, path: str) -> Diagnostic | None:
    """The outermost condition nesting deeper than MAX_NESTING, as a diagnostic (an iterative walk)."""
    stack: list[tuple[Tree, int, Tree | None]] = [(tree, 0, None)]
    while stack:
        node, depth, root = stack.pop()
        if root is None and node.data in _EXPRESSION_NODES:
            root, depth = node, 0
        if depth > MAX_NESTING and root is not None:
            return error(
                "too-deeply-nested",
                f"this condition nests more than {MAX_NESTING} levels deep",
                _loc(path, root.meta),
                "split it: name parts of it as auto gates, or as separate forbid/require rules",
            )
        stack.extend((child, depth + 1, root) for child in node.children if isinstance(child, Tree))
    return None


def lex_with_comments(text: str) -> list[Token]:
    """Every token, comments and newlines included (for `stampgen fmt`)."""
    return list(grammar_parser().lex(text, dont_ignore=True))
