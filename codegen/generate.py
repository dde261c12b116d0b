"""`stampgen generate`: rules/NAME.rules → generated/NAME.py and generated/test_NAME.py.

Load and check every rules file (nothing is written if any has an error), render everything in memory,
format it with the pinned ruff, then write only the files that changed, atomically, and remove the files
stampgen owns that no rules file produces any more (codegen/writer.py). `check=True` writes nothing: it
prints a unified diff of what would change and says whether the output is stale (a manifest whose only
change would be its fingerprint does not make it stale: the generator changed, its output did not).

Before any of that, a fast path: when the manifest records the fingerprint of exactly these inputs (rules
sources, templates, generator sources, pinned tool versions) and every owned file still has the hash the
manifest records, the output is fresh without parsing or rendering anything.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TextIO

from stampgen.codegen import writer
from stampgen.codegen.project import Project, find_project

RUFF_VERSION = "0.17.5"  # pinned in pyproject.toml; another version formats differently
LINE_LENGTH = 110
TARGET_VERSION = "py310"

CODEGEN_DIR = Path(__file__).resolve().parent
# The files whose content decides the output (the CLI and other commands are not among them).
GENERATOR_SOURCES = (
    "grammar/stampgen.lark",
    "codegen/checks.py",
    "codegen/diagnostics.py",
    "codegen/domains.py",
    "codegen/generate.py",
    "codegen/interpreter.py",
    "codegen/ir.py",
    "codegen/load.py",
    "codegen/model.py",
    "codegen/naming.py",
    "codegen/parser.py",
    "codegen/project.py",
    "codegen/render.py",
    "codegen/writer.py",
)
TOOL_VERSIONS = ("ruff", "jinja2", "msgspec", "lark")
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


class GenerateError(Exception):
    """A problem with the request itself (bad paths, formatter missing); reported as one line."""


def run_generate(
    rule_paths: list[str],
    out_dir: str | None = None,
    check: bool = False,
    *,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Generate (or, with check=True, verify) the output of every rules file. 0 ok/fresh, 1 errors/stale."""
    try:
        return _generate(rule_paths, out_dir, check, out, err)
    except (GenerateError, writer.WriteError) as exc:
        print(f"stampgen generate: error: {exc}", file=err)
        return 1
    except OSError as exc:
        print(f"stampgen generate: error: {exc}", file=err)
        return 1


def _generate(rule_paths: list[str], out_dir: str | None, check: bool, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen.load import discover

    project = find_project()
    paths = discover(list(rule_paths) or None, project)
    if not paths:
        where = project.relative(project.rules_dir)
        raise GenerateError(f"no rules files (looked for {where}/*.rules); name the files to generate from")
    sources = [_source_name(project, p) for p in paths]
    modules = _module_names(sources)
    target = Path(out_dir) if out_dir is not None else project.out_dir
    display_dir = _shown(target)
    package, root_expr = _package_and_root(project, target)
    fingerprint = compute_fingerprint(project, sources, package, root_expr)
    if writer.is_fresh(target, fingerprint):
        return 0

    outputs = render_outputs(project, sources, modules, package, root_expr, err)
    if outputs is None:
        return 1
    plan = writer.plan(target, outputs, fingerprint, sources)
    if check:
        if not plan.outputs_stale:
            return 0
        out.write(writer.render_diff(plan, display_dir))
        names = [f"{display_dir}/{n}" for n in plan.written() + plan.removed()] or [
            f"{display_dir}/{writer.MANIFEST}"
        ]
        print(f"stampgen generate --check: stale: {', '.join(names)}; run `make codegen`", file=err)
        return 1
    writer.apply(plan)
    if plan.stale:
        written, removed = plan.written(), plan.removed()
        summary = f"{display_dir}: {len(written)} written, {len(removed)} removed"
        if not written and not removed:
            summary = f"{display_dir}: {writer.MANIFEST} updated (generator changed, output identical)"
        print(summary, file=out)
    return 0


def render_outputs(
    project: Project, sources: list[str], modules: list[str], package: str, root_expr: str, err: TextIO
) -> list[writer.Output] | None:
    """Every output file, formatted, in memory; None (diagnostics printed) if any rules file has errors."""
    from stampgen.codegen import render
    from stampgen.codegen.diagnostics import render as render_diagnostic
    from stampgen.codegen.diagnostics import sort_key
    from stampgen.codegen.load import load

    loaded = [load(str(project.root / source), source) for source in sources]
    failed = False
    for item in loaded:
        if not item.ok:
            failed = True
            for diag in sorted(item.diagnostics, key=sort_key):
                print(render_diagnostic(diag, item.source), file=err)
    if failed:
        return None
    texts: list[tuple[str, str, str]] = []  # (file name, unformatted text, rules source)
    for item, module in zip(loaded, modules):
        assert item.model is not None
        try:
            view = render.build_view(item.model, item.path, module)
        except render.RenderError as exc:
            for diag in sorted(exc.diagnostics, key=sort_key):
                print(render_diagnostic(diag, item.source), file=err)
            failed = True
            continue
        context = render.tests_context(item.model, view, package, root_expr)
        texts.append((f"{module}.py", render.render_module(view), item.path))
        texts.append((f"test_{module}.py", render.render_tests(view, context), item.path))
    if failed:
        return None
    formatted = format_python([text for _, text, _ in texts])
    return [writer.Output(name, text, source) for (name, _, source), text in zip(texts, formatted)]


# --------------------------------------------------------------------------------------------- formatting


def ruff_command() -> list[str]:
    """The ruff next to this Python (the venv's), else `python -m ruff`."""
    exe = Path(sys.executable).with_name("ruff.exe" if os.name == "nt" else "ruff")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "ruff"]


