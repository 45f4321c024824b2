"""A query PostgreSQL cannot hold (a NUL character) is an `InputError` from every search entry
point of the library, before it connects or embeds: not a driver error after the embedding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from seams.errors import InputError
from seams.storage import search as search_module


class Untouchable:
    """Stands for the database and the embedder: any use means work began before the check."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"{name} was used before the query was checked")


ENTRY_POINTS: dict[str, Callable[..., Any]] = {
    "search_response": search_module.search_response,
    "search": search_module.search,
    "candidates": search_module.candidates,
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("query", ["queen\x00bee", "\x00", "bee\x00"])
def test_a_nul_in_the_query_is_an_input_error_before_any_work(entry: str, query: str) -> None:
    with pytest.raises(InputError, match=r"NUL character \(\\x00\) at position \d+: .*remove it"):
        ENTRY_POINTS[entry](Untouchable(), Untouchable(), query)
