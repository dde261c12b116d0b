"""The `stampgen` command line: check, generate, fmt, explain, table, diff.

Exit codes scripts can trust: 0 ok; 1 findings only (errors in rules files, stale output, unformatted
files, behaviour changes, a violation in `explain`); 2 every usage or environment error (bad arguments, a
path that cannot be read, an unknown stamp, a table too large, no rules files, a bad project config, the
formatter missing or unsupported, an output folder problem, git failing; an internal error too); 130 when
interrupted. Nothing a user does prints a Python traceback (STAMPGEN_DEBUG=1 shows one for internal errors).

Quiet on success: `check` prints nothing; `generate` and `fmt` print one summary line, which `--quiet`
drops. Errors are never dropped.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

# The rest of stampgen is imported where it is used, so that importing it happens inside main()'s
# handlers: a Ctrl-C or an error while importing ends in one line like anywhere else in a command.
if TYPE_CHECKING:
    from stampgen.codegen.load import Loaded
    from stampgen.codegen.model import Model

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEBUG_ENV = "STAMPGEN_DEBUG"


class UsageError(Exception):
    """A usage or environment error: reported as `stampgen COMMAND: error: MESSAGE`, exit 2."""


class _Exit(Exception):
    """Stop the command with this status; what the user needs to know has been printed already."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


class _ShowVersion(Exception):
    pass


