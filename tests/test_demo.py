"""`make demo` (python -m stampgen.kernels.runtime.demo): what it prints, per runner and per pair."""

from __future__ import annotations

import io
import re
import shlex
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


QWEN3_NEXT_MTP = "Qwen3NextForCausalLMMTP"
BAD_ARGS = [
    (
        ["--prompt-lengths", "4,x"],
        "--prompt-lengths: comma-separated prompt lengths, each not a whole number",
    ),
    (
        ["--prompt-lengths", "4,0"],
        "--prompt-lengths: comma-separated prompt lengths, each must be at least 1",
    ),
    (["--draft-tokens", "0"], "--draft-tokens: must be at least 1, got 0"),
    (["--new-tokens", "-3"], "--new-tokens: must be at least 1, got -3"),
    (["--warmup", "-1"], "--warmup: must be at least 0, got -1"),
    (["--device", "gpu0"], "--device: not a device: 'gpu0'"),
    # refused by the rules, the loader or the kernels once the runners are built
    (
        ["--backend", "flashinfer"],
        "RuleViolationError: cutedsl and flashinfer GDN kernels need a CUDA device",
    ),
    (["--decode-backend", "helion"], "RuleViolationError: helion has kernels for KDA only, not GDN"),
    (
        ["--without-hook", QWEN3_NEXT_MTP],
        f"LoaderError: runner 'draft': {QWEN3_NEXT_MTP} cannot be built in the fused layout",
    ),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ARGS, ids=[" ".join(a) for a, _ in BAD_ARGS])
def test_bad_arguments_get_one_clear_line_and_exit_2_never_a_traceback(capsys, argv, message):
    try:
        code = demo.main([*FAST, "--pair", QWEN3_NEXT_MTP, *argv], out=io.StringIO())
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err, err
    assert hasattr(ARCHS[QWEN3_NEXT_MTP], FUSION_HOOK)  # put back after a refused run too


def test_a_gpu_the_rules_do_not_describe_is_a_clear_error_not_a_traceback(monkeypatch, capsys):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a Turing card: SM 7.5, CUDA 12
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setattr(torch.version, "hip", None, raising=False)
    assert demo.main([*FAST, "--device", "cuda"], out=io.StringIO()) == 2
    err = capsys.readouterr().err
    assert "MachineNotDescribedError: cuda: launch.sm (rules/linear_attn.rules:" in err, err
    assert "7 is not one of" in err and "Traceback" not in err


def test_every_pair_says_what_its_accept_length_should_be_and_why(output):
    assert output.count("expected about 1: the draft's MTP layer has seeded random weights") == 3
    assert "expected D + 1 = 5: self-speculating, the draft holds the target's weights" in output


def test_the_lightning_pair_runs_its_target_through_the_lightning_consumer(output):
    assert "== process 4: BailingMoeV2_5ForCausalLM + BailingMoeForCausalLMNextN" in output
    assert "runner 'target': BailingMoeV2_5ForCausalLM (target, family lightning)" in output
    assert "LightningAttentionBackend     prefill=torch decode=torch verify=torch" in output
    accept, draft_tokens = accept_lengths(output)["BailingMoeForCausalLMNextN"]
    assert 1.0 <= accept <= draft_tokens + 1


def test_the_lightning_kernel_is_the_backend_when_lightning_has_it_else_triton():
    assert demo.lightning_kernel_backend("torch") == "torch"
    assert demo.lightning_kernel_backend("triton") == "triton"
    assert demo.lightning_kernel_backend("flashinfer") == "triton"


def test_make_demo_runs_the_module_with_its_args():
    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text(encoding="utf-8")
    assert re.search(
        r"^demo: install\n\t\$\(BIN\)/python -m stampgen\.kernels\.runtime\.demo \$\(ARGS\)$", makefile, re.M
    )


REPO = Path(__file__).resolve().parents[1]
DOCUMENTED = [
    (page, args)
    for page in ("README.md", "docs/runtime.md")
    for args in re.findall(r'^make demo(?: ARGS="([^"]*)")?', (REPO / page).read_text(encoding="utf-8"), re.M)
]


def test_the_readme_and_the_runtime_page_show_make_demo():
    assert {page for page, _ in DOCUMENTED} == {"README.md", "docs/runtime.md"}
    assert ("README.md", "") in DOCUMENTED


@pytest.mark.parametrize(("page", "args"), DOCUMENTED, ids=[f"{p}: {a}" for p, a in DOCUMENTED])
def test_every_documented_make_demo_command_is_one_the_demo_takes(page, args):
    argv = shlex.split(args)
    if argv == ["--help"]:
        with pytest.raises(SystemExit) as exited:
            demo._parser().parse_args(argv)
        assert exited.value.code == 0
        return
    parsed = demo._parser().parse_args(argv)  # a usage error exits here, failing the test
    for name in parsed.without_hook:
        assert FUSION_HOOK in vars(ARCHS[name]), f"{page}: {name} has no hook of its own to remove"
