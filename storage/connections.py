"""What storage code needs from a database: pooled connections and a clear error when one fails.

Storage sits below the Dagster resources, so it does not import `PostgresResource`; it takes any
object with `connection()` and `redacted_url` (the resource is one), and turns a failed connection
into a `StorageError` that names the (redacted) server and says what was, and was not, written.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

import psycopg

from seams.errors import StorageError


class ConnectionSource(Protocol):
    """A pool of connections to the Seams data database (e.g. `PostgresResource`)."""

    @property
    def redacted_url(self) -> str: ...

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


def connection_lost(redacted_url: str, doing: str, exc: BaseException) -> StorageError:
    """A `StorageError` for a connection that failed while `doing` something."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if (getattr(exc, "sqlstate", None) or "").startswith("53"):  # disk full, out of memory, ...
        return StorageError(
            f"PostgreSQL at {redacted_url} ran out of resources while {doing}: {reason}. "
            "Nothing was written (each write is one transaction); free disk space or memory on "
            "the server and rerun."
        )
    return StorageError(
        f"lost the connection to PostgreSQL at {redacted_url} while {doing}: {reason}. "
        "Nothing was half-written (each write is one transaction); check the server and rerun."
    )
