"""What a tenant's role may spend and call, that it never stalls a writer, and its removal:
real roles on the test server (a superuser owner, as the embedded server's), on the tenancy
of `test_tenants`."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from seams.orchestration.cli import check
from seams.orchestration.command_lock import LOCK_NAME, command_lock
from seams.resources import database
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import lock_waits, migrations, tenant_roles, tenants
from tests.storage.test_tenants import Tenancy
from tests.storage.test_tenants import tenancy as tenancy  # the fixture, shared
from tests.support.databases import database_name, fresh_database
from tests.support.privileges import assert_refused


def test_a_tenants_connections_stop_at_its_limit_while_another_still_connects(
    tenancy: Tenancy,
) -> None:
    opened: list[psycopg.Connection[Any]] = []
    refused: list[str] = []
    try:
        for _ in range(100):
            try:
                opened.append(psycopg.connect(tenancy.urls[tenancy.a]))
            except psycopg.OperationalError as exc:
                refused.append(str(exc))
        assert len(opened) == tenant_roles.LIMITS.connections
        assert len(refused) == 100 - tenant_roles.LIMITS.connections
        assert all("too many connections for role" in r for r in refused)
        with psycopg.connect(tenancy.urls[tenancy.b]) as other:
            assert other.execute("SELECT count(*) FROM seams.chunks").fetchone() == (1,)
        # The limit is the owner's to change, not the tenant's.
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            opened[0].execute(
                sql.SQL("ALTER ROLE {} CONNECTION LIMIT -1").format(
                    sql.Identifier(tenants.tenant_role(tenancy.a))
                )
            )
    finally:
        for conn in opened:
            conn.close()


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT pg_sleep(3600)",
        "SELECT pg_sleep_for('1 hour')",
        "SELECT pg_sleep_until(now() + interval '1 hour')",
        "SELECT lo_from_bytea(0, 'x')",
        "SELECT lo_create(0)",
        "SELECT lo_creat(-1)",
        f"SELECT pg_advisory_lock(hashtextextended('{LOCK_NAME}', 0))",
        "SELECT pg_try_advisory_xact_lock_shared(1)",
    ],
)
def test_sleep_large_objects_and_advisory_locks_are_refused_to_a_tenant(
    tenancy: Tenancy, statement: str
) -> None:
    assert_refused(tenancy.urls[tenancy.a], statement)


def test_the_writers_command_lock_is_the_owners_alone(tenancy: Tenancy) -> None:
    lines: list[str] = []
    with psycopg.connect(tenancy.urls[tenancy.b], autocommit=True) as tenant:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            tenant.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (LOCK_NAME,))
        with command_lock(tenancy.owner_url, "seams run /data", lines.append, wait=False):
            pass
    assert lines == []
    with psycopg.connect(tenancy.owner_url) as conn:
        assert tenant_roles.problems(conn, tenants.ROLE_PREFIX, tenants.GROUP) == []


def test_role_defaults_hold_and_temporary_files_are_bounded(tenancy: Tenancy) -> None:
    role = tenants.tenant_role(tenancy.b)
    with psycopg.connect(tenancy.urls[tenancy.b]) as conn:
        shown = {
            name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[0]  # type: ignore[index]
            for name in tenant_roles.LIMITS.settings(conn.info.server_version)
        }
        assert shown["statement_timeout"] == "1min"
        assert shown["idle_in_transaction_session_timeout"] == "1min"
        assert shown["temp_file_limit"] == "1GB"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET temp_file_limit = -1")
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        tenant_roles.apply_limits(owner, role, tenant_roles.Limits(temp_file_limit="1MB"))
    try:
        with psycopg.connect(tenancy.urls[tenancy.b]) as conn:
            conn.execute("SET work_mem = '64kB'")
            with pytest.raises(psycopg.errors.ConfigurationLimitExceeded, match="temp_file_limit"):
                conn.execute(
                    "SELECT count(*) FROM (SELECT md5(g::text) AS h FROM"
                    " generate_series(1, 300000) AS g ORDER BY 1) AS s"
                ).fetchone()
    finally:
        with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
            tenant_roles.apply_limits(owner, role)


@contextlib.contextmanager
def _extra_tenant(tenancy: Tenancy) -> Any:
    """A third tenant `c` reading `gamma` in the tenancy's database; gone afterwards."""
    fresh = f"c{uuid.uuid4().hex[:8]}"
    base = {"alpha": tenancy.a, "alpha2": tenancy.a, "beta": tenancy.b}
    with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
        tenants.sync_project(conn, {**base, "gamma": fresh})
    try:
        yield fresh, base
    finally:
        close_pool(tenants.tenant_url(tenancy.owner_url, fresh))
        with psycopg.connect(tenancy.owner_url, autocommit=True) as conn:
            tenants.drop_tenant(conn, fresh)
            tenants.sync_tenants(conn, {**base, "gamma": None})


