"""What every search entry point accepts as a query, checked before any work is done.

PostgreSQL's text cannot hold a NUL character: a query with one would be embedded first and then
fail inside the database driver with an error that names neither the query nor what to do.
"""

from __future__ import annotations

from seams.errors import InputError


def validate_query(text: object) -> str:
    """`text` itself when it can be searched for; `InputError` saying what to change when it is
    not a string or holds a NUL character. Called by the search entry points before they embed
    or connect, so a bad query costs nothing."""
    if not isinstance(text, str):
        raise InputError(f"the query must be a string, got {type(text).__name__}")
    position = text.find("\x00")
    if position >= 0:
        raise InputError(
            f"the query contains a NUL character (\\x00) at position {position}: PostgreSQL "
            "text cannot hold one; remove it and search again"
        )
    return text
