"""The README and docs/ say what is true: their examples run, their links resolve, nothing points outside.

README conventions these tests rely on:

- The language tour is the first fenced block under `## A tour of the language`: a complete rules file.
- Example commands are lines `$ stampgen ARGS` inside fenced blocks; the lines after one, up to the next
  `$ ` line or the end of the block, are its output (stdout, then stderr). In the shown output a line that
  is exactly `...` stands for any number of lines (none included), and `[...]` inside a line for any text
  within that line. A command expects exit status 0 unless its line ends with `# exit N`. The commands run
  in-process from the repository root.
- Every `python` block runs as it is.
"""

from __future__ import annotations

import difflib
import importlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MARKDOWN = [README, *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "benchmarks").glob("*.md"))]


class Block:
    """A fenced code block: its info string, the README line of its first content line, and its lines."""

    def __init__(self, info: str, first_line: int, lines: list[str]):
        self.info, self.first_line, self.lines = info, first_line, lines


def fenced_blocks(text: str) -> list[Block]:
    blocks: list[Block] = []
    current: Block | None = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            if current is None:
                current = Block(line[3:].strip(), number + 1, [])
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current.lines.append(line)
    assert current is None, "an unterminated fenced block"
    return blocks


def section(text: str, heading: str) -> str:
    """The text of one `## ` section of a markdown text (its heading line excluded)."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"no section `## {heading}`"
    return match.group(1)


README_TEXT = README.read_text(encoding="utf-8")


# --------------------------------------------------------------------------------------------- set-up, tour


def test_the_set_up_is_exactly_two_commands():
    blocks = fenced_blocks(section(README_TEXT, "Set-up (a fresh machine, Python ≥ 3.10)"))
    assert blocks, "the set-up section has no command block"
    commands = [line.split("#", 1)[0].strip() for line in blocks[0].lines if line.strip()]
    assert commands == ["make codegen", "make test"]


def tour() -> Block:
    start = README_TEXT.index("\n## A tour of the language\n")
    offset = README_TEXT[:start].count("\n") + 1
    blocks = fenced_blocks(README_TEXT[start:])
    assert blocks, "the tour has no code block"
    block = blocks[0]
    return Block(block.info, block.first_line + offset, block.lines)


def test_the_language_tour_is_a_complete_rules_file_that_checks_clean():
    from stampgen.codegen.diagnostics import render
    from stampgen.codegen.load import load_text

    block = tour()
    placeholders = [line for line in block.lines if "..." in line.split("#", 1)[0]]
    assert not placeholders, f"the tour must be real rules, not a sketch: {placeholders}"
    # blank lines before the block, so diagnostics name the README's own line numbers
    text = "\n" * (block.first_line - 1) + "\n".join(block.lines) + "\n"
    loaded = load_text(text, "README.md")
    shown = "\n".join(render(d, text) for d in loaded.diagnostics)
    assert loaded.ok, f"the README's language tour does not check:\n{shown}"
    assert not loaded.diagnostics, f"the README's language tour has warnings:\n{shown}"
    kinds = {line.split()[0] for line in block.lines if line and not line[0].isspace()}
    expected = {"enum", "config", "facts", "launch", "auto", "stamp", "validate", "guard", "parity"}
    assert expected <= kinds, f"the tour no longer shows {sorted(expected - kinds)}"


# --------------------------------------------------------------------------------------------- examples

_COMMAND = re.compile(r"^\$ (stampgen(?: .*?)?)(?:\s+# exit (\d+))?$")


class Example:
    def __init__(self, line: int, command: str, status: int, shown: list[str]):
        self.line, self.command, self.status, self.shown = line, command, status, shown

    def __repr__(self) -> str:  # the test id
        return f"README.md:{self.line}: {self.command}"


def readme_examples() -> list[Example]:
    examples: list[Example] = []
    for block in fenced_blocks(README_TEXT):
        current: Example | None = None
        for index, line in enumerate(block.lines):
            if line.startswith("$ "):
                match = _COMMAND.match(line)
                assert match, f"README.md:{block.first_line + index}: not a `$ stampgen ...` example: {line}"
                current = Example(block.first_line + index, match[1], int(match[2] or 0), [])
                examples.append(current)
            elif current is not None:
                current.shown.append(line)
    return examples


def shown_as_pattern(shown: list[str]) -> re.Pattern[str]:
    """The README's rendering of an output as a regex: `...` lines match any lines, `[...]` any text."""
    parts = []
    for line in _trimmed(shown):
        if line == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(re.escape(line).replace(re.escape("[...]"), r"[^\n]*?") + r"\n")
    return re.compile("".join(parts))


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


EXAMPLES = readme_examples()


def test_the_readme_has_command_examples():
    assert len(EXAMPLES) >= 2, "the README shows no `$ stampgen ...` examples any more"


