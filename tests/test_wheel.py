"""stampgen as an installable tool: what the wheel and the sdist hold, and that both work where they land.

The distributions are built from a copy of the checkout (so the build writes nothing into it) with this
venv's setuptools, without build isolation. The sdist is unpacked and one of its own test files runs
against the unpacked tree. The wheel goes into a fresh virtual environment next to `ruff==0.17.6` and
`msgspec==0.23.0` (from PyPI), and that venv's `stampgen` works on a small project of its own outside the
repository, whose generated module that venv's Python then imports and calls.

Nothing here is skipped: a step that cannot run (no network, no `venv` module) fails, saying which step.
The pre-commit hooks offered to other repositories (`.pre-commit-hooks.yaml`) are checked here too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NAME, VERSION = "stampgen", "0.1.0"

# The versions a consumer of stampgen may well pin: the wheel must install and work next to them.
NEIGHBOURS = ("ruff==0.17.6", "msgspec==0.23.0")

# What the checkout holds that is no part of a distribution (caches, environments, build output).
_NOT_SOURCE = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis"}
_NOT_SOURCE_AT_ROOT = {"build", "dist", "out", ".peers", ".whl"}


def run(cmd: list[str], *, cwd: Path, step: str, env: dict[str, str] | None = None, timeout: float = 300):
    """Run a command; return it finished. It fails the test (with the command and all its output) when it
    cannot start or runs past `timeout`; the caller checks the exit status with `expect`."""
    try:
        return subprocess.run(
            cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"{step}: `{' '.join(map(str, cmd))}` could not run: {exc}")


def expect(result: subprocess.CompletedProcess, status: int, step: str) -> str:
    """`result`'s stdout + stderr, after checking its exit status; a mismatch fails showing both."""
    output = result.stdout + result.stderr
    if result.returncode != status:
        pytest.fail(
            f"{step}: `{' '.join(map(str, result.args))}` exited {result.returncode}, expected {status}\n"
            f"--- stdout ---\n{result.stdout}\n--- stderr ---\n{result.stderr}"
        )
    return output


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that points Python at this checkout or at this venv."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "STAMPGEN_RUFF"}
    }
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


# --------------------------------------------------------------------------------------------- building


def _ignore(folder: str, names: list[str]) -> set[str]:
    skip = {n for n in names if n in _NOT_SOURCE or n.endswith(".egg-info")}
    if Path(folder).resolve() == REPO:
        skip |= {n for n in names if n in _NOT_SOURCE_AT_ROOT}
    return skip


_BUILD = """\
import sys
from setuptools import build_meta
out = sys.argv[1]
wheel = build_meta.build_wheel(out)
sdist = build_meta.build_sdist(out)
print("built:", wheel, sdist)
"""


class Built:
    def __init__(self, wheel: Path, sdist: Path, source: Path):
        self.wheel, self.sdist, self.source = wheel, sdist, source
        with zipfile.ZipFile(wheel) as zf:
            self.wheel_names = zf.namelist()
        with tarfile.open(sdist) as tf:
            prefix = f"{NAME}-{VERSION}/"
            self.sdist_names = [m.name.removeprefix(prefix) + ("/" if m.isdir() else "") for m in tf]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    root = tmp_path_factory.mktemp("dist")
    source, out = root / "source", root / "out"
    shutil.copytree(REPO, source, ignore=_ignore, symlinks=True)
    result = run([sys.executable, "-c", _BUILD, str(out)], cwd=source, step="building the wheel and sdist")
    expect(result, 0, "building the wheel and sdist with setuptools.build_meta")
    wheel_name, sdist_name = re.findall(r"^built: (\S+) (\S+)$", result.stdout, re.M)[-1]
    return Built(out / wheel_name, out / sdist_name, source)


def test_the_wheel_installs_one_top_level_package_stampgen(built):
    top = {name.split("/", 1)[0] for name in built.wheel_names}
    assert top == {NAME, f"{NAME}-{VERSION}.dist-info"}, (
        "the wheel must put everything under stampgen/ (no generic codegen/, kernels/ or generated/ in "
        f"site-packages); its top level is {sorted(top)}"
    )


def test_the_wheel_carries_the_grammar_templates_type_markers_and_license(built):
    names = set(built.wheel_names)
    required = {
        "stampgen/grammar/stampgen.lark",
        "stampgen/codegen/py.typed",
        "stampgen/codegen/cli.py",
        "stampgen/generated/linear_attn.py",
        "stampgen/kernels/gdn/__init__.py",
        f"{NAME}-{VERSION}.dist-info/entry_points.txt",
    }
    assert not required - names, f"missing from the wheel: {sorted(required - names)}"
    templates = [n for n in names if re.fullmatch(r"stampgen/codegen/templates/[^/]+\.jinja", n)]
    assert templates, "the wheel holds no stampgen/codegen/templates/*.jinja"
    licenses = [n for n in names if n.startswith(f"{NAME}-{VERSION}.dist-info/") and n.endswith("/LICENSE")]
    assert licenses, f"no LICENSE under the dist-info: {sorted(n for n in names if 'dist-info' in n)}"


