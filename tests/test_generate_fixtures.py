"""End to end: every construct of the language, generated, linted, type-checked, and its generated tests run.

tests/fixtures/everything.rules uses every construct (open and closed enums, config and facts, two launch
blocks with set/local/forbid/require, auto gates, slots with and without gates, every tier kind with
`when`, validate blocks with and without a stamp, guards, parity); minimal.rules uses almost none;
edges.rules holds the corner cases (blocks that read nothing, a gate that reads nothing, an int slot,
members named like Enum attributes); injection.rules puts hostile text in every string position. Each is generated into a scratch repository
(next to a consumer module and a registry for the guard and parity tests), then:
ruff check and mypy --strict must pass, and the generated tests must pass against the interpreter, none
skipped. injection.rules names a consumer module and a registry that do not exist: its guard and parity
tests must fail, saying which module, since a rule that holds nothing must never pass.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stampgen.codegen.generate import run_generate

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
VENV_BIN = Path(sys.executable).parent
NAMES = ("edges", "everything", "injection", "minimal")

CONSUMERS = '''\
"""The consumers tests/fixtures/everything.rules guards: they read the stamp through the guard only."""

from gen.everything import require_choice


class ConsumerA:
    def __init__(self, runner):
        self.choice = require_choice(runner)


class ConsumerB(ConsumerA):
    pass
'''

REGISTRY = '''\
"""The registry tests/fixtures/everything.rules checks: drafts answer the hooks their targets answer."""


class Hooked:
    @classmethod
    def loader_hook(cls):
        return None

    other_hook = None


class Alpha(Hooked): ...
class AlphaMTP(Hooked): ...
class BetaForCausalLM: ...
class BetaNextN: ...
class GammaForCausalLM(Hooked): ...
class GammaNextN(Hooked): ...
class SharedNextN: ...  # excluded, though its target would be Shared
class Shared(Hooked): ...
class DeltaForCausalLM(Hooked): ...
class DeltaMTP: ...  # lacks its target's hooks: waived in everything.rules
class Edge:  # edges.rules' bare parity: one pair
    hook = None
class EdgeDraft(Edge): ...

MODELS = {cls.__name__: cls for cls in (Alpha, AlphaMTP, BetaForCausalLM, BetaNextN, GammaForCausalLM,
                                         GammaNextN, SharedNextN, Shared, DeltaForCausalLM, DeltaMTP, Edge,
                                         EdgeDraft)}
'''


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fixtures-repo")
    (root / "rules").mkdir()
    for name in NAMES:
        shutil.copy(FIXTURES / f"{name}.rules", root / "rules" / f"{name}.rules")
    (root / "fixture_consumers.py").write_text(CONSUMERS)
    (root / "fixture_registry.py").write_text(REGISTRY)
    cwd = os.getcwd()
    os.chdir(root)
    try:
        out, err = io.StringIO(), io.StringIO()
        status = run_generate([f"rules/{n}.rules" for n in NAMES], "gen", out=out, err=err)
    finally:
        os.chdir(cwd)
    assert status == 0, err.getvalue()
    return root


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture(scope="module")
def stampgen_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A MYPYPATH under which `stampgen` is this checkout: mypy cannot follow the import hook of an
    editable install, so it reads the namespace through a link (stampgen -> the repository root)."""
    folder = tmp_path_factory.mktemp("mypypath")
    (folder / "stampgen").symlink_to(REPO, target_is_directory=True)
    return str(folder)


def _mypy_strict(paths: list[str], cwd: Path, mypypath: str) -> subprocess.CompletedProcess[str]:
    config = str(REPO / "pyproject.toml")  # stampgen.codegen is followed silently (see its overrides)
    cmd = [str(VENV_BIN / "mypy"), "--strict", "--no-incremental", "--cache-dir", os.devnull]
    return _run([*cmd, "--config-file", config, *paths], cwd, MYPYPATH=mypypath)


def test_every_fixture_generates_a_module_and_its_tests(scratch: Path) -> None:
    names = sorted(p.name for p in (scratch / "gen").iterdir())
    assert names == ["MANIFEST.json"] + sorted([f"{n}.py" for n in NAMES] + [f"test_{n}.py" for n in NAMES])


def test_generated_code_passes_ruff_check(scratch: Path) -> None:
    proc = _run(
        [str(VENV_BIN / "ruff"), "check", "--no-cache", "--config", str(REPO / "pyproject.toml"),
         "--config", f"src = [{str(REPO)!r}, {str(scratch)!r}]", "gen"],
        scratch,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("folder", ["scratch", "repository"])
def test_a_users_ruff_with_default_settings_leaves_generated_files_alone(scratch: Path, folder: str) -> None:
    cwd, target = (scratch, "gen") if folder == "scratch" else (REPO, "generated")
    ruff = str(VENV_BIN / "ruff")
    for command in (["format", "--check"], ["check"]):
        proc = _run([ruff, *command, "--isolated", "--no-cache", target], cwd)
        assert proc.returncode == 0, f"ruff {' '.join(command)}: " + proc.stdout + proc.stderr


def test_generated_modules_and_their_tests_pass_mypy_strict(scratch: Path, stampgen_path: str) -> None:
    proc = _mypy_strict(["-p", "gen"], scratch, stampgen_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checked = int(proc.stdout.split(" source file")[0].rsplit(" ", 1)[1])
    assert checked >= 2 * len(NAMES), proc.stdout  # every module and its tests


def test_the_repository_module_and_its_tests_pass_mypy_strict_and_ruff(stampgen_path: str) -> None:
    proc = _mypy_strict(["-p", "stampgen.generated"], REPO, stampgen_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = sorted(p.name for p in (REPO / "generated").glob("*.py"))
    assert len(files) >= 3 and "__init__.py" in files, files  # __init__, a module and its tests
    assert f"{len(files)} source files" in proc.stdout, (files, proc.stdout)
    proc = _run([str(VENV_BIN / "ruff"), "check", "--no-cache", "generated"], REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# injection.rules' guard and parity name modules that do not exist: their tests fail (see below)
EXPECTED_FAILURES = (
    "gen/test_injection.py::test_p_parity_holds_over_the_registry",
    "gen/test_injection.py::test_a_guarded_consumer_on_an_unstamped_runner_fails_closed[Consumer]",
)


def _generated_tests(scratch: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return _run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-p", "no:randomly",
         "--rootdir", str(scratch), *argv],
        scratch,
    )  # fmt: skip


@pytest.mark.slow
def test_the_generated_tests_of_every_fixture_pass(scratch: Path) -> None:
    proc = _generated_tests(scratch, "gen", *(f"--deselect={test}" for test in EXPECTED_FAILURES))
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    # every fixture has its consumers and registry here, or none: nothing may skip
    skipped = [line for line in proc.stdout.splitlines() if line.startswith("SKIPPED")]
    assert not skipped, skipped


@pytest.mark.slow
def test_the_generated_tests_of_a_rule_naming_missing_modules_fail_saying_which(scratch: Path) -> None:
    proc = _generated_tests(scratch, *EXPECTED_FAILURES)
    assert proc.returncode == 1, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert "2 failed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-3000:]
    assert "the module fixture_missing_module does not import (ModuleNotFoundError" in proc.stdout
    assert "the module fixture_missing_registry does not import (ModuleNotFoundError" in proc.stdout
