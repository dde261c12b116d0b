"""`stampgen explain`: one stamp resolved for given inputs, every tier shown with why it won or lost."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from stampgen.codegen import ir
from stampgen.codegen.load import load

REPO = Path(__file__).resolve().parent.parent
RULES = "rules/linear_attn.rules"
RULE_LINES = (REPO / RULES).read_text(encoding="utf-8").splitlines()
DECODE_FLASHINFER = "mamba.linear_attn_decode_backend=flashinfer"
MODEL = load(str(REPO / RULES)).model


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


# --------------------------------------------------------------------------------------------- what the inputs leave open

# One GDN runner on Hopper, every fact given: the FlashInfer prefill gate yields.
HOPPER_FACTS = {
    "launch": {"sm": 9, "cuda": 12, "kimi_k3": False},
    "runner": {
        "family": "gdn",
        "platform": "cuda",
        "sm": 9,
        "sm_minor": 0,
        "cuda": 12,
        "pool_dtype": "float32",
        "head_k_dim": 128,
        "head_v_dim": 128,
        "flashinfer_gdn_prefill": True,
    },
}
CHUNKED = "server.chunked_prefill_size=8192"


def explain_argv(stampgen, *argv: str) -> tuple[int, str, str]:
    return stampgen("explain", "LinearAttnBackends", *argv)


def sets(*items: str) -> list[str]:
    return [arg for item in items for arg in ("--set", item)]


def write_json(tmp_path: Path, name: str, data: object) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def test_with_runner_facts_missing_prefill_is_undecided_with_its_candidates_and_deciding_facts(stampgen):
    prefill = explain_json(stampgen, CHUNKED)["fields"]["prefill"]
    assert prefill["value"] is None and prefill["undecided"] is True
    assert prefill["candidates"] == ["triton", "flashinfer"]
    assert {"runner.family", "runner.platform", "runner.sm", "runner.head_k_dim"} <= set(
        prefill["decided_by"]
    )
    assert "runner.sm_minor" not in prefill["decided_by"]  # read by nothing that decides prefill
    auto = prefill["tiers"][1]
    assert (auto["tier"], auto["status"]) == ("auto", "undecided")
    assert sorted(auto["possible"]) == ["lost", "won"]


def test_the_text_never_shows_an_undecided_field_as_won(stampgen):
    status, out, _ = explain_argv(stampgen, *sets(CHUNKED))
    assert status == 0
    block = out.split("\nprefill = ", 1)[1].split("\n\n", 1)[0]
    assert block.startswith("undecided (triton or flashinfer)\n  Decided by: runner.family, runner.platform")
    assert "✓" not in block and "won:" not in block
    assert "? auto prefill_default" in block and "? base mamba.linear_attn_backend" in block


def test_an_undecidable_gate_makes_its_slot_undecided_not_unset(stampgen):
    data = explain_json(stampgen)  # the KDA gate needs runner.family: it may fill the slot
    assert data["slots"]["prefill_default"] is None
    assert data["undecided_slots"]["prefill_default"]["candidates"] == [None, "flashinfer"]
    assert data["fields"]["prefill"]["candidates"] == ["triton", "flashinfer"]
    assert data["gates"]["prefill_default"][1]["status"] == "undecided"


def test_an_undecided_launch_rule_leaves_what_it_sets_undecided(stampgen):
    data = explain_json(stampgen, "mamba.ssm_dtype=bfloat16")  # decode becomes flashinfer on SM100 only
    decode = data["fields"]["decode"]
    assert (decode["undecided"], decode["candidates"], decode["decided_by"]) == (
        True,
        ["triton", "flashinfer"],
        ["launch.sm"],
    )
    first = data["launch"][0]
    assert (first["kind"], first["status"], first["decided_by"]) == ("set", "undecided", ["launch.sm"])
    assert data["not_given"][0] == "launch.sm"


def test_with_every_fact_given_everything_is_decided(stampgen, tmp_path):
    facts = write_json(tmp_path, "runner.json", HOPPER_FACTS)
    status, out, err = explain_argv(stampgen, "--facts", facts, *sets(CHUNKED), "--format", "json")
    assert status == 0, err
    data = json.loads(out)
    assert not data["not_given"] and not data["undecided_slots"]
    assert {name: f["value"] for name, f in data["fields"].items()} == {
        "decode": "triton",
        "prefill": "flashinfer",
        "verify": "triton",
    }
    assert not any("undecided" in f for f in data["fields"].values())
    statuses = [o["status"] for o in data["launch"]] + [
        o["status"] for log in data["validations"].values() for o in log
    ]
    assert "undecided" not in statuses


def test_the_text_shows_every_check_and_what_an_undecided_one_needs(stampgen):
    status, out, _ = explain_argv(stampgen, *sets(CHUNKED))
    assert status == 0
    launch = out.split("Launch (process-wide, before any runner):\n", 1)[1].split("\n\n", 1)[0]
    launch_checks = [s for launch in MODEL.launches for s in launch.decl.stmts if isinstance(s, ir.Check)]
    assert launch.count("[ok]") == len(launch_checks) > 0  # every check, though none can fail here
    gdn = out.split("validate GDNAttnBackend:\n", 1)[1].split("\n\n", 1)[0]
    line = next(i for i, text in enumerate(gdn.splitlines()) if "require runner.platform != npu" in text)
    undecided = gdn.splitlines()[line : line + 2]
    assert "[undecided]" in undecided[0]
    assert undecided[1].strip().startswith("ok or violated, depending on runner.platform (not given)")


# --------------------------------------------------------------------------------------------- a check that fires ends the story


def test_after_a_validate_forbid_fires_no_later_fallback_is_shown_as_applied(stampgen, tmp_path):
    facts = write_json(tmp_path, "runner.json", HOPPER_FACTS)
    given = [
        "server.deterministic=true",
        "mamba.linear_attn_prefill_backend=flashinfer",
        "mamba.linear_attn_verify_backend=flashinfer",
        "server.speculative_topk=2",  # the tree-draft fallback would apply, were it reached
    ]
    status, out, _ = explain_argv(stampgen, "--facts", facts, *sets(*given))
    assert status == 1
    gdn = out.split("validate GDNAttnBackend:\n", 1)[1].split("\n\n", 1)[0]
    assert "[violated]" in gdn.splitlines()[0]
    assert "[applied]" not in gdn and "runs with" not in gdn
    fallbacks = [line for line in gdn.splitlines() if line.lstrip("·? ").startswith("fallback ")]
    assert fallbacks and all("[not reached]" in line for line in fallbacks)
    lines = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines, 1) if "forbid server.deterministic and LinearAttn" in line)
    assert f"GDNAttnBackend raises at rules/linear_attn.rules:{first}:5" in gdn
    data = json.loads(explain_argv(stampgen, "--facts", facts, *sets(*given), "--format", "json")[1])
    assert "GDNAttnBackend" not in data["after_validation"]
    log = data["validations"]["GDNAttnBackend"]
    assert [o["status"] for o in log[1:]] == ["not reached"] * (len(log) - 1)


def test_after_a_launch_forbid_fires_nothing_later_runs_and_no_consumer_is_built(stampgen):
    given = ["mamba.linear_attn_decode_backend=flashinfer", "launch.sm=10", "launch.cuda=13"]
    status, out, _ = explain_argv(stampgen, *sets(*given))
    assert status == 1
    launch = out.split("Launch (process-wide, before any runner):\n", 1)[1].split("\n\n", 1)[0]
    after = launch.split("[violated]", 1)[1]
    assert "needs --mamba-ssm-dtype bfloat16" in after.splitlines()[1]
    assert "[ok]" not in after and "[applied]" not in after and "[not reached]" in after
    assert "not reached: launch refuses these inputs" in out
    data = json.loads(explain_argv(stampgen, *sets(*given), "--format", "json")[1])
    assert len(data["violations"]) == 1  # the generated code raises at the first
    for log in data["validations"].values():
        assert {o["status"] for o in log} == {"not reached"}


# --------------------------------------------------------------------------------------------- --facts and --config


def test_facts_and_config_files_give_a_whole_runners_view(stampgen, tmp_path):
    facts = write_json(tmp_path, "runner.json", HOPPER_FACTS)  # nested
    config = tmp_path / "config.toml"
    config.write_text('[server]\nchunked_prefill_size = 8192\n\n[mamba]\nlinear_attn_backend = "triton"\n')
    status, out, err = explain_argv(stampgen, "--facts", facts, "--config", str(config), "--format", "json")
    assert status == 0, err
    data = json.loads(out)
    assert (
        data["fields"]["prefill"]["value"] == "flashinfer"
        and data["slots"]["prefill_default"] == "flashinfer"
    )


def test_a_flat_toml_facts_file_and_a_set_that_overrides_it(stampgen, tmp_path):
    lines = [
        f'"{ns}.{k}" = {json.dumps(v)}' for ns, leaves in HOPPER_FACTS.items() for k, v in leaves.items()
    ]
    facts = tmp_path / "runner.toml"
    facts.write_text("\n".join(lines) + "\n")  # JSON's scalars are TOML's
    status, out, err = explain_argv(
        stampgen, "--facts", str(facts), *sets(CHUNKED, "runner.head_k_dim=64"), "--format", "json"
    )
    assert status == 0, err
    data = json.loads(out)
    assert data["fields"]["prefill"]["value"] == "triton"  # the --set geometry makes the gate decline
    assert data["gates"]["prefill_default"][0]["status"] == "declines"


@pytest.mark.parametrize(
    ("option", "name", "content", "message"),
    [
        ("--facts", "f.json", '{"runner": {"smm": 9}}', "unknown name 'runner.smm'; did you mean `runner.sm`?"),
        ("--facts", "f.json", '{"runner.sm": 11}', "runner.sm (rules/linear_attn.rules:"),
        ("--facts", "f.json", '{"runner.sm": "9"}', 'runner.sm: expected an int in {0, 8, 9, 10, 12}, not "9"'),
        ("--facts", "f.json", '{"runner.flashinfer_gdn_prefill": "yes"}', "expected true or false"),
        ("--facts", "f.json", '{"runner.family": 3}', "expected a member of ModelFamily"),
        ("--facts", "f.json", '{"runner.sm": null}', "runner.sm cannot be unset"),
        ("--facts", "f.json", '{"server.deterministic": true}', "server.deterministic is a config leaf, not a fact"),
        ("--config", "c.json", '{"runner.sm": 9}', "runner.sm is a fact, not a config leaf"),
        ("--config", "c.json", '{"prefill_default": "triton"}', "prefill_default is a slot of LinearAttnBackends"),
        ("--config", "c.json", '{"server.chunked_prefill_size": 8192, "server": {"chunked_prefill_size": 4096}}',
         "server.chunked_prefill_size is given twice"),
        ("--facts", "f.json", "{nope", "not valid JSON"),
        ("--facts", "f.toml", "runner.sm = ", "not valid TOML"),
        ("--facts", "f.json", "[9]", "expected a mapping of the rules' dotted names"),
        ("--facts", "f.yaml", "runner.sm: 9", "expected a .json or .toml file"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("--") else None,
)  # fmt: skip
def test_a_bad_input_file_exits_2_naming_the_file_and_the_name(
    stampgen, tmp_path, option, name, content, message
):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    status, out, err = explain_argv(stampgen, option, str(path))
    assert status == 2 and out == ""
    assert err.startswith(f"stampgen explain: error: {path}: ") and message in err, err
    assert "Traceback" not in err


def test_an_unreadable_input_file_exits_2(stampgen, tmp_path):
    status, _, err = explain_argv(stampgen, "--facts", str(tmp_path / "missing.json"))
    assert status == 2 and err.startswith("stampgen explain: error: cannot read ") and "missing.json" in err


# --------------------------------------------------------------------------------------------- gate conditions


def test_a_gate_lists_the_value_of_each_of_its_top_level_conditions(stampgen, tmp_path):
    facts = write_json(
        tmp_path, "runner.json", {**HOPPER_FACTS, "runner": {**HOPPER_FACTS["runner"], "head_k_dim": 64}}
    )
    status, out, _ = explain_argv(stampgen, "--facts", facts, *sets(CHUNKED))
    assert status == 0
    gate = out.split("  gate gdn_flashinfer_prefill declines: ", 1)[1].split("\n  gate ", 1)[0]
    conditions = [line.split(None, 2)[1:] for line in gate.splitlines()[1:]]
    assert len(conditions) == 17  # the conjuncts of its `when`, in order
    assert conditions[0] == ["true", "runner.family == gdn  (runner.family = gdn)"]
    assert ["false", "runner.head_k_dim == 128  (runner.head_k_dim = 64)"] in conditions
    assert [value for value, _ in conditions].count("false") == 1


def test_an_undecided_gate_condition_says_so(stampgen):
    status, out, _ = explain_argv(stampgen, *sets(CHUNKED))
    assert status == 0
    gate = out.split("  gate gdn_flashinfer_prefill undecided: ", 1)[1].split("\n  gate ", 1)[0]
    assert "      ? undecided runner.family == gdn  (runner.family = not given)" in gate
    assert (
        "      ✓ true      server.chunked_prefill_size is set  (server.chunked_prefill_size = 8192)" in gate
    )


# --------------------------------------------------------------------------------------------- ints outside their domain


@pytest.mark.parametrize("value", ["16384", "-2", "true"])
def test_an_int_outside_its_declared_domain_is_bad_input(stampgen, value):
    status, out, err = explain_argv(stampgen, *sets(f"server.chunked_prefill_size={value}"))
    assert status == 2 and out == ""
    line = RULE_LINES.index("    chunked_prefill_size: int in {-1, 4096, 8192, 32768, 65536}?") + 1
    assert f"server.chunked_prefill_size (rules/linear_attn.rules:{line}:5): " in err
    assert "is not one of -1, 4096, 8192, 32768, 65536" in err


def _generate(tmp_path: Path, rules: Path, name: str):
    """Generate `rules` into a scratch project and import the module (it needs only msgspec)."""
    import importlib.util
    import io
    import os
    import shutil

    from stampgen.codegen.generate import run_generate

    (tmp_path / "rules").mkdir()
    shutil.copy(rules, tmp_path / "rules" / f"{name}.rules")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        err = io.StringIO()
        assert run_generate([f"rules/{name}.rules"], "gen", out=io.StringIO(), err=err) == 0, err.getvalue()
    finally:
        os.chdir(cwd)
    spec = importlib.util.spec_from_file_location(f"explain_scratch_{name}", tmp_path / "gen" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # msgspec resolves the records' annotations through it
    spec.loader.exec_module(module)
    return module


def test_generated_code_refuses_an_int_outside_its_domain_naming_the_leaf_and_its_line(tmp_path):
    from types import SimpleNamespace

    module = _generate(tmp_path, REPO / "tests" / "fixtures" / "everything.rules", "everything")
    engine = SimpleNamespace(decode_backend=None, prefill_backend=None, verify_backend=None, backend="triton",
                             mode="eager", strict=False, fast=None, chunk=16384, threads=2)  # fmt: skip
    with pytest.raises(
        ValueError, match=r"^engine\.chunk \(rules/everything\.rules:\d+:\d+\): 16384 is not one of "
    ):
        module.resolve_choice(engine, auto_prefill=None, hint=None)
    for bad in (8, "9", True):
        with pytest.raises(
            ValueError, match=r"runner\.sm \(rules/everything\.rules:\d+:\d+\): .* is not one of 0, 9, 10"
        ):
            module.RunnerFacts(family="gdn", sm=bad, big=False)
    for chunk in (None, -1, 4096):  # unset and every listed value pass
        module.resolve_choice(
            SimpleNamespace(**{**vars(engine), "chunk": chunk}), auto_prefill=None, hint=None
        )


@pytest.mark.parametrize("name", ["everything", "linear_attn"])
def test_the_differential_check_holds_both_sides_refusing_out_of_domain_ints(tmp_path, name):
    from stampgen.codegen import testing

    rules = REPO / ("rules" if name == "linear_attn" else "tests/fixtures") / f"{name}.rules"
    module = _generate(tmp_path, rules, name)
    testing.check_refusals(testing.load_rules(tmp_path, f"rules/{name}.rules", module))


def test_the_differential_check_catches_generated_code_that_accepts_an_out_of_domain_int(tmp_path):
    from stampgen.codegen import testing

    module = _generate(tmp_path, REPO / "tests" / "fixtures" / "everything.rules", "everything")

    class Lenient(module.RunnerFacts):  # what a generator without the refusals would emit
        def __post_init__(self) -> None:
            pass

    rules = testing.load_rules(tmp_path, "rules/everything.rules", module)
    module.RunnerFacts = Lenient
    with pytest.raises(AssertionError, match=r"RunnerFacts with sm = 11: accepted it"):
        testing.check_refusals(rules)
