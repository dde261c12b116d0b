"""Rendering: the views the emitters build (codegen/emit/) → the text of generated/NAME.py and
generated/test_NAME.py, before formatting.

The rule that keeps Python in one place: emitters work out every name, expression and literal (so every
string from the rules passes through `repr` once, in codegen/emit/names.py); the Jinja templates
(codegen/templates/, one per rule kind) lay out statements and blocks and never build an expression from
parts. Everything is iterated in declaration order or sorted: the output depends on nothing but the Model.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

import jinja2

from stampgen.codegen.emit.module import build_module, used_imports
from stampgen.codegen.emit.names import RenderError, py_str
from stampgen.codegen.emit.suite import build_suite
from stampgen.codegen.model import Model

__all__ = ["RenderError", "render_files"]

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"
DOC_WIDTH = 84  # docstrings and comments stay inside the formatter's default line length (88)


def wrap(text: str, width: int = DOC_WIDTH, indent: str = "    ") -> str:
    """A paragraph of a docstring, wrapped between words (never inside a name or a path)."""
    lines = textwrap.wrap(text, width=width, break_long_words=False, break_on_hyphens=False)
    return ("\n" + indent).join(lines)


def comment(text: str, indent: str = "    ", width: int = DOC_WIDTH) -> str:
    """A `# ...` comment of one or more lines (text built from names and literals only, never strings)."""
    lines = textwrap.wrap(oneline(text), width=width - 2, break_long_words=False, break_on_hyphens=False)
    return ("\n" + indent).join("# " + line for line in lines)


def oneline(text: str) -> str:
    """Text for the end of a line: whitespace runs (a rules text may span lines) as one space."""
    return " ".join(text.split())


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["py"] = py_str
    env.filters["wrap"] = wrap
    env.filters["comment"] = comment
    env.filters["oneline"] = oneline
    return env


def render_files(
    model: Model, rules_source: str, module: str, package: str, root_expr: str
) -> list[tuple[str, str]]:
    """(file name, unformatted text) of the module and its tests; raises RenderError on a name clash."""
    view = build_module(model, rules_source, module)
    suite = build_suite(model, rules_source, module, package, root_expr)
    env = environment()
    text = env.get_template("module.py.jinja").render(m=view)
    if view.imports:  # again, importing only what the module reads of the files it imports
        text = env.get_template("module.py.jinja").render(m=used_imports(view, text))
    return [
        (f"{module}.py", text),
        (f"test_{module}.py", env.get_template("test_module.py.jinja").render(t=suite)),
    ]
