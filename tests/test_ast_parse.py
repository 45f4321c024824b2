"""`tests.support.ast_parse`: on CPython 3.11 before 3.11.8, a parse that a garbage collection
interrupts with another parse fails; the suite's `ast.parse` holds collection off and survives.

The other parse here comes from a finalizer, as it does in a test worker when pytest formats the
traceback of an exception raised in a finalizer or a dying thread (3.11 parses traceback lines for
their `^^^` markers), or when a background thread logs a traceback.
"""

from __future__ import annotations

import ast
import gc
from pathlib import Path

import pytest

from tests.support import ast_parse

SOURCE = Path(ast.__file__).read_text(encoding="utf-8")
"""A source large enough that building its tree allocates past the collector's threshold."""


class _ParsesWhenCollected:
    """Cyclic garbage (only a collection frees it) whose finalizer parses."""

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        ast_parse.interpreter_parse("a + b")


def _parse_amid_garbage(parse: object) -> None:
    assert callable(parse)
    for _ in range(20):
        for _ in range(500):
            _ParsesWhenCollected()
        parse(SOURCE)


@pytest.mark.skipif(not ast_parse.affected(), reason="this interpreter counts per parse")
def test_the_interpreters_parse_fails_when_a_collection_parses_meanwhile() -> None:
    with pytest.raises(SystemError, match="AST constructor recursion depth mismatch"):
        _parse_amid_garbage(ast_parse.interpreter_parse)
    gc.collect()


def test_the_suites_parse_survives_it_and_collects_afterwards() -> None:
    _parse_amid_garbage(ast.parse)
    assert gc.isenabled()
    gc.collect()
    assert not [o for o in gc.get_objects() if isinstance(o, _ParsesWhenCollected)]


def test_installed_exactly_where_the_interpreter_needs_it() -> None:
    assert (ast.parse is ast_parse.parse) == ast_parse.affected()
    assert ast_parse.affected((3, 11, 7)) and ast_parse.affected((3, 12, 1))
    assert not ast_parse.affected((3, 11, 8)) and not ast_parse.affected((3, 13, 0))
