"""The parser: .rules text → the frozen IR, with positions; syntax errors as diagnostics, never exceptions."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from stampgen.codegen import ir
from stampgen.codegen.parser import parse

REPO = Path(__file__).resolve().parent.parent
SHIPPED_PATH = REPO / "rules" / "linear_attn.rules"
SHIPPED = SHIPPED_PATH.read_text(encoding="utf-8")

HEADER = """\
enum Backend { triton flashinfer cutedsl }
config mamba {
    backend: Backend = triton
    decode_backend: Backend?
    deterministic: bool = false
}
facts launch {
    sm: int in {0, 9, 10}
}
"""


def parse_ok(text: str, path: str = "t.rules") -> ir.RulesFile:
    rules, diags = parse(text, path)
    assert rules is not None and diags == [], [f"{d.loc}: {d.message}" for d in diags]
    return rules


def launch_conditions(cond_text: str) -> ir.Expr:
    rules = parse_ok(HEADER + f'launch l {{\n    forbid {cond_text} "m"\n}}\n')
    return rules.decls[-1].stmts[0].cond


# --------------------------------------------------------------------------------------------- the shipped rules


def test_the_shipped_rules_check_clean_with_no_errors_and_no_warnings(stampgen, monkeypatch):
    monkeypatch.chdir(REPO)
    assert stampgen("check") == (0, "", "")
    assert stampgen("check", "rules/linear_attn.rules") == (0, "", "")


def test_the_shipped_rules_parse_into_every_kind_of_declaration():
    kinds = {type(d).__name__ for d in parse_ok(SHIPPED, "rules/linear_attn.rules").decls}
    assert kinds == {
        "EnumDecl",
        "ConfigDecl",
        "FactsDecl",
        "LaunchDecl",
        "AutoDecl",
        "StampDecl",
        "ValidateDecl",
        "GuardDecl",
        "ParityDecl",
    }


def test_the_ir_is_frozen():
    rules = parse_ok(HEADER)
    with pytest.raises(AttributeError):
        rules.decls[0].name = ir.Name("Other", rules.decls[0].loc)  # type: ignore[misc]


# --------------------------------------------------------------------------------------------- positions


def test_positions_count_lines_and_columns_from_one_and_span_the_token():
    rules = parse_ok(HEADER, "rules/x.rules")
    config = rules.decls[1]
    leaf = config.leaves[1]
    assert leaf.name.value == "decode_backend"
    assert (leaf.name.loc.path, leaf.name.loc.line, leaf.name.loc.col) == ("rules/x.rules", 4, 5)
    assert leaf.name.loc.end_col == 5 + len("decode_backend")
    assert str(config.loc) == "rules/x.rules:2:1"


def test_each_tier_of_a_chain_keeps_its_own_position():
    text = HEADER + "stamp S on runner.s {\n    decode = flag mamba.decode_backend > base mamba.backend\n}\n"
    field = parse_ok(text).decls[-1].fields[0]
    assert [(t.kind, t.loc.line, t.loc.col) for t in field.tiers] == [("flag", 11, 14), ("base", 11, 42)]


def test_crlf_line_endings_give_the_same_ir_and_the_same_positions():
    assert parse_ok(SHIPPED.replace("\n", "\r\n")) == parse_ok(SHIPPED)


# --------------------------------------------------------------------------------------------- shapes


def test_a_precedence_chain_keeps_its_tiers_in_order_with_their_conditions():
    text = HEADER + (
        "stamp S on runner.s {\n"
        "    slot d: Backend\n"
        "    decode = flag mamba.decode_backend > auto d > base mamba.backend\n"
        "    verify = follow decode when decode == flashinfer > triton\n"
        "}\n"
    )
    stamp = parse_ok(text).decls[-1]
    assert [s.name.value for s in stamp.slots] == ["d"]
    decode, verify = stamp.fields
    assert [(t.kind, t.ref.name) for t in decode.tiers] == [
        ("flag", "mamba.decode_backend"),
        ("auto", "d"),
        ("base", "mamba.backend"),
    ]
    follow, const = verify.tiers
    assert (follow.kind, follow.ref.name) == ("follow", "decode")
    assert isinstance(follow.when, ir.Compare) and follow.when.value.value == "flashinfer"
    assert (const.kind, const.value.value, const.when) == ("const", "triton", None)


def test_and_binds_tighter_than_or_and_implies_is_loosest():
    cond = launch_conditions(
        "launch.sm == 9 or mamba.deterministic and launch.sm == 10 implies mamba.deterministic"
    )
    assert isinstance(cond, ir.Implies)
    assert isinstance(cond.left, ir.Or)
    assert isinstance(cond.left.right, ir.And)


def test_implies_associates_to_the_right():
    cond = launch_conditions("mamba.deterministic implies launch.sm == 9 implies launch.sm >= 9")
    assert isinstance(cond, ir.Implies) and isinstance(cond.right, ir.Implies)


def test_not_applies_to_the_nearest_operand_unless_parenthesised():
    cond = launch_conditions("not mamba.deterministic and launch.sm == 9")
    assert isinstance(cond, ir.And) and isinstance(cond.left, ir.Not)
    cond = launch_conditions("not (mamba.deterministic and launch.sm == 9)")
    assert isinstance(cond, ir.Not) and isinstance(cond.operand, ir.And)


@pytest.mark.parametrize(
    ("text", "node", "fields"),
    [
        ("mamba.deterministic", ir.Truthy, {}),
        ("launch.sm >= 10", ir.Compare, {"op": ">="}),
        ("launch.sm != 0", ir.Compare, {"op": "!="}),
        ("mamba.backend in {triton, cutedsl}", ir.Member, {"negated": False}),
        ("mamba.backend not in {triton}", ir.Member, {"negated": True}),
        ("mamba.decode_backend is unset", ir.IsUnset, {"negated": False}),
        ("mamba.decode_backend is set", ir.IsUnset, {"negated": True}),
        ("true", ir.Const, {"value": True}),
        ("false", ir.Const, {"value": False}),
    ],
)
def test_each_condition_form_parses_to_its_node(text, node, fields):
    cond = launch_conditions(text)
    assert isinstance(cond, node)
    for name, value in fields.items():
        assert getattr(cond, name) == value


def test_value_in_stamp_asks_about_any_field():
    text = HEADER + 'validate V {\n    forbid flashinfer in LinearAttnBackends "m"\n}\n'
    cond = parse_ok(text).decls[-1].stmts[0].cond
    assert isinstance(cond, ir.AnyField)
    assert (cond.value.value, cond.stamp.name) == ("flashinfer", "LinearAttnBackends")


def test_int_literals_may_be_negative_and_domains_keep_their_order():
    rules = parse_ok("config server {\n    size: int in {-1, 4096, 8192}? = -1\n}\n")
    leaf = rules.decls[0].leaves[0]
    assert leaf.type.values == (-1, 4096, 8192)
    assert leaf.optional and leaf.default.value == -1


def test_strings_are_unescaped():
    text = HEADER + 'launch l {\n    forbid mamba.deterministic "say \\"no\\" to \\\\ this"\n}\n'
    assert parse_ok(text).decls[-1].stmts[0].message == 'say "no" to \\ this'


def test_comments_anywhere_do_not_change_the_ir(meaning):
    commented = HEADER.replace("{ triton", "{ # members\n triton").replace("= triton", "= triton  # base")
    assert meaning(parse_ok(commented)) == meaning(parse_ok(HEADER))


def test_a_parity_declaration_collects_its_clauses():
    text = (
        'parity p over "stampgen.kernels.models:ARCHS" {\n'
        "    draft /(NextN|MTP)$/\n"
        '    target base | base "ForCausalLM"\n'
        "    exclude A, B\n"
        "    hooks h1, h2\n"
        "    at_least 3\n"
        "}\n"
    )
    parity = parse_ok(text).decls[0]
    assert parity.registry == "stampgen.kernels.models:ARCHS"
    assert parity.draft == "(NextN|MTP)$"
    assert parity.targets == ("", "ForCausalLM")
    assert [n.value for n in parity.exclude] == ["A", "B"]
    assert [n.value for n in parity.hooks] == ["h1", "h2"]
    assert parity.at_least == 3
    assert [kw for kw, _ in parity.clause_locs] == ["draft", "target", "exclude", "hooks", "at_least"]


def test_a_guard_names_its_consumers_module_and_stamp():
    guard = parse_ok('guard A, B from "stampgen.kernels.backends" reads S\n').decls[0]
    assert [c.value for c in guard.consumers] == ["A", "B"]
    assert (guard.module, guard.stamp.value) == ("stampgen.kernels.backends", "S")


def test_the_ir_serialises_to_json_with_node_tags():
    data = msgspec.json.decode(msgspec.json.encode(parse_ok(HEADER)))
    assert [d["node"] for d in data["decls"]] == ["enum", "config", "facts"]


# --------------------------------------------------------------------------------------------- syntax errors


def test_a_syntax_error_gives_no_ir_and_a_positioned_diagnostic():
    rules, diags = parse(HEADER + 'launch l {\n    forbid launch.sm > 9 "m"\n}\n', "x.rules")
    assert rules is None
    [diag] = diags
    assert (diag.code, diag.loc.line, diag.loc.col) == ("syntax", 11, 22)
    assert "`>`" in diag.message and ">=" in diag.hint


def test_recovery_reports_the_first_error_of_every_broken_declaration():
    text = (
        "enum Backend { triton, flashinfer }\n"  # commas are not separators in an enum
        "config mamba {\n    backend: Backend triton\n}\n"  # missing `=`: `triton` reads as the next leaf
        'launch l {\n    forbid mamba.backend == triton && true "m"\n}\n'  # `&&`
    )
    rules, diags = parse(text, "x.rules")
    assert rules is None
    assert [(d.code, d.loc.line) for d in diags] == [("syntax", 1), ("syntax", 4), ("syntax-char", 6)]


def test_an_unclosed_declaration_is_reported_once_at_the_next_declaration():
    rules, diags = parse(
        HEADER.replace("    sm: int in {0, 9, 10}\n}\n", "    sm: int in {0, 9, 10}\n") + "enum X { a }\n",
        "x.rules",
    )
    assert rules is None
    [diag] = diags
    assert diag.loc.line == 9 and "missing" in diag.hint


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_an_empty_file_is_valid_and_declares_nothing(text):
    assert parse_ok(text).decls == ()


def test_the_same_text_always_parses_to_the_same_ir():
    assert parse_ok(SHIPPED) == parse_ok(SHIPPED)


def test_a_leaf_carries_its_comment_as_its_doc():
    text = """\
# a block comment is not a leaf's
config mamba {
    # the base for every phase,
    # as --linear-attn-backend gives it
    backend: bool = false  # (a flag)
    plain: bool = false
    after: bool = false    # trailing only

    # above a blank line: nobody's

    last: bool = false
}
facts runner { sm: int in {0, 9} }  # the SM major
"""
    rules, diags = parse(text, "t.rules")
    assert diags == [] and rules is not None
    config, facts = rules.decls
    docs = {leaf.name.value: leaf.doc for leaf in config.leaves}
    assert docs == {
        "backend": "the base for every phase, as --linear-attn-backend gives it (a flag)",
        "plain": "",  # the comment of the line above belongs to that line's leaf
        "after": "trailing only",
        "last": "",
    }
    assert facts.leaves[0].doc == "the SM major"
