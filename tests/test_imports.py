"""`import "other.rules"`: files share a vocabulary (enums, config and facts blocks) with one source of
truth; what the import brings in is checked where it is declared, and used as if declared here."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from stampgen.codegen.generate import run_generate
from stampgen.codegen.load import load

REPO = Path(__file__).resolve().parents[1]

COMMON = """\
# the shared vocabulary
enum Backend open(custom) { triton flashinfer custom }
config mamba {
    backend: Backend = triton
    decode_backend: Backend?
}
facts runner { sm: int in {0, 9, 10} }
"""

GDN = """\
import "common.rules"

auto hopper: Backend = flashinfer when runner.sm == 9

stamp Backends on runner.backends {
    slot default: Backend from hopper
    decode = flag mamba.decode_backend > auto default > base mamba.backend
}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "common.rules").write_text(COMMON, encoding="utf-8")
    (tmp_path / "rules" / "gdn.rules").write_text(GDN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def codes(path: str) -> list[str]:
    return [d.code for d in load(path).diagnostics]


def test_an_importing_file_reads_the_imported_vocabulary_with_its_positions(project: Path) -> None:
    loaded = load("rules/gdn.rules")
    assert loaded.ok, [d.message for d in loaded.diagnostics]
    leaf = loaded.model.leaves["mamba.backend"]
    assert (leaf.loc.path, leaf.loc.line) == ("rules/common.rules", 4)
    assert loaded.model.enums["Backend"].open_member == "custom"


def test_a_vocabulary_file_warns_of_no_unread_leaf(project: Path) -> None:
    assert codes("rules/common.rules") == []


def test_an_import_cycle_is_an_error_naming_the_chain(project: Path) -> None:
    (project / "rules" / "a.rules").write_text('import "b.rules"\nenum A { x }\n', encoding="utf-8")
    (project / "rules" / "b.rules").write_text('import "a.rules"\nenum B { y }\n', encoding="utf-8")
    loaded = load("rules/a.rules")
    assert [d.code for d in loaded.diagnostics] == ["import-cycle"]
    assert loaded.diagnostics[0].message == "import cycle: a.rules -> b.rules -> a.rules"
    assert (loaded.diagnostics[0].loc.line, loaded.diagnostics[0].loc.col) == (1, 8)


@pytest.mark.parametrize(
    ("line", "code"),
    [
        ('import "missing.rules"', "import-not-found"),
        ('import "../elsewhere/common.rules"', "import-not-sibling"),
        ('import "common.txt"', "import-not-rules"),
    ],
)
def test_an_import_that_cannot_be_resolved_is_an_error_at_its_path(
    project: Path, line: str, code: str
) -> None:
    (project / "rules" / "x.rules").write_text(f"{line}\nenum X {{ a }}\n", encoding="utf-8")
    assert codes("rules/x.rules") == [code]


def test_an_imported_file_with_errors_is_one_error_at_the_import_with_its_first_as_a_note(
    project: Path,
) -> None:
    (project / "rules" / "common.rules").write_text(COMMON.replace("Backend = triton", "Backend = tritn"))
    loaded = load("rules/gdn.rules")
    assert [d.code for d in loaded.diagnostics] == ["import-has-errors"]
    (note,) = loaded.diagnostics[0].notes
    assert note.loc.path == "rules/common.rules" and "tritn" in note.message


def test_redeclaring_an_imported_name_is_a_duplicate_with_the_first_declaration_as_a_note(
    project: Path,
) -> None:
    (project / "rules" / "gdn.rules").write_text(GDN + "enum Backend { triton }\n", encoding="utf-8")
    loaded = load("rules/gdn.rules")
    assert "duplicate-declaration" in [d.code for d in loaded.diagnostics]
    dup = next(d for d in loaded.diagnostics if d.code == "duplicate-declaration")
    assert dup.notes[0].loc.path == "rules/common.rules"


def test_a_diff_reads_an_imported_file_at_the_same_revision(project: Path, stampgen) -> None:
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for argv in (["init", "-q", "-b", "main"], ["add", "rules"], ["commit", "-q", "-m", "rules"]):
        subprocess.run([*git, *argv], cwd=project, check=True, capture_output=True)
    # a default changed in the imported file changes what the importing file's stamp decides
    (project / "rules" / "common.rules").write_text(
        COMMON.replace("Backend = triton", "Backend = flashinfer")
    )
    status, out, err = stampgen("diff", "HEAD")
    assert status == 1, err
    assert "Backends.decode" in out, out


# a file that imports another one: the stamp reads an enum of common.rules through it, and its own enum
MORE = """\
import "common.rules"
enum Pool { fp32 bf16 }
config pool { dtype: Pool = fp32 }
"""

GDN_OF_TWO = (
    GDN.replace('import "common.rules"', 'import "common.rules"\nimport "more.rules"')
    + """
stamp PoolChoice on runner.pool_choice {
    dtype = base pool.dtype
}
"""
)


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(cwd), "PYTHONDONTWRITEBYTECODE": "1", **env}
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)


