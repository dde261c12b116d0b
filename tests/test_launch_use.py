"""`use STAMP.FIELD` in a launch block: the launch checks read the stamp's own chains, so editing the stamp
changes what launch checks — in the interpreter and in the generated code alike."""

from __future__ import annotations

import importlib.util
import io
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from stampgen.codegen import interpreter
from stampgen.codegen.generate import run_generate
from stampgen.codegen.load import load_text

REPO = Path(__file__).resolve().parents[1]
SHIPPED = (REPO / "rules" / "linear_attn.rules").read_text(encoding="utf-8")
FOLLOWS = "verify = flag mamba.linear_attn_verify_backend > follow decode when decode == flashinfer > triton"
ALWAYS_TRITON = "verify = flag mamba.linear_attn_verify_backend > triton"

# ReplaySSM speculative decoding with a FlashInfer decode: verify must be triton or nv_cutedsl.
CONFIG = {
    "mamba.linear_attn_decode_backend": "flashinfer",
    "mamba.enable_linear_replayssm_spec": True,
    "server.speculative_algorithm": "dspark",
    "server.speculative_topk": 1,
    "launch.sm": 9,
    "launch.cuda": 13,
    "launch.kimi_k3": False,
}
MESSAGE = "--enable-linear-replayssm-spec needs a triton or nv_cutedsl verify backend"


def _model(text: str):
    loaded = load_text(text, "rules/linear_attn.rules")
    assert loaded.ok, [str(d.message) for d in loaded.diagnostics]
    return loaded.model


def test_the_shipped_stamp_holds_the_only_copy_of_the_verify_chain() -> None:
    assert SHIPPED.count(FOLLOWS) == 1
    assert "use LinearAttnBackends.decode, LinearAttnBackends.verify" in SHIPPED


@pytest.mark.parametrize(("chain", "violated"), [(FOLLOWS, True), (ALWAYS_TRITON, False)])
def test_the_launch_checks_follow_the_stamps_verify(chain: str, violated: bool) -> None:
    model = _model(SHIPPED.replace(FOLLOWS, chain))
    env = interpreter.config_env(model, CONFIG)
    _, outcomes, violations = interpreter.run_launch(model, env)
    verify = next(o for o in outcomes if o.kind == "local" and o.text == "verify")
    assert verify.reason == ("= flashinfer" if violated else "= triton")
    assert [v.message for v in violations] == ([MESSAGE] if violated else [])


def _generated(root: Path, text: str):
    (root / "rules").mkdir(parents=True)
    (root / "rules" / "linear_attn.rules").write_text(text, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        err = io.StringIO()
        assert run_generate([], None, out=io.StringIO(), err=err) == 0, err.getvalue()
    finally:
        os.chdir(cwd)
    spec = importlib.util.spec_from_file_location(f"la_{root.name}", root / "generated" / "linear_attn.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_launch_follows_the_stamps_verify_too(tmp_path: Path) -> None:
    follows = _generated(tmp_path / "follows", SHIPPED)
    triton = _generated(tmp_path / "triton", SHIPPED.replace(FOLLOWS, ALWAYS_TRITON))
    namespaces: dict[str, dict] = {"mamba": {}, "server": {}, "launch": {}}
    for name, value in CONFIG.items():
        namespace, _, leaf = name.partition(".")
        namespaces[namespace][leaf] = value
    model = _model(SHIPPED)
    for namespace in ("mamba", "server"):
        for leaf in model.leaves_of(namespace):
            namespaces[namespace].setdefault(leaf.name, None)

    def run(module):
        facts = module.LaunchFacts(**namespaces["launch"])
        return module.normalize_linear_attn(
            SimpleNamespace(**namespaces["mamba"]), SimpleNamespace(**namespaces["server"]), facts
        )

    with pytest.raises(follows.RuleViolationError, match="verify backend"):
        run(follows)
    assert set(run(triton)) <= {"mamba"}  # it normalises (ssm_dtype), and raises nothing
