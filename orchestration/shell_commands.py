"""The commands Seams prints for a user to type, written as they work in the user's shell."""

from __future__ import annotations

import contextlib
import shutil
import sys
from pathlib import Path


def _as_typed(executable: Path) -> str:
    """`executable` as a person types it here: relative to the working folder when inside it."""
    with contextlib.suppress(ValueError):
        return str(Path(".") / executable.relative_to(Path.cwd()))
    return str(executable)


def python_command() -> str:
    """The Python that runs Seams, as a command that works in a fresh shell."""
    return _as_typed(Path(sys.executable))


def seams_command() -> str:
    """The `seams` command as it works in a fresh shell: `seams` when that is on PATH and the
    one of this environment, else this environment's script (`.venv/bin/seams`), else
    `python -m seams`."""
    script = Path(sys.executable).parent / "seams"
    on_path = shutil.which("seams")
    if on_path and Path(on_path).resolve() == script.resolve():
        return "seams"
    if script.exists():
        return _as_typed(script)
    return f"{python_command()} -m seams"
