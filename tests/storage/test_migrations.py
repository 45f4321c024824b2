"""The schema is created and upgraded once per version, by writers, under a lock; readers and
later processes run no DDL; an aborted transaction is retried, then named as what it is.

DDL is counted by an event trigger (`ddl_command_start`) installed in the test's database, which
logs every CREATE/ALTER/DROP, `CREATE OR REPLACE VIEW` included, with the backend that ran it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from seams.errors import StorageError
from seams.resources.io_manager import PostgresIOManager
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import migrations
from seams.storage.connections import connection_lost, retrying
from seams.storage.migrations import SCHEMA_NUMBER, ddl_sha256, migrate, read_state
from tests.support.cli import run_seams, seams_env
from tests.support.concurrency import run_together
from tests.support.databases import fresh_database, rows


def install_ddl_log(url: str) -> None:
    """Log every DDL command run in `url`'s database from now on into `public.ddl_log`."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE public.ddl_log (tag text, pid integer, at timestamptz"
            " DEFAULT clock_timestamp())"
        )
        conn.execute(
            "CREATE FUNCTION public.log_ddl() RETURNS event_trigger LANGUAGE plpgsql AS"
            " $$ BEGIN INSERT INTO public.ddl_log (tag, pid) VALUES (tg_tag, pg_backend_pid());"
            " END $$"
        )
        conn.execute(
            "CREATE EVENT TRIGGER log_ddl ON ddl_command_start EXECUTE FUNCTION public.log_ddl()"
        )


def ddl_log(url: str) -> list[str]:
    return [r[0] for r in rows(url, "SELECT tag FROM public.ddl_log ORDER BY at")]


def version_rows(url: str) -> list[tuple]:
    return rows(url, "SELECT version, ddl_sha256, seams_version FROM seams.schema_version")


@pytest.fixture
def migrated(database_url: str) -> Iterator[str]:
    """A database set up by a writer, DDL logged from then on."""
    PostgresResource(url=database_url).ensure_schema()
    install_ddl_log(database_url)
    yield database_url


def test_a_fresh_database_gets_the_schema_and_one_version_row(database_url: str) -> None:
    postgres = PostgresResource(url=database_url)
    migration = postgres.ensure_schema()
    assert migration is not None and migration.applied and migration.before.missing
    assert migration.describe("db").startswith("created the seams schema at db: version 1")
    assert version_rows(database_url) == [(SCHEMA_NUMBER, ddl_sha256(), migrations.seams_version())]
    assert rows(database_url, "SELECT to_regclass('seams.current_chunks') IS NOT NULL") == [(True,)]
    assert postgres.ensure_schema() is None  # once per process
    again = migrate(database_url)
    assert not again.applied and "is up to date: version 1" in again.describe("db")


def test_readers_and_later_processes_run_no_ddl(migrated: str) -> None:
    close_pool(migrated)  # a new process's view: nothing checked or migrated yet
    postgres = PostgresResource(url=migrated)
    with postgres.connection() as conn:
        conn.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
    migration = postgres.ensure_schema()  # a writer, first in this process: checks, no DDL
    assert migration is not None and not migration.applied
    assert ddl_log(migrated) == []


@pytest.mark.slow
def test_a_dozen_processes_start_while_threads_search_without_error_or_ddl(
    migrated: str,
) -> None:
    """Readers' snapshots touch the views and tables a search reads while twelve processes
    start (half of them writers): no error, no deadlock, and not one DDL statement."""
    errors: list[BaseException] = []
    stop = threading.Event()

    def search_loop() -> None:
        postgres = PostgresResource(url=migrated)
        try:
            while not stop.is_set():
                with postgres.connection() as conn, conn.transaction():
                    conn.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
                    conn.execute("SELECT count(*) FROM seams.chunk_parents").fetchone()
                    conn.execute("SELECT count(*) FROM seams.current_versions").fetchone()
                    conn.execute("SELECT * FROM seams.lexical_totals").fetchall()
                    conn.execute("SELECT count(*) FROM seams.chunk_index").fetchone()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=search_loop) for _ in range(4)]
    for thread in threads:
        thread.start()
    script = (
        "import sys\n"
        "from seams.resources.postgres import PostgresResource\n"
        "p = PostgresResource(url=sys.argv[1])\n"
        "if sys.argv[2] == 'writer':\n"
        "    p.ensure_schema()\n"
        "with p.connection() as conn:\n"
        "    conn.execute('SELECT count(*) FROM seams.current_chunks').fetchone()\n"
    )
    try:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", script, migrated, "writer" if i % 2 else "reader"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(12)
        ]
        outputs = [(p.wait(timeout=240), p.stdout.read() if p.stdout else "") for p in procs]
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    assert [o for o in outputs if o[0] != 0] == []
    assert errors == []
    assert ddl_log(migrated) == []


