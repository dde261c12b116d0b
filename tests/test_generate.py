"""`run_generate`: what it writes, what it refuses, and what `--check` says (codegen/generate.py, writer.py)."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stampgen.codegen import generate, writer
from stampgen.codegen.generate import run_generate
from stampgen.codegen.project import find_project

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "rules" / "linear_attn.rules"
FIXTURES = REPO / "tests" / "fixtures"
MARKER = re.compile(r"^# Code generated .* DO NOT EDIT\.$")


if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


def gen(
    *paths: str, out_dir: str = "generated", check: bool = False, quiet: bool = False
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = run_generate(list(paths), out_dir, check, out=out, err=err, quiet=quiet)
    return status, out.getvalue(), err.getvalue()


def snapshot_dir(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())} if path.exists() else {}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch repository: rules/linear_attn.rules and rules/minimal.rules, the working directory."""
    (tmp_path / "rules").mkdir()
    shutil.copy(SHIPPED, tmp_path / "rules" / "linear_attn.rules")
    shutil.copy(FIXTURES / "minimal.rules", tmp_path / "rules" / "minimal.rules")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --------------------------------------------------------------------------------------------- what it writes


def test_generate_writes_the_module_its_tests_and_a_manifest(workspace: Path) -> None:
    status, out, err = gen("rules/linear_attn.rules")
    assert (status, err) == (0, "")
    assert out == "generated: 2 written, 0 removed\n"
    assert sorted(p.name for p in (workspace / "generated").iterdir()) == [
        "MANIFEST.json",
        "linear_attn.py",
        "test_linear_attn.py",
    ]
    manifest = writer.read_manifest(workspace / "generated")
    assert manifest is not None and sorted(manifest.files) == ["linear_attn.py", "test_linear_attn.py"]
    for name, entry in manifest.files.items():
        assert entry.sha256 == writer.sha256((workspace / "generated" / name).read_text(encoding="utf-8"))
        assert entry.source == "rules/linear_attn.rules"


