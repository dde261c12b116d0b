"""Finding the project a command works on (codegen/project.py): the root, its settings, and the names
outputs use for paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stampgen.codegen.project import ProjectError, Settings, find_project

PYPROJECT_TABLE = '[tool.stampgen]\nrules = "spec"\nout = "src/gen"\npackage = "app.gen"\n'


def write(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------------------------- discovery


def test_a_stampgen_toml_makes_its_folder_the_root(tmp_path: Path) -> None:
    config = write(tmp_path / "stampgen.toml", 'out = "gen"\n')
    project = find_project(tmp_path)
    assert (project.root, project.config) == (tmp_path.resolve(), config)
    assert project.settings == Settings(out="gen")
    assert project.out_dir == tmp_path.resolve() / "gen"


def test_a_pyproject_table_makes_its_folder_the_root(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "app"\n\n' + PYPROJECT_TABLE)
    project = find_project(tmp_path)
    assert project.settings == Settings(rules="spec", out="src/gen", package="app.gen")
    assert project.rules_dir == tmp_path.resolve() / "spec"


def test_the_root_is_found_from_any_subfolder(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", PYPROJECT_TABLE)
    deep = tmp_path / "src" / "app" / "deep"
    deep.mkdir(parents=True)
    assert find_project(deep).root == tmp_path.resolve()


def test_stampgen_toml_wins_over_pyproject_in_the_same_folder(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", PYPROJECT_TABLE)
    config = write(tmp_path / "stampgen.toml", 'rules = "mine"\n')
    project = find_project(tmp_path)
    assert project.config == config and project.settings.rules == "mine"


def test_the_nearest_config_wins(tmp_path: Path) -> None:
    write(tmp_path / "stampgen.toml", 'out = "outer"\n')
    write(tmp_path / "inner" / "pyproject.toml", '[tool.stampgen]\nout = "inner"\n')
    project = find_project(tmp_path / "inner")
    assert project.root == (tmp_path / "inner").resolve() and project.settings.out == "inner"


def test_a_pyproject_without_the_table_is_passed_over(tmp_path: Path) -> None:
    write(tmp_path / "stampgen.toml", "")
    write(tmp_path / "inner" / "pyproject.toml", '[project]\nname = "other"\n[tool.ruff]\nline-length = 99\n')
    assert find_project(tmp_path / "inner").root == tmp_path.resolve()


def test_a_pyproject_whose_tool_is_not_a_table_is_passed_over(tmp_path: Path) -> None:
    write(tmp_path / "stampgen.toml", "")
    write(tmp_path / "inner" / "pyproject.toml", "tool = 1\n")
    assert find_project(tmp_path / "inner").root == tmp_path.resolve()


def test_a_config_above_wins_over_a_rules_folder_below_it(tmp_path: Path) -> None:
    write(tmp_path / "stampgen.toml", "")
    write(tmp_path / "inner" / "rules" / "a.rules")
    assert find_project(tmp_path / "inner").root == tmp_path.resolve()


def test_without_a_config_the_nearest_folder_with_rules_files_is_the_root(tmp_path: Path) -> None:
    write(tmp_path / "rules" / "a.rules")
    (tmp_path / "inner" / "rules").mkdir(parents=True)  # a rules folder without rules files does not count
    project = find_project(tmp_path / "inner")
    assert (project.root, project.config, project.settings) == (tmp_path.resolve(), None, Settings())


def test_with_nothing_to_go_by_the_start_folder_is_the_root(tmp_path: Path) -> None:
    project = find_project(tmp_path)
    assert (project.root, project.config) == (tmp_path.resolve(), None)


def test_the_working_directory_is_the_default_start(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "stampgen.toml", "")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    assert find_project().root == tmp_path.resolve()


# --------------------------------------------------------------------------------------------- bad configs


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("stampgen.toml", 'rules = "a"\nrules = "b"\n', "stampgen.toml: not valid TOML"),
        ("pyproject.toml", "[tool.stampgen\n", "pyproject.toml: not valid TOML"),
        ("stampgen.toml", 'output = "gen"\n', "unknown field `output`"),
        ("stampgen.toml", "rules = 3\n", "Expected `str`, got `int` - at `$.rules`"),
        ("pyproject.toml", '[tool]\nstampgen = "gen"\n', "pyproject.toml [tool.stampgen]: Expected `object`"),
        ("stampgen.toml", 'package = "1st.gen"\n', "`package` must be a dotted Python name, got '1st.gen'"),
        ("stampgen.toml", 'package = "app..gen"\n', "`package` must be a dotted Python name"),
    ],
    ids=[
        "duplicate-key",
        "unclosed-table",
        "unknown-setting",
        "wrong-type",
        "not-a-table",
        "package",
        "empty-part",
    ],
)
def test_a_malformed_config_is_a_project_error_naming_the_file(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    write(tmp_path / name, text)
    with pytest.raises(ProjectError, match="^" + re.escape(str(tmp_path.resolve() / name))) as info:
        find_project(tmp_path)
    assert message in str(info.value)


def test_a_config_that_is_not_utf8_is_a_project_error(tmp_path: Path) -> None:
    (tmp_path / "stampgen.toml").write_bytes(b'out = "\xff"\n')
    with pytest.raises(ProjectError, match="stampgen.toml: cannot read it"):
        find_project(tmp_path)


@pytest.mark.parametrize("setting", ["rules", "out"])
@pytest.mark.parametrize("value", ["../elsewhere", "/abs/gen", "gen/../../x", ""])
def test_folders_outside_the_project_are_refused(tmp_path: Path, setting: str, value: str) -> None:
    write(tmp_path / "stampgen.toml", f"{setting} = {value!r}\n")
    with pytest.raises(ProjectError, match=rf"`{setting}` must be a folder inside the project, got"):
        find_project(tmp_path)


# --------------------------------------------------------------------------------------------- names


def test_the_package_setting_names_the_configured_output_folder_only(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", PYPROJECT_TABLE)
    project = find_project(tmp_path)
    assert project.package_for(tmp_path / "src" / "gen") == "app.gen"
    assert project.package_for(tmp_path / "src" / "other") == "src.other"  # --out elsewhere: its own path


def test_without_a_package_setting_the_output_folder_is_named_by_its_path(tmp_path: Path) -> None:
    write(tmp_path / "stampgen.toml", 'out = "src/gen"\n')
    project = find_project(tmp_path)
    assert project.package_for(project.out_dir) == "src.gen"


def test_an_output_folder_without_an_import_name_has_no_package(tmp_path: Path) -> None:
    write(tmp_path / "stampgen.toml", "")
    project = find_project(tmp_path / "x")
    assert project.package_for(tmp_path / "my-gen") is None
    assert project.package_for(tmp_path.parent / "outside") is None
    assert project.package_for(tmp_path) is None  # the root itself has no dotted name


def test_paths_are_named_relative_to_the_root_from_any_subfolder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "stampgen.toml", "")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    project = find_project()
    assert project.relative("../rules/a.rules") == "rules/a.rules"
    assert project.relative(tmp_path / "rules" / "a.rules") == "rules/a.rules"
    assert project.relative("local.rules") == "sub/local.rules"


def test_paths_outside_the_root_are_named_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "project" / "stampgen.toml", "")
    monkeypatch.chdir(tmp_path / "project")
    project = find_project()
    assert project.relative("../elsewhere/a.rules") == "../elsewhere/a.rules"
    assert (
        project.relative(tmp_path / "elsewhere" / "a.rules")
        == (tmp_path / "elsewhere" / "a.rules").as_posix()
    )
