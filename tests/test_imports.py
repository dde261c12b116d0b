"""`import "other.rules"`: files share a vocabulary (enums, config and facts blocks) with one source of
truth; what the import brings in is checked where it is declared, and used as if declared here."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stampgen.codegen.load import load

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
