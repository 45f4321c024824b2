"""No product module imports itself back through others: the modules form a graph without
cycles, so each can be read (and loaded) after the ones it names.

Every `seams.*` import counts, at module level and inside functions (an import moved into a
function hides a cycle from Python, not from a reader); only imports under `if TYPE_CHECKING:`
are left out, since they never run. An import names the most specific module it reaches:
`from seams.storage import schema` is an edge to `seams.storage.schema`, `from
seams.storage.search import search_response` one to the package `seams.storage.search`.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("assets", "chunking", "extraction", "integrations", "models", "orchestration",
           "resources", "serving", "storage", "seams")  # fmt: skip


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts if parts[0] == "seams" else ("seams", *parts))


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for folder in FOLDERS for p in (REPO / folder).rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            found += [n for child in node.orelse for n in _imports(ast.Module([child], []))]
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        found += _imports(node)
    return found


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*anchor, base] if base else anchor)
        for alias in node.names:
            full = f"{base}.{alias.name}"
            targets.add(full if full in modules else base)
    return {t for t in targets if t in modules and t != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_product_modules_import_without_cycles() -> None:
    found = cycles(import_graph())
    assert not found, "modules that import each other:\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_the_check_sees_a_cycle_hidden_in_a_function() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    tree = ast.parse(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from x import y\n"
        "def f():\n    from seams.storage import schema\n"
    )
    assert [n.module for n in _imports(tree) if isinstance(n, ast.ImportFrom)] == [
        "typing", "seams.storage"
    ]  # fmt: skip
