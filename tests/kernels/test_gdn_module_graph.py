"""The chunked GDN prefill's modules (``kernels/gdn``) and the building blocks they share with KDA and
lightning (``kernels/chunked``) import one way: no import cycle among them, counting the imports made
inside functions (an import that only runs at call time still ties the two modules together), and
nothing imports the public entry ``kernels/gdn/chunk.py`` back.

Read from the source with ``ast``, so this needs no Triton and imports none of the modules.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "stampgen.kernels.gdn": ROOT / "kernels" / "gdn",
    "stampgen.kernels.chunked": ROOT / "kernels" / "chunked",
}


def module_graph(packages: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the modules among ``packages`` it imports (at the top or inside a function). A package's
    ``__init__`` is the package's own name; ``from P import m`` names the module ``P.m`` where it is one."""
    modules = {}
    for package, folder in packages.items():
        for path in sorted(folder.glob("*.py")):
            modules[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    graph = {}
    for name, path in modules.items():
        here = name.split(".") if path.stem == "__init__" else name.split(".")[:-1]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the package, up level - 1
                    anchor = here[: len(here) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in node.names:
                    imported.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None."""
    done, path = set(), []

    def visit(node):
        path.append(node)
        for nxt in sorted(graph[node]):
            if nxt in path:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in done:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        done.add(path.pop())
        return None

    for node in sorted(graph):
        if node not in done:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_the_gdn_and_chunked_modules_import_one_way():
    cycle = find_cycle(module_graph(PACKAGES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_nothing_imports_the_prefill_entry_back():
    # kernels.gdn's dispatch reaches it by name (importlib), on first use: no import statement.
    graph = module_graph(PACKAGES)
    entry = "stampgen.kernels.gdn.chunk"
    assert not [name for name, imported in graph.items() if entry in imported]


def test_the_launches_share_their_pieces_through_one_module():
    # The Triton passes and both Gluon kernels take the chunk size, log2 e and the TMA pieces from the
    # shared modules, and those from kernels/chunked where they are the same.
    graph = module_graph(PACKAGES)
    gdn = "stampgen.kernels.gdn."
    for user in (
        "chunk_intra",
        "chunk_state",
        "chunk_gluon",
        "chunk_gluon_batch",
        "chunk_intra_gluon",
        "chunk_config",
    ):
        assert gdn + "chunk_common" in graph[gdn + user], user
    for user in ("chunk_state", "chunk_gluon", "chunk_gluon_batch", "chunk_intra_gluon"):
        assert gdn + "chunk_tma" in graph[gdn + user], user
    assert "stampgen.kernels.chunked.common" in graph[gdn + "chunk_common"]
    assert "stampgen.kernels.chunked.blocks" in graph[gdn + "chunk_common"]


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    # The form the prefill had: the entry imports the Gluon pass where it runs, the pass imports the
    # entry at its top.
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "entry.py").write_text("def run():\n    from pkg import gluon_pass\n")
    (tmp_path / "gluon_pass.py").write_text("from pkg import entry\n")
    (tmp_path / "shared.py").write_text("import os\n")
    graph = module_graph({"pkg": tmp_path})
    assert graph["pkg.entry"] == {"pkg.gluon_pass"} and graph["pkg.gluon_pass"] == {"pkg.entry"}
    assert find_cycle(graph) == ["pkg.entry", "pkg.gluon_pass", "pkg.entry"]
    (tmp_path / "gluon_pass.py").write_text("from .shared import os\n")  # what it shares, elsewhere
    graph = module_graph({"pkg": tmp_path})
    assert graph["pkg.gluon_pass"] == {"pkg.shared"} and find_cycle(graph) is None
