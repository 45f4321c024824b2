"""`ast.parse` that no other thread and no finalizer can disturb, for CPython 3.11 before 3.11.8.

Those releases keep the AST constructor's recursion counter in state the whole interpreter shares
(CPython gh-106905; fixed in 3.11.8 and 3.12.2 by a counter per call). The constructor runs no
Python code of its own, so it keeps the GIL throughout, except when one of its allocations starts a
garbage collection: the finalizers and weakref callbacks a collection runs are Python code, so
there the interpreter may switch threads, or a finalizer may itself parse. Whoever parses meanwhile
resets the shared counter, and the first parse then fails with `SystemError: AST constructor
recursion depth mismatch` although its tree was built correctly. In a test worker, parsing happens
behind the scenes: on 3.11 every formatted traceback parses its lines for the `^^^` markers
(pytest's reports, its unraisable-exception and thread-exception hooks, `logging` with a traceback
from a background thread a test left running). Such a parse, landing while a test walks the
package's sources with `ast.parse`, failed that test.

`parse` holds garbage collection off while it parses, so no Python code runs inside the
constructor and no other parse can start before it ends. Nothing is caught or retried: every
error is the interpreter's own. `tests/conftest.py` installs it as `ast.parse` on the affected
releases only.
"""

from __future__ import annotations

import ast
import gc
import sys
import threading
from typing import Any

#: Per affected minor version, the first release whose AST constructor counts recursion per call.
FIXED_IN = {(3, 11): 8, (3, 12): 2}

#: `ast.parse` as the interpreter defines it.
interpreter_parse = ast.parse

_lock = threading.Lock()
_parsing = 0  # threads inside `parse` now; the first turns collection off, the last back on
_was_enabled = False


def affected(version: tuple[int, int, int] = sys.version_info[:3]) -> bool:
    """True on the CPython releases with the shared counter (3.11.0-3.11.7, 3.12.0-3.12.1)."""
    major, minor, micro = version
    fixed = FIXED_IN.get((major, minor))
    return sys.implementation.name == "cpython" and fixed is not None and micro < fixed


def parse(source: Any, *args: Any, **kwargs: Any) -> ast.AST:
    """`ast.parse(source, ...)` with garbage collection held off until it returns."""
    global _parsing, _was_enabled
    with _lock:
        if _parsing == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _parsing += 1
    try:
        return interpreter_parse(source, *args, **kwargs)
    finally:
        with _lock:
            _parsing -= 1
            if _parsing == 0 and _was_enabled:
                gc.enable()


def install() -> None:
    """Make `ast.parse` this `parse` for the rest of the process, on the affected releases."""
    if affected():
        ast.parse = parse  # type: ignore[assignment]
