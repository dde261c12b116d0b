"""`stampgen fmt`: the canonical layout of a .rules file.

Token-based, so comments and the author's line breaks survive: 4 spaces per open block, 4 more on a
continuation line, one space between tokens (none inside `(...)`, `{a, b}` sets or before `,` `:` `?`),
trailing comments of consecutive lines aligned two spaces after the longest code, at most one blank line.
Formatting never changes meaning: the tests hold parse(fmt(x)) equal to parse(x) and fmt idempotent.
"""

from __future__ import annotations

from lark import Token

from stampgen.codegen.ir import RulesFile, without_positions
from stampgen.codegen.parser import DECL_KEYWORDS, lex_with_comments

INDENT = "    "
_STATEMENT_KEYWORDS = {
    *DECL_KEYWORDS,
    "set",
    "forbid",
    "require",
    "fallback",
    "slot",
    "draft",
    "target",
    "exclude",
    "hooks",
    "at_least",
    "waive",
    "use",
}
_NO_SPACE_BEFORE = {",", ":", "?", ")"}
_NO_SPACE_AFTER = {"("}


class _Line:
    def __init__(self) -> None:
        self.tokens: list[Token] = []
        self.comment: str | None = None


def _split_lines(text: str) -> list[_Line]:
    lines = [_Line()]
    for tok in lex_with_comments(text):
        if tok.type == "NEWLINE":
            lines.append(_Line())
        elif tok.type == "COMMENT":
            lines[-1].comment = str(tok).rstrip()
        elif str(tok).strip():
            lines[-1].tokens.append(tok)
    return lines


def _join(tokens: list[Token]) -> str:
    out = ""
    set_depth = 0  # inside `{...}` that follows `in`: an inline set
    prev: Token | None = None
    for tok in tokens:
        s = str(tok)
        space = prev is not None
        if prev is not None:
            p = str(prev)
            if s in _NO_SPACE_BEFORE or p in _NO_SPACE_AFTER:
                space = False
            if s == "(" and p == "open":
                space = False
            if p == "{" and set_depth:
                space = False
            if s == "}" and set_depth:
                space = False
        if s == "{" and prev is not None and str(prev) == "in":
            set_depth += 1
        elif s == "}" and set_depth:
            set_depth -= 1
        out += (" " if space else "") + s
        prev = tok
    return out


def format_rules(text: str) -> str:
    """The canonical text. Raises lark's UnexpectedInput on text that does not lex (callers check first)."""
    lines = _split_lines(text)
    depth = 0
    block_kinds: list[str] = []
    in_statement = False
    rendered: list[tuple[str, str | None, int]] = []  # (code with indent, trailing comment, depth)
    for line in lines:
        toks = line.tokens
        if not toks:
            if line.comment is not None:
                rendered.append((INDENT * depth + line.comment, None, depth))
            else:
                rendered.append(("", None, depth))
            continue
        first = str(toks[0])
        if first == "}" and block_kinds and block_kinds[-1] != "set":
            depth = max(depth - 1, 0)
        enum_block = bool(block_kinds) and block_kinds[-1] == "enum"
        starts = (
            first in _STATEMENT_KEYWORDS
            or first == "}"
            or enum_block
            or (len(toks) > 1 and str(toks[1]) in ("=", ":") and toks[0].type == "NAME")
            or not in_statement
        )
        indent = INDENT * depth + ("" if starts else INDENT)
        rendered.append((indent + _join(toks), line.comment, depth))
        # track blocks opened or closed on this line; `in {...}` sets are not blocks
        ends_block = False
        prev = None
        for k, tok in enumerate(toks):
            s = str(tok)
            if s == "{":
                kind = "set" if prev == "in" else first
                block_kinds.append(kind)
                if kind != "set":
                    depth += 1
                ends_block = kind != "set"
            elif s == "}" and block_kinds:
                kind = block_kinds.pop()
                if kind != "set" and k > 0:
                    depth = max(depth - 1, 0)
                ends_block = kind != "set"
            else:
                ends_block = False
            prev = s
        in_statement = not ends_block and not enum_block
    return _assemble(rendered)


def _assemble(rendered: list[tuple[str, str | None, int]]) -> str:
    out: list[str] = []
    i = 0
    while i < len(rendered):
        code, comment, depth = rendered[i]
        if comment is None or not code.strip():
            out.append(code.rstrip())
            i += 1
            continue
        # a run of consecutive lines at this depth with trailing comments: align them
        j = i
        while (
            j < len(rendered)
            and rendered[j][1] is not None
            and rendered[j][0].strip()
            and rendered[j][2] == depth
        ):
            j += 1
        width = max(len(rendered[k][0].rstrip()) for k in range(i, j)) + 2
        for c, com, _ in rendered[i:j]:
            out.append(c.rstrip().ljust(width) + (com or ""))  # every line of the run has a comment
        i = j
    # at most one blank line in a row; none at the start or end
    result: list[str] = []
    for line in out:
        if not line and (not result or not result[-1]):
            continue
        result.append(line)
    while result and not result[-1]:
        result.pop()
    return "\n".join(result) + "\n"


def same_meaning(a: RulesFile | None, b: RulesFile | None) -> bool:
    """Whether two parses say the same thing: equal IR once positions are left out."""
    return a is not None and b is not None and without_positions(a) == without_positions(b)
