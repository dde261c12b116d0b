"""``benchmarks/gdn_fused_timeline.py`` reads the fused pass's stamp buffer (``chunk_gluon_fused._stamp``'s
layout) into each program's items and sums them up: checked here on a buffer written by hand."""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks import gdn_fused_timeline as timeline  # noqa: E402


def _buffer(programs: list[list[tuple]]) -> torch.Tensor:
    """A stamp buffer with, for each program, items (item, state start, state end, worker start, worker
    end, chunks, and on the state warpgroups: the first step's products issued, the first and last steps'
    ends, the last rows stored) on SM 7 + its index; -1 elsewhere, as the tool allocates it."""
    stamps = torch.full((4, 3, timeline.chunk_gluon_fused.STAMP_FIELDS.value, 2), -1, dtype=torch.int64)
    for pid, items in enumerate(programs):
        done = 0
        for m, (item, s0, s1, w0, w1, chunks, (loaded, f, z, stored)) in enumerate(items):
            done += chunks
            stamps[pid, m, timeline.STATE_START] = torch.tensor([s0, item])
            stamps[pid, m, timeline.STATE_END] = torch.tensor([s1, done])
            stamps[pid, m, timeline.WORKER_START] = torch.tensor([w0, item])
            stamps[pid, m, timeline.WORKER_END] = torch.tensor([w1, done])
            stamps[pid, m, timeline.SM] = torch.tensor([7 + pid, 0])
            stamps[pid, m, timeline.STATE_FIRST] = torch.tensor([f, done - chunks])
            stamps[pid, m, timeline.STATE_LAST] = torch.tensor([z, done - 1])
            stamps[pid, m, timeline.STATE_LOADED] = torch.tensor([loaded, done - chunks])
            stamps[pid, m, timeline.STATE_STORED] = torch.tensor([stored, done - 1])
    return stamps


def test_items_chunks_and_the_gaps_between_items_come_from_the_stamps():
    # program 0: two items of 32 chunks (the second starting 5 µs / 2 µs after the first's end on the
    # state / worker side); program 1: one item of 16 chunks, then a padding item (no chunk) starting
    # 1 µs after it on either side; program 2: nothing stamped. The state's
    # initial states are in 1 / 2 / 3 µs after their items' starts, their first steps end 8 / 9 / 6 µs
    # after, their last steps 2 / 3 / 4 µs before their ends, and their last rows are stored 1 / 2 / 1 µs
    # after their last steps' ends
    stamps = _buffer(
        [
            [
                (0, 1_000, 101_000, 1_000, 99_000, 32, (2_000, 9_000, 99_000, 100_000)),
                (5, 106_000, 206_000, 101_000, 200_000, 32, (108_000, 115_000, 203_000, 205_000)),
            ],
            [
                (1, 2_000, 52_000, 2_000, 51_000, 16, (5_000, 8_000, 48_000, 49_000)),
                # a padding item: stamped at its start and end, no chunk
                (6, 53_000, 54_000, 52_000, 52_500, 0, (-1, -1, -1, -1)),
            ],
        ]
    )
    rows = timeline.programs(stamps)
    assert [row["program"] for row in rows] == [0, 1] and [row["sm"] for row in rows] == [7, 8]
    assert [(i["item"], i["chunks"]) for i in rows[0]["items"]] == [(0, 32), (5, 32)]
    assert [i["chunks"] for i in rows[1]["items"]] == [16, 0]
    s = timeline.summary(rows)
    assert s["programs"] == 2 and s["items"] == 4
    assert s["span_us"] == pytest.approx(205.0)  # first state start 1 µs, last end 206 µs
    # gaps: state 5 (program 0), 1 (program 1); worker 2, 1
    assert s["state_gap_us"] == pytest.approx((3.0, 5.0)) and s["worker_gap_us"] == pytest.approx((1.5, 2.0))
    # median of 100, 100, 50: the padding item's 1 µs would make it 75
    assert s["state_item_us"] == pytest.approx(100.0)
    assert s["worker_item_us"] == pytest.approx(98.0)  # of 98, 99, 49 (not 0.5)
    assert s["worker_chunk_us"] == pytest.approx(98 / 32)  # median of 98/32, 99/32, 49/16
    # medians of (1, 2, 3), (7, 7, 3), (90/31, 88/31, 40/15), (1, 2, 1) and (1, 1, 3)
    assert s["state_parts_us"] == pytest.approx([2.0, 7.0, 88 / 31, 1.0, 1.0])


@pytest.mark.parametrize(
    "items", [[], [[(3, 1_000, 1_500, 1_000, 1_400, 0, (-1, -1, -1, -1))]]], ids=["none", "no-chunk"]
)
def test_a_buffer_with_no_item_that_ran_a_chunk_is_refused_rather_than_summed_to_nothing(items):
    # (a padding item is stamped at its start and end but runs no chunk: no time a chunk to take from it)
    with pytest.raises(ValueError, match="stamped no item that ran a chunk"):
        timeline.summary(timeline.programs(_buffer(items)))
