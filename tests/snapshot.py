"""The one place tests touch the snapshot library (snapshottest), so it can be swapped for another.

Snapshots live in tests/snapshots/snap_<test module>.py. A missing snapshot fails the test instead of being
written silently (snapshottest's default), so CI never passes on a snapshot nobody reviewed: record or
update them with `pytest --snapshot-update` and review the diff of tests/snapshots/.
"""

from __future__ import annotations

from typing import Any

import pytest


def assert_match(snapshot: Any, value: str, name: str) -> None:
    """`value` equals the snapshot `name` of the current test (pass the `snapshot` fixture)."""
    snapshot.curr_snapshot = name  # what snapshottest keys the snapshot by, with the test's name
    if not snapshot.update and snapshot.test_name not in snapshot.module.snapshots:
        pytest.fail(
            f"no snapshot {name!r} for this test yet; run `pytest --snapshot-update` and review "
            "tests/snapshots/ before committing",
            pytrace=False,
        )
    snapshot.assert_match(value, name)
