"""`stampgen explain`: one stamp resolved for given inputs, every tier shown with why it won or lost."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RULES = "rules/linear_attn.rules"
RULE_LINES = (REPO / RULES).read_text(encoding="utf-8").splitlines()
DECODE_FLASHINFER = "mamba.linear_attn_decode_backend=flashinfer"


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def explain_json(stampgen, *sets: str) -> dict:
    argv = ["explain", "LinearAttnBackends", "--format", "json"]
    for item in sets:
        argv += ["--set", item]
    status, out, err = stampgen(*argv)
    assert status in (0, 1), err
    return json.loads(out)


def text_at(source: str) -> str:
    """The rules text a `path:line:col` position points at."""
    path, line, col = re.fullmatch(r"(.+):(\d+):(\d+)", source).groups()
    assert path == RULES
    return RULE_LINES[int(line) - 1][int(col) - 1 :]


def test_verify_follows_a_flashinfer_decode_and_names_the_follow_rule(stampgen):
    verify = explain_json(stampgen, DECODE_FLASHINFER)["fields"]["verify"]
    assert verify["value"] == "flashinfer"
    assert verify["tier"] == "follow"
    assert re.fullmatch(r"rules/linear_attn\.rules:\d+:\d+", verify["source"])
    assert text_at(verify["source"]).startswith("follow decode when decode == flashinfer")


def test_the_json_lists_every_tier_in_order_with_its_status(stampgen):
    verify = explain_json(stampgen, DECODE_FLASHINFER)["fields"]["verify"]
    assert [(t["tier"], t["status"]) for t in verify["tiers"]] == [
        ("flag", "lost"),
        ("follow", "won"),
        ("const", "not reached"),
    ]
    assert "unset" in verify["tiers"][0]["reason"]
    for tier in verify["tiers"]:
        assert text_at(tier["source"]).startswith(tier["text"].split(" when ")[0])


def test_the_json_has_the_documented_shape(stampgen):
    data = explain_json(stampgen)
    assert data["stamp"] == "LinearAttnBackends"
    assert list(data["fields"]) == ["decode", "prefill", "verify"]
    for field in data["fields"].values():
        assert {"value", "tier", "source", "tiers"} <= set(field)


def test_decode_is_decided_by_its_flag_and_the_base_is_not_reached(stampgen):
    decode = explain_json(stampgen, DECODE_FLASHINFER)["fields"]["decode"]
    assert (decode["value"], decode["tier"]) == ("flashinfer", "flag")
    assert decode["tiers"][1]["status"] == "not reached"


def test_a_slot_can_be_given_directly(stampgen):
    prefill = explain_json(stampgen, "prefill_default=flashinfer")["fields"]["prefill"]
    assert (prefill["value"], prefill["tier"]) == ("flashinfer", "auto")


def test_facts_fill_the_slot_through_the_gdn_gate(stampgen):
    facts = [
        "runner.family=gdn",
        "runner.platform=cuda",
        "runner.sm=9",
        "runner.cuda=12",
        "runner.pool_dtype=float32",
        "server.chunked_prefill_size=8192",
        "runner.head_k_dim=128",
        "runner.head_v_dim=128",
        "runner.flashinfer_gdn_prefill=true",
    ]
    data = explain_json(stampgen, *facts)
    assert data["slots"]["prefill_default"] == "flashinfer"
    assert data["gates"]["prefill_default"][0]["status"] == "yields"
    assert (data["fields"]["prefill"]["value"], data["fields"]["prefill"]["tier"]) == ("flashinfer", "auto")


def test_text_output_reads_like_kconfig(stampgen):
    status, out, err = stampgen("explain", "LinearAttnBackends", "--set", DECODE_FLASHINFER)
    assert status == 0 and err == ""
    block = out.split("\nverify = flashinfer\n", 1)[1].split("\n\n", 1)[0]
    selected = block.splitlines()[0]
    assert selected.startswith("  Selected by: follow decode when decode == flashinfer")
    assert re.search(r"rules/linear_attn\.rules:\d+:\d+$", selected)
    assert "✗ flag mamba.linear_attn_verify_backend" in block
    assert "· triton" in block and "not reached" in block


def test_the_text_says_which_launch_rule_applied(stampgen):
    status, out, _ = stampgen(
        "explain",
        "LinearAttnBackends",
        "--set",
        "launch.sm=10",
        "--set",
        "launch.cuda=13",
        "--set",
        "mamba.ssm_dtype=bfloat16",
    )
    assert status == 0
    assert "Launch (process-wide, before any runner):" in out
    assert "set mamba.linear_attn_decode_backend = flashinfer  [applied]" in out
    assert "decode = flashinfer" in out


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("mamba.nope=1", "unknown name 'mamba.nope'"),
        ("mamba.linear_attn_backnd=triton", "did you mean `mamba.linear_attn_backend`?"),
        ("runner.sm=7", "7 is not one of 0, 8, 9, 10, 12"),
        ("runner.family=rwkv", "'rwkv' is not a member of ModelFamily"),
        ("server.deterministic=maybe", "is not true or false"),
        ("runner.sm=unset", "runner.sm cannot be unset"),
        ("mamba.linear_attn_backend=unset", "cannot be unset"),
        ("no_equals_sign", "--set expects NAME=VALUE"),
    ],
)
def test_a_bad_set_exits_2_with_a_message_and_no_traceback(stampgen, setting, message):
    status, out, err = stampgen("explain", "LinearAttnBackends", "--set", setting)
    assert status == 2
    assert out == ""
    assert err.startswith("stampgen explain: error: ") and message in err
    assert "Traceback" not in err


def test_an_unknown_stamp_exits_2_and_suggests_the_closest(stampgen):
    status, _, err = stampgen("explain", "LinearAttnBackend")
    assert status == 2 and "did you mean `LinearAttnBackends`?" in err


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (
            ["server.deterministic=true", "mamba.linear_attn_prefill_backend=flashinfer"],
            "FlashInfer GDN prefill is not deterministic",
        ),
        (["mamba.linear_attn_decode_backend=flashkda"], "FlashKDA is prefill-only"),
    ],
    ids=["validate", "launch"],
)
def test_a_violation_exits_1_and_names_the_rule(stampgen, sets, message):
    argv = ["explain", "LinearAttnBackends"]
    for item in sets:
        argv += ["--set", item]
    status, out, _ = stampgen(*argv)
    assert status == 1
    errors = out.split("errors:\n", 1)[1]
    assert re.search(rf"rules/linear_attn\.rules:\d+:\d+: {re.escape(message)}", errors)
    data = explain_json(stampgen, *sets)
    assert [v["message"] for v in data["violations"] if message in v["message"]]


def test_a_fallback_shows_what_the_consumer_runs_with(stampgen):
    data = explain_json(stampgen, "mamba.linear_attn_prefill_backend=cutedsl", "runner.sm=9")
    assert data["after_validation"]["GDNAttnBackend"]["prefill"] == "triton"
    applied = [o for o in data["validations"]["GDNAttnBackend"] if o["status"] == "applied"]
    assert applied[0]["reason"] == "cutedsl GDN prefill needs SM100; using triton"


def test_an_unknown_backend_name_is_explained_as_custom(stampgen):
    data = explain_json(stampgen, "mamba.linear_attn_backend=my_plugin")
    assert data["fields"]["decode"]["value"] == "custom"


def test_explain_reads_another_rules_file_with_rules(stampgen, tmp_path):
    path = tmp_path / "mini.rules"
    path.write_text(
        "enum B { triton flashinfer }\nconfig m {\n    base: B = triton\n    d: B?\n}\n"
        "stamp S on runner.s {\n    decode = flag m.d > base m.base\n}\n",
        encoding="utf-8",
    )
    status, out, _ = stampgen(
        "explain", "S", "--rules", str(path), "--set", "m.d=flashinfer", "--format", "json"
    )
    assert status == 0
    assert json.loads(out)["fields"]["decode"]["source"] == f"{path}:7:14"


def test_explain_on_rules_with_errors_prints_the_diagnostics_and_exits_1(stampgen):
    status, out, err = stampgen("explain", "Backends", "--rules", "tests/diagnostics/not-total.rules")
    assert status == 1 and out == ""
    assert "[not-total]" in err
