"""The `seams` schema is created and upgraded here, once per schema version, never per connection.

`ddl()` declares the schema as idempotent statements (CREATE ... IF NOT
EXISTS, CREATE OR REPLACE VIEW, ADD COLUMN IF NOT EXISTS). Running them is not free: replacing a
view or a trigger takes an ACCESS EXCLUSIVE lock, in the opposite order to a search's
ACCESS SHARE locks, so a process that ran them at its first connection could deadlock with the
searches running meanwhile. So they run only when the database's recorded version differs from
the code's, by a writer (a run, a step, a sensor, `seams db upgrade`), in one transaction under
`DDL_LOCK`; everyone else reads the one-row `seams.schema_version` table and goes on.

The version is two things, so that nobody has to remember to bump anything for an additive
change:

- `SCHEMA_NUMBER`, bumped only with a step in `STEPS` that moves data (a non-idempotent change);
- the sha256 of `ddl()`'s text (`ddl_sha256`): editing `ddl()` (a new table, view or column)
  changes it, and the next writer applies the DDL once.

After `ddl()`, each migration runs `ADOPTIONS`: idempotent conversions of an older shape that
depend on what the database holds, such as a `chunk_index` of one fixed vector dimension becoming
one HNSW index per model (`seams.storage.vector_indexes`).

A database whose number is higher than the code's was upgraded by a newer Seams: writers refuse
(one line: upgrade Seams), readers go on reading. Same number, other DDL text, recorded by a newer
Seams release: left alone, so an older writer never puts back older view definitions.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg import sql
from psycopg.pq import TransactionStatus

from seams.environment import DATABASE_URL_ENV
from seams.errors import StorageError
from seams.storage import lock_waits, schema, tenants, vector_indexes, writer_locks
from seams.storage.connections import (
    connect_direct,
    connection_lost,
    describe_connection,
    first_line,
    retrying,
)
from seams.storage.search.lexical_index import maintenance_ddl

log = logging.getLogger(__name__)

#: The lock every creator of schema-level objects (extension, schema, tables) takes.
DDL_LOCK = writer_locks.DDL
#: The one-row table recording which schema version the database holds.
VERSION_TABLE = schema.SCHEMA_VERSION.name
#: Bumped with a step in `STEPS` when a change moves data; additive DDL needs no bump.
SCHEMA_NUMBER = 1

Step = Callable[[psycopg.Connection[Any]], None]
#: `STEPS[n]` moves an existing database from number n-1 to n, before `ddl()` runs (a fresh
#: database gets `ddl()` alone: it describes the newest schema and there is no data to move).
STEPS: dict[int, Step] = {}
#: Run after `ddl()` by every migration: idempotent changes of an older shape that `CREATE ... IF
#: NOT EXISTS` cannot express and that depend on what the database holds (a catalog lookup when
#: there is nothing to change), so they need no number bump. Here: a `chunk_index` of one fixed
#: vector dimension becomes one HNSW index per model (`vector_indexes.adopt_fixed_dimension`).
ADOPTIONS: tuple[Callable[[psycopg.Connection[Any]], object], ...] = (
    vector_indexes.adopt_fixed_dimension,
    vector_indexes.adopt_collection_keys,
)


def ddl(*, schema_exists: bool = False, vector_exists: bool = False) -> list[sql.Composable]:
    """Every statement that creates the `seams` schema, idempotently, in dependency order: the
    declared tables and views (`schema.declared_ddl`), the BM25 index's maintenance triggers, the
    adoption of a database made before builds existed (`adoption_ddl`), and last
    row-level security on every table holding documents, whatever replaced a view before it (a
    database with tenants and one without have the same schema)."""
    return [
        *schema.declared_ddl(schema_exists=schema_exists, vector_exists=vector_exists),
        *maintenance_ddl(),
        *adoption_ddl(),
        *tenants.ddl(),
    ]


def adoption_ddl() -> list[sql.Composable]:
    """The data step of `ddl()` that adopts the batches of a database made before builds
    existed, once (it does nothing where any build is recorded): a batch whose
    `chunk_index` has rows is published as build 1 (what its readers saw), any other is an
    open build 1 whose parts are the asset tables up to the last one holding its rows (the
    next run finishes it); the current documents follow the published batches, and the BM25
    index is rebuilt over them."""
    prefix_cases = []
    for position in range(len(schema.BATCH_ASSETS) - 1, -1, -1):
        name = schema.BATCH_ASSETS[position]
        prefix_cases.append(
            sql.SQL(
                "WHEN EXISTS (SELECT 1 FROM {} AS t WHERE t.batch_key = b.batch_key)"
                " THEN {}::text[]"
            ).format(
                schema.ASSET_TABLES[name].identifier(),
                sql.Literal(list(schema.BATCH_ASSETS[: position + 1])),
            )
        )
    return [
        sql.SQL(
            """DO $adopt$
            DECLARE s bigint;
            BEGIN
                IF EXISTS (SELECT 1 FROM seams.batch_builds)
                   OR NOT EXISTS (SELECT 1 FROM seams.batches) THEN
                    RETURN;
                END IF;
                INSERT INTO seams.batch_builds
                    (batch_key, generation, state, parts, completed_at, published_at)
                SELECT b.batch_key, 1,
                       CASE WHEN a.published THEN 'published' ELSE 'building' END,
                       a.parts,
                       CASE WHEN a.published THEN now() END,
                       CASE WHEN a.published THEN now() END
                FROM seams.batches AS b
                CROSS JOIN LATERAL (
                    SELECT EXISTS (SELECT 1 FROM seams.chunk_index AS i
                                   WHERE i.batch_key = b.batch_key) AS published,
                           CASE {cases} ELSE '{{}}'::text[] END AS parts
                ) AS a;
                IF NOT EXISTS (SELECT 1 FROM seams.batch_builds WHERE state = 'published') THEN
                    RETURN;
                END IF;
                s := nextval('seams.publication_seq');
                INSERT INTO seams.publications (seq, batch_key, generation, kind)
                SELECT s, batch_key, generation, 'batch' FROM seams.batch_builds
                WHERE state = 'published';
                INSERT INTO seams.current_documents
                    (document_id, batch_key, generation, source_sha256, registered_at,
                     published_seq)
                SELECT l.document_id, l.batch_key, l.generation, l.source_sha256,
                       l.registered_at, s
                FROM (SELECT DISTINCT ON (d.document_id) d.document_id, d.batch_key,
                             b.generation, d.source_sha256, d.registered_at
                      FROM seams.batch_documents AS d
                      JOIN seams.batch_builds AS b
                        ON b.batch_key = d.batch_key AND b.state = 'published'
                      ORDER BY d.document_id, d.registered_at DESC, d.batch_key DESC) AS l
                WHERE NOT EXISTS (SELECT 1 FROM seams.document_tombstones AS t
                                  WHERE t.document_id = l.document_id
                                    AND t.retired_at >= l.registered_at)
                ON CONFLICT DO NOTHING;
                DELETE FROM seams.lexical_postings;
                DELETE FROM seams.lexical_terms;
                DELETE FROM seams.lexical_totals;
                DELETE FROM seams.lexical_chunks;
                PERFORM seams.lexical_sync(
                    ARRAY(SELECT document_id FROM seams.current_documents), '{{}}'::text[]);
            END
            $adopt$"""
        ).format(cases=sql.SQL(" ").join(prefix_cases))
    ]


@functools.cache
def ddl_sha256() -> str:
    """sha256 of the text of every statement of `ddl()`: the code's schema, as the database
    records it. Independent of what the database holds (extension and schema taken as present)."""
    text = "\n".join(
        statement.as_string(None) for statement in ddl(schema_exists=True, vector_exists=True)
    )
    return hashlib.sha256(text.encode()).hexdigest()


#: Seams' distribution name on PyPI (the import name and the command are `seams`).
DISTRIBUTION = "seams-chunking"


def seams_version() -> str:
    """The installed Seams release, recorded beside the schema version."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source checkout
        return "unknown"


