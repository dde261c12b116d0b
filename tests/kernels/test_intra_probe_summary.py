"""``benchmarks/gdn_intra_probe.py``'s closing summary, from rows as the probe writes them: the mean over
rounds, the ratio to the tree, whether outputs stayed the tree's, and a failed round's error."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import gdn_intra_probe as probe  # noqa: E402


def _row(case, variant, r, ms, o_rel=0.0, state_rel=0.0):
    return dict(case=case, variant=variant, round=r, prefill_ms=ms, o_rel=o_rel, state_rel=state_rel)


def test_a_line_per_case_and_variant_with_its_mean_ratio_and_sameness():
    rows = [
        _row("16x2048", "tree", 1, 0.50),
        _row("16x2048", "fast", 1, 0.44),
        _row("16x2048", "off", 1, 0.30, o_rel=1e-3),
        _row("16x2048", "tree", 2, 0.30),
        _row("16x2048", "fast", 2, 0.36),
        _row("16x2048", "off", 2, 0.30),
        _row("4x8192", "tree", 1, 0.46),
        _row("4x8192", "fast", 1, 0.46, state_rel=2e-7),
    ]
    lines = probe.summary(rows)
    assert [line.split()[:2] for line in lines] == [
        ["16x2048", "tree"], ["16x2048", "fast"], ["16x2048", "off"], ["4x8192", "tree"], ["4x8192", "fast"]
    ]  # fmt: skip
    # means over the rounds (0.40 and 0.40 and 0.30), ratios to the tree's mean on the same case
    assert "0.4000 ms (2 rounds)  1.000 of the tree  same" in lines[0]
    assert "0.4000 ms (2 rounds)  1.000 of the tree  same" in lines[1]
    assert "0.3000 ms (2 rounds)  0.750 of the tree  differs" in lines[2]  # one round's output differed
    assert lines[4].endswith("1.000 of the tree  differs")  # final states off by a rounding
    assert "0.4600 ms (1 round)  1.000 of the tree  same" in lines[3]


def test_a_failed_round_gives_its_error_and_a_failed_tree_no_ratio():
    rows = [
        dict(case="16x2048", variant="tree", error="RuntimeError: refused"),
        _row("64x512", "tree", 1, 0.55),
        _row("64x512", "broken", 1, 0.50),
        dict(case="64x512", variant="broken", round=2, error="CompilationError: at 3:4"),
    ]
    lines = probe.summary(rows)
    assert lines[0].split()[:2] == ["16x2048", "tree"] and lines[0].endswith("error: RuntimeError: refused")
    assert lines[2].split()[:2] == ["64x512", "broken"]
    assert lines[2].endswith("error: CompilationError: at 3:4")
    # a variant whose tree failed on its case: no ratio to give
    assert "—" in probe.summary([dict(case="c", variant="tree", error="x"), _row("c", "v", 1, 0.2)])[1]