def format_python(texts: list[str]) -> list[str]:
    """Format with the pinned ruff, ignoring any configuration file (output must not depend on it)."""
    try:
        version = importlib.metadata.version("ruff")
    except importlib.metadata.PackageNotFoundError:
        raise GenerateError(f"ruff is not installed; stampgen formats with ruff=={RUFF_VERSION}") from None
    if version != RUFF_VERSION:
        raise GenerateError(
            f"stampgen formats with ruff=={RUFF_VERSION} (pinned in pyproject.toml), found {version}; "
            "reinstall the pinned version (make install)"
        )
    if not texts:
        return []
    with tempfile.TemporaryDirectory(prefix="stampgen-format-") as tmp:
        files = []
        for i, text in enumerate(texts):
            path = Path(tmp) / f"out_{i}.py"
            path.write_bytes(text.encode("utf-8"))
            files.append(str(path))
        cmd = ruff_command() + [
            "format",
            "--isolated",
            "--no-cache",
            "--quiet",
            f"--line-length={LINE_LENGTH}",
            f"--target-version={TARGET_VERSION}",
            *files,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise GenerateError(
                "ruff could not format the generated code (a stampgen bug; please report it): "
                + (proc.stderr.strip() or proc.stdout.strip())
            )
        return [Path(f).read_bytes().decode("utf-8") for f in files]


# --------------------------------------------------------------------------------------------- names and paths


def _source_name(project: Project, path: str) -> str:
    """A rules file as the output names it: relative to the project root, with `/`."""
    text = project.relative(path)
    if not _SAFE_PATH.match(text.lstrip("/")) or "\n" in text:
        raise GenerateError(
            f"{path!r}: stampgen names this path in generated code; use letters, digits, `_`, `.`, `-`, `/`"
        )
    return text


def _shown(path: Path) -> str:
    """A folder as messages name it: relative to the working directory when inside it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix().rstrip("/")


def _module_names(sources: list[str]) -> list[str]:
    from stampgen.codegen.model import is_valid_identifier

    modules = []
    seen: dict[str, str] = {}
    for source in sources:
        name = Path(source).name
        if not name.endswith(".rules"):
            raise GenerateError(f"{source}: a rules file is named NAME.rules")
        module = name[: -len(".rules")]
        if not is_valid_identifier(module) or module.startswith("test"):
            raise GenerateError(
                f"{source}: `{module}` becomes the module generated/{module}.py; it must be a Python name "
                "that is not a keyword and starts with neither `_` nor `test`"
            )
        if module in seen:
            raise GenerateError(f"{seen[module]} and {source} would both generate {module}.py")
        seen[module] = source
        modules.append(module)
    return modules


def _package_and_root(project: Project, target: Path) -> tuple[str, str]:
    """The package generated tests import the module from, and how they find the project root (relative
    to themselves, so that the output does not depend on where it was generated)."""
    package = project.package_for(target)
    if package is None:
        name = target.resolve().name
        package = name if name.isidentifier() else "generated"
    try:
        depth = len(target.resolve().relative_to(project.root).parts)
    except ValueError:
        return package, f"Path({str(project.root)!r})"
    return package, f"Path(__file__).resolve().parents[{depth}]"


def compute_fingerprint(project: Project, sources: list[str], package: str, root_expr: str) -> str:
    """sha256 of everything the output depends on: rules, templates, generator sources, tool versions."""
    h = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data)

    add("format", b"stampgen-generate/1")
    add("package", f"{package}\0{root_expr}".encode())
    for source in sorted(sources):
        add(f"rules:{source}", _normalized(project.root / source))
    for template in sorted(p.name for p in (CODEGEN_DIR / "templates").glob("*.jinja")):
        add(f"template:{template}", _normalized(CODEGEN_DIR / "templates" / template))
    root = CODEGEN_DIR.parent
    for name in GENERATOR_SOURCES:
        add(f"generator:{name}", _normalized(root / name))
    for tool in TOOL_VERSIONS:
        try:
            version = importlib.metadata.version(tool)
        except importlib.metadata.PackageNotFoundError:
            version = "missing"
        add(f"version:{tool}", version.encode())
    return h.hexdigest()


def _normalized(path: Path) -> bytes:
    try:
        return path.read_bytes().replace(b"\r\n", b"\n")
    except OSError:
        return b"\0missing\0"