def test_the_wheel_holds_every_module_and_data_file_of_the_installed_folders(built):
    """A folder of the checkout missing from pyproject.toml's package list would install incompletely."""
    names = set(built.wheel_names)
    wanted = {
        f"stampgen/{path.relative_to(built.source).as_posix()}"
        for folder in ("codegen", "grammar", "generated", "kernels")  # installed as stampgen.<folder>
        for path in (built.source / folder).rglob("*")
        if path.is_file() and path.suffix in {".py", ".jinja", ".lark", ".typed", ".json"}
    }
    missing = sorted(wanted - names)
    assert not missing, (
        f"files of the checkout missing from the wheel (add their package to [tool.setuptools]): {missing}"
    )


def test_the_sdist_holds_what_its_own_tests_need(built):
    names = set(built.sdist_names)
    required = {
        "LICENSE",
        "README.md",
        "Makefile",
        "conftest.py",
        "pyproject.toml",
        ".ci/run",
        ".pre-commit-hooks.yaml",
        "rules/linear_attn.rules",
        "grammar/stampgen.lark",
        "tests/conftest.py",
        "tests/test_parser.py",
        "docs/language.md",
        "benchmarks/README.md",
    }
    assert not required - names, f"missing from the sdist: {sorted(required - names)}"
    for folder in ("tests/fixtures/", "tests/diagnostics/", "tests/snapshots/", "docs/"):
        assert any(n.startswith(folder) and not n.endswith("/") for n in names), f"no files under {folder}"


def test_the_sdist_leaves_out_caches_and_benchmark_logs(built):
    unwanted = [
        n
        for n in built.sdist_names
        if "__pycache__" in n or n.endswith((".pyc", ".pyo")) or n.startswith("benchmarks/results/")
    ]
    assert not unwanted, f"the sdist should not hold: {unwanted[:20]}"


def test_the_unpacked_sdist_runs_its_own_tests(built, tmp_path):
    with tarfile.open(built.sdist) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(tmp_path, filter="data")
        else:  # pragma: no cover - Python before 3.10.12
            tf.extractall(tmp_path)
    tree = tmp_path / f"{NAME}-{VERSION}"
    # This venv has the checkout installed (editable); point the `stampgen` namespace at the unpacked tree
    # instead, as conftest.py does where stampgen is not installed, so its tests run its own code.
    shim = tmp_path / "shim"
    (shim / "stampgen").mkdir(parents=True)
    (shim / "stampgen" / "__init__.py").write_text(f"__path__ = [{str(tree)!r}]\n", encoding="utf-8")
    env = clean_env(PYTHONPATH=str(shim))

    where = run(
        [sys.executable, "-c", "import stampgen.codegen.parser as p; print(p.__file__)"],
        cwd=tree,
        env=env,
        step="importing the unpacked tree",
    )
    location = Path(expect(where, 0, "importing stampgen.codegen.parser from the unpacked sdist").strip())
    assert location.is_relative_to(tree), f"the test would run {location}, not the unpacked sdist's code"

    tests = run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_parser.py"],
        cwd=tree,
        env=env,
        step="the sdist's tests",
    )
    output = expect(tests, 0, "running the unpacked sdist's tests/test_parser.py")
    assert re.search(r"\b\d+ passed\b", output), output


# --------------------------------------------------------------------------------------------- a fresh venv

RULES = """\
# Which attention kernel each runner of a small engine uses.

enum AttnKernel open(custom) { naive fused flash custom }  # unknown names -> custom

config attn {
    kernel: AttnKernel = naive
    decode_kernel: AttnKernel?
    verify_kernel: AttnKernel?
}

stamp AttnKernels on runner.attn_kernels {
    decode = flag attn.decode_kernel > base attn.kernel
    verify = flag attn.verify_kernel > follow decode when decode == flash > naive
}
"""

CALL_RESOLVER = """\
import sys
from types import SimpleNamespace

import stampgen.codegen
import generated.attn as attn

config = SimpleNamespace(kernel="naive", decode_kernel="flash", verify_kernel=None)
stamp = attn.resolve_attn_kernels(config)
assert stamp == attn.AttnKernels(decode="flash", verify="flash"), stamp
assert stamp.verify is attn.AttnKernel.FLASH and stamp.verify.is_flash()
assert attn.AttnKernel("a plugin's kernel") is attn.AttnKernel.CUSTOM
print(stamp)
print(stampgen.codegen.__file__)
"""


