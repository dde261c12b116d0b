"""`stampgen fmt`: the canonical layout of .rules files. It never changes meaning and is idempotent."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stampgen.codegen.fmt import format_rules
from stampgen.codegen.parser import parse

REPO = Path(__file__).resolve().parent.parent
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")


def _readable(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None


FIXTURES = {p.name: _readable(p) for p in sorted((REPO / "tests" / "diagnostics").glob("*.rules"))}
PARSEABLE = {name: text for name, text in FIXTURES.items() if text and parse(text, name)[0] is not None}
BROKEN = {name: text for name, text in FIXTURES.items() if text and parse(text, name)[0] is None}
SAMPLES = {"rules/linear_attn.rules": SHIPPED, **PARSEABLE}

MESSY = """\
# a messy file
enum   Backend{triton flashinfer
  cutedsl}
config mamba{
backend :Backend=triton   # base
      decode_backend:Backend ?
   chunk: int in { 1 ,2, 3 } ? # sizes
}


stamp Backends on runner.backends{
  slot d : Backend from gate
decode=flag mamba.decode_backend>auto d
>base mamba.backend
}
auto gate: Backend = flashinfer when mamba.chunk in {1,2} and not(mamba.backend==cutedsl)
"""

MESSY_FORMATTED = """\
# a messy file
enum Backend { triton flashinfer
    cutedsl }
config mamba {
    backend: Backend = triton  # base
    decode_backend: Backend?
    chunk: int in {1, 2, 3}?  # sizes
}

