"""The one place tests touch the snapshot library (snapshottest), so it can be swapped for another.

A snapshot is one plain-text file, `tests/snapshots/<group>/<name>.snap`, holding exactly the text under
test: a generated module's snapshot reads as the module itself, and a template change shows in review as
an ordinary diff of each output it really changes. A group (a folder) belongs to one test call, which
compares all of its files at once and fails, listing every problem, when a snapshot

- is missing: it is never written silently, so CI never passes on a snapshot nobody reviewed;
- differs from the text under test (the message carries a unified diff, snapshot → this run);
- is stale: a file of the group that the test no longer produces.

`pytest --snapshot-update` (snapshottest's flag) writes the missing and differing snapshots and removes the
stale ones instead; review `git diff tests/snapshots/` before committing. A run of a subset of the tests
(`-k`) updates only the groups of the tests it runs.

snapshottest provides the `snapshot` fixture, the `--snapshot-update` flag and the run's summary line
("N snapshots passed"). Its own file snapshots (`snapshottest.file.FileSnapshot`, 1.0.0a1) do not fit: they
name each file after the test id (`test_x[edges] edges.py.py`, which pytest would collect), keep an index
module beside the files, leave the file on disk when a snapshot goes stale, and report a mismatch without
a diff.
"""

from __future__ import annotations

import difflib
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from snapshottest.pytest import PyTestSnapshotTest  # type: ignore[import-untyped]

SUFFIX = ".snap"  # never .py: pytest would collect a snapshot of a generated test module
DIFF_LINES = 200  # per file in a failure message; the whole diff is `git diff` after an update


def assert_match_files(snapshot: PyTestSnapshotTest, group: str, files: Mapping[str, str]) -> None:
    """Each of `files` (name → text) equals `tests/snapshots/<group>/<name>.snap`, and the group holds no
    other file (pass the `snapshot` fixture; `group` is a relative folder, e.g. "generated/edges")."""
    folder = _snapshot_root(snapshot) / group
    expected = {f"{name}{SUFFIX}": text for name, text in files.items()}
    for name in expected:
        if "/" in name or "\\" in name or name.startswith("."):
            raise ValueError(f"snapshot name {name!r} must be a plain file name")
    problems: list[str] = []
    diffs: list[str] = []
    for name, text in sorted(expected.items()):
        path = folder / name
        key = _key(snapshot, path)
        snapshot.module.visit(key)  # counted in snapshottest's summary of the run
        stored = path.read_bytes().decode("utf-8") if path.is_file() else None
        if stored == text:
            continue
        if snapshot.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
            snapshot.module.new_snapshots.add(key)
            continue
        snapshot.module.mark_failed(key)
        if stored is None:
            problems.append(f"missing {key} (no snapshot recorded yet)")
        else:
            problems.append(f"differs {key}")
            diffs.append(_diff(stored, text, key, name.removesuffix(SUFFIX)))
    for path in _stale(folder, expected):
        if snapshot.update:
            _remove(path)
        else:
            problems.append(f"stale   {_key(snapshot, path)} (the test no longer produces it)")
    if snapshot.update and folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    _fail_if(snapshot, problems, diffs)


def assert_only_groups(snapshot: PyTestSnapshotTest, parent: str, groups: Iterable[str]) -> None:
    """`tests/snapshots/<parent>/` holds a folder for each of `groups` at most: any other entry is stale
    (e.g. the snapshots of a fixture that was removed) and fails, or is removed by `--snapshot-update`."""
    folder = _snapshot_root(snapshot) / parent
    problems = []
    for path in _stale(folder, set(groups)):
        if snapshot.update:
            _remove(path)
        else:
            problems.append(f"stale   {_key(snapshot, path)} (no test produces it any more)")
    _fail_if(snapshot, problems, [])


def _snapshot_root(snapshot: PyTestSnapshotTest) -> Path:
    return Path(snapshot.module.snapshot_dir)  # snapshottest's folder: tests/snapshots beside the test


def _key(snapshot: PyTestSnapshotTest, path: Path) -> str:
    """The path as a reviewer sees it: relative to the repository (pytest's rootdir)."""
    root = Path(snapshot.request.config.rootpath)
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


def _stale(folder: Path, wanted: Iterable[str]) -> list[Path]:
    if not folder.is_dir():
        return []
    keep = set(wanted)
    return sorted(path for path in folder.iterdir() if path.name not in keep)


def _remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()


def _diff(stored: str, text: str, key: str, name: str) -> str:
    lines = list(
        difflib.unified_diff(
            stored.splitlines(keepends=True), text.splitlines(keepends=True), key, f"{name} (this run)"
        )
    )
    shown = "".join(line if line.endswith("\n") else line + "\n" for line in lines[:DIFF_LINES])
    if len(lines) > DIFF_LINES:
        shown += f"... {len(lines) - DIFF_LINES} more diff lines\n"
    return shown


def _fail_if(snapshot: PyTestSnapshotTest, problems: list[str], diffs: list[str]) -> None:
    if not problems:
        return
    test_file = _key(snapshot, Path(snapshot.request.node.path))
    pytest.fail(
        "\n".join(
            [
                "snapshots do not match:",
                *(f"  {problem}" for problem in problems),
                f"Record them with `pytest {test_file} --snapshot-update`, then review "
                "`git diff tests/snapshots/` before committing.",
                "",
                *diffs,
            ]
        ),
        pytrace=False,
    )