@pytest.fixture(scope="module")
def fresh_venv(built, tmp_path_factory) -> Path:
    """A new virtual environment holding the wheel, its dependencies and the neighbour pins, from PyPI."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    made = run([sys.executable, "-m", "venv", str(venv)], cwd=venv.parent, step="python -m venv", timeout=120)
    expect(made, 0, "creating a fresh virtual environment (python -m venv)")
    python = venv / "bin" / "python"
    installed = run(
        [str(python), "-m", "pip", "install", "-q", str(built.wheel), *NEIGHBOURS],
        cwd=venv.parent,
        env=clean_env(),
        step="pip install",
    )
    if installed.returncode != 0:
        pytest.fail(
            f"pip could not install the wheel with {' '.join(NEIGHBOURS)} into a fresh venv (is PyPI "
            f"reachable? do the versions agree with pyproject.toml's ranges?)\n"
            f"--- stdout ---\n{installed.stdout}\n--- stderr ---\n{installed.stderr}"
        )
    return venv


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "engine"
    (root / "rules").mkdir(parents=True)
    (root / "rules" / "attn.rules").write_text(RULES, encoding="utf-8")
    (root / "stampgen.toml").write_text('rules = "rules"\nout = "generated"\n', encoding="utf-8")
    assert not root.resolve().is_relative_to(REPO)
    return root


def test_the_wheel_works_in_a_fresh_venv_on_a_project_of_its_own(fresh_venv, project):
    stampgen = str(fresh_venv / "bin" / "stampgen")
    env = clean_env()

    def cli(*argv: str, status: int = 0) -> str:
        step = f"stampgen {' '.join(argv)}"
        return expect(run([stampgen, *argv], cwd=project, env=env, step=step), status, step)

    assert cli("check") == "", "check is quiet on clean rules"
    cli("fmt", "--check")

    cli("generate")
    module = project / "generated" / "attn.py"
    first_line = module.read_text(encoding="utf-8").splitlines()[0]
    assert re.fullmatch(r"# Code generated .* DO NOT EDIT\.", first_line), first_line
    assert "rules/attn.rules" in first_line, first_line
    assert (project / "generated" / "MANIFEST.json").is_file()
    cli("generate", "--check")  # fresh: exit 0

    explained = cli("explain", "AttnKernels", "--set", "attn.decode_kernel=flash")
    assert "decode = flash" in explained and "verify = flash" in explained, explained
    assert re.search(r"✓ follow decode when decode == flash\s+won", explained), explained

    table = cli("table", "AttnKernels")
    assert "Decision table of `AttnKernels`" in table, table
    assert "| attn.kernel | attn.decode_kernel | attn.verify_kernel |" in table, table

    assert "no stamp 'Nope'" in cli("explain", "Nope", status=2)

    called = run(
        [str(fresh_venv / "bin" / "python"), "-c", CALL_RESOLVER],
        cwd=project,
        env=env,
        step="import generated.attn",
    )
    stamp_line, codegen_file = expect(called, 0, "importing and calling generated.attn").splitlines()[-2:]
    assert stamp_line.startswith("AttnKernels(decode=")
    assert Path(codegen_file).is_relative_to(fresh_venv), f"stampgen came from {codegen_file}, not the venv"

    # A behaviour change makes the checked-in output stale: --check says so, with a diff, and writes nothing.
    rules = project / "rules" / "attn.rules"
    rules.write_text(RULES.replace("when decode == flash", "when decode == fused"), encoding="utf-8")
    before = module.read_text(encoding="utf-8")
    stale = cli("generate", "--check", status=1)
    assert any(line.startswith("+") and "AttnKernel.FUSED" in line for line in stale.splitlines()), stale
    assert module.read_text(encoding="utf-8") == before


# --------------------------------------------------------------------------------------------- pre-commit

HOOKS = REPO / ".pre-commit-hooks.yaml"


def read_hooks(text: str) -> list[dict[str, object]]:
    """The hooks of a `.pre-commit-hooks.yaml` written as a list of flat `key: value` mappings (all this
    file needs; there is no YAML library among the dependencies). Anything else in it is an error."""
    hooks: list[dict[str, object]] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith("- "):
            hooks.append({})
            line = "  " + line[2:]
        match = re.fullmatch(r"  ([a-z_]+): (.+)", line)
        assert hooks and match, f"{HOOKS.name}:{number}: not a `key: value` of a hook: {raw!r}"
        key, value = match.groups()
        assert key not in hooks[-1], f"{HOOKS.name}:{number}: {key} given twice"
        hooks[-1][key] = {"true": True, "false": False}.get(value, value)
    return hooks


def test_the_pre_commit_hooks_run_real_stampgen_commands_once_per_project():
    from stampgen.codegen.cli import build_parser

    hooks = {hook["id"]: hook for hook in read_hooks(HOOKS.read_text(encoding="utf-8"))}
    assert set(hooks) == {"stampgen-check", "stampgen-generate-check", "stampgen-fmt-check"}
    commands = {
        "stampgen-check": ["check"],
        "stampgen-generate-check": ["generate", "--check"],
        "stampgen-fmt-check": ["fmt", "--check"],
    }
    for hook_id, hook in hooks.items():
        entry = str(hook["entry"]).split()
        assert entry[0] == "stampgen" and entry[1:] == commands[hook_id], (hook_id, entry)
        build_parser().parse_args(entry[1:])  # a real subcommand with real options (raises otherwise)
        assert hook["language"] == "python", hook_id
        assert hook["pass_filenames"] is False, f"{hook_id}: stampgen finds the project's files itself"
        assert hook.get("name") and hook.get("description"), hook_id
        files = re.compile(str(hook["files"]))
        assert files.search("rules/linear_attn.rules") and not files.search("README.md"), hook_id
    assert re.search(str(hooks["stampgen-generate-check"]["files"]), "generated/linear_attn.py")