stamp Backends on runner.backends {
    slot d: Backend from gate
    decode = flag mamba.decode_backend > auto d
        > base mamba.backend
}
auto gate: Backend = flashinfer when mamba.chunk in {1, 2} and not (mamba.backend == cutedsl)
"""


def test_the_shipped_rules_are_already_canonical():
    assert format_rules(SHIPPED) == SHIPPED


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_fmt_is_idempotent(name):
    once = format_rules(SAMPLES[name])
    assert format_rules(once) == once


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_parse_fmt_parse_gives_the_same_ir(name, meaning):
    before, _ = parse(SAMPLES[name], name)
    after, diags = parse(format_rules(SAMPLES[name]), name)
    assert diags == []
    assert meaning(after) == meaning(before)


def test_a_messy_file_gets_the_canonical_layout(meaning):
    assert format_rules(MESSY) == MESSY_FORMATTED
    assert meaning(parse(MESSY_FORMATTED, "m")[0]) == meaning(parse(MESSY, "m")[0])


def test_comments_survive_formatting():
    comments = re.findall(r"#[^\n]*", SHIPPED)
    assert re.findall(r"#[^\n]*", format_rules(SHIPPED)) == [c.rstrip() for c in comments]


def test_trailing_comments_of_consecutive_lines_line_up_two_spaces_after_the_longest_code():
    text = "config c {\n    a: bool = false # short\n    longer_name: bool = true # long\n}\n"
    assert format_rules(text) == (
        "config c {\n    a: bool = false           # short\n    longer_name: bool = true  # long\n}\n"
    )


def test_runs_of_blank_lines_collapse_to_one_and_the_file_ends_with_one_newline():
    assert format_rules("\n\nenum A { a }\n\n\n\nenum B { b }\n\n\n") == "enum A { a }\n\nenum B { b }\n"


# --------------------------------------------------------------------------------------------- whitespace property

_TOKEN = re.compile(r'( +|\n|#[^\n]*|"(?:[^"\\\n]|\\.)*")')


@st.composite
def respaced_shipped_rules(draw) -> str:
    """The shipped rules with the spaces between tokens (and the indentation) changed at random."""
    parts = _TOKEN.split(SHIPPED)
    out = []
    for part in parts:
        if part and set(part) == {" "}:
            part = draw(st.sampled_from([" ", "  ", "\t", " \t  ", "        "]))
        elif part == "\n" and draw(st.integers(0, 9)) == 0:
            part = draw(st.sampled_from(["  \n", "\t\n"])) + draw(st.sampled_from(["", "   ", "\t"]))
        out.append(part)
    return "".join(out)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(text=respaced_shipped_rules())
def test_spacing_and_indentation_do_not_matter_to_fmt(text):
    assert format_rules(text) == SHIPPED


# --------------------------------------------------------------------------------------------- the command


@pytest.fixture
def messy_file(tmp_path: Path) -> Path:
    path = tmp_path / "messy.rules"
    path.write_text(MESSY, encoding="utf-8")
    return path


def test_fmt_check_exits_1_with_a_diff_and_writes_nothing(messy_file, stampgen):
    before = messy_file.stat().st_mtime_ns
    status, out, err = stampgen("fmt", "--check", str(messy_file))
    assert status == 1
    assert out.startswith(f"--- {messy_file} (current)\n+++ {messy_file} (formatted)\n")
    assert "-enum   Backend{triton flashinfer\n" in out
    assert "+enum Backend { triton flashinfer\n" in out
    assert messy_file.read_text(encoding="utf-8") == MESSY
    assert messy_file.stat().st_mtime_ns == before
    assert [p.name for p in messy_file.parent.iterdir()] == ["messy.rules"], "no temp file left behind"


def test_fmt_check_on_a_canonical_file_exits_0_and_prints_nothing(tmp_path, stampgen):
    path = tmp_path / "ok.rules"
    path.write_text(SHIPPED, encoding="utf-8")
    assert stampgen("fmt", "--check", str(path)) == (0, "", "")


def test_fmt_rewrites_the_file_then_has_nothing_left_to_do(messy_file, stampgen):
    status, _, err = stampgen("fmt", str(messy_file))
    assert status == 0 and "formatted" in err
    assert messy_file.read_text(encoding="utf-8") == MESSY_FORMATTED
    assert stampgen("fmt", str(messy_file)) == (0, "", "")
    assert stampgen("fmt", "--check", str(messy_file)) == (0, "", "")
    assert [p.name for p in messy_file.parent.iterdir()] == ["messy.rules"], "no temp file left behind"


@pytest.mark.parametrize("name", sorted(BROKEN))
@pytest.mark.parametrize("check", [False, True], ids=["write", "check"])
def test_fmt_refuses_a_file_with_syntax_errors_and_leaves_it_unchanged(name, check, tmp_path, stampgen):
    path = tmp_path / name
    path.write_text(BROKEN[name], encoding="utf-8")
    status, out, err = stampgen("fmt", *(["--check"] if check else []), str(path))
    assert status == 1
    assert out == ""
    assert re.search(
        rf"^{re.escape(str(path))}:\d+:\d+: error: .*\[(syntax(-char)?|too-deeply-nested)\]$", err, re.M
    )
    assert f"{path}: not formatted: fix the errors above first" in err
    assert path.read_text(encoding="utf-8") == BROKEN[name]


def test_fmt_formats_a_file_with_semantic_errors(tmp_path, stampgen):
    path = tmp_path / "semantic.rules"
    path.write_text("enum   Backend { triton }\nconfig mamba {\nx: Bakend\n}\n", encoding="utf-8")
    assert stampgen("fmt", str(path))[0] == 0
    assert path.read_text(encoding="utf-8") == "enum Backend { triton }\nconfig mamba {\n    x: Bakend\n}\n"


def test_fmt_of_an_unreadable_file_exits_2_without_a_traceback(tmp_path, stampgen):
    path = tmp_path / "missing.rules"
    status, _, err = stampgen("fmt", str(path))
    assert status == 2
    assert "[unreadable]" in err and "Traceback" not in err


def test_a_waiver_is_a_statement_and_its_reason_on_the_next_line_a_continuation(meaning):
    messy = (
        'parity p over "m:R" {\ndraft /MTP$/\n  waive   AMTP until 2030-06-30\n"its hook lands later"\n}\n'
    )
    formatted = format_rules(messy)
    assert formatted == (
        'parity p over "m:R" {\n    draft /MTP$/\n    waive AMTP until 2030-06-30\n'
        '        "its hook lands later"\n}\n'
    )
    assert meaning(parse(formatted, "m")[0]) == meaning(parse(messy, "m")[0])
