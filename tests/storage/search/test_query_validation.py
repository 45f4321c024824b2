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
    "read_search": search_module.read_search,
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("query", ["queen\x00bee", "\x00", "bee\x00"])
def test_a_nul_in_the_query_is_an_input_error_before_any_work(entry: str, query: str) -> None:
    with pytest.raises(InputError, match=r"NUL character \(\\x00\) at position \d+: .*remove it"):
        ENTRY_POINTS[entry](Untouchable(), Untouchable(), query)


def test_a_collection_is_known_from_the_settings_or_else_from_the_data() -> None:
    from seams.storage.search.query import known_collections

    asked: list[bool] = []

    def stored() -> list[str]:
        asked.append(True)
        return ["handbook", "tickets"]

    declared = ["handbook", "notes"]
    assert known_collections(["notes"], declared, option="--collection", stored=stored) == (
        "notes",
    )
    assert asked == []  # declared names need no query
    # Removed from the settings, still in the data (and searchable): it can be named.
    assert known_collections(["tickets"], declared, option="--collection", stored=stored) == (
        "tickets",
    )
    with pytest.raises(InputError) as raised:
        known_collections(["nope"], declared, option="--collection", stored=stored)
    assert str(raised.value) == (
        "--collection 'nope': no such collection; the settings declare 'handbook', 'notes' "
        "(and in the data: 'tickets')"
    )