def test_changed_ddl_text_triggers_exactly_one_migration(
    migrated: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Editing `ddl()` (here: a new view) needs no version bump: the next writers apply it,
    exactly one of them, once; readers meanwhile run nothing."""
    original = migrations.ddl

    def edited(**kwargs: Any) -> list[sql.Composable]:
        return [*original(**kwargs), sql.SQL("CREATE OR REPLACE VIEW seams.edited AS SELECT 1")]

    monkeypatch.setattr(migrations, "ddl", edited)
    ddl_sha256.cache_clear()  # recomputed from the edited ddl()
    views = sum(
        s.as_string(None).startswith("CREATE OR REPLACE VIEW")
        for s in edited(schema_exists=True, vector_exists=True)
    )
    try:
        with psycopg.connect(migrated, autocommit=True) as conn:
            assert read_state(conn).needs_migration
        close_pool(migrated)
        with PostgresResource(url=migrated).connection() as conn:  # a reader: reads, no DDL
            conn.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
        assert ddl_log(migrated) == []

        results: list[migrations.Migration] = []
        assert run_together(*[lambda: results.append(migrate(migrated))] * 6) == []
        assert sorted(r.applied for r in results) == [False] * 5 + [True]
        log = ddl_log(migrated)
        assert log.count("CREATE VIEW") == views  # every view once, the new one included
        assert rows(migrated, "SELECT count(DISTINCT pid) FROM public.ddl_log") == [(1,)]
        assert version_rows(migrated)[0][1] == migrations.ddl_sha256()
        assert not migrate(migrated).applied
        assert len(ddl_log(migrated)) == len(log)
    finally:
        ddl_sha256.cache_clear()


def test_a_database_made_before_versions_is_read_as_is_and_upgraded_by_a_writer(
    migrated: str,
) -> None:
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute("DROP TABLE seams.schema_version")
    close_pool(migrated)
    with PostgresResource(url=migrated).connection() as conn:
        assert conn.execute("SELECT count(*) FROM seams.chunks").fetchone() == (0,)
    assert ddl_log(migrated) == ["DROP TABLE"]
    migration = PostgresResource(url=migrated).ensure_schema()
    assert migration is not None and migration.applied
    assert "from a seams schema without a recorded version to version 1" in migration.describe("db")
    assert version_rows(migrated) == [(SCHEMA_NUMBER, ddl_sha256(), migrations.seams_version())]


def test_a_newer_schema_is_read_but_not_written(migrated: str) -> None:
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute("UPDATE seams.schema_version SET version = version + 1, seams_version='9.0'")
    close_pool(migrated)
    with PostgresResource(url=migrated).connection() as conn:
        conn.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
    with pytest.raises(StorageError, match=r"is version 2, newer than this Seams .*upgrade Seams"):
        PostgresResource(url=migrated).ensure_schema()
    assert ddl_log(migrated) == []


# --- aborted transactions -------------------------------------------------------------------


def _deadlocking(url: str, conflicts: int) -> tuple[Callable[[], str], list[int]]:
    """A transaction locking rows 1 then 2 whose first `conflicts` attempts deadlock with a
    thread locking 2 then 1; it is always PostgreSQL's victim (the shorter deadlock_timeout
    detects first). Returns it and the list of its attempts."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS public.pair (id integer PRIMARY KEY, n integer)")
        conn.execute("INSERT INTO public.pair VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING")
    attempts: list[int] = []

    def adversary(barrier: threading.Barrier) -> None:
        with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
            conn.execute("SET LOCAL deadlock_timeout = '10s'")
            conn.execute("UPDATE public.pair SET n = n + 1 WHERE id = 2")
            barrier.wait()
            conn.execute("UPDATE public.pair SET n = n + 1 WHERE id = 1")

    def transaction() -> str:
        attempts.append(len(attempts) + 1)
        conflict = len(attempts) <= conflicts
        barrier = threading.Barrier(2)
        other = threading.Thread(target=adversary, args=(barrier,))
        if conflict:
            other.start()
        try:
            with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
                conn.execute("SET LOCAL deadlock_timeout = '50ms'")
                conn.execute("UPDATE public.pair SET n = n + 1 WHERE id = 1")
                if conflict:
                    barrier.wait()
                conn.execute("UPDATE public.pair SET n = n + 1 WHERE id = 2")
        finally:
            if conflict:
                other.join()
        return "written"

    return transaction, attempts


def test_a_deadlock_is_retried(database_url: str) -> None:
    transaction, attempts = _deadlocking(database_url, conflicts=2)
    assert retrying("db", "testing", transaction) == "written"
    assert attempts == [1, 2, 3]
    # every adversary and the last attempt committed; the aborted attempts wrote nothing
    assert rows(database_url, "SELECT id, n FROM public.pair ORDER BY id") == [(1, 3), (2, 3)]