@dataclass(frozen=True)
class SchemaState:
    """What a database holds: whether the `seams` schema exists and which version it records."""

    exists: bool
    """Any table in schema `seams` (a database set up before versions were recorded has tables
    and no version row)."""
    number: int | None = None
    ddl_sha256: str | None = None
    seams_version: str | None = None
    migrated_at: datetime | None = None

    @property
    def missing(self) -> bool:
        return not self.exists

    @property
    def newer(self) -> bool:
        """Upgraded by a newer Seams whose data steps this one does not know: writers refuse."""
        return self.number is not None and self.number > SCHEMA_NUMBER

    @property
    def current(self) -> bool:
        """Nothing to apply: the code's number and DDL text, or the same number with the DDL
        text of a newer Seams release (never rolled back by an older writer)."""
        if not self.exists or self.number != SCHEMA_NUMBER:
            return False
        if self.ddl_sha256 == ddl_sha256():
            return True
        return _newer_release(self.seams_version, seams_version())

    @property
    def needs_migration(self) -> bool:
        return not self.current and not self.newer

    def describe(self) -> str:
        """`version 1 (ddl 3f2a9c1b0d4e, seams 0.1.0, 2026-11-24 21:16 UTC)`, or what is missing."""
        if not self.exists:
            return "no seams schema"
        if self.number is None:
            return "a seams schema without a recorded version"
        when = f", {self.migrated_at:%Y-%m-%d %H:%M %Z}" if self.migrated_at else ""
        return (
            f"version {self.number} (ddl {(self.ddl_sha256 or '')[:12]}, "
            f"seams {self.seams_version}{when})"
        )


