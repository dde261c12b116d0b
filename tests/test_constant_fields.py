"""An all-constant field is legal when its type is known: the one enum that has its members, else the enum
of its sibling fields, else a declared type (`verify: Backend = triton`)."""

from __future__ import annotations

from pathlib import Path

from stampgen.codegen.load import load_text

SHIPPED = (Path(__file__).resolve().parents[1] / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
FOLLOWS = "verify = flag mamba.linear_attn_verify_backend > follow decode when decode == flashinfer > triton"


def test_verify_is_always_triton_checks_on_the_shipped_rules() -> None:
    # `triton` is a member of LinearAttnKernelBackend and of AttentionBackend: the siblings decide
    loaded = load_text(SHIPPED.replace(FOLLOWS, "verify = triton"), "rules/linear_attn.rules")
    assert loaded.ok, [d.message for d in loaded.diagnostics if d.is_error]
    field = loaded.model.stamps["LinearAttnBackends"].field("verify")
    assert field.type.name == "LinearAttnKernelBackend"


def test_a_declared_type_settles_an_ambiguous_constant() -> None:
    text = """
enum Backend { triton flashinfer }
enum Attention { triton fa3 }
config c { enabled: bool = false }
stamp S on runner.s {
    verify: Attention = triton
}
validate V { forbid S.verify == fa3 and c.enabled "no" }
"""
    loaded = load_text(text, "x.rules")
    assert loaded.ok, [d.message for d in loaded.diagnostics]
    assert loaded.model.stamps["S"].field("verify").type.name == "Attention"
    undeclared = load_text(text.replace("verify: Attention = triton", "verify = triton"), "x.rules")
    assert [d.code for d in undeclared.diagnostics if d.is_error] == ["untyped-field"]
