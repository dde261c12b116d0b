"""Reading .rules files: path discovery, parse, check. The front half of every command."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from stampgen.codegen import ir
from stampgen.codegen.analysis import analyze as dead_rules
from stampgen.codegen.checks import check
from stampgen.codegen.diagnostics import Diagnostic, Note, error, sort_key
from stampgen.codegen.ir import Loc
from stampgen.codegen.model import Model
from stampgen.codegen.parser import parse
from stampgen.codegen.project import Project, find_project


class Loaded(msgspec.Struct):
    path: str  # as given / relative to the working directory, used in every position
    source: str | None
    model: Model | None
    diagnostics: list[Diagnostic]

    @property
    def ok(self) -> bool:
        return self.model is not None and not any(d.is_error for d in self.diagnostics)


def discover(paths: list[str] | None, project: Project | None = None) -> list[str]:
    """The rules files to work on: the given paths (folders expand to their *.rules), else the project's
    rules folder (`rules/*.rules` below the project root), named relative to the working directory."""
    if not paths:
        project = project or find_project()
        return sorted(from_cwd(p) for p in project.rules_dir.glob("*.rules"))
    found: list[str] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found += sorted(str(q) for q in p.glob("*.rules"))
        else:
            found.append(raw)
    return found


def unreadable(paths: Iterable[str]) -> list[Diagnostic]:
    """An `unreadable` error for each file that cannot be opened (missing, a folder, no permission).

    Commands check this before reading anything and exit 2: it is a problem of the environment or of the
    command line, not a finding. A file that opens but is not UTF-8 text is reported by `load` like any
    other problem in a rules file (exit 1)."""
    found = []
    for path in paths:
        try:
            with open(path, "rb"):
                pass
        except OSError as exc:
            found.append(_unreadable(path, exc.strerror or str(exc)))
    return found


def _unreadable(name: str, reason: str) -> Diagnostic:
    return error("unreadable", f"cannot read the file: {reason}", Loc(name, 1, 1, 1, 1))


Reader = Callable[[str], "str | None"]  # a rules file's text by its location, None when it cannot be read


def _read_file(location: str) -> str | None:
    try:
        return Path(location).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def load_text(
    source: str,
    path: str,
    *,
    analyze: bool = True,
    origin: str | None = None,
    read: Reader = _read_file,
    _importing: tuple[str, ...] = (),
) -> Loaded:
    """Parse and check `source`; on a clean check, also what only a reviewer needs (the dead-rule analysis,
    codegen/analysis.py, and what generating would refuse), which a caller that reads only the model (generate,
    explain, table, diff) skips with `analyze=False`.

    `import "x.rules"` is resolved next to `origin` (where the text came from; default `path`) through
    `read` (default: the file system; `diff` reads a git revision) and named next to `path`."""
    rules, diags = parse(source, path)
    if rules is None:
        return Loaded(path, source, None, diags)
    origin = origin if origin is not None else path
    rules, import_diags = _resolve_imports(rules, origin, read, (*_importing, _key(origin)))
    if import_diags:
        return Loaded(path, source, None, sorted(diags + import_diags, key=sort_key))
    model, check_diags = check(rules, generation=analyze)
    diags += check_diags
    if analyze and model is not None:
        diags = sorted(diags + dead_rules(model, check_diags), key=sort_key)
    return Loaded(path, source, model, diags)


def _line(text: str, number: int) -> str | None:
    """Line `number` of `text` as the parser counts lines (\\n only), None past the end."""
    lines = text.split("\n")
    return lines[number - 1].removesuffix("\r") if 1 <= number <= len(lines) else None


def _key(location: str) -> str:
    return posixpath.normpath(location.replace(os.sep, "/"))


def _resolve_imports(
    rules: ir.RulesFile, origin: str, read: Reader, importing: tuple[str, ...]
) -> tuple[ir.RulesFile, list[Diagnostic]]:
    """The file with its imports resolved: each imported file loaded (itself checked, its own imports
    resolved), its vocabulary attached; a missing file, a cycle or an imported file with errors is an
    error at the import's path."""
    files: dict[str, ir.ImportedFile] = {}
    diags: list[Diagnostic] = []
    for decl in rules.decls:
        if not isinstance(decl, ir.ImportDecl):
            continue
        name = _key(posixpath.join(posixpath.dirname(rules.path), decl.path))
        location = _key(posixpath.join(posixpath.dirname(origin.replace(os.sep, "/")), decl.path))
        if "/" in decl.path or "\\" in decl.path:
            diags.append(
                error(
                    "import-not-sibling",
                    f'import "{decl.path}": an imported file sits beside the one that imports it',
                    decl.path_loc,
                    "its module is generated beside this one's, from the same rules folder",
                )
            )
            continue
        if not decl.path.endswith(".rules"):
            diags.append(
                error(
                    "import-not-rules",
                    f'import "{decl.path}": a rules file is named NAME.rules',
                    decl.path_loc,
                )
            )
            continue
        if location in importing:
            chain = [*importing[importing.index(location) :], location]
            diags.append(
                error(
                    "import-cycle",
                    "import cycle: " + " -> ".join(posixpath.basename(c) for c in chain),
                    decl.path_loc,
                    "move what both files need into a third file that both import",
                )
            )
            continue
        text = read(location)
        if text is None:
            diags.append(
                error("import-not-found", f'import "{decl.path}": cannot read {name}', decl.path_loc)
            )
            continue
        loaded = load_text(text, name, analyze=False, origin=location, read=read, _importing=importing)
        if not loaded.ok or loaded.model is None:
            first = next((d for d in loaded.diagnostics if d.is_error), None)
            if first is not None and first.code == "import-cycle":  # the cycle runs through this import
                diags.append(error("import-cycle", first.message, decl.path_loc))
                continue
            found = error(
                "import-has-errors",
                f"{name}, imported here, has errors",
                decl.path_loc,
                f"run `stampgen check {name}`",
            )
            if first is not None:
                note = Note(first.message, first.loc, _line(text, first.loc.line))
                found = msgspec.structs.replace(found, notes=(note,))
            diags.append(found)
            continue
        imported = loaded.model.file
        vocabulary = [d for f in imported.imported for d in f.decls]
        vocabulary += [d for d in imported.decls if isinstance(d, (ir.EnumDecl, ir.ConfigDecl, ir.FactsDecl))]
        files.setdefault(
            name, ir.ImportedFile(name, posixpath.basename(name)[: -len(".rules")], tuple(vocabulary))
        )
    if diags:
        return rules, diags
    return msgspec.structs.replace(rules, imported=tuple(files.values())), []


def from_cwd(path: Path) -> str:
    """`path` relative to the working directory, `../` included (as ruff names files), so that a command
    run from a subfolder of the project still names the rules files it found as the user can type them."""
    try:
        return os.path.relpath(path.resolve(), Path.cwd().resolve())
    except ValueError:  # another drive (Windows)
        return str(path)


def load(path: str, name: str | None = None, *, analyze: bool = True) -> Loaded:
    """Parse and check one file, named `name` (default: `path`) in every position; a file that cannot be
    read is a diagnostic, never a traceback."""
    name = path if name is None else name
    try:
        source = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Loaded(name, None, None, [_unreadable(name, reason)])
    return load_text(source, name, analyze=analyze, origin=path)
