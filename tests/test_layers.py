"""The rooms of the package import downward only, so the tree reads bottom to top.

Every product module's `seams.*` imports (at module level and inside functions) are checked
against one order; a module may import its own room or any room below it. The two entry points
of the package itself are exempt: `seams/__init__.py` (the library entry, which loads the
embedders lazily) and `seams/__main__.py` (`python -m seams`, the CLI).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Bottom to top. The modules directly in `seams/` are rooms of their own.
ORDER = (
    "errors",
    "logs",
    "environment",
    "chunking",
    "extraction",
    "models",
    "targets",
    "storage",
    "paths",
    "collections",
    "settings_yaml",
    "settings",
    "resources",
    "serving",
    "assets",
    "orchestration",
    "integrations",
)
FOLDERS = ("chunking", "extraction", "models", "storage", "resources", "serving", "assets",
           "orchestration", "integrations")  # fmt: skip
ENTRY_POINTS = {"seams/__init__.py", "seams/__main__.py"}


def _room_of_module(dotted: str) -> str | None:
    """`seams.storage.search` -> `storage`; `seams.errors` -> `errors`; others -> None."""
    parts = dotted.split(".")
    return parts[1] if parts[0] == "seams" and len(parts) > 1 else None


def _room_of_file(path: Path) -> str:
    relative = path.relative_to(REPO)
    return relative.parts[0] if relative.parts[0] != "seams" else relative.stem


def _imported_rooms(path: Path) -> set[str]:
    rooms: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if node.module == "seams":  # `from seams import errors`
                rooms |= {r for n in names[1:] if (r := _room_of_module(n)) in ORDER}
            elif (room := _room_of_module(node.module)) is not None:
                rooms.add(room)
        elif isinstance(node, ast.Import):
            rooms |= {r for a in node.names if (r := _room_of_module(a.name)) is not None}
    return rooms


def _product_files() -> list[Path]:
    files = [p for folder in FOLDERS for p in (REPO / folder).rglob("*.py")]
    files += [p for p in (REPO / "seams").glob("*.py")]
    return sorted(p for p in files if str(p.relative_to(REPO)) not in ENTRY_POINTS)


def test_every_room_is_in_the_order() -> None:
    rooms = {_room_of_file(p) for p in _product_files()}
    assert rooms <= set(ORDER), f"rooms without a place in ORDER: {sorted(rooms - set(ORDER))}"


def test_imports_point_down_the_layers() -> None:
    upward = []
    for path in _product_files():
        room = _room_of_file(path)
        for target in _imported_rooms(path):
            if target in ORDER and ORDER.index(target) > ORDER.index(room):
                upward.append(f"{path.relative_to(REPO)} ({room}) imports seams.{target}")
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The checker itself: an import from a higher room, even inside a function, is found."""
    module = tmp_path / "probe.py"
    module.write_text(
        "from seams.errors import SeamsError\n"
        "def f():\n    from seams.orchestration.cli import main\n",
        encoding="utf-8",
    )
    assert _imported_rooms(module) == {"errors", "orchestration"}