@dataclass(frozen=True)
class Migration:
    """What `migrate` found and did."""

    before: SchemaState
    applied: bool
    seconds: float = 0.0
    steps: tuple[int, ...] = ()

    def describe(self, where: str) -> str:
        """One line for people: what was done to the schema at `where`."""
        target = f"version {SCHEMA_NUMBER} (ddl {ddl_sha256()[:12]}, seams {seams_version()})"
        if not self.applied:
            return f"the seams schema at {where} is up to date: {self.before.describe()}"
        if self.before.missing:
            return f"created the seams schema at {where}: {target}, in {self.seconds:.1f} s"
        steps = f", data steps {list(self.steps)}" if self.steps else ""
        return (
            f"upgraded the seams schema at {where} from {self.before.describe()} to {target}"
            f"{steps}, in {self.seconds:.1f} s"
        )


def read_state(conn: psycopg.Connection[Any]) -> SchemaState:
    """The database's schema state: catalog lookups and one SELECT, no lock beyond a reader's.

    A role that may not read `seams.schema_version` sees a schema without a recorded version."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "               WHERE n.nspname = %s AND c.relkind IN ('r', 'p')),"
        " to_regclass(%s) IS NOT NULL",
        (schema.SCHEMA, f"{schema.SCHEMA}.{VERSION_TABLE}"),
    ).fetchone()
    exists, versioned = bool(row[0]), bool(row[1])
    if not versioned:
        return SchemaState(exists=exists)
    try:
        with conn.transaction():  # a savepoint inside a caller's transaction
            version = conn.execute(
                sql.SQL(
                    "SELECT version, ddl_sha256, seams_version, migrated_at FROM {} WHERE one"
                ).format(sql.Identifier(schema.SCHEMA, VERSION_TABLE))
            ).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        return SchemaState(exists=exists)
    if version is None:
        return SchemaState(exists=exists)
    return SchemaState(True, int(version[0]), version[1], version[2], version[3])


def migrate(target: str | psycopg.Connection[Any], *, redacted_url: str | None = None) -> Migration:
    """Bring the database of `target` (a URL, or a connection outside any transaction) to the
    code's schema version; nothing but one SELECT when it is there already.

    The migration is one transaction under `DDL_LOCK` (a concurrent migrator waits, then finds
    the work done), each lock wait bounded by `lock_waits.LOCK_TIMEOUT`, and a tenant's session that
    blocks it ended (`lock_waits.clearing_tenants`); an abort (deadlock, lock timeout) reruns it
    whole a few times, and past that is one line naming the abort, or the session that held
    the lock. Afterwards every
    declared table is checked against its declaration. `redacted_url` names the server in errors
    (default: host, port and database of `target`, never a password).
    """
    if isinstance(target, psycopg.Connection):
        return _migrate(target, redacted_url or describe_connection(target))
    where = redacted_url or _where(target)
    conn = connect_direct(target, where)
    with conn:
        return _migrate(conn, where)


def _migrate(conn: psycopg.Connection[Any], where: str) -> Migration:
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ValueError("migrate needs a connection outside any transaction: it commits")
    doing = "upgrading the seams schema"
    try:
        with conn.transaction():
            before = read_state(conn)
        refuse_newer(before, where)
        if not before.needs_migration:
            if before.ddl_sha256 == ddl_sha256():
                check_declared_columns(conn, where)
            return Migration(before, applied=False)
        started = time.perf_counter()
        with lock_waits.clearing_tenants(conn, where, doing):
            done = retrying(
                where, doing, lambda: _apply(conn), also=(psycopg.errors.LockNotAvailable,)
            )
        check_declared_columns(conn, where)
    except (psycopg.errors.UndefinedFile, psycopg.errors.InsufficientPrivilege) as exc:
        raise StorageError(
            f"cannot create the seams schema at {where}: {first_line(exc)}. The pgvector "
            "extension must be installed and the user allowed to CREATE in the database "
            "(or an administrator runs `CREATE EXTENSION vector` and `seams db upgrade`); or "
            f"unset {DATABASE_URL_ENV} to use Seams' embedded PostgreSQL, which has both."
        ) from exc
    except psycopg.errors.FeatureNotSupported as exc:  # pragma: no cover - server specific
        raise StorageError(f"cannot create the seams schema at {where}: {exc}") from exc
    except psycopg.OperationalError as exc:
        raise connection_lost(where, doing, exc) from exc
    if done is None:  # another process migrated while this one waited for the lock
        return Migration(before, applied=False)
    seconds = time.perf_counter() - started
    migration = Migration(before, applied=True, seconds=seconds, steps=done)
    log.info("%s", migration.describe(where))
    return migration


def _apply(conn: psycopg.Connection[Any]) -> tuple[int, ...] | None:
    """One migration transaction; the data steps it ran, or None when, once the lock was
    ours, there was nothing left to do."""
    with conn.transaction():
        writer_locks.ddl_lock(conn)
        conn.execute(
            sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(lock_waits.LOCK_TIMEOUT))
        )
        state = read_state(conn)
        if not state.needs_migration:
            return None
        steps: tuple[int, ...] = ()
        if state.exists:  # a database made before versions were recorded holds version 1
            steps = tuple(n for n in sorted(STEPS) if (state.number or 1) < n <= SCHEMA_NUMBER)
            for number in steps:
                STEPS[number](conn)
        for statement in ddl(**_existing(conn)):  # `seams.schema_version` too
            conn.execute(statement)
        for adopt in ADOPTIONS:
            adopt(conn)
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (one, version, ddl_sha256, seams_version, migrated_at)"
                " VALUES (true, %s, %s, %s, now())"
                " ON CONFLICT (one) DO UPDATE SET version = EXCLUDED.version,"
                " ddl_sha256 = EXCLUDED.ddl_sha256, seams_version = EXCLUDED.seams_version,"
                " migrated_at = EXCLUDED.migrated_at"
            ).format(sql.Identifier(schema.SCHEMA, VERSION_TABLE)),
            (SCHEMA_NUMBER, ddl_sha256(), seams_version()),
        )
    return steps


def refuse_newer(state: SchemaState, where: str) -> None:
    """A writer's refusal of a schema upgraded by a newer Seams: its data steps are unknown here."""
    if state.newer:
        raise StorageError(
            f"the seams schema at {where} is version {state.number}, newer than this Seams "
            f"({seams_version()}, version {SCHEMA_NUMBER}; upgraded by seams "
            f"{state.seams_version}): upgrade Seams before writing to it"
        )