def _role_exists(url: str, role: str) -> bool:
    with psycopg.connect(url) as conn:
        return bool(conn.execute("SELECT to_regrole(%s) IS NOT NULL", (role,)).fetchone()[0])  # type: ignore[index]


def test_a_removed_tenant_with_a_large_object_is_dropped_and_its_url_stops_connecting(
    tenancy: Tenancy,
) -> None:
    with _extra_tenant(tenancy) as (fresh, base):
        role = tenants.tenant_role(fresh)
        url = tenants.tenant_url(tenancy.owner_url, fresh)
        with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
            # Created before large objects were denied, or granted by hand: the tenant's own.
            oid = owner.execute("SELECT lo_from_bytea(0, 'x')").fetchone()[0]  # type: ignore[index]
            owner.execute(
                sql.SQL("ALTER LARGE OBJECT {} OWNER TO {}").format(
                    sql.Literal(oid), sql.Identifier(role)
                )
            )
            session = psycopg.connect(url, autocommit=True)
            changes = tenants.sync_project(owner, {**base, "gamma": None})
            assert changes.removed == (fresh,) and changes.left == ()
            assert owner.execute(
                "SELECT count(*) FROM pg_largeobject_metadata WHERE oid = %s", (oid,)
            ).fetchone() == (0,)
        assert not _role_exists(tenancy.owner_url, role)
        with pytest.raises(psycopg.OperationalError):  # its open session was ended
            session.execute("SELECT 1")
        session.close()
        with pytest.raises(psycopg.OperationalError, match=role):
            psycopg.connect(url)


def test_a_role_that_cannot_be_dropped_loses_its_login_and_is_named_until_it_is_gone(
    tenancy: Tenancy, pg_server_url: str
) -> None:
    with _extra_tenant(tenancy) as (fresh, base), fresh_database(pg_server_url) as elsewhere:
        role = tenants.tenant_role(fresh)
        with psycopg.connect(elsewhere, autocommit=True) as other:
            other.execute("CREATE TABLE kept (x int)")
            other.execute(sql.SQL("ALTER TABLE kept OWNER TO {}").format(sql.Identifier(role)))
        with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
            first = tenants.sync_project(owner, {**base, "gamma": None})
            later = tenants.sync_project(owner, {**base, "gamma": None})
        for changes in (first, later):
            assert changes.changed
            assert len(changes.left) == 1 and changes.left[0].startswith(f"{role} is left")
            assert changes.describe().endswith(changes.left[0])
        name = psycopg.conninfo.conninfo_to_dict(elsewhere)["dbname"]
        assert f"database(s) {name}" in first.left[0]
        with pytest.raises(psycopg.OperationalError, match="not permitted to log in"):
            psycopg.connect(tenants.tenant_url(tenancy.owner_url, fresh))
        report, status = check.tenancy_report(PostgresResource(url=tenancy.owner_url))
        assert f"Tenants: {role} is no tenant any more without login" in report
        assert status == 0
        with psycopg.connect(elsewhere, autocommit=True) as other:
            other.execute("DROP TABLE kept")
        with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
            assert tenants.sync_project(owner, {**base, "gamma": None}).left == ()
        assert not _role_exists(tenancy.owner_url, role)


