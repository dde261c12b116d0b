"""The `stampgen` command line: check, generate, fmt, explain, table, diff.

Exit codes scripts can trust: 0 ok, 1 findings (errors, stale output, changes), 2 usage errors. Bad input
never prints a Python traceback.
"""

from __future__ import annotations

import argparse
import difflib
import json
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from stampgen.codegen import explain as explain_mod
from stampgen.codegen import table as table_mod
from stampgen.codegen.diagnostics import render
from stampgen.codegen.fmt import format_rules, same_meaning
from stampgen.codegen.load import Loaded, discover, load, load_text
from stampgen.codegen.parser import parse

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    pass


class _ArgError(Exception):
    def __init__(self, usage: str, message: str):
        super().__init__(message)
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # reported by main() on the caller's stream, exit 2
        raise _ArgError(self.format_usage(), f"{self.prog}: error: {message}")


def _print_diagnostics(loaded: Loaded, err: TextIO) -> None:
    for diag in loaded.diagnostics:
        print(render(diag, loaded.source), file=err)


def _discover(paths: list[str] | None) -> list[str]:
    files = discover(paths)
    if not files:
        where = ", ".join(paths) if paths else "rules/*.rules"
        raise UsageError(f"no .rules files found (looked in {where})")
    return files


def _load_all(paths: list[str] | None, err: TextIO) -> list[Loaded]:
    return [load(p) for p in _discover(paths)]


# --------------------------------------------------------------------------------------------- commands


def cmd_check(args, out: TextIO, err: TextIO) -> int:
    loaded = _load_all(args.paths, err)
    diags = [d for item in loaded for d in item.diagnostics]
    errors = sum(d.is_error for d in diags)
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
            }
            for d in diags
        ]
        out.write(json.dumps(rows, indent=2) + "\n")
    elif args.format == "github":  # workflow commands: annotations on the pull request's diff
        for d in diags:
            text = d.message + (f" ({d.hint})" if d.hint else "")
            text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
            out.write(
                f"::{d.severity} file={d.loc.path},line={d.loc.line},col={d.loc.col},title={d.code}::{text}\n"
            )
    else:
        for item in loaded:
            _print_diagnostics(item, err)
        if diags:
            print(f"{errors} error(s), {len(diags) - errors} warning(s) in {len(loaded)} file(s)", file=err)
    return EXIT_FINDINGS if errors else EXIT_OK


def cmd_generate(args, out: TextIO, err: TextIO) -> int:
    from stampgen.codegen.generate import run_generate

    files = _discover(args.paths)
    return run_generate(files, args.out, args.check, out=out, err=err)


def cmd_fmt(args, out: TextIO, err: TextIO) -> int:
    files = _discover(args.paths)
    status = EXIT_OK
    for path in files:
        loaded = load(path)
        before = parse(loaded.source, path)[0] if loaded.source is not None else None
        if before is None:  # unreadable or not parseable: nothing to hold the formatted text against
            _print_diagnostics(loaded, err)
            print(f"{path}: not formatted: fix the errors above first", file=err)
            status = EXIT_FINDINGS
            continue
        formatted = format_rules(loaded.source)
        if formatted == loaded.source:
            continue
        if not same_meaning(before, parse(formatted, path)[0]):  # never write a text that means otherwise
            print(f"{path}: not formatted: the formatter would change its meaning (a stampgen bug)", file=err)
            status = EXIT_FINDINGS
            continue
        if args.check:
            diff = difflib.unified_diff(
                loaded.source.splitlines(keepends=True),
                formatted.splitlines(keepends=True),
                f"{path} (current)",
                f"{path} (formatted)",
            )
            out.writelines(diff)
            status = EXIT_FINDINGS
        else:
            tmp = Path(path).with_name(f".{Path(path).name}.fmt.tmp")
            tmp.write_text(formatted, encoding="utf-8")
            tmp.replace(path)
            print(f"formatted {path}", file=err)
    return status


def _model_with_stamp(args, err: TextIO):
    loaded = _load_all(args.paths or None, err)
    for item in loaded:
        if not item.ok:
            _print_diagnostics(item, err)
            raise _Findings()
        if args.stamp in item.model.stamps:
            return item.model
    known = sorted(s for item in loaded for s in item.model.stamps)
    from stampgen.codegen.diagnostics import did_you_mean

    hint = did_you_mean(args.stamp, known)
    raise UsageError(f"no stamp {args.stamp!r}" + (f"; {hint}" if hint else f" (stamps: {', '.join(known)})"))


class _Findings(Exception):
    pass


def cmd_explain(args, out: TextIO, err: TextIO) -> int:
    model = _model_with_stamp(args, err)
    stamp = model.stamps[args.stamp]
    notes: list[str] = []
    try:
        given = explain_mod.parse_settings(model, stamp, args.set or [], notes)
    except explain_mod.InputError as exc:
        raise UsageError(str(exc)) from None
    ex = explain_mod.explain(model, args.stamp, given, notes)
    if args.format == "json":
        out.write(json.dumps(explain_mod.to_json(ex), indent=2, sort_keys=False) + "\n")
    else:
        out.write(explain_mod.to_text(ex))
    return EXIT_FINDINGS if ex.violations else EXIT_OK