class _VersionAction(argparse.Action):
    """`--version` answers before argparse asks for a command (argparse's own prints to sys.stdout)."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: object):
        super().__init__(
            option_strings,
            dest=argparse.SUPPRESS,
            default=argparse.SUPPRESS,
            nargs=0,
            help="print the version",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        raise _ShowVersion()


class _ArgError(Exception):
    def __init__(self, usage: str, message: str):
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # reported by main() on the caller's stream, exit 2
        raise _ArgError(self.format_usage(), f"{self.prog}: error: {message}")


def _print_diagnostics(loaded: Loaded, err: TextIO) -> None:
    from stampgen.codegen.diagnostics import render

    for diag in loaded.diagnostics:
        print(render(diag, loaded.source), file=err)


def _discover(paths: list[str] | None, err: TextIO) -> list[str]:
    """The rules files a command works on, each one readable (exit 2 otherwise, before reading any)."""
    from stampgen.codegen.load import discover
    from stampgen.codegen.project import find_project

    files = discover(paths)
    if not files:
        where = ", ".join(paths) if paths else f"{os.path.relpath(find_project().rules_dir)}/*.rules"
        raise UsageError(f"no .rules files found (looked in {where})")
    _require_readable(files, err)
    return files


def _require_readable(files: list[str], err: TextIO) -> None:
    from stampgen.codegen.diagnostics import render
    from stampgen.codegen.load import unreadable

    missing = unreadable(files)
    for diag in missing:
        print(render(diag, None), file=err)
    if missing:
        raise _Exit(EXIT_USAGE)


def _load_all(paths: list[str] | None, err: TextIO, *, analyze: bool = False) -> list[Loaded]:
    """The rules files, parsed and checked; `analyze` adds what only `check` reports (dead rules, what
    generating would refuse)."""
    from stampgen.codegen.load import load

    return [load(p, analyze=analyze) for p in _discover(paths, err)]


# --------------------------------------------------------------------------------------------- commands


def _add_cross_file_findings(loaded: list[Loaded], imports: bool) -> None:
    """Add to each file what only `check` finds, over every file it loaded: a stamp or a runner attribute
    two files declare, and (unless `imports` is False) what importing the named registries and consumer
    modules shows. Only files that checked clean take part."""
    from stampgen.codegen.checks import check_across_files, check_imports
    from stampgen.codegen.diagnostics import sort_key
    from stampgen.codegen.project import find_project

    models = [item.model for item in loaded if item.ok and item.model is not None]
    found = check_across_files(models)
    if imports and models:
        root = str(find_project().root)
        found += [d for model in models for d in check_imports(model, root)]
    by_path = {item.path: item for item in loaded}
    for diag in found:
        by_path[diag.loc.path].diagnostics.append(diag)
    for item in loaded:
        item.diagnostics.sort(key=sort_key)


def cmd_check(args, out: TextIO, err: TextIO) -> int:
    loaded = _load_all(args.paths, err, analyze=True)
    _add_cross_file_findings(loaded, imports=not args.no_import)
    diags = [d for item in loaded for d in item.diagnostics]
    errors = sum(d.is_error for d in diags)
    # --strict / -W error: a warning is a finding too (exit 1), for CI that keeps dead rules out
    findings = len(diags) if args.strict or args.warnings == "error" else errors
    if args.format == "json":  # machine-readable, on stdout
        rows = [
            {
                "path": d.loc.path,
                "line": d.loc.line,
                "col": d.loc.col,
                "end_line": d.loc.end_line,
                "end_col": d.loc.end_col,
                "severity": d.severity,
                "code": d.code,
                "message": d.message,
                "hint": d.hint,
                "notes": [
                    {
                        "path": n.loc.path,
                        "line": n.loc.line,
                        "col": n.loc.col,
                        "end_line": n.loc.end_line,
                        "end_col": n.loc.end_col,
                        "message": n.message,
                    }
                    for n in d.notes
                ],
            }
            for d in diags
        ]
        out.write(json.dumps(rows, indent=2) + "\n")
    elif args.format == "github":  # workflow commands: annotations on the pull request's diff
        for d in diags:
            text = d.message + "".join(f" (note: {n.loc}: {n.message})" for n in d.notes)
            text += f" ({d.hint})" if d.hint else ""
            text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            out.write(
                f"::{d.severity} file={d.loc.path},line={d.loc.line},col={d.loc.col},title={d.code}::{text}\n"
            )
    else:
        for item in loaded:
            _print_diagnostics(item, err)
        if diags and not (args.quiet and not findings):  # the count is a summary when nothing fails
            print(f"{errors} error(s), {len(diags) - errors} warning(s) in {len(loaded)} file(s)", file=err)
    return EXIT_FINDINGS if findings else EXIT_OK


def cmd_generate(args, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen.generate import run_generate

    files = _discover(args.paths, err)
    return run_generate(files, args.out, args.check, out=out, err=err, quiet=args.quiet)


def cmd_fmt(args, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen.fmt import format_rules, same_meaning
    from stampgen.codegen.load import load
    from stampgen.codegen.parser import parse

    files = _discover(args.paths, err)
    status = EXIT_OK
    formatted_count = 0
    for path in files:
        loaded = load(path)
        source = loaded.source
        before = parse(source, path)[0] if source is not None else None
        if source is None or before is None:  # not text or not parseable: nothing to hold the result against
            _print_diagnostics(loaded, err)
            print(f"{path}: not formatted: fix the errors above first", file=err)
            status = max(status, EXIT_FINDINGS)
            continue
        formatted = format_rules(source)
        if formatted == source:
            continue
        if not same_meaning(before, parse(formatted, path)[0]):  # never write a text that means otherwise
            print(f"{path}: not formatted: the formatter would change its meaning (a stampgen bug)", file=err)
            status = EXIT_USAGE  # not a finding in the file: exit 2, as for any internal error
            continue
        if args.check:
            diff = difflib.unified_diff(
                source.splitlines(keepends=True),
                formatted.splitlines(keepends=True),
                f"{path} (current)",
                f"{path} (formatted)",
            )
            out.writelines(diff)
            status = max(status, EXIT_FINDINGS)
        else:
            _replace_text(Path(path), formatted)
            formatted_count += 1
    if formatted_count and not args.quiet:
        print(f"{formatted_count} file(s) formatted", file=err)
    return status


def _replace_text(path: Path, text: str) -> None:
    """Write `text` over `path` atomically, leaving no temporary file behind on failure."""
    tmp = path.with_name(f".{path.name}.fmt.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write the formatted file: {exc.strerror or exc}") from None


def _model_with_stamp(args, err: TextIO) -> Model:
    models: list[Model] = []
    for item in _load_all(args.paths or None, err):
        if item.model is None or not item.ok:
            _print_diagnostics(item, err)
            raise _Exit(EXIT_FINDINGS)
        if args.stamp in item.model.stamps:
            return item.model
        models.append(item.model)
    known = sorted(s for model in models for s in model.stamps)
    from stampgen.codegen.diagnostics import did_you_mean

    hint = did_you_mean(args.stamp, known)
    raise UsageError(f"no stamp {args.stamp!r}" + (f"; {hint}" if hint else f" (stamps: {', '.join(known)})"))


def cmd_explain(args, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen import explain as explain_mod

    model = _model_with_stamp(args, err)
    stamp = model.stamps[args.stamp]
    notes: list[str] = []
    given: dict[str, object] = {}
    try:  # files first, in order; --set overrides them
        for path in args.config or []:
            given.update(explain_mod.load_inputs(model, stamp, path, explain_mod.CONFIG, notes))
        for path in args.facts or []:
            given.update(explain_mod.load_inputs(model, stamp, path, explain_mod.FACTS, notes))
        given.update(explain_mod.parse_settings(model, stamp, args.set or [], notes))
    except explain_mod.InputError as exc:
        raise UsageError(str(exc)) from None
    ex = explain_mod.explain(model, args.stamp, given, notes)
    if args.format == "json":
        out.write(json.dumps(explain_mod.to_json(ex), indent=2, sort_keys=False) + "\n")
    else:
        out.write(explain_mod.to_text(ex))
    return EXIT_FINDINGS if ex.violations else EXIT_OK


def cmd_table(args, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen import table as table_mod

    model = _model_with_stamp(args, err)
    try:
        tables = table_mod.stamp_tables(model, args.stamp)
    except table_mod.TableTooLarge as exc:
        print(f"stampgen table: error: the decision table is too large to enumerate ({exc})", file=err)
        return EXIT_USAGE
    import msgspec

    from stampgen.codegen.explain import waivers_of

    # the consumers' waivers: a reader of the table sees what the consumers let pass, and until when
    readers = [v.name for v in model.validates if args.stamp in v.stamps]
    waivers = waivers_of(model, readers)
    if args.format == "json":
        body = (
            table_mod.to_json(tables[0])
            if len(tables) == 1
            else {
                "stamp": args.stamp,
                "per_field": True,
                "tables": [table_mod.to_json(t) for t in tables],
            }
        )
        body["waivers"] = {block: [msgspec.to_builtins(w) for w in ws] for block, ws in waivers.items()}
        out.write(json.dumps(body, indent=2) + "\n")
    else:
        out.write("\n".join(table_mod.to_markdown(t) for t in tables))
        for block, ws in waivers.items():
            out.write(f"\nWaivers of `validate {block}` (its failures are logged, not raised, for):\n\n")
            for w in ws:
                state = "**expired**" if w.expired else f"until {w.until}"
                out.write(f"- `{w.cls}` {state}: {w.reason} ({w.source})\n")
    return EXIT_OK


def _git(root: Path, *argv: str, quiet: bool = False) -> str:
    """git's output; a failure is a usage error with git's message (exit 2), or "" with quiet=True."""
    try:
        result = subprocess.run(["git", "-C", str(root), *argv], capture_output=True, text=True)
    except OSError as exc:
        if quiet:
            return ""
        raise UsageError(f"cannot run git: {exc.strerror or exc}") from None
    if result.returncode != 0:
        if quiet:
            return ""
        raise UsageError(f"git {' '.join(argv)}: {result.stderr.strip() or 'failed'}")
    return result.stdout


def _models_at(spec: str | None, project, top: Path | None, err: TextIO):  # -> diff.Version
    """One side of a diff: a .rules file named by path, the project's rules in the working tree (None), or
    the project's rules at a git revision. Files are keyed by their path relative to the project root, so
    both sides pair up from any folder (the project may be a subfolder of the git repository, `top`), and
    inside a git repository they are named relative to its top, as GitHub names them."""
    from pathlib import PurePosixPath

    from stampgen.codegen.diff import Version
    from stampgen.codegen.load import discover, load, load_text

    if spec is not None and spec.endswith(".rules"):
        _require_readable([spec], err)
        return Version(spec, {Path(spec).name: load(spec, analyze=False)}, single=True)
    prefix = PurePosixPath(project.root.relative_to(top).as_posix()) if top else None
    rules = project.settings.rules
    if spec is None:
        keys = {project.relative(p): p for p in discover(None, project)}
        if top is None or prefix is None:
            return Version("the working tree", {k: load(p, analyze=False) for k, p in keys.items()})
        files = {k: load(p, (prefix / k).as_posix(), analyze=False) for k, p in keys.items()}
        # links to HEAD only when the rules there are what was read (a status that never writes the index)
        status = ("--no-optional-locks", "status", "--porcelain", "--", (prefix / rules).as_posix())
        clean = not _git(top, *status).strip()
        commit = _git(top, "rev-parse", "--verify", "--quiet", "HEAD", quiet=True).strip() if clean else ""
        return Version("the working tree", files, commit or None)
    if top is None or prefix is None:
        raise UsageError(f"{spec!r} is not a .rules file, and {project.root} is not in a git repository")
    commit = _git(top, "rev-parse", "--verify", "--quiet", f"{spec}^{{commit}}", quiet=True).strip()
    if not commit:
        raise UsageError(f"git: no commit {spec!r} in this repository (fetch it, or name a .rules file)")
    folder = prefix / rules
    listed = _git(top, "ls-tree", "-r", "-z", "--name-only", commit, "--", f"{folder.as_posix()}/")
    paths = [PurePosixPath(p) for p in listed.split("\0") if p.endswith(".rules")]

    def at_commit(location: str) -> str | None:  # an imported file, as the same revision has it
        text = _git(top, "show", f"{commit}:{location}", quiet=True)
        return text or None

    files = {
        p.relative_to(prefix).as_posix(): load_text(
            _git(top, "show", f"{commit}:{p.as_posix()}"), p.as_posix(), analyze=False, read=at_commit
        )
        for p in paths
        if p.parent == folder  # the rules folder's own files, as discover() finds them
    }
    return Version(spec, files, commit)


def cmd_diff(args, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen import diff as diff_mod
    from stampgen.codegen.project import find_project
    from stampgen.codegen.table import TableTooLarge

    if args.base is not None and args.base_rev is not None:
        raise UsageError(f"the base is given twice: {args.base!r} and --base {args.base_rev!r}")
    project = find_project()
    found_top = _git(project.root, "rev-parse", "--show-toplevel", quiet=True).strip()
    top = Path(found_top).resolve() if found_top else None
    if top is not None and top != project.root and top not in project.root.parents:
        top = None  # a project outside the repository git found: read it as plain files
    base, how = args.base if args.base is not None else args.base_rev, ""
    if base is None:
        if top is None:
            raise UsageError(f"no base to compare with: {project.root} is not in a git repository")
        try:
            base, how = diff_mod.default_base(lambda *argv: _git(top, *argv, quiet=True))
        except diff_mod.DiffError as exc:
            raise UsageError(str(exc)) from None
    old, new = _models_at(base, project, top, err), _models_at(args.head, project, top, err)
    if how:
        old.label = f"{base[:12]} ({how})"
    for item in (*old.files.values(), *new.files.values()):
        if not item.ok:
            _print_diagnostics(item, err)
            raise _Exit(EXIT_FINDINGS)
    try:
        changes = [
            change
            for _, a, b in diff_mod.pair(old, new)
            for change in diff_mod.diff_models(a.model if a else None, b.model if b else None)
        ]
    except diff_mod.DiffError as exc:
        raise UsageError(str(exc)) from None
    except TableTooLarge as exc:
        print(f"stampgen diff: error: the decision table is too large to enumerate ({exc})", file=err)
        return EXIT_USAGE
    if args.format == "json":
        out.write(json.dumps(diff_mod.to_json(changes, old.label, new.label), indent=2) + "\n")
    elif args.format == "markdown":
        remote = _git(top, "remote", "get-url", "origin", quiet=True) if top else ""
        links = (diff_mod.github_blob_base(remote, old.commit), diff_mod.github_blob_base(remote, new.commit))
        out.write(diff_mod.to_markdown(changes, old.label, new.label, links))
    elif args.format == "github":
        out.write(diff_mod.to_github(changes, [item.path for item in new.files.values()]))
    else:
        out.write(diff_mod.to_text(changes))
    return EXIT_FINDINGS if changes and not args.exit_zero else EXIT_OK


# --------------------------------------------------------------------------------------------- entry


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="stampgen", description="Kernel-selection rules → frozen stamps, resolvers, guards, tests."
    )
    parser.add_argument("--version", action=_VersionAction)
    parser.add_argument("-q", "--quiet", action="store_true", help="no summary line on success")
    # -q after the command too; SUPPRESS keeps a `stampgen -q CMD` from being reset by the subcommand's default
    common = _Parser(add_help=False)
    common.add_argument(
        "-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no summary line on success"
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("check", help="parse and validate .rules files", parents=[common])
    p.add_argument("paths", nargs="*")
    p.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="text (stderr, with source lines and carets), json or github annotations (stdout)",
    )
    p.add_argument("--no-import", action="store_true", help="do not import the modules the rules name")
    p.add_argument("--strict", action="store_true", help="warnings are findings too: exit 1 on any")
    p.add_argument("-W", dest="warnings", choices=("error",), help="`-W error`: the same as --strict")
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("generate", help="write generated/ from the rules", parents=[common])
    p.add_argument("paths", nargs="*")
    p.add_argument("--check", action="store_true", help="write nothing; print a diff and exit 1 when stale")
    p.add_argument("--out", default=None, help="output folder (default: the project's, generated/)")
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("fmt", help="canonical layout of .rules files", parents=[common])
    p.add_argument("paths", nargs="*")
    p.add_argument(
        "--check", action="store_true", help="write nothing; print a diff and exit 1 if not formatted"
    )
    p.set_defaults(run=cmd_fmt)

    p = sub.add_parser("explain", help="resolve one stamp for given inputs and say why", parents=[common])
    p.add_argument("stamp")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="a config leaf, slot or fact")
    p.add_argument(
        "--facts", action="append", metavar="FILE", help="a runner's facts, .json or .toml (--set overrides)"
    )
    p.add_argument(
        "--config", action="append", metavar="FILE", help="config leaves, .json or .toml (--set overrides)"
    )
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--rules", dest="paths", action="append", metavar="PATH", help="rules files (default: rules/)"
    )
    p.set_defaults(run=cmd_explain)

    p = sub.add_parser("table", help="the whole decision table of a stamp", parents=[common])
    p.add_argument("stamp")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.add_argument("--rules", dest="paths", action="append", metavar="PATH")
    p.set_defaults(run=cmd_table)

    p = sub.add_parser(
        "diff", help="behaviour diff between two git revisions or two .rules files", parents=[common]
    )
    p.add_argument(
        "base",
        nargs="?",
        help="git revision or .rules file (default: --base, $STAMPGEN_DIFF_BASE, else the merge-base of HEAD "
        "with origin/HEAD, main or master)",
    )
    p.add_argument("head", nargs="?", help="git revision or .rules file (default: the working tree)")
    p.add_argument("--base", dest="base_rev", metavar="REV", help="the base revision (instead of BASE)")
    p.add_argument(
        "--exit-zero", action="store_true", help="exit 0 when decisions changed (2 stays an error)"
    )
    p.add_argument("--format", choices=("text", "markdown", "json", "github"), default="text")
    p.set_defaults(run=cmd_diff)
    return parser


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    command = None
    try:
        try:
            args = build_parser().parse_args(argv)
        except _ArgError as exc:
            err.write(exc.usage)
            print(exc, file=err)
            return EXIT_USAGE
        except _ShowVersion:
            from stampgen.codegen.generate import stampgen_version

            print(f"stampgen {stampgen_version()}", file=out)
            return EXIT_OK
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        command = args.command
        status = _run(args, out, err)
        out.flush()  # a closed pipe shows here, inside the handlers, not at interpreter exit
        return status
    except KeyboardInterrupt:
        print("stampgen: interrupted", file=err)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `stampgen table X | head`: the reader has all it wanted
        _discard_stdout(out)
        return EXIT_OK
    except Exception as exc:  # a stampgen bug: one line, the traceback on request
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=err)
        who = f"stampgen {command}" if command else "stampgen"
        message = " ".join(str(exc).split())  # one line, whatever the exception holds
        print(
            f"{who}: internal error: {type(exc).__name__}: {message} "
            f"(a stampgen bug; set {DEBUG_ENV}=1 for the traceback)",
            file=err,
        )
        return EXIT_USAGE


def _run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen.project import ProjectError

    try:
        return args.run(args, out, err)
    except (UsageError, ProjectError) as exc:
        print(f"stampgen {args.command}: error: {exc}", file=err)
        return EXIT_USAGE
    except _Exit as exc:
        return exc.status
    except BrokenPipeError:
        raise
    except OSError as exc:  # the environment: a folder that vanished, a full disk
        print(f"stampgen {args.command}: error: {exc}", file=err)
        return EXIT_USAGE


def _discard_stdout(out: TextIO) -> None:
    """After a broken pipe, point stdout at /dev/null: Python flushes it again at exit and would complain."""
    if out is not sys.stdout:
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor behind it
        pass


if __name__ == "__main__":
    sys.exit(main())
