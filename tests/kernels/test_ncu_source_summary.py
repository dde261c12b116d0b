"""``benchmarks/ncu_source_summary.py`` reads Nsight Compute's per-instruction CSV page right."""

import importlib.util
import re
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[2] / "benchmarks" / "ncu_source_summary.py"
spec = importlib.util.spec_from_file_location("ncu_source_summary", TOOL)
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)

HEADER = (
    '"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
    '"stall_long_sb","stall_barrier","stall_long_sb (Not Issued)"'
)
PAGE = "\n".join(
    [
        '"Kernel Name","_gdn_chunk_state_kernel",',
        HEADER,
        '"0x10","      LDG.E.128 R4, desc[UR4][R2.64]","10","1,000","8","2","8"',
        '"0x20","@!P3  LDG.E.128 R8, desc[UR4][R6.64]","30","500","30","0","30"',
        '"0x30","      WARPGROUP.DEPBAR.LE gsb0, 0x0","60","250","0","60","0"',
    ]
)


def test_samples_are_summed_by_reason_and_by_opcode_with_predicates_stripped(tmp_path):
    page = tmp_path / "state.csv"
    page.write_text(PAGE)
    kernel, rows = tool.read_page(page)
    assert kernel == "_gdn_chunk_state_kernel" and len(rows) == 3
    text = tool.summarize(kernel, rows, top=2)
    assert "3 SASS instructions, 100 stall samples" in text
    assert re.search(r"long_sb\s+38\.0\n", text) and re.search(r"barrier\s+62\.0\n", text)
    # The predicated load counts as an LDG: 40% of the samples, 1500 warp-instructions executed.
    assert re.search(r"LDG\s+40\.0\s+1500\n", text)
    assert "(Not Issued)" not in text
    top = text.splitlines()[-2:]
    assert "WARPGROUP.DEPBAR" in top[0] and "barrier 60.0" in top[0]
    assert "LDG.E.128 R8" in top[1]


def test_a_csv_that_is_not_the_source_page_is_refused(tmp_path, capsys):
    other = tmp_path / "details.csv"
    other.write_text('"ID","Kernel Name","Metric Name"\n"0","k","Duration"\n')
    with pytest.raises(SystemExit) as done:
        tool.main([str(other)])
    assert done.value.code == 2
    assert "not an ncu --page source --csv output" in capsys.readouterr().err


LISTING = "0x0\tLDG.E.128\tchunk.py:10\n0x10\tLDG.E.128\tchunk.py:11\n0x20\tWARPGROUP.DEPBAR\tchunk.py:11\n"


def _rows(tmp_path):
    page = tmp_path / "state.csv"
    page.write_text(PAGE)
    return tool.read_page(page)[1]


def test_samples_are_joined_to_the_listings_source_lines_over_a_span(tmp_path):
    listing = tmp_path / "k.lines"
    listing.write_text(LISTING)
    rows, lines = _rows(tmp_path), tool.read_listing(listing)
    text = tool.by_line(rows, lines, range(0, 3))
    # line 11 holds the second load (30) and the wgmma wait (60) of 100 samples
    assert re.search(r"90\.0\s+chunk\.py:11\s+barrier 67%, long_sb 33%", text)
    assert re.search(r"10\.0\s+chunk\.py:10\s+long_sb 80%, barrier 20%", text)
    # over the last two instructions alone, line 11 is all of them
    assert re.search(r"100\.0\s+chunk\.py:11", tool.by_line(rows, lines, range(1, 3)))


def test_a_listing_of_another_binary_is_refused_not_joined(tmp_path):
    listing = tmp_path / "k.lines"
    listing.write_text(LISTING.replace("WARPGROUP.DEPBAR", "HGMMA.64x64x16.F32.BF16"))
    with pytest.raises(ValueError, match="instruction 2 differs"):
        tool.by_line(_rows(tmp_path), tool.read_listing(listing), range(0, 3))
    with pytest.raises(ValueError, match="past the page"):
        tool.by_line(_rows(tmp_path), tool.read_listing(listing), range(0, 4))


@pytest.mark.parametrize(
    "args,message",
    [(["--span", "0:2"], "--span needs --listing"), (["--listing", "k.lines", "--span", "3:1"], "A < B")],
    ids=["span-without-listing", "empty-span"],
)
def test_bad_listing_arguments_are_usage_errors(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "state.csv").write_text(PAGE)
    (tmp_path / "k.lines").write_text(LISTING)
    with pytest.raises(SystemExit) as done:
        tool.main(["state.csv", *args])
    assert done.value.code == 2
    assert message in capsys.readouterr().err
