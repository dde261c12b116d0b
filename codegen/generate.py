"""`stampgen generate`: rules/NAME.rules → generated/NAME.py and generated/test_NAME.py.

Load and check every rules file (nothing is written if any has an error), render everything in memory,
format it with ruff (a version in RUFF_RANGE, with its default settings), then write only the files that
changed, atomically, and remove the files stampgen owns that no rules file produces any more
(codegen/writer.py). `check=True` writes nothing: it prints a unified diff of what would change and says
whether the output is stale (a manifest whose only change would be its fingerprint does not make it
stale: the generator changed, its output did not).

Before any of that, a fast path: when the manifest records the fingerprint of exactly these inputs (rules
sources, templates, generator sources, stampgen's version, the ruff range) and every owned file still has
the hash the manifest records, the output is fresh without parsing or rendering anything.
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
from typing import NamedTuple, TextIO

import msgspec

from stampgen.codegen import writer
from stampgen.codegen.progress import Progress
from stampgen.codegen.project import Project, ProjectError, find_project

# The ruff versions the output is formatted with, exactly as pyproject.toml's dependency states them (a test
# holds the two equal). tests/test_formatter_range.py shows the output byte-identical at both ends; any
# other version may format differently, so `generate` refuses it rather than report stale output.
RUFF_RANGE = (">=0.17.5", "<0.18")
RUFF_REQUIREMENT = "ruff" + ",".join(RUFF_RANGE)
RUFF_ENV = "STAMPGEN_RUFF"  # a ruff executable to format with instead of the installed one
EXIT_ERROR = 2  # a usage or environment error (the CLI's EXIT_USAGE); 1 is for rules errors and stale output

CODEGEN_DIR = Path(__file__).resolve().parent
# The files whose content decides the output (the CLI and other commands are not among them).
GENERATOR_SOURCES = (
    "grammar/stampgen.lark",
    "codegen/analysis.py",
    "codegen/checks/__init__.py",
    "codegen/checks/across_files.py",
    "codegen/checks/chains.py",
    "codegen/checks/declarations.py",
    "codegen/checks/expressions.py",
    "codegen/checks/generation.py",
    "codegen/checks/imports.py",
    "codegen/checks/parity.py",
    "codegen/checks/references.py",
    "codegen/checks/report.py",
    "codegen/checks/symbols.py",
    "codegen/checks/type_refs.py",
    "codegen/checks/waivers.py",
    "codegen/diagnostics.py",
    "codegen/domains.py",
    "codegen/emit/__init__.py",
    "codegen/emit/blocks.py",
    "codegen/emit/enums.py",
    "codegen/emit/exprs.py",
    "codegen/emit/facts.py",
    "codegen/emit/gates.py",
    "codegen/emit/module.py",
    "codegen/emit/names.py",
    "codegen/emit/parities.py",
    "codegen/emit/positions.py",
    "codegen/emit/reads.py",
    "codegen/emit/stamps.py",
    "codegen/emit/suite.py",
    "codegen/generate.py",
    "codegen/interpreter.py",
    "codegen/ir.py",
    "codegen/load.py",
    "codegen/model.py",
    "codegen/naming.py",
    "codegen/parser.py",
    "codegen/progress.py",
    "codegen/project.py",
    "codegen/render.py",
    "codegen/table.py",
    "codegen/testing.py",
    "codegen/writer.py",
)
_SAFE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


class GenerateError(Exception):
    """A problem with the request itself (bad paths, formatter missing); reported as one line, exit 2."""


def run_generate(
    rule_paths: list[str],
    out_dir: str | None = None,
    check: bool = False,
    *,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
    quiet: bool = False,
) -> int:
    """Generate (or, with check=True, verify) the output of every rules file. 0 ok/fresh, 1 rules errors or
    stale output, 2 a problem with the request or the environment (paths, config, formatter, output folder).
    `quiet` drops the summary line of a successful run."""
    try:
        return _generate(rule_paths, out_dir, check, out, err, quiet)
    except (GenerateError, ProjectError, writer.WriteError, OSError) as exc:
        print(f"stampgen generate: error: {exc}", file=err)
        return EXIT_ERROR


def _generate(
    rule_paths: list[str], out_dir: str | None, check: bool, out: TextIO, err: TextIO, quiet: bool
) -> int:
    from stampgen.codegen.diagnostics import render as render_diagnostic
    from stampgen.codegen.load import discover, unreadable

    progress = Progress("generate", err, enabled=not quiet)
    project = find_project()
    paths = discover(list(rule_paths) or None, project)
    if not paths:
        where = project.relative(project.rules_dir)
        raise GenerateError(f"no rules files (looked for {where}/*.rules); name the files to generate from")
    missing = unreadable(paths)
    if missing:
        for diag in missing:
            print(render_diagnostic(diag, None), file=err)
        return EXIT_ERROR
    find_formatter()  # a missing or unsupported ruff is refused even when the output is fresh
    sources = [_source_name(project, p) for p in paths]
    modules = _module_names(sources)
    target = Path(out_dir) if out_dir is not None else project.out_dir
    display_dir = _shown(project, target)
    package, root_expr = _package_and_root(project, target)
    fingerprint = compute_fingerprint(project, sources, package, root_expr)
    if writer.is_fresh(target, fingerprint):
        if not check and not quiet:
            print(f"{display_dir}: up to date", file=out)
        return 0

    outputs = render_outputs(project, sources, modules, package, root_expr, err, progress)
    if outputs is None:
        return 1
    progress.stage(f"writing {display_dir}")
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
    written, removed = plan.written(), plan.removed()
    summary = f"{display_dir}: {len(written)} written, {len(removed)} removed"
    if not plan.stale:
        summary = f"{display_dir}: up to date"
    elif not written and not removed:
        summary = f"{display_dir}: {writer.MANIFEST} updated (generator changed, output identical)"
    if not quiet:
        print(summary, file=out)
    return 0


def render_outputs(
    project: Project,
    sources: list[str],
    modules: list[str],
    package: str,
    root_expr: str,
    err: TextIO,
    progress: Progress | None = None,
) -> list[writer.Output] | None:
    """Every output file, formatted, in memory; None (diagnostics printed) if any rules file has errors."""
    from stampgen.codegen import render
    from stampgen.codegen.diagnostics import Diagnostic, sort_key
    from stampgen.codegen.diagnostics import render as render_diagnostic
    from stampgen.codegen.load import Loaded, load

    progress = progress or Progress("generate", err, enabled=False)
    loaded = []
    for source in sources:
        progress.stage(f"checking {source}")
        loaded.append(load(str(project.root / source), source, analyze=False))  # warnings are check's

    def report(diagnostics: list[Diagnostic], item: Loaded) -> None:
        # generated code names the file relative to the project root; a user reads it from where they are
        shown = _shown(project, project.root / item.path)
        for diag in sorted(diagnostics, key=sort_key):
            if diag.loc.path == item.path:
                notes = tuple(
                    msgspec.structs.replace(n, loc=msgspec.structs.replace(n.loc, path=shown))
                    if n.loc.path == item.path
                    else n
                    for n in diag.notes
                )
                diag = msgspec.structs.replace(
                    diag, loc=msgspec.structs.replace(diag.loc, path=shown), notes=notes
                )
            print(render_diagnostic(diag, item.source), file=err)

    failed = False
    for item in loaded:
        if not item.ok:
            failed = True
            report(item.diagnostics, item)
    if failed:
        return None
    for item in loaded:
        missing = _imports_not_generated(item, set(sources))
        if missing:
            failed = True
            report(missing, item)
    if failed:
        return None
    texts: list[tuple[str, str, str]] = []  # (file name, unformatted text, rules source)
    for item, module in zip(loaded, modules):
        assert item.model is not None
        stamps = len(item.model.stamps)
        progress.stage(f"rendering {item.path} ({stamps} stamp{'' if stamps == 1 else 's'})")
        try:
            files = render.render_files(item.model, item.path, module, package, root_expr)
        except render.RenderError as exc:
            report(exc.diagnostics, item)
            failed = True
            continue
        texts += [(name, text, item.path) for name, text in files]
    if failed:
        return None
    progress.stage(f"formatting {len(texts)} files")
    formatted = format_python([text for _, text, _ in texts])
    return [writer.Output(name, text, source) for (name, _, source), text in zip(texts, formatted)]


def _imports_not_generated(item, sources: set[str]) -> list:
    """An error at each import whose file (or a file it imports in turn) this run does not generate: the
    importing module would import a module that is not there."""
    import posixpath

    from stampgen.codegen import ir
    from stampgen.codegen.diagnostics import error

    assert item.model is not None
    rules = item.model.file
    reached = {f.path: {f.path} | {d.loc.path for d in f.decls} for f in rules.imported}
    found = []
    for decl in rules.decls:
        if not isinstance(decl, ir.ImportDecl):
            continue
        name = posixpath.normpath(posixpath.join(posixpath.dirname(rules.path), decl.path))
        absent = sorted(reached.get(name, set()) - sources)
        if absent:
            found.append(
                error(
                    "import-not-generated",
                    f"{', '.join(absent)}, imported here, is not generated by this run: "
                    f"the module of {rules.path} would import a module that is not there",
                    decl.path_loc,
                    "name it too, or run `stampgen generate` without paths (the whole rules folder)",
                )
            )
    return found


# --------------------------------------------------------------------------------------------- formatting


class Formatter(NamedTuple):
    command: list[str]  # the ruff executable (or `python -m ruff`)
    version: str


def ruff_command() -> list[str]:
    """The ruff next to this Python (the venv's), else `python -m ruff`."""
    exe = Path(sys.executable).with_name("ruff.exe" if os.name == "nt" else "ruff")
    return [str(exe)] if exe.is_file() else [sys.executable, "-m", "ruff"]


def find_formatter() -> Formatter:
    """The ruff to format with: $STAMPGEN_RUFF when set (its version as `ruff --version` reports it), else
    the installed ruff package. GenerateError when it is missing or outside RUFF_RANGE."""
    override = os.environ.get(RUFF_ENV)
    if override:
        command, version, origin = [override], _reported_version(override), f"{RUFF_ENV}={override}"
    else:
        try:
            version = importlib.metadata.version("ruff")
        except importlib.metadata.PackageNotFoundError:
            raise GenerateError(
                f"ruff is not installed; stampgen formats with {RUFF_REQUIREMENT} "
                f"(pip install '{RUFF_REQUIREMENT}')"
            ) from None
        command, origin = ruff_command(), "installed"
    if not in_ruff_range(version):
        raise GenerateError(
            f"stampgen formats with {RUFF_REQUIREMENT}, found ruff {version} ({origin}); "
            "install a ruff in that range"
        )
    return Formatter(command, version)


def _reported_version(exe: str) -> str:
    try:
        proc = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise GenerateError(f"{RUFF_ENV}={exe}: cannot run it: {reason}") from None
    match = re.fullmatch(r"ruff (\S+)", proc.stdout.strip())
    if proc.returncode != 0 or match is None:
        said = (proc.stdout.strip() or proc.stderr.strip())[:200]
        raise GenerateError(f"{RUFF_ENV}={exe}: `--version` did not report `ruff VERSION` (it said {said!r})")
    return match[1]


def in_ruff_range(version: str) -> bool:
    """Whether a ruff version (`X.Y.Z`, digits only) lies in RUFF_RANGE; anything else does not."""
    lower, upper = (_release(bound.lstrip(">=<")) for bound in RUFF_RANGE)
    found = _release(version)
    return found is not None and lower is not None and upper is not None and lower <= found < upper


def _release(version: str) -> tuple[int, ...] | None:
    if not re.fullmatch(r"\d+(\.\d+)*", version):
        return None  # a pre-release, a local build: not a version the range was shown to hold for
    return tuple(int(part) for part in version.split("."))


def format_python(texts: list[str]) -> list[str]:
    """Format with ruff's default settings, ignoring any configuration file (output must not depend on it,
    and a user's own `ruff format` with the defaults leaves the generated files as they are)."""
    formatter = find_formatter()
    if not texts:
        return []
    with tempfile.TemporaryDirectory(prefix="stampgen-format-") as tmp:
        files = []
        for i, text in enumerate(texts):
            path = Path(tmp) / f"out_{i}.py"
            path.write_bytes(text.encode("utf-8"))
            files.append(str(path))
        # no --quiet: it hides the parse error that says why ruff failed; its summary is captured anyway
        cmd = [*formatter.command, "format", "--isolated", "--no-cache", *files]
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


def _shown(project: Project, path: Path) -> str:
    """A folder as messages name it: inside the project, relative to the working directory (`../`
    included, as diagnostics name rules files, so a run from a subfolder names it as the user would type
    it); elsewhere, as given."""
    target = path.resolve()
    if target != project.root and project.root not in target.parents:
        return path.as_posix().rstrip("/")
    return Path(os.path.relpath(target, Path.cwd().resolve())).as_posix()


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
    """sha256 of everything the output depends on: rules, templates, generator sources, stampgen's version
    and the ruff range (not the exact ruff: every version in the range formats alike, so two machines with
    different ruffs in it agree on the manifest)."""
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
    add("stampgen", stampgen_version().encode())
    add("formatter", RUFF_REQUIREMENT.encode())
    return h.hexdigest()


def stampgen_version() -> str:
    try:
        return importlib.metadata.version("stampgen")
    except importlib.metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
        return "unknown"


def _normalized(path: Path) -> bytes:
    try:
        return path.read_bytes().replace(b"\r\n", b"\n")
    except OSError:
        return b"\0missing\0"
