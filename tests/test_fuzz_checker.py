"""Fuzzing `stampgen check`: whatever the file holds, the checker answers with diagnostics, never a traceback.

Mutations of the shipped rules (lines deleted, duplicated, swapped, truncated; tokens deleted, inserted,
replaced; identifiers swapped; numbers replaced; characters inserted) reach every layer: the lexer, the
parser's error recovery, the checker's cross-declaration passes. Random token soup and random text/bytes
cover the rest. Each example goes through the CLI entry, `main(["check", path])`, and must exit 0 or 1
with every problem line in the `PATH:LINE:COL: error|warning: ` form.

Derandomized, so CI sees the same examples every run; about 2,500 examples in total.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stampgen.codegen.cli import main

REPO = Path(__file__).resolve().parent.parent
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
LINES = SHIPPED.splitlines(keepends=True)

_TOKEN = re.compile(
    r'\s+|#[^\n]*|"(?:[^"\\\n]|\\.)*"|/(?:[^/\\\n]|\\.)+/|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|==|!=|<=|>=|->|.',
)
TOKENS = _TOKEN.findall(SHIPPED)
IDENTIFIERS = sorted({t for t in TOKENS if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", t)})
NASTY = [
    "{",
    "}",
    "(",
    ")",
    ">",
    "=",
    "==",
    ">=",
    "<",
    "->",
    ",",
    ":",
    "?",
    "|",
    '"',
    "'",
    "&&",
    "||",
    "!",
    "#",
    "/",
    "\\",
    "\n",
    "\t",
    "\r",
    "\f",
    "\x00",
    "\u2028",
    "é",
    "-1",
    "99999999999999999999",
    "_x",
    "class",
    "unset",
    "set",
    "true",
    "false",
    "in",
    "not",
    "is",
    "when",
    "log",
    "open",
    "custom",
    "int in {",
    "Stamp.",
    'forbid true ""',
    "follow decode",
    "flag mamba.x",
    "auto",
    "base",
    "slot s: Missing from nowhere",
    "stamp S on runner.s {",
    "enum E { a }",
    "config c {",
    "facts runner {",
    "launch l {",
    "validate V {",
    'guard G from "m" reads LinearAttnBackends',
    'parity p over "a:B" {',
    "draft /(/",
    "at_least -1",
]
VOCAB = sorted(set(TOKENS)) + NASTY

HEADER = re.compile(r"^(?P<path>.+?):(?P<line>\d+):\d+: (error|warning): ")
SUMMARY = re.compile(r"^\d+ error\(s\), \d+ warning\(s\) in 1 file\(s\)$")


@pytest.fixture(scope="module")
def rules_path(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "fuzzed.rules"


def assert_checks_cleanly(path: Path, content: str | bytes) -> None:
    """Run `stampgen check` on the content; the answer must be well-formed diagnostics, never a crash."""
    if isinstance(content, str):
        path.write_bytes(content.encode("utf-8", errors="surrogatepass"))
    else:
        path.write_bytes(content)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", str(path)], out=out, err=err)  # an escaping exception fails the test
    assert status in (0, 1), status
    assert out.getvalue() == ""
    lines = err.getvalue().split("\n")
    assert lines[-1] == "", "stderr ends with a newline"
    reported = [line for line in lines[:-1] if not line.startswith("  ")]
    if status == 1:
        assert reported, "exit 1 without a diagnostic"
    for line in reported[:-1]:
        m = HEADER.match(line)
        assert m, f"not a diagnostic line: {line!r}"
        assert m["path"] == str(path)
    if reported:
        assert SUMMARY.match(reported[-1]), reported[-1]
    source = _decoded(content)
    for i, line in enumerate(lines[:-1]):
        m = HEADER.match(line)
        if m and source is not None and 1 <= int(m["line"]) <= len(source):
            echoed = "  " + source[int(m["line"]) - 1].expandtabs(1)
            assert lines[i + 1] == echoed, f"{line!r} shows the wrong source line"


def _decoded(content: str | bytes) -> list[str] | None:
    """The source lines as the checker reads them (universal newlines, then lines end at \\n only), or
    None if the file is not UTF-8."""
    try:
        text = content if isinstance(content, str) else content.decode("utf-8")
        text.encode("utf-8")
    except UnicodeError:
        return None
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


# --------------------------------------------------------------------------------------------- mutations


@st.composite
def line_mutants(draw) -> str:
    lines = list(LINES)
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "truncate", "cut_file"]))
        i = draw(st.integers(0, len(lines) - 1))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(draw(st.integers(0, len(lines))), lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        else:
            lines = lines[:i]
    return "".join(lines)


@st.composite
def token_mutants(draw) -> str:
    tokens = list(TOKENS)
    for _ in range(draw(st.integers(1, 5))):
        op = draw(st.sampled_from(["delete", "insert", "replace", "swap_ident", "number", "char"]))
        i = draw(st.integers(0, len(tokens) - 1))
        if op == "delete":
            del tokens[i]
        elif op == "insert":
            tokens.insert(i, draw(st.sampled_from(VOCAB)))
        elif op == "replace":
            tokens[i] = draw(st.sampled_from(VOCAB))
        elif op == "swap_ident":
            idents = [k for k, t in enumerate(tokens) if t in IDENTIFIERS]
            a, b = draw(st.sampled_from(idents)), draw(st.sampled_from(IDENTIFIERS))
            tokens = [b if t == tokens[a] else t for t in tokens]  # rename every use, as a refactor would
        elif op == "number":
            numbers = [k for k, t in enumerate(tokens) if re.fullmatch(r"-?\d+", t)]
            k = draw(st.sampled_from(numbers))
            tokens[k] = str(draw(st.integers(-(2**70), 2**70)))
        else:
            tokens[i] = tokens[i] + draw(st.characters(codec="utf-8")) + " "
        if not tokens:
            break
    return "".join(tokens)


token_soup = st.lists(st.sampled_from(VOCAB), max_size=60).map(" ".join)
random_text = st.text(max_size=300)
random_bytes = st.binary(max_size=300)


def fuzz(max_examples: int) -> settings:
    return settings(
        max_examples=max_examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


@fuzz(800)
@given(content=line_mutants())
def test_line_mutations_of_the_shipped_rules_never_crash_the_checker(rules_path, content):
    assert_checks_cleanly(rules_path, content)


@fuzz(900)
@given(content=token_mutants())
def test_token_mutations_of_the_shipped_rules_never_crash_the_checker(rules_path, content):
    assert_checks_cleanly(rules_path, content)


@fuzz(400)
@given(content=token_soup)
def test_random_token_soup_never_crashes_the_checker(rules_path, content):
    assert_checks_cleanly(rules_path, content)


@fuzz(300)
@given(content=random_text)
def test_random_text_never_crashes_the_checker(rules_path, content):
    assert_checks_cleanly(rules_path, content)


@fuzz(100)
@given(content=random_bytes)
def test_random_bytes_never_crash_the_checker(rules_path, content):
    assert_checks_cleanly(rules_path, content)


def test_the_unmutated_shipped_rules_check_clean(rules_path):
    out, err = io.StringIO(), io.StringIO()
    rules_path.write_text(SHIPPED, encoding="utf-8")
    assert main(["check", str(rules_path)], out=out, err=err) == 0
    assert err.getvalue() == ""
