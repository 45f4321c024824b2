"""Poison files: a document whose extraction killed the run's process is not read again.

A file can take its reader down with it (a parser that runs out of memory, a crash in C code,
the OOM killer) before any per-document limit fires; as a batch keeps its bytes in PostgreSQL,
every later `seams run` would resume the same batch and die on the same file. So each document's
extraction is bracketed by a row in `seams.extraction_attempts`: written before reading, deleted
when reading returns (with text or with an error). A row whose run has ended means that run died
inside that file: the next run records the document as failed ("quarantined") instead of
reading it, and the rest of the batch goes on. `seams run --retry-quarantined` reads them again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import psycopg

QUARANTINE_RETRY_TAG = "seams/retry-quarantined"
"""Run tag: "true" makes extraction read quarantined documents again."""


def begin(
    conn: psycopg.Connection, batch_key: str, document_id: str, sha256: str, run_id: str
) -> None:
    """Record that `run_id` starts reading this document (committed before it does)."""
    conn.execute(
        "INSERT INTO seams.extraction_attempts (batch_key, document_id, source_sha256, run_id)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (batch_key, document_id) DO UPDATE"
        " SET source_sha256 = EXCLUDED.source_sha256, run_id = EXCLUDED.run_id,"
        " started_at = now()",
        (batch_key, document_id, sha256, run_id),
    )


def end(conn: psycopg.Connection, batch_key: str, document_id: str) -> None:
    """Reading returned (text or an error): the document is not poison."""
    conn.execute(
        "DELETE FROM seams.extraction_attempts WHERE batch_key = %s AND document_id = %s",
        (batch_key, document_id),
    )


def left_behind(
    conn: psycopg.Connection,
    batch_keys: Sequence[str],
    run_id: str,
    run_ended: Callable[[str], bool],
) -> dict[tuple[str, str], str]:
    """(batch, document) -> the run that died reading it, for attempts of ended runs only
    (a run still going elsewhere may be reading the file right now)."""
    rows = conn.execute(
        "SELECT batch_key, document_id, run_id FROM seams.extraction_attempts"
        " WHERE batch_key = ANY(%s) AND run_id <> %s",
        (list(batch_keys), run_id),
    ).fetchall()
    return {(batch, doc): run for batch, doc, run in rows if run_ended(run)}


def quarantined_batches(conn: psycopg.Connection, source: str) -> list[str]:
    """Batches registered from `source` that hold a quarantined (or never finished) document."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT a.batch_key FROM seams.extraction_attempts a"
            " JOIN seams.batches b USING (batch_key) WHERE b.source = %s ORDER BY 1",
            (source,),
        )
    ]


def quarantine_error(file: str, run_id: str) -> str:
    """The per-document error of a quarantined file: what happened and what to do."""
    return (
        f"{file}: quarantined: run {run_id} died while extracting this file (out of memory, a "
        "crash or a kill), so it is not read again; fix or remove the file, or run "
        "`seams run --retry-quarantined PATH` to read it once more"
    )