def test_a_deadlock_past_the_last_attempt_is_named_not_a_lost_connection(
    database_url: str,
) -> None:
    transaction, attempts = _deadlocking(database_url, conflicts=3)
    with pytest.raises(StorageError) as raised:
        retrying("host:5432/seams", "writing asset chunks to seams.chunks", transaction)
    message = str(raised.value)
    assert attempts == [1, 2, 3]
    assert message == (
        "PostgreSQL at host:5432/seams aborted the transaction (deadlock detected, SQLSTATE "
        "40P01) while writing asset chunks to seams.chunks, 3 times; nothing was written (each "
        "write is one transaction): rerun"
    )
    assert "lost the connection" not in message and "cannot connect" not in message
    assert isinstance(raised.value.__cause__, psycopg.errors.DeadlockDetected)


def test_connection_lost_names_a_serialization_failure(database_url: str) -> None:
    """Two serializable transactions writing what the other read: PostgreSQL aborts one."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.acct (id integer PRIMARY KEY, n integer)")
        conn.execute("INSERT INTO public.acct VALUES (1, 0), (2, 0)")
    first = psycopg.connect(database_url)
    second = psycopg.connect(database_url)
    try:
        for conn in (first, second):
            conn.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
        first.execute("SELECT sum(n) FROM public.acct").fetchone()
        second.execute("SELECT sum(n) FROM public.acct").fetchone()
        first.execute("UPDATE public.acct SET n = 1 WHERE id = 1")
        second.execute("UPDATE public.acct SET n = 1 WHERE id = 2")
        first.commit()
        with pytest.raises(psycopg.errors.SerializationFailure) as raised:
            second.commit()
    finally:
        first.close()
        second.close()
    error = connection_lost("db", "registering a batch", raised.value)
    assert str(error).startswith(
        "PostgreSQL at db aborted the transaction (serialization failure, SQLSTATE 40001) "
        "while registering a batch; nothing was written"
    )


# --- writers' entry points -------------------------------------------------------------------


def test_dagster_steps_and_sensors_migrate_before_their_first_use(
    database_url: str, pg_server_url: str
) -> None:
    """Every Dagster step (the IO manager's resource too) and sensor is a writer: the resource
    migrates when Dagster sets it up, before the asset or sensor body touches the database."""

    def versioned(url: str) -> bool:
        state = rows(url, "SELECT to_regclass('seams.schema_version') IS NOT NULL")
        return state == [(True,)]

    seen: list[bool] = []

    @dg.asset
    def stores_nothing() -> None:
        seen.append(versioned(database_url))

    postgres = PostgresResource(url=database_url)
    result = dg.materialize(
        [stores_nothing], resources={"io_manager": PostgresIOManager(postgres=postgres)}
    )
    assert result.success and seen == [True]

    with fresh_database(pg_server_url) as other:

        @dg.sensor(target=[stores_nothing])
        def watches(context: dg.SensorEvaluationContext, postgres: PostgresResource) -> None:
            seen.append(versioned(other))

        with dg.build_sensor_context(resources={"postgres": PostgresResource(url=other)}) as ctx:
            watches(ctx)
    assert seen == [True, True]


def test_an_old_schema_missing_what_a_reader_needs_says_to_upgrade_and_db_upgrade_does(
    migrated: str, tmp_path: Path
) -> None:
    """A reader of a schema older than this Seams reads what is there; what is not there yet
    is one line naming `seams db upgrade`, which applies the migration and says so."""
    with psycopg.connect(migrated, autocommit=True) as conn:
        conn.execute("DROP VIEW seams.chunk_parents")
        conn.execute("UPDATE seams.schema_version SET ddl_sha256 = 'older'")
    close_pool(migrated)
    postgres = PostgresResource(url=migrated)
    with postgres.connection() as conn:
        assert conn.execute("SELECT count(*) FROM seams.chunks").fetchone() == (0,)
    with pytest.raises(StorageError) as raised, postgres.connection() as conn:
        conn.execute("SELECT count(*) FROM seams.chunk_parents")
    assert "is older than this Seams" in str(raised.value)
    assert "run `seams db upgrade`" in str(raised.value)
    assert ddl_log(migrated) == ["DROP VIEW"]

    env = seams_env(SEAMS_DATABASE_URL=migrated, SEAMS_DATA_DIR=str(tmp_path / "data"))
    done = run_seams("db", "upgrade", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("upgraded the seams schema at "), lines
    assert "to version 1 (ddl " in lines[0]
    assert rows(migrated, "SELECT to_regclass('seams.chunk_parents') IS NOT NULL") == [(True,)]
    again = run_seams("db", "upgrade", env=env)
    assert again.returncode == 0 and "is up to date: version 1" in again.stdout, again.stderr