def test_a_tenant_cannot_connect_to_the_dagster_database(
    tenancy: Tenancy, pg_server_url: str
) -> None:
    """The embedded server's Dagster database is closed to every role but its owner and
    superusers (the test server's own, made by its start, and one closed the same way); the
    tenant's URL still connects to the data."""
    tenant = psycopg.conninfo.conninfo_to_dict(tenancy.urls[tenancy.a])
    with fresh_database(pg_server_url) as elsewhere:
        name = database_name(elsewhere)
        database.close_to_others(pg_server_url, name)
        database.close_to_others(pg_server_url, name)  # again: nothing left to do
        names = [name]
        with psycopg.connect(pg_server_url) as conn:
            if conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", (database.DAGSTER_DATABASE,)
            ).fetchone():
                names.append(database.DAGSTER_DATABASE)
        for closed in names:
            with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
                psycopg.connect(psycopg.conninfo.make_conninfo(**{**tenant, "dbname": closed}))
            with psycopg.connect(database.database_url_for(pg_server_url, closed)) as owner:
                assert owner.execute("SELECT 1").fetchone() == (1,)
    with psycopg.connect(tenancy.urls[tenancy.a]) as conn:
        assert conn.execute("SELECT count(*) FROM seams.chunks").fetchone() == (2,)


def _wanted(tenancy: Tenancy) -> dict[str, str | None]:
    return {"alpha": tenancy.a, "alpha2": tenancy.a, "beta": tenancy.b, "gamma": None}


@contextlib.contextmanager
def _idle_reader(url: str, application: str = "report") -> Any:
    """A session in an open transaction that read a table and a view, then sits idle (its
    idle timeout off, as a tenant may set it)."""
    conn = psycopg.connect(url, application_name=application)
    try:
        conn.execute("SET idle_in_transaction_session_timeout = 0")
        conn.execute("SELECT 1 FROM seams.chunks LIMIT 1").fetchall()
        conn.execute("SELECT 1 FROM seams.published_chunks LIMIT 1").fetchall()
        yield conn
    finally:
        conn.close()


def _ended(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def test_a_sync_with_everything_in_place_takes_no_lock_a_tenants_reads_hold(
    tenancy: Tenancy,
) -> None:
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        assert tenants.missing(owner) == set()
        with _idle_reader(tenancy.urls[tenancy.a]) as reader:
            changes = tenants.sync_project(owner, _wanted(tenancy))
            assert changes.reads == {tenancy.a: ("alpha", "alpha2"), tenancy.b: ("beta",)}
            # Its transaction never conflicted: still open, and reading.
            assert reader.execute("SELECT count(*) FROM seams.chunks").fetchone() == (2,)


def test_the_tenants_ddl_ends_a_tenant_session_that_blocks_it(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        owner.execute("ALTER TABLE seams.source_files DISABLE ROW LEVEL SECURITY")
        assert tenants.missing(owner) == {"policies"}
        with _idle_reader(tenancy.urls[tenancy.a]) as reader:
            tenants.sync_project(owner, _wanted(tenancy))
            assert _ended(reader)
        assert tenants.missing(owner) == set()
        rls = owner.execute(
            "SELECT relrowsecurity FROM pg_class WHERE oid = 'seams.source_files'::regclass"
        ).fetchone()
        assert rls == (True,)


def test_an_upgrade_ends_a_tenant_session_that_blocks_it(tenancy: Tenancy) -> None:
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        owner.execute("UPDATE seams.schema_version SET ddl_sha256 = 'older'")
        with _idle_reader(tenancy.urls[tenancy.b]) as reader:
            assert migrations.migrate(owner).applied
            assert _ended(reader)
        assert migrations.read_state(owner).current


def test_a_writer_blocked_by_a_session_that_is_no_tenants_names_it(
    tenancy: Tenancy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only tenants' sessions are ended: any other is waited for, up to the lock timeout, then
    named in one line (its role and application)."""
    monkeypatch.setattr(lock_waits, "LOCK_TIMEOUT", "1s")
    with psycopg.connect(tenancy.owner_url, autocommit=True) as owner:
        owner.execute("ALTER TABLE seams.source_files DISABLE ROW LEVEL SECURITY")
        try:
            with _idle_reader(tenancy.owner_url, "nightly-report") as other:
                with pytest.raises(lock_waits.LockError) as caught:
                    tenants.sync_project(owner, _wanted(tenancy))
                assert not _ended(other)
            line = str(caught.value)
            assert "\n" not in line and "'nightly-report'" in line and owner.info.user in line
            assert line.startswith("waited 1s at ") and "pg_terminate_backend" in line
        finally:
            tenants.sync_project(owner, _wanted(tenancy))
        assert tenants.missing(owner) == set()
