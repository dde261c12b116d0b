"""The checker's layout (codegen/checks/): one module per layer, data flowing one way.

A maintainer grows the checker by adding a check to the layer it belongs to; these tests keep the layers
honest: no module imports one that comes after it, every module says what it is for, and what other
modules import from `stampgen.codegen.checks` stays importable there.
"""

from __future__ import annotations

import ast
from pathlib import Path

import stampgen.codegen.checks as checks

CHECKS = Path(__file__).resolve().parents[1] / "codegen" / "checks"

# Each module may import only modules listed before it.
LAYERS = [
    "report",  # where every layer reports
    "symbols",  # what the declarations declare
    "type_refs",  # written types and literals
    "parity",  # what a parity means over a registry
    "waivers",  # dates and waivers
    "declarations",  # layer 1: each declaration on its own
    "expressions",  # what an expression may read where
    "chains",  # precedence chains
    "references",  # layer 2: across declarations
    "generation",  # what the emitters would refuse
    "imports",  # what the rules name in modules
    "across_files",  # what several files declare
    "__init__",  # check() and the public names
]


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("stampgen.codegen.checks.")
        ):
            found.add(node.module.rsplit(".", 1)[1])
    return found


def test_every_module_of_the_checker_has_a_place_in_the_layers() -> None:
    assert sorted(p.stem for p in CHECKS.glob("*.py")) == sorted(LAYERS)


def test_no_layer_of_the_checker_imports_a_later_one() -> None:
    for i, name in enumerate(LAYERS):
        later = _imported_layers(CHECKS / f"{name}.py") - set(LAYERS[:i])
        assert not later, f"codegen/checks/{name}.py imports {sorted(later)}, which come after it"


def test_every_module_of_the_checker_says_what_it_is_for() -> None:
    for path in sorted(CHECKS.glob("*.py")):
        assert ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))), f"{path.name} has no docstring"


def test_what_other_modules_import_from_the_checker_is_still_there() -> None:
    for name in ("check", "check_across_files", "check_imports", "current_date", "import_module"):
        assert callable(getattr(checks, name)), name
    assert callable(checks.is_registry) and callable(checks.parity_pairs)
    assert checks.TODAY_ENV == "STAMPGEN_TODAY"
