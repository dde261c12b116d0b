"""What `check` imports and finds in modules: each parity registry imports and is a mapping of names to
classes whose hooks the parity names, with enough draft/target pairs and no waiver that waives nothing; each
guarded consumer module can be found and binds its consumer classes. `stampgen check --no-import` skips it:
importing runs those modules' code."""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import io
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from stampgen.codegen import ir
from stampgen.codegen.checks.parity import draft_pattern, is_registry, parity_pairs
from stampgen.codegen.diagnostics import Diagnostic, did_you_mean, error, sort_key, warning
from stampgen.codegen.model import Model

_IMPORT_HINT = "make it importable from the project root, or skip the imports: `stampgen check --no-import`"


def check_imports(model: Model, search_path: str | None = None) -> list[Diagnostic]:
    """Import what the rules name and hold it to them, so that no generated test can pass vacuously: each
    parity registry must import and be a mapping of names to classes, each of its hooks must be on some class
    (a misspelt hook finds no offender, ever), each waiver must name a draft that is an offender; each
    guarded consumer module must import and hold its consumer classes. `search_path` (the project root) is
    put first on sys.path meanwhile. Importing runs those modules' code: `stampgen check --no-import` skips
    this."""
    diags: list[Diagnostic] = []
    with _on_path(search_path):
        for decl in model.parities:
            diags += _registry_findings(decl)
        for guard in model.guards:
            diags += _consumer_findings(guard)
    return sorted(diags, key=sort_key)


@contextlib.contextmanager
def _on_path(folder: str | None) -> Iterator[None]:
    if folder is None:
        yield
        return
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(folder)


def import_module(name: str) -> tuple[ModuleType | None, str]:
    """The module, or None and why it does not import. What it prints is kept out of the report (stdout
    may be JSON); SystemExit is a failure to import like any other."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return importlib.import_module(name), ""
    except (Exception, SystemExit) as exc:
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _public_names(module: ModuleType) -> list[str]:
    return [n for n in dir(module) if not n.startswith("_")]


def _registry_findings(decl: ir.ParityDecl) -> list[Diagnostic]:
    module_name, _, attribute = decl.registry.partition(":")
    module, why = import_module(module_name)
    if module is None:
        return [
            error(
                "registry-not-importable",
                f"the registry module `{module_name}` of parity `{decl.name.value}` does not import: {why}",
                decl.registry_loc,
                _IMPORT_HINT,
            )
        ]
    if not hasattr(module, attribute):
        return [
            error(
                "unknown-registry",
                f"`{module_name}` has no `{attribute}`",
                decl.registry_loc,
                did_you_mean(attribute, _public_names(module)),
            )
        ]
    registry = getattr(module, attribute)
    if not is_registry(registry):
        return [
            error(
                "registry-not-a-mapping",
                f"`{decl.registry}` is a {type(registry).__name__}, not a mapping of names to classes",
                decl.registry_loc,
                'the registry maps each architecture name to its class: {"QwenMTP": QwenMTP, ...}',
            )
        ]
    diags = []
    attributes = {n for cls in registry.values() for n in dir(cls) if not n.startswith("__")}
    for hook in decl.hooks:
        if not any(hasattr(cls, hook.value) for cls in registry.values()):
            diags.append(
                error(
                    "unknown-hook",
                    f"no class of `{decl.registry}` has `{hook.value}`: parity `{decl.name.value}` would find "
                    "no offender, whatever the drafts do",
                    hook.loc,
                    did_you_mean(hook.value, attributes),
                )
            )
    pattern = draft_pattern(decl)
    excluded = {n.value for n in decl.exclude}
    pairs, offences = parity_pairs(decl, registry)
    targets = dict(pairs)
    at_least = decl.at_least if decl.at_least is not None else 1
    if len(pairs) < at_least and pattern is not None:
        diags.append(
            error(
                "too-few-pairs",
                f"parity `{decl.name.value}` finds {len(pairs)} draft/target pair(s) in `{decl.registry}`, fewer "
                f"than the {at_least} it requires",
                decl.name.loc,
                "check the draft pattern and the target suffixes against the registry's names",
            )
        )
    for waiver in decl.waivers:
        cls = waiver.cls.value
        if cls in excluded or pattern is None or pattern.search(cls) is None:
            continue  # the checker said so without importing
        if cls not in registry:
            diags.append(
                warning(
                    "stale-waiver",
                    f"`{cls}` is not a class of `{decl.registry}`: the waiver waives nothing",
                    waiver.cls.loc,
                    did_you_mean(cls, registry) or "remove the waiver",
                )
            )
        elif cls not in offences:
            why = (
                f"answers the hooks its target `{targets[cls]}` answers"
                if cls in targets
                else f"has no target in `{decl.registry}`, so parity `{decl.name.value}` never checks it"
            )
            diags.append(
                warning(
                    "stale-waiver",
                    f"draft `{cls}` {why}: the waiver waives nothing",
                    waiver.cls.loc,
                    "remove the waiver",
                )
            )
    return diags


def _consumer_findings(guard: ir.GuardDecl) -> list[Diagnostic]:
    # Found, not run: a consumer module may load a GPU stack when imported (seconds of torch), and check
    # must stay fast. The module's source is read for the names it binds at its top level; the generated
    # guard tests import it and build each consumer.
    names, why = _module_top_level_names(guard.module)
    if names is None:
        return [
            error(
                "consumer-module-not-importable",
                f"the consumer module `{guard.module}` cannot be found: {why}",
                guard.module_loc,
                _IMPORT_HINT,
            )
        ]
    return [
        error(
            "unknown-consumer",
            f"`{guard.module}` has no class `{consumer.value}`: its guard test could not build it",
            consumer.loc,
            did_you_mean(consumer.value, names),
        )
        for consumer in guard.consumers
        if consumer.value not in names
    ]


def _module_top_level_names(name: str) -> tuple[set[str] | None, str]:
    """The names a module's source binds at its top level (classes, functions, assignments, imports), or
    None and why it cannot be found; a module without Python source is imported instead."""
    try:
        spec = importlib.util.find_spec(name)
    except (Exception, SystemExit) as exc:  # a parent package that fails to import, a bad name
        return None, f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    if spec is None:
        return None, f"no module named {name!r}"
    source = None
    if spec.origin and spec.origin.endswith(".py"):
        try:
            source = Path(spec.origin).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            source = None
    if source is None:
        module, why = import_module(name)
        return (None, why) if module is None else (set(_public_names(module)), "")
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return None, f"SyntaxError: {exc.msg} (line {exc.lineno})"
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names, ""