@pytest.fixture
def generated(project: Path) -> Path:
    (project / "rules" / "more.rules").write_text(MORE, encoding="utf-8")
    (project / "rules" / "gdn.rules").write_text(GDN_OF_TWO, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    status = run_generate([f"rules/{n}.rules" for n in ("common", "more", "gdn")], "gen", out=out, err=err)
    assert status == 0, err.getvalue()
    (project / "gen" / "__init__.py").write_text("", encoding="utf-8")
    return project


def test_an_importing_module_takes_the_vocabulary_from_the_modules_that_declare_it(generated: Path) -> None:
    gdn = (generated / "gen" / "gdn.py").read_text(encoding="utf-8")
    # each name from the module that declares it, none declared again
    assert "from .common import Backend, RunnerFacts, _as_backend\n" in gdn
    assert "from .more import Pool, _as_pool\n" in gdn
    assert "class Backend(" not in gdn and "class RunnerFacts(" not in gdn and "class Pool(" not in gdn

    def forget_gen() -> None:  # another test may have imported a package named gen from elsewhere
        for name in [m for m in sys.modules if m == "gen" or m.startswith("gen.")]:
            del sys.modules[name]

    forget_gen()
    importlib.invalidate_caches()
    sys.path.insert(0, str(generated))
    try:
        common, module = importlib.import_module("gen.common"), importlib.import_module("gen.gdn")
        assert module.Backend is common.Backend  # one enum: a member from either module is the same
        # RULE_POSITIONS: the imported leaves at their own files' lines, this file's rules at its own
        assert module.RULE_POSITIONS["mamba.backend"] == "rules/common.rules:4:5"
        assert module.RULE_POSITIONS["pool.dtype"] == "rules/more.rules:3:15"
        assert module.RULE_POSITIONS["stamp Backends"].startswith("rules/gdn.rules:")
        # the importing module's resolver coerces names through the imported enum's coercer
        stamp = module.resolve_backends(SimpleNamespace(backend="flashinfer", decode_backend=None))
        assert stamp.decode is common.Backend.FLASHINFER
        gate = module.hopper(module.RunnerFacts(sm=9))
        assert gate is common.Backend.FLASHINFER
    finally:
        sys.path.remove(str(generated))
        forget_gen()


def test_the_generated_tests_of_importing_modules_pass(generated: Path) -> None:
    proc = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "gen"], generated)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout


def test_importing_modules_pass_ruff_and_mypy_strict(generated: Path, tmp_path_factory) -> None:
    bin_dir = Path(sys.executable).parent
    for config in (["--config", str(REPO / "pyproject.toml")], ["--isolated", "--select", "E4,E7,E9,F,I"]):
        proc = _run([str(bin_dir / "ruff"), "check", "--no-cache", *config, "gen"], generated)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    link = tmp_path_factory.mktemp("mypypath")
    (link / "stampgen").symlink_to(REPO, target_is_directory=True)
    mypy = [str(bin_dir / "mypy"), "--strict", "--no-incremental", "--cache-dir", os.devnull]
    proc = _run(
        [*mypy, "--config-file", str(REPO / "pyproject.toml"), "-p", "gen"], generated, MYPYPATH=str(link)
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generating_an_importing_file_without_what_it_imports_is_refused_writing_nothing(
    project: Path,
) -> None:
    (project / "rules" / "more.rules").write_text(MORE, encoding="utf-8")
    (project / "rules" / "gdn.rules").write_text(GDN_OF_TWO, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    # more.rules is named, but common.rules (which gdn.rules and more.rules import) is not
    status = run_generate(["rules/more.rules", "rules/gdn.rules"], "gen", out=out, err=err)
    assert status == 1, err.getvalue()
    assert "rules/common.rules, imported here, is not generated by this run" in err.getvalue()
    assert "[import-not-generated]" in err.getvalue()
    assert not (project / "gen").exists()