def _existing(conn: psycopg.Connection[Any]) -> dict[str, bool]:
    """Whether the schema and pgvector already exist: their CREATE ... IF NOT EXISTS would still
    need privileges a least-privilege data role (docs/reliability.md) does not have."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = %s),"
        " EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector')",
        (schema.SCHEMA,),
    ).fetchone()
    return {"schema_exists": bool(row[0]), "vector_exists": bool(row[1])}


_PG_TYPE_NAMES = {"timestamptz": "timestamp with time zone"}


def check_declared_columns(conn: psycopg.Connection[Any], where: str) -> None:
    """Tables created by an older declaration are reported, not silently written with gaps."""
    rows = conn.execute(
        """SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull
           FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE n.nspname = %s AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped""",
        (schema.SCHEMA,),
    ).fetchall()
    actual: dict[str, set[tuple[str, str, bool]]] = {}
    for table, column, pg_type, not_null in rows:
        actual.setdefault(table, set()).add((column, pg_type, not_null))
    for table in schema.TABLES:
        declared = {
            (c.name, _PG_TYPE_NAMES.get(c.pg_type, c.pg_type), not c.nullable)
            for c in table.columns
        }
        found = actual.get(table.name, set())
        if found == declared:
            continue
        missing = sorted(declared - found)
        unexpected = sorted(found - declared)
        raise StorageError(
            f"table {table.qualified_name} at {where} does not match its declaration in "
            f"seams/storage/schema.py: missing or changed {missing}, unexpected {unexpected}. "
            f"Asset tables hold derived data: `DROP TABLE {table.qualified_name} CASCADE` and "
            "re-materialize (the view is recreated), or migrate the table by hand."
        )


def _newer_release(recorded: str | None, ours: str) -> bool:
    """Whether `recorded` is a strictly newer Seams release than `ours`, by the numbers of their
    release segments (`0.10.1` > `0.9`); either unparsable: no."""
    release = re.compile(r"^\d+(?:\.\d+)*")
    a = release.match(recorded or "")
    b = release.match(ours)
    if a is None or b is None:
        return False
    return tuple(map(int, a.group().split("."))) > tuple(map(int, b.group().split(".")))


def _where(url: str) -> str:
    """Host, port and database of a URL or DSN, for messages: never its password."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "the configured database"
    host = str(info.get("host") or "localhost")
    port = f":{info['port']}" if info.get("port") else ""
    return f"{host}{port}/{info.get('dbname') or ''}"
