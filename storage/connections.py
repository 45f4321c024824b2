"""What storage code needs from a database: pooled connections, clear errors, and retries.

Storage sits below the Dagster resources, so it does not import `PostgresResource`; it takes any
object with `connection()` and `redacted_url` (the resource is one), and turns a failed connection
into a `StorageError` that names the (redacted) server and says what was, and was not, written.

PostgreSQL may abort a transaction to break a deadlock (SQLSTATE 40P01) or a serialization
conflict (40001): the server is fine and nothing was written, so `retrying` reruns the whole
transaction a few times, and `connection_lost` names what happened instead of blaming the
connection.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, TypeVar

import psycopg
import psycopg.errors

from seams.environment import DATABASE_URL_ENV
from seams.errors import StorageError

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Pauses before the 2nd, 3rd, ... attempt of an aborted transaction (each scaled by a random
#: factor in [0.5, 1.5) so two transactions that deadlocked do not meet again in step).
RETRY_DELAYS_S: tuple[float, ...] = (0.05, 0.2, 0.8)
#: Attempts of one transaction before its abort is reported.
ATTEMPTS = 3

#: What each SQLSTATE of class 40 (transaction rollback) means, in PostgreSQL's own words.
_ROLLBACK_NAMES = {
    "40P01": "deadlock detected",
    "40001": "serialization failure",
    "40002": "integrity constraint violation",
    "40003": "statement completion unknown",
    "40000": "transaction rollback",
}


class ConnectionSource(Protocol):
    """A pool of connections to the Seams data database (e.g. `PostgresResource`)."""

    @property
    def redacted_url(self) -> str: ...

    def connection(self) -> AbstractContextManager[psycopg.Connection[Any]]: ...


def describe_connection(conn: psycopg.Connection[Any]) -> str:
    """`host:port/database` of an open connection, for messages (never a password)."""
    info = conn.info
    return f"{info.host}:{info.port}/{info.dbname}"


def rollback_cause(exc: BaseException | None) -> psycopg.Error | None:
    """The transaction-rollback error (SQLSTATE class 40: deadlock detected, serialization
    failure, ...) behind `exc`, following `raise ... from` and implicit chaining: storage code
    wraps driver errors in `StorageError`s, and a retry must still see that the server only
    aborted the transaction. (psycopg 3 makes `DeadlockDetected` and `SerializationFailure`
    siblings of `TransactionRollback`, not subclasses: the SQLSTATE class is what they share.)"""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, psycopg.Error) and (exc.sqlstate or "").startswith("40"):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def retrying(
    redacted_url: str,
    doing: str,
    transaction: Callable[[], T],
    *,
    attempts: int = ATTEMPTS,
    also: tuple[type[BaseException], ...] = (),
) -> T:
    """`transaction()`, rerun when PostgreSQL aborted it (deadlock, serialization failure, or an
    error class in `also`), at most `attempts` times with jittered backoff; past the last attempt,
    a `StorageError` that names the abort and says nothing was written.

    `transaction` must be one whole transaction that opens (and so rolls back) by itself: a
    retry inside an outer transaction would rerun on a transaction PostgreSQL already aborted.
    Any other exception passes through unchanged at once.
    """
    for attempt in range(1, attempts + 1):
        try:
            return transaction()
        except Exception as exc:
            cause = rollback_cause(exc) or _matching(exc, also)
            if cause is None:
                raise
            if attempt == attempts:
                raise connection_lost(redacted_url, doing, cause, attempts=attempts) from exc
            delay = RETRY_DELAYS_S[min(attempt, len(RETRY_DELAYS_S)) - 1]
            delay *= 0.5 + random.random()
            log.info(
                "PostgreSQL aborted the transaction while %s (%s); retrying in %.0f ms",
                doing,
                _aborted_name(cause),
                delay * 1000,
            )
            time.sleep(delay)
    raise AssertionError("unreachable: the last attempt returns or raises")  # pragma: no cover


def connection_lost(
    redacted_url: str, doing: str, exc: BaseException, *, attempts: int = 1
) -> StorageError:
    """A `StorageError` for a database operation that failed while `doing` something: an aborted
    transaction (deadlock, serialization failure) by that name, resources running out as such,
    anything else as the lost connection it is."""
    cause = rollback_cause(exc)
    if cause is not None or isinstance(exc, psycopg.errors.LockNotAvailable):
        aborted = cause or exc
        times = f", {attempts} times" if attempts > 1 else ""
        return StorageError(
            f"PostgreSQL at {redacted_url} aborted the transaction ({_aborted_name(aborted)}) "
            f"while {doing}{times}; nothing was written (each write is one transaction): rerun"
        )
    reason = first_line(exc)
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


def _matching(
    exc: BaseException | None, kinds: tuple[type[BaseException], ...]
) -> BaseException | None:
    """The first exception of `kinds` in `exc`'s chain, or None."""
    seen: set[int] = set()
    while kinds and exc is not None and id(exc) not in seen:
        if isinstance(exc, kinds):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _aborted_name(exc: BaseException) -> str:
    """`deadlock detected, SQLSTATE 40P01`: what PostgreSQL reported, named and coded."""
    sqlstate = getattr(exc, "sqlstate", None) or ""
    if isinstance(exc, psycopg.errors.LockNotAvailable):
        return f"lock wait timeout, SQLSTATE {sqlstate or '55P03'}"
    name = _ROLLBACK_NAMES.get(sqlstate) or first_line(exc)
    return f"{name}, SQLSTATE {sqlstate}" if sqlstate else name


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (psycopg's carry libpq's multi-line detail), or
    its type's name when it has none: what a one-line error quotes."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


CONNECT_TIMEOUT_S = 5
"""Seconds a direct connection may take before its one-line error."""

# `scheme://user:secret@host`: everything between the user's `:` and the last `@` of the run is
# the password, even when it holds characters a URL should have encoded (`@`, `/`, `#`).
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:@/'\"]*):[^\s'\"]+@")
# Keyword DSNs and query strings: `password=x`, `password = 'with spaces \' and quotes'`,
# `?sslpassword=x&...`, `PGPASSWORD=x`; an unterminated quote runs to the end of the text.
_KEYWORD_PASSWORD = re.compile(
    r"""(?i)(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|[^\s&;,'"]+)"""
)


def redact(text: str) -> str:
    """`text` (a URL, a DSN, or a message quoting them) with every password replaced by `***`:
    safe for logs, errors and metadata."""
    text = _URL_PASSWORD.sub(r"\1:***@", text)
    return _KEYWORD_PASSWORD.sub(r"\1***", text)


def connect_direct(url: str, where: str) -> psycopg.Connection[Any]:
    """One autocommit connection outside any pool, or the one-line `StorageError` that says the
    server at `where` (a redacted URL) cannot be reached and what to check."""
    try:
        return psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        raise StorageError(
            f"cannot connect to PostgreSQL at {where}: {redact(first_line(exc))}. Check that "
            f"the server is running and the URL is right, or unset {DATABASE_URL_ENV} to use "
            "Seams' embedded PostgreSQL."
        ) from exc
