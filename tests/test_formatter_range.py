"""The formatter contract: the output is byte-identical at both ends of the supported ruff range.

`generate` formats with any ruff in generate.RUFF_RANGE (the range pyproject.toml requires), and the
manifest's fingerprint names the range, not the version; both are honest only if every version in the
range formats the generated code alike. The low end is the venv's ruff; the high end, the newest release
in the range, is downloaded once with `pip download` and cached next to the venv, then handed to
`generate` through STAMPGEN_RUFF. Without it the test fails: an invariant checked over nothing must not pass.
"""

from __future__ import annotations

import importlib.metadata
import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from stampgen.codegen import generate
from stampgen.codegen.generate import run_generate

REPO = Path(__file__).resolve().parents[1]
RULES = sorted([REPO / "rules" / "linear_attn.rules", *(REPO / "tests" / "fixtures").glob("*.rules")])
LOWEST = generate.RUFF_RANGE[0].removeprefix(">=")
NEWEST = "0.17.6"  # the newest ruff release in RUFF_RANGE: raise it when ruff publishes another 0.17.x


def _cache_dir() -> Path:
    """A folder that outlives one test run: inside the venv when there is one, else the temp folder."""
    in_venv = sys.prefix != sys.base_prefix
    return Path(sys.prefix if in_venv else tempfile.gettempdir()) / f".ruff-{NEWEST}"


def _version_of(exe: Path) -> str:
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    return proc.stdout.strip()


@pytest.fixture(scope="session")
def newest_ruff() -> Path:
    """The ruff executable of release NEWEST, taken out of its wheel."""
    cache = _cache_dir()
    exe = cache / "ruff"
    if exe.is_file() and _version_of(exe) == f"ruff {NEWEST}":
        return exe
    cache.mkdir(parents=True, exist_ok=True)
    download = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    proc = subprocess.run(
        [*download, f"ruff=={NEWEST}", "-d", str(cache)], capture_output=True, text=True, timeout=600
    )
    wheels = sorted(cache.glob(f"ruff-{NEWEST}-*.whl"))
    if proc.returncode != 0 or not wheels:
        pytest.fail(
            f"could not download ruff=={NEWEST} (the high end of the supported range) into {cache}; "
            f"this test needs it to hold the formatter contract:\n{proc.stdout}{proc.stderr}"
        )
    member = f"ruff-{NEWEST}.data/scripts/ruff"
    with zipfile.ZipFile(wheels[-1]) as wheel:
        if member not in wheel.namelist():
            pytest.fail(f"{wheels[-1]} holds no {member}: not a wheel for this platform?")
        # extracted next to its final place, then renamed: a concurrent run never sees half a binary
        fd, partial = tempfile.mkstemp(dir=cache, prefix=".ruff-")
        with os.fdopen(fd, "wb") as f:
            f.write(wheel.read(member))
    os.chmod(partial, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    os.replace(partial, exe)
    assert _version_of(exe) == f"ruff {NEWEST}", f"{exe} is not ruff {NEWEST}"
    return exe


def _generate_with(root: Path, ruff: Path | None, monkeypatch: pytest.MonkeyPatch) -> dict[str, bytes]:
    """Every file `stampgen generate` writes for RULES in a fresh project at `root`, formatted by `ruff`
    (None: the venv's)."""
    (root / "rules").mkdir(parents=True)
    for path in RULES:
        shutil.copy(path, root / "rules" / path.name)
    with monkeypatch.context() as patch:
        patch.chdir(root)
        if ruff is None:
            patch.delenv(generate.RUFF_ENV, raising=False)
        else:
            patch.setenv(generate.RUFF_ENV, str(ruff))
        assert generate.find_formatter().version == (LOWEST if ruff is None else NEWEST)
        out, err = io.StringIO(), io.StringIO()
        status = run_generate([], out=out, err=err)
    assert status == 0, err.getvalue()
    return {p.name: p.read_bytes() for p in sorted((root / "generated").iterdir())}


def test_the_development_environment_holds_the_low_end_of_the_range() -> None:
    installed = importlib.metadata.version("ruff")
    assert installed == LOWEST, (
        f"the venv holds ruff {installed}; the formatter-range test needs the low end of "
        f"{generate.RUFF_REQUIREMENT}, ruff=={LOWEST} (pip install ruff=={LOWEST})"
    )


def test_the_newest_ruff_tested_lies_in_the_range() -> None:
    assert generate.in_ruff_range(NEWEST), f"NEWEST = {NEWEST} is outside {generate.RUFF_REQUIREMENT}"


def test_the_output_is_byte_identical_at_both_ends_of_the_range(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, newest_ruff: Path
) -> None:
    lowest = _generate_with(tmp_path / "lowest", None, monkeypatch)
    newest = _generate_with(tmp_path / "newest", newest_ruff, monkeypatch)
    assert len(lowest) == 1 + 2 * len(RULES), sorted(lowest)  # every module, its tests, the manifest
    differ = sorted(name for name in lowest if lowest[name] != newest.get(name))
    assert not differ and lowest.keys() == newest.keys(), (
        f"ruff {LOWEST} and ruff {NEWEST} format {differ} differently: narrow RUFF_RANGE (and pyproject.toml)"
    )
