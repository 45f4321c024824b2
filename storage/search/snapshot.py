"""One answer, one published state of the corpus.

Writers build a batch's new rows beside the published ones and publish them in one transaction
(`seams.publications`, `seams.current_documents`); a reader that ran its statements in separate
transactions could still pair the pool of one publication with the hits of the next. So every
search answer runs in ONE read-only REPEATABLE READ transaction: every statement of the answer
sees the same snapshot, hence the same publication, and a read-only transaction at this level
never fails with a serialization error.

`published_seq` is the newest publication that snapshot sees (`max(seq)` of
`seams.publications`, None before the first): every hit of the answer belongs to the state
published at it, which is what a caller can check against `seams.publications`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.connections import ConnectionSource, connection_lost


@dataclass(frozen=True)
class Snapshot:
    """An open read-only snapshot: its connection and the publication it sees."""

    conn: psycopg.Connection[Any]
    published_seq: int | None


@contextmanager
def published_snapshot(conn: psycopg.Connection[Any]) -> Iterator[Snapshot]:
    """A read-only REPEATABLE READ transaction on `conn` (an autocommit connection), with the
    newest publication it sees; committed on exit (nothing is written, so this only ends it)."""
    with conn.transaction():
        # Must be the transaction's first statement: the snapshot is taken by the next one.
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        row = conn.execute(
            sql.SQL("SELECT max(seq) FROM {}").format(schema.PUBLICATIONS.identifier()),
            prepare=True,
        ).fetchone()
        seq = None if row is None or row[0] is None else int(row[0])
        yield Snapshot(conn, seq)


@contextmanager
def search_snapshot(postgres: ConnectionSource) -> Iterator[Snapshot]:
    """A connection of `postgres` in a `published_snapshot`: where every search reads. A
    database failure, here or in the reads it holds (a lost connection, an aborted transaction),
    is one `StorageError` naming the database (`connection_lost`)."""
    try:
        with postgres.connection() as conn, published_snapshot(conn) as snapshot:
            yield snapshot
    except psycopg.OperationalError as exc:
        raise connection_lost(postgres.redacted_url, "searching the chunk index", exc) from exc