@pytest.mark.parametrize("example", EXAMPLES, ids=repr)
def test_each_readme_example_prints_what_the_readme_shows(example: Example, monkeypatch):
    from stampgen.codegen.cli import main

    monkeypatch.chdir(REPO)
    out, err = io.StringIO(), io.StringIO()
    status = main(shlex.split(example.command)[1:], out=out, err=err)
    actual = "".join(line + "\n" for line in _trimmed((out.getvalue() + err.getvalue()).splitlines()))
    matches = shown_as_pattern(example.shown).fullmatch(actual) is not None
    if status != example.status or not matches:
        diff = "\n".join(
            difflib.unified_diff(
                _trimmed(example.shown), actual.splitlines(), "README", "actual", lineterm=""
            )
        )
        pytest.fail(
            f"{example!r}: exit {status} (README expects {example.status}); output "
            f"{'matches' if matches else 'differs'} (`...` = any lines, `[...]` = any text):\n{diff}"
        )


def test_the_readme_python_examples_run():
    blocks = [block for block in fenced_blocks(README_TEXT) if block.info == "python"]
    assert blocks, "the README has no python example"
    for block in blocks:
        code = compile("\n" * (block.first_line - 1) + "\n".join(block.lines), str(README), "exec")
        exec(code, {"__name__": "readme_example"})


def test_every_import_path_the_readme_names_exists():
    names = sorted(
        set(re.findall(r"`(stampgen\.(?:codegen|grammar|generated|kernels)(?:\.[A-Za-z_]\w*)*)", README_TEXT))
    )
    assert "stampgen.generated.linear_attn" in names and "stampgen.kernels.gdn" in names, names
    missing = [name for name in names if not _resolves(name)]
    assert not missing, f"the README names import paths that do not exist: {missing}"


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:end]))
        except ModuleNotFoundError:
            continue
        for attr in parts[end:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


# --------------------------------------------------------------------------------------------- links


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives the headings of a markdown text (outside code blocks)."""
    anchors, fenced = set(), False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6} (.+)", line)):
            slug = re.sub(r"[^\w\- ]", "", match[1].strip().lower()).replace(" ", "-")
            anchors.add(slug)
    return anchors


@pytest.mark.parametrize("page", MARKDOWN, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_of_a_page_resolves(page: Path):
    text = page.read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", prose):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target} (no such file)")
        elif (
            anchor and resolved.suffix == ".md" and anchor not in github_anchors(resolved.read_text("utf-8"))
        ):
            broken.append(f"{target} (no such heading)")
    assert not broken, f"{page.relative_to(REPO)}: broken links: {broken}"


# --------------------------------------------------------------------------------------------- references

# What is not the project's own text: version control, environments, caches, build output, raw logs.
_SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache", ".hypothesis"}
_SKIP_AT_ROOT = {"build", "dist", "out", ".peers", ".whl", "benchmarks/results"}

# The team's notes that live outside the repository, by name (a URL's path is not matched: its parts follow
# a `/`) or by their folders, the design brief, and numbered sections of some document (no page of this
# repository numbers its sections: docs/ links to headings). A name that resolves to a file of the
# repository (docs/kernels.md, say) is fine.
_NOTES = r"(?:DESIGN|STYLE|KINDS|sglang|kernels|gpu-baseline(?:-\d+)?|codegen-anchors)\.md"
_NOTES_DOCUMENT = re.compile(rf"(?<![\w/.-])((?:\.\.?/)*(?:[\w.-]+/)*{_NOTES})\b")
_NOTES_FOLDER = re.compile(
    r"(?<![\w/.-])((?:\.\./)*(?:shared/)?(?:reference|examples|tools|hooks)/[\w.-]+(?:/[\w.-]+)*)"
)
_BRIEF = re.compile(r"\bDESIGN\b")
_SECTION = re.compile(r"§\s*\d")


def text_files() -> list[Path]:
    files = []
    for folder, dirs, names in os.walk(REPO):
        here = Path(folder)
        rel = here.relative_to(REPO).as_posix()
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in _SKIP_DIRS
            and not d.endswith(".egg-info")
            and (f"{rel}/{d}" if rel != "." else d) not in _SKIP_AT_ROOT
        )
        files += [here / name for name in sorted(names)]
    return [f for f in files if f.resolve() != Path(__file__).resolve()]


def _read_text(path: Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def test_no_file_points_at_files_outside_the_repository():
    """Every document a file cites is in the repository (docs/ holds what users and maintainers need)."""
    files = text_files()
    basenames = {f.name for f in files}
    problems = []
    for path in files:
        text = _read_text(path)
        if text is None:
            continue
        rel = path.relative_to(REPO).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            reasons = [
                f"`{ref}` is not in the repository"
                for ref in dict.fromkeys(_NOTES_DOCUMENT.findall(line) + _NOTES_FOLDER.findall(line))
                if not any(c.exists() for c in (path.parent / ref, REPO / ref))
                and not ("/" not in ref and ref in basenames)
            ]
            if _BRIEF.search(line):
                reasons.append("names the design brief (point at docs/design.md)")
            if _SECTION.search(line):
                reasons.append("cites a numbered section (docs/ pages have headings: name or link one)")
            if reasons:
                problems.append(f"{rel}:{number}: {'; '.join(reasons)}: {line.strip()}")
    assert not problems, "references to files that are not in the repository:\n" + "\n".join(problems)