def cmd_table(args, out: TextIO, err: TextIO) -> int:
    model = _model_with_stamp(args, err)
    try:
        tables = table_mod.stamp_tables(model, args.stamp)
    except table_mod.TableTooLarge as exc:
        print(f"stampgen table: the decision table is too large to enumerate ({exc})", file=err)
        return EXIT_FINDINGS
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
        out.write(json.dumps(body, indent=2) + "\n")
    else:
        out.write("\n".join(table_mod.to_markdown(t) for t in tables))
    return EXIT_OK


def _git(*argv: str) -> str:
    result = subprocess.run(["git", *argv], capture_output=True, text=True)
    if result.returncode != 0:
        raise UsageError(f"git {' '.join(argv)}: {result.stderr.strip() or 'failed'}")
    return result.stdout


def _models_at(rev: str | None, err: TextIO) -> dict[str, Loaded]:
    """Every rules file at a git revision (None = the working tree), or one .rules file given by path."""
    if rev is not None and rev.endswith(".rules"):
        item = load(rev)
        return {"rules": item}
    if rev is None:
        return {p: load(p) for p in discover(None)}
    names = [
        n for n in _git("ls-tree", "-r", "--name-only", rev, "rules/").splitlines() if n.endswith(".rules")
    ]
    return {n: load_text(_git("show", f"{rev}:{n}"), f"{n}@{rev}") for n in names}


def cmd_diff(args, out: TextIO, err: TextIO) -> int:
    base, head = args.base, args.head
    if base is None:
        base = _git("merge-base", "main", "HEAD").strip()
    old, new = _models_at(base, err), _models_at(head, err)
    for item in (*old.values(), *new.values()):
        if not item.ok:
            _print_diagnostics(item, err)
            raise _Findings()
    changes = []
    for name in sorted(set(old) | set(new)):
        a = old.get(name)
        b = new.get(name)
        try:
            changes += table_mod.diff_models(a.model if a else None, b.model if b else None)
        except table_mod.TableTooLarge as exc:
            print(f"stampgen diff: the decision table is too large to enumerate ({exc})", file=err)
            return EXIT_USAGE
    if args.format == "json":
        import msgspec

        out.write(json.dumps(msgspec.to_builtins(changes), indent=2) + "\n")
    elif args.format == "markdown":
        out.write(table_mod.changes_to_markdown(changes))
    else:
        out.write(table_mod.changes_to_text(changes))
    return EXIT_FINDINGS if changes else EXIT_OK


# --------------------------------------------------------------------------------------------- entry


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="stampgen", description="Kernel-selection rules → frozen stamps, resolvers, guards, tests."
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("check", help="parse and validate .rules files")
    p.add_argument("paths", nargs="*")
    p.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="text (stderr, with source lines and carets), json or github annotations (stdout)",
    )
    p.set_defaults(run=cmd_check)

    p = sub.add_parser("generate", help="write generated/ from the rules")
    p.add_argument("paths", nargs="*")
    p.add_argument("--check", action="store_true", help="write nothing; print a diff and exit 1 when stale")
    p.add_argument("--out", default=None, help="output folder (default: the project's, generated/)")
    p.set_defaults(run=cmd_generate)

    p = sub.add_parser("fmt", help="canonical layout of .rules files")
    p.add_argument("paths", nargs="*")
    p.add_argument(
        "--check", action="store_true", help="write nothing; print a diff and exit 1 if not formatted"
    )
    p.set_defaults(run=cmd_fmt)

    p = sub.add_parser("explain", help="resolve one stamp for given inputs and say why")
    p.add_argument("stamp")
    p.add_argument("--set", action="append", metavar="NAME=VALUE", help="a config leaf, slot or fact")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.add_argument(
        "--rules", dest="paths", action="append", metavar="PATH", help="rules files (default: rules/)"
    )
    p.set_defaults(run=cmd_explain)

    p = sub.add_parser("table", help="the whole decision table of a stamp")
    p.add_argument("stamp")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.add_argument("--rules", dest="paths", action="append", metavar="PATH")
    p.set_defaults(run=cmd_table)

    p = sub.add_parser("diff", help="behaviour diff between two git revisions or two .rules files")
    p.add_argument("base", nargs="?", help="git revision or .rules file (default: merge-base with main)")
    p.add_argument("head", nargs="?", help="git revision or .rules file (default: the working tree)")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.set_defaults(run=cmd_diff)
    return parser


def main(argv: list[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except _ArgError as exc:
        err.write(exc.usage)
        print(exc, file=err)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    try:
        return args.run(args, out, err)
    except UsageError as exc:
        print(f"stampgen {args.command}: error: {exc}", file=err)
        return EXIT_USAGE
    except _Findings:
        return EXIT_FINDINGS
    except BrokenPipeError:  # `stampgen table X | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