def test_every_generated_file_says_it_is_generated_and_from_which_rules(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    for name in ("linear_attn", "minimal"):
        for file in (f"{name}.py", f"test_{name}.py"):
            first, second = (workspace / "generated" / file).read_text(encoding="utf-8").splitlines()[:2]
            assert MARKER.match(first) and f"from rules/{name}.rules." in first, first
            assert second == f"# Edit rules/{name}.rules and run `make codegen`."


def test_generated_files_hold_no_timestamps_or_versions(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules")[0] == 0
    for file in ("linear_attn.py", "test_linear_attn.py"):
        text = (workspace / "generated" / file).read_text(encoding="utf-8")
        assert not re.search(r"20\d\d-\d\d-\d\d|\d\d:\d\d:\d\d|version|ruff 0\.|stampgen 0\.", text, re.I), (
            file
        )


def test_a_second_run_says_up_to_date_and_rewrites_nothing(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules")[0] == 0
    before = {p.name: p.stat().st_mtime_ns for p in (workspace / "generated").iterdir()}
    assert gen("rules/linear_attn.rules") == (0, "generated: up to date\n", "")
    assert {p.name: p.stat().st_mtime_ns for p in (workspace / "generated").iterdir()} == before


def test_quiet_drops_the_summary_but_not_the_errors(workspace: Path) -> None:
    assert gen("rules/minimal.rules", quiet=True) == (0, "", "")
    assert (workspace / "generated" / "minimal.py").is_file()
    assert gen("rules/minimal.rules", quiet=True) == (0, "", "")
    status, _, err = gen("rules/nope.rules", quiet=True)
    assert status == 2 and "rules/nope.rules:1:1: error: cannot read the file" in err


def test_only_changed_files_are_rewritten(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    before = {p.name: p.stat().st_mtime_ns for p in (workspace / "generated").iterdir()}
    rules = workspace / "rules" / "minimal.rules"
    rules.write_text(rules.read_text().replace("kernel: Kernel = naive", "kernel: Kernel = fused"))
    status, out, _ = gen("rules/linear_attn.rules", "rules/minimal.rules")
    assert status == 0 and re.fullmatch(r"generated: [12] written, 0 removed\n", out), out
    after = {p.name: p.stat().st_mtime_ns for p in (workspace / "generated").iterdir()}
    assert after["linear_attn.py"] == before["linear_attn.py"]
    assert after["minimal.py"] != before["minimal.py"]


def test_the_output_folder_is_created_when_missing(workspace: Path) -> None:
    assert gen("rules/minimal.rules", out_dir="out/deep")[0] == 0
    assert (workspace / "out" / "deep" / "minimal.py").is_file()
    assert "from out.deep import minimal" in (workspace / "out" / "deep" / "test_minimal.py").read_text()


# --------------------------------------------------------------------------------------------- what it refuses


def test_rules_with_errors_print_diagnostics_and_write_nothing(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    before = snapshot_dir(workspace / "generated")
    rules = workspace / "rules" / "minimal.rules"
    rules.write_text(rules.read_text().replace("base settings.kernel", "base settings.kernal"))
    status, out, err = gen("rules/linear_attn.rules", "rules/minimal.rules")
    assert status == 1 and out == ""
    assert re.search(r"^rules/minimal\.rules:\d+:\d+: error: ", err, re.M), err
    assert "Traceback" not in err
    assert snapshot_dir(workspace / "generated") == before


def test_rules_with_errors_do_not_create_the_output_folder(workspace: Path) -> None:
    (workspace / "rules" / "broken.rules").write_text("enum {")
    status, _, err = gen("rules/broken.rules")
    assert status == 1 and "rules/broken.rules:1:" in err
    assert not (workspace / "generated").exists()


def test_a_missing_rules_file_is_an_environment_error_not_a_traceback(workspace: Path) -> None:
    status, _, err = gen("rules/nope.rules")
    assert status == 2 and "rules/nope.rules:1:1: error: cannot read the file" in err
    assert "Traceback" not in err and not (workspace / "generated").exists()


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("test_things.rules", "starts with neither `_` nor `test`"),
        ("my-rules.rules", "must be a Python name"),
        ("class.rules", "not a keyword"),
    ],
)
def test_a_rules_file_whose_name_cannot_be_a_module_is_refused(workspace: Path, name: str, why: str) -> None:
    shutil.copy(FIXTURES / "minimal.rules", workspace / "rules" / name)
    status, _, err = gen(f"rules/{name}")
    assert status == 2 and why in err and not (workspace / "generated").exists()


def test_two_rules_files_with_one_name_are_refused(workspace: Path) -> None:
    (workspace / "other").mkdir()
    shutil.copy(FIXTURES / "minimal.rules", workspace / "other" / "minimal.rules")
    status, _, err = gen("rules/minimal.rules", "other/minimal.rules")
    assert status == 2 and "would both generate minimal.py" in err


def test_unowned_files_are_never_overwritten(workspace: Path) -> None:
    (workspace / "generated").mkdir()
    (workspace / "generated" / "minimal.py").write_text("# hand-written, precious\n")
    status, _, err = gen("rules/minimal.rules")
    assert status == 2 and "refusing to overwrite" in err and "minimal.py" in err
    assert (workspace / "generated" / "minimal.py").read_text() == "# hand-written, precious\n"
    assert not (workspace / "generated" / "test_minimal.py").exists()


def test_a_file_with_the_stampgen_header_is_adopted_even_without_a_manifest(workspace: Path) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    (workspace / "generated" / "MANIFEST.json").unlink()
    (workspace / "generated" / "minimal.py").write_text(
        "# Code generated by stampgen from rules/minimal.rules. DO NOT EDIT.\nstale = True\n"
    )
    assert gen("rules/minimal.rules")[0] == 0
    assert "stale = True" not in (workspace / "generated" / "minimal.py").read_text()


def test_a_corrupt_manifest_is_an_error(workspace: Path) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    (workspace / "generated" / "MANIFEST.json").write_text("{not json")
    status, _, err = gen("rules/minimal.rules")
    assert status == 2 and "is not a stampgen manifest" in err


def test_a_manifest_naming_a_path_outside_the_folder_is_refused(workspace: Path) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    manifest = workspace / "generated" / "MANIFEST.json"
    manifest.write_text(manifest.read_text().replace('"minimal.py"', '"../rules/minimal.rules"'))
    status, _, err = gen("rules/minimal.rules")
    assert status == 2 and "not a file name inside" in err
    assert (workspace / "rules" / "minimal.rules").exists()


# --------------------------------------------------------------------------------------------- stale outputs


def test_renaming_a_rules_file_removes_the_outputs_it_owned(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    (workspace / "rules" / "minimal.rules").rename(workspace / "rules" / "smallest.rules")
    status, out, _ = gen("rules/linear_attn.rules", "rules/smallest.rules")
    assert status == 0 and out == "generated: 2 written, 2 removed\n"
    names = sorted(p.name for p in (workspace / "generated").iterdir())
    assert names == [
        "MANIFEST.json",
        "linear_attn.py",
        "smallest.py",
        "test_linear_attn.py",
        "test_smallest.py",
    ]


def test_generating_one_rules_file_keeps_the_outputs_of_the_others(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    before = snapshot_dir(workspace / "generated")
    status, out, _ = gen("rules/minimal.rules")
    assert status == 0 and "removed" not in out.replace("0 removed", "")
    after = snapshot_dir(workspace / "generated")
    assert {n: after[n] for n in after if n != "MANIFEST.json"} == {
        n: before[n] for n in before if n != "MANIFEST.json"
    }
    manifest = json.loads(after["MANIFEST.json"])
    assert sorted(manifest["files"]) == [
        "linear_attn.py",
        "minimal.py",
        "test_linear_attn.py",
        "test_minimal.py",
    ]


def test_generating_one_file_removes_the_outputs_of_a_deleted_rules_file(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    (workspace / "rules" / "minimal.rules").unlink()
    status, out, _ = gen("rules/linear_attn.rules")
    assert status == 0 and out == "generated: 0 written, 2 removed\n"
    assert not (workspace / "generated" / "minimal.py").exists()


def test_removal_never_touches_files_it_does_not_own(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    (workspace / "generated" / "__init__.py").write_text("")
    (workspace / "generated" / "notes.py").write_text("# mine\n")
    (workspace / "rules" / "minimal.rules").unlink()
    assert gen("rules/linear_attn.rules")[0] == 0
    assert (workspace / "generated" / "__init__.py").exists()
    assert (workspace / "generated" / "notes.py").read_text() == "# mine\n"
    assert not (workspace / "generated" / "minimal.py").exists()


# --------------------------------------------------------------------------------------------- --check


def test_check_on_fresh_output_is_silent(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules")[0] == 0
    assert gen("rules/linear_attn.rules", check=True) == (0, "", "")


def test_check_prints_a_diff_writes_nothing_and_fails_when_stale(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    before = snapshot_dir(workspace / "generated")
    rules = workspace / "rules" / "minimal.rules"
    rules.write_text(rules.read_text().replace("kernel: Kernel = naive", "kernel: Kernel = fused"))
    status, out, err = gen("rules/linear_attn.rules", "rules/minimal.rules", check=True)
    assert status == 1
    assert "--- a/generated/minimal.py\n+++ b/generated/minimal.py\n" in out
    assert re.search(r"^-\s+kernel = Kernel.NAIVE$", out, re.M) and re.search(
        r"^\+\s+kernel = Kernel.FUSED$", out, re.M
    )
    assert "linear_attn.py" not in out.split("MANIFEST.json")[0]
    assert "stale" in err and "make codegen" in err
    assert snapshot_dir(workspace / "generated") == before


def test_check_catches_a_hand_edit(workspace: Path) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    target = workspace / "generated" / "minimal.py"
    target.write_text(target.read_text() + "# sneaky\n")
    status, out, _ = gen("rules/minimal.rules", check=True)
    assert status == 1 and "-# sneaky" in out
    assert target.read_text().endswith("# sneaky\n")


def test_check_lists_files_it_would_remove(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    (workspace / "rules" / "minimal.rules").unlink()
    status, out, _ = gen("rules/linear_attn.rules", check=True)
    assert status == 1
    assert "would remove generated/minimal.py\n" in out and "would remove generated/test_minimal.py\n" in out
    assert (workspace / "generated" / "minimal.py").exists()


def test_check_on_a_missing_output_shows_new_files(workspace: Path) -> None:
    status, out, _ = gen("rules/minimal.rules", check=True)
    assert status == 1 and "--- /dev/null\n+++ b/generated/minimal.py\n" in out
    assert not (workspace / "generated").exists()


def test_a_generator_change_that_changes_no_output_is_not_stale(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the manifest's fingerprint would change: --check passes; generate records the new fingerprint."""
    assert gen("rules/minimal.rules")[0] == 0
    monkeypatch.setattr(generate, "compute_fingerprint", lambda *a: "0" * 64)
    assert gen("rules/minimal.rules", check=True) == (0, "", "")
    assert (
        gen("rules/minimal.rules")[1]
        == "generated: MANIFEST.json updated (generator changed, output identical)\n"
    )
    assert '"fingerprint": "' + "0" * 64 in (workspace / "generated" / "MANIFEST.json").read_text()


def test_check_uses_the_manifest_hashes_before_rendering(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gen("rules/minimal.rules")[0] == 0

    def no_rendering(*args: object) -> None:
        raise AssertionError("rendered although the manifest says the output is fresh")

    monkeypatch.setattr(generate, "render_outputs", no_rendering)
    assert gen("rules/minimal.rules", check=True) == (0, "", "")


# --------------------------------------------------------------------------------------------- atomic writes


def test_a_failure_in_the_middle_of_writing_leaves_the_output_as_it_was(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    before = snapshot_dir(workspace / "generated")
    (workspace / "rules" / "minimal.rules").rename(workspace / "rules" / "renamed.rules")
    rules = workspace / "rules" / "linear_attn.rules"
    rules.write_text(rules.read_text().replace("linear_replayssm_cache_len: int in {0, 1, 16} = 16",
                                               "linear_replayssm_cache_len: int in {0, 1, 16} = 1"))  # fmt: skip
    calls = {"n": 0}
    real_replace = os.replace

    def failing_replace(src: str, dst: str) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError(28, "No space left on device")
        real_replace(src, dst)

    monkeypatch.setattr(writer.os, "replace", failing_replace)
    status, _, err = gen("rules/linear_attn.rules", "rules/renamed.rules")
    monkeypatch.undo()
    assert status == 2 and "No space left on device" in err and "Traceback" not in err
    assert snapshot_dir(workspace / "generated") == before  # restored, and no temporary files left behind


def test_a_failure_while_staging_leaves_no_trace(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_mkstemp = writer.tempfile.mkstemp
    calls = {"n": 0}

    def failing_mkstemp(*args: object, **kwargs: object) -> tuple[int, str]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise PermissionError(13, "Permission denied")
        return real_mkstemp(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(writer.tempfile, "mkstemp", failing_mkstemp)
    status, _, err = gen("rules/minimal.rules")
    assert status == 2 and "Permission denied" in err
    assert not (workspace / "generated").exists()


def test_written_files_get_ordinary_permissions(workspace: Path) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    mask = os.umask(0)
    os.umask(mask)
    assert (workspace / "generated" / "minimal.py").stat().st_mode & 0o777 == 0o666 & ~mask


# --------------------------------------------------------------------------------------------- determinism


def _generate_in_subprocess(root: Path, order: list[str], seed: str) -> dict[str, bytes]:
    shutil.rmtree(root / "generated", ignore_errors=True)
    code = f"import sys; from stampgen.codegen.generate import run_generate; raise SystemExit(run_generate({order!r}))"
    env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-c", code], cwd=root, env=env, check=True, capture_output=True)
    return snapshot_dir(root / "generated")


def test_output_is_byte_identical_across_hash_seeds_and_file_order(workspace: Path) -> None:
    shutil.copy(FIXTURES / "everything.rules", workspace / "rules" / "everything.rules")
    files = ["rules/everything.rules", "rules/linear_attn.rules", "rules/minimal.rules"]
    first = _generate_in_subprocess(workspace, files, "0")
    second = _generate_in_subprocess(workspace, list(reversed(files)), "4242")
    assert len(first) == 7 and first == second


def test_output_does_not_depend_on_the_users_ruff_config(workspace: Path) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    expected = snapshot_dir(workspace / "generated")
    (workspace / "ruff.toml").write_text('line-length = 60\n[format]\nquote-style = "single"\n')
    (workspace / "pyproject.toml").write_text("[tool.ruff]\nline-length = 70\n")
    shutil.rmtree(workspace / "generated")
    assert gen("rules/minimal.rules")[0] == 0
    assert snapshot_dir(workspace / "generated") == expected


# --------------------------------------------------------------------------------------------- the repository


def test_the_repository_output_is_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make codegen-check`: generated/ is what the rules and the generator produce now."""
    monkeypatch.chdir(REPO)
    status, out, err = gen(check=True)
    assert status == 0, f"generated/ is stale; run `make codegen`\n{err}{out[:4000]}"


# --------------------------------------------------------------------------------------------- the formatter


def test_the_supported_ruff_range_is_the_one_pyproject_requires() -> None:
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "dependencies"
    ]
    [ruff] = [d for d in dependencies if re.match(r"ruff\b", d)]
    assert ruff == generate.RUFF_REQUIREMENT, "pyproject.toml and generate.RUFF_RANGE must state one range"


def test_the_range_holds_its_lower_bound_and_not_its_upper_bound() -> None:
    lower, upper = (bound.lstrip(">=<") for bound in generate.RUFF_RANGE)
    below = ".".join([*lower.split(".")[:-1], str(int(lower.split(".")[-1]) - 1)])
    assert generate.in_ruff_range(lower) and generate.in_ruff_range(lower + ".1")
    for outside in (below, upper, upper + ".0", lower + "rc1", lower + "+local", "", "ruff"):
        assert not generate.in_ruff_range(outside), outside


def fake_ruff(tmp_path: Path, version: str, then: str = "exit 3") -> Path:
    """An executable that reports `ruff VERSION` and then does `then` (by default: fails, as it must never
    be asked to format)."""
    script = tmp_path / f"fake-ruff-{version or 'x'}"
    script.write_text(f'#!/bin/sh\nif [ "$1" = --version ]; then echo "ruff {version}"; exit 0; fi\n{then}\n')
    script.chmod(0o755)
    return script


@pytest.mark.parametrize("version", ["0.17.4", "0.18.0", "0.17.6rc1"])
@pytest.mark.parametrize("check", [False, True], ids=["generate", "check"])
def test_a_ruff_outside_the_range_is_an_environment_error_never_stale(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, version: str, check: bool
) -> None:
    monkeypatch.setenv("STAMPGEN_RUFF", str(fake_ruff(workspace, version)))
    status, out, err = gen("rules/minimal.rules", check=check)
    assert (status, out) == (2, "")
    assert err.count("\n") == 1 and "stale" not in err, err
    assert f"found ruff {version}" in err and generate.RUFF_REQUIREMENT in err
    assert not (workspace / "generated").exists()


def test_a_ruff_outside_the_range_is_refused_even_when_the_output_is_fresh(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert gen("rules/minimal.rules")[0] == 0
    monkeypatch.setenv("STAMPGEN_RUFF", str(fake_ruff(workspace, "0.18.0")))
    status, _, err = gen("rules/minimal.rules", check=True)
    assert status == 2 and "found ruff 0.18.0" in err


def test_a_missing_ruff_is_an_environment_error(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_version = importlib.metadata.version

    def without_ruff(name: str) -> str:
        if name == "ruff":
            raise importlib.metadata.PackageNotFoundError(name)
        return real_version(name)

    monkeypatch.setattr(importlib.metadata, "version", without_ruff)
    status, _, err = gen("rules/minimal.rules")
    assert status == 2 and "ruff is not installed" in err and generate.RUFF_REQUIREMENT in err


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda tmp: tmp / "no-such-ruff", "cannot run it"),
        (lambda tmp: fake_ruff(tmp, ""), "`--version` did not report `ruff VERSION`"),
    ],
    ids=["missing", "not-ruff"],
)
def test_a_stampgen_ruff_that_is_not_a_ruff_is_an_environment_error(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, make, says: str
) -> None:
    monkeypatch.setenv("STAMPGEN_RUFF", str(make(workspace)))
    status, _, err = gen("rules/minimal.rules")
    assert status == 2 and f"STAMPGEN_RUFF={make(workspace)}: {says}" in err, err


def test_stampgen_ruff_is_the_ruff_that_formats_with_default_settings(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = workspace / "ruff-calls.log"
    real = shlex.join(generate.ruff_command())
    ruff = fake_ruff(workspace, generate.RUFF_RANGE[0].lstrip(">="), f'echo "$@" >> {log}\nexec {real} "$@"')
    monkeypatch.setenv("STAMPGEN_RUFF", str(ruff))
    assert gen("rules/minimal.rules")[0] == 0
    [call] = log.read_text().splitlines()
    assert call.startswith("format --isolated --no-cache ")
    assert "--line-length" not in call and "--target-version" not in call


def test_a_formatter_failure_says_what_ruff_said() -> None:
    with pytest.raises(generate.GenerateError, match=r"a stampgen bug.*Failed to parse .*out_0\.py:1:7"):
        generate.format_python(["def f(:\n"])


def test_ruff_format_with_its_default_settings_leaves_generated_files_alone(workspace: Path) -> None:
    assert gen("rules/linear_attn.rules", "rules/minimal.rules")[0] == 0
    users = workspace / "elsewhere"
    users.mkdir()
    for path in (workspace / "generated").glob("*.py"):
        shutil.copy(path, users / path.name)
    proc = subprocess.run(
        [*generate.ruff_command(), "format", "--isolated", "--no-cache", "--check", "."],
        cwd=users,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_manifest_does_not_depend_on_the_exact_ruff_version(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = find_project()
    before = generate.compute_fingerprint(project, ["rules/minimal.rules"], "generated", "root")
    real_version = importlib.metadata.version
    monkeypatch.setattr(
        importlib.metadata, "version", lambda name: "0.17.99" if name == "ruff" else real_version(name)
    )
    assert generate.compute_fingerprint(project, ["rules/minimal.rules"], "generated", "root") == before


@pytest.mark.parametrize("change", ["stampgen", "range"])
def test_the_manifest_changes_with_stampgen_s_version_and_the_ruff_range(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    project = find_project()
    before = generate.compute_fingerprint(project, ["rules/minimal.rules"], "generated", "root")
    if change == "stampgen":
        real_version = importlib.metadata.version
        monkeypatch.setattr(
            importlib.metadata, "version", lambda name: "99.0" if name == "stampgen" else real_version(name)
        )
    else:
        monkeypatch.setattr(generate, "RUFF_REQUIREMENT", "ruff>=0.19,<0.20")
    assert generate.compute_fingerprint(project, ["rules/minimal.rules"], "generated", "root") != before


def test_the_fingerprint_covers_every_module_the_generator_runs(workspace: Path) -> None:
    code = (
        "import sys; from stampgen.codegen.generate import run_generate; run_generate(['rules/minimal.rules']); "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('stampgen.codegen.'))))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=workspace, env=env, capture_output=True, text=True
    )
    modules = proc.stdout.splitlines()[-1].split() if proc.stdout else []
    assert modules, proc.stderr
    covered = {
        Path(p)
        .with_suffix("")
        .as_posix()
        .removeprefix("codegen/")
        .removesuffix("/__init__")
        .replace("/", ".")
        for p in generate.GENERATOR_SOURCES
        if p.startswith("codegen/")
    }
    assert {m.split(".", 2)[2] for m in modules} <= covered


def test_long_work_reports_its_stages_on_stderr(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAMPGEN_PROGRESS_AFTER", "0")  # as if every stage came after the first seconds
    status, out, err = gen("rules/minimal.rules")
    assert status == 0, err
    stages = [line.split(": ", 1)[1].rsplit(" (", 1)[0] for line in err.splitlines()]
    assert stages == [
        "checking rules/minimal.rules",
        "rendering rules/minimal.rules (1 stamp)",
        "formatting 2 files",
        "writing generated",
    ], err
    assert out.startswith("generated: 2 written"), out


def test_quick_work_and_quiet_runs_report_no_progress(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, _, err = gen("rules/minimal.rules")  # the default threshold: seconds, far above this run
    assert (status, err) == (0, "")
    monkeypatch.setenv("STAMPGEN_PROGRESS_AFTER", "0")
    (workspace / "generated" / "minimal.py").unlink()
    status, out, err = gen("rules/minimal.rules", quiet=True)
    assert (status, out, err) == (0, "", "")
