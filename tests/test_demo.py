"""`make demo` (python -m stampgen.kernels.runtime.demo): what it prints, per runner and per pair."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from stampgen.kernels.runtime import demo
from stampgen.kernels.runtime.loader import FUSION_HOOK
from stampgen.kernels.runtime.models import ARCHS

ACCEPT_LINE = re.compile(r"^(\w+) -> (\w+): mean accept length: (\d+\.\d\d) \(draft tokens (\d+)\)$", re.M)
FAST = ["--new-tokens", "10", "--prompt-lengths", "4,7"]
DSPARK = "DeepseekV4ForCausalLMDSpark"


def run(*argv: str) -> str:
    out = io.StringIO()
    assert demo.main([*FAST, *argv], out=out) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def output() -> str:
    return run()


def accept_lengths(text: str) -> dict[str, tuple[float, int]]:
    return {m[1]: (float(m[3]), int(m[4])) for m in ACCEPT_LINE.finditer(text)}


def test_every_pair_prints_its_accept_line_exactly_once(output):
    lines = ACCEPT_LINE.findall(output)
    assert [(draft, target) for draft, target, _, _ in lines] == [(p.draft, p.target) for p in demo.PAIRS]
    assert all(1.0 <= float(a) <= int(d) + 1 for _, _, a, d in lines)


def test_the_self_speculating_dspark_pair_accepts_every_token(output):
    assert accept_lengths(output)[DSPARK] == (5.0, 4)


def test_every_runner_shows_its_stamp_with_the_deciding_tiers_and_its_fusion_decision(output):
    assert output.count("runner 'target'") == output.count("runner 'draft'") == len(demo.PAIRS)
    assert "verify=torch        flag mamba.linear_attn_verify_backend (rules/linear_attn.rules:" in output
    assert "decode=torch        base mamba.linear_attn_backend (rules/linear_attn.rules:" in output
    assert "GDNAttnBackend                prefill=torch decode=torch verify=torch" in output
    assert "layout=unfused      auto model_answer (rules/loader.rules:" in output
    assert f"{FUSION_HOOK}: 'Config does not support fused shared expert(s).'" in output


def test_every_pair_reproduces_the_targets_greedy_output(output):
    assert output.count("speculative output equals the target's greedy output") == len(demo.PAIRS)
    assert output.count("time: prefill ") == len(demo.PAIRS)


def test_without_the_hook_the_parity_check_names_the_draft_and_its_accept_length_collapses():
    text = run("--without-hook", DSPARK, "--pair", DSPARK)
    assert f"removed {FUSION_HOOK} from {DSPARK}" in text
    assert f"draft {DSPARK} lacks {FUSION_HOOK}, which its target DeepseekV4ForCausalLM has" in text
    assert "layout=fused        fused (rules/loader.rules:" in text
    assert "6 missing, 6 unused" in text
    accept, draft_tokens = accept_lengths(text)[DSPARK]
    assert accept < (draft_tokens + 1) / 2, text
    assert hasattr(ARCHS[DSPARK], FUSION_HOOK)  # put back at exit


def test_an_unknown_class_or_pair_is_a_usage_error(capsys):
    assert demo.main(["--without-hook", "NoSuchModel"], out=io.StringIO()) == 2
    assert "no registered entry class 'NoSuchModel'" in capsys.readouterr().err
    assert demo.main(["--pair", "NoSuchDraft"], out=io.StringIO()) == 2


def test_make_demo_runs_the_module_with_its_args():
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    assert re.search(
        r"^demo: install\n\t\$\(BIN\)/python -m stampgen\.kernels\.runtime\.demo \$\(ARGS\)$", makefile, re.M
    )
