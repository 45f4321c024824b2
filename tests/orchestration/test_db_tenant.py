"""`seams db url --tenant` and `seams db upgrade` follow the tenants seams.yaml names, and `seams
check` says where the database differs from them.

The commands run in-process against a fresh database of the test server, given as an external
server (`SEAMS_DATABASE_URL`). Tenant names are unique per test (roles are per server) and
dropped afterwards. The slow tests start servers of their own: the data dir's embedded server
(trust on its socket: the URL carries the role name alone) and one that demands a password of
tenant roles on its socket, so the printed password is the one that logs in.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from seams.environment import SeamsEnvironment
from seams.orchestration import cli
from seams.orchestration.cli import check
from seams.orchestration.runner import seams_command
from seams.resources import database
from seams.resources.database import EmbeddedPostgres, database_url_for
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import schema, tenants
from tests.storage.test_tenants import _insert
from tests.support.databases import fresh_database
from tests.support.instances import keep_environment
from tests.support.privileges import tenant_names


def write_settings(folder: Path, assignments: dict[str, str | None]) -> Path:
    """seams.yaml declaring `assignments` (collection -> tenant or None), a source folder each."""
    lines = ["collections:"]
    for collection, tenant in assignments.items():
        (folder / collection).mkdir(exist_ok=True)
        tenant_field = f", tenant: {tenant}" if tenant else ""
        lines.append(f"  {collection}: {{source: {collection}{tenant_field}}}")
    settings = folder / "seams.yaml"
    settings.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return settings


Seams = Callable[..., tuple[int, str, str]]


@pytest.fixture
def seams(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Seams:
    """`seams(ARGV, settings=..., database_url=...)`: `seams ARGV` in-process with these
    settings and server (None: the data dir's own); (status, stdout, stderr)."""
    keep_environment(monkeypatch)

    def run(argv: list[str], *, settings: Path, database_url: str | None) -> tuple[int, str, str]:
        monkeypatch.setenv("SEAMS_CONFIG", str(settings))
        if database_url is None:
            monkeypatch.delenv(database.URL_ENV, raising=False)
        else:
            monkeypatch.setenv(database.URL_ENV, database_url)
        status = cli.main(argv)
        out, err = capsys.readouterr()
        return status, out, err

    return run


@pytest.fixture
def names() -> tuple[str, str]:
    """Two tenant names no other test uses (roles are per server)."""
    return tenant_names()


@pytest.fixture
def server(pg_server_url: str, names: tuple[str, str]) -> Iterator[str]:
    """A fresh database on the test server; the tenants' roles dropped after the test."""
    with fresh_database(pg_server_url) as url:
        try:
            yield url
        finally:
            close_pool(url)
            with psycopg.connect(url, autocommit=True) as conn:
                for tenant in names:
                    if conn.execute("SELECT to_regclass('seams.collection_tenants')").fetchone()[0]:
                        tenants.drop_tenant(conn, tenant)
                    else:
                        conn.execute(
                            sql.SQL("DROP ROLE IF EXISTS {}").format(
                                sql.Identifier(tenants.tenant_role(tenant))
                            )
                        )
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(tenants.GROUP)))


# --- no database ------------------------------------------------------------------------------


def test_an_unknown_tenant_is_one_line_naming_the_known_ones(tmp_path: Path, seams: Seams) -> None:
    settings = write_settings(tmp_path, {"handbook": "acme", "tickets": "beta", "misc": None})
    argv = ["db", "url", "--tenant", "nobody"]
    status, out, err = seams(argv, settings=settings, database_url=None)
    assert status == cli.EXIT_ERROR and out == ""
    assert err == (
        f"seams: error: --tenant 'nobody': no collection names that tenant in {settings} "
        "(from SEAMS_CONFIG); known tenants: acme, beta\n"
    )
    (tmp_path / "bare").mkdir()
    bare = write_settings(tmp_path / "bare", {"misc": None})
    status, out, err = seams(argv, settings=bare, database_url=None)
    assert status == cli.EXIT_ERROR and err.count("\n") == 1
    assert "it names none: give a collection `tenant: NAME` under `collections:`" in err


@pytest.mark.parametrize("action", ["start", "stop", "status", "upgrade"])
def test_tenant_goes_with_url_only(
    action: str,
    tmp_path: Path,
    seams: Seams,
) -> None:
    settings = write_settings(tmp_path, {"handbook": "acme"})
    argv = ["db", action, "--tenant", "acme"]
    status, out, err = seams(argv, settings=settings, database_url=None)
    assert status == cli.EXIT_ERROR and out == ""
    assert err == (
        f"seams: error: --tenant goes with `seams db url` only, not `seams db {action}`: "
        "run `seams db url --tenant acme`\n"
    )


def test_a_broken_seams_yaml_stops_only_the_actions_that_read_it(
    tmp_path: Path, seams: Seams, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_path / "seams.yaml"
    settings.write_text("embedder: {variant: fp16}\n", encoding="utf-8")
    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "data"))  # no server there
    argv = ["db", "status"]
    status, out, err = seams(argv, settings=settings, database_url=None)
    assert (status, err) == (1, "") and out.startswith("stopped: embedded PostgreSQL in ")
    argv = ["db", "url", "--tenant", "acme"]
    status, out, err = seams(argv, settings=settings, database_url=None)
    assert status == cli.EXIT_ERROR and out == "" and err.count("\n") == 1
    assert err.startswith(f"seams: error: {settings}: ") and "embedder.variant" in err


# --- the test server as an external one -------------------------------------------------------


def test_db_url_tenant_syncs_the_settings_and_prints_a_working_url(
    server: str,
    names: tuple[str, str],
    tmp_path: Path,
    seams: Seams,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = names
    settings = write_settings(tmp_path, {"alpha": a, "beta": b, "gamma": None})
    argv = ["db", "url", "--tenant", a]
    status, first, err = seams(argv, settings=settings, database_url=server)
    assert status == 0 and err == "" and first.count("\n") == 1
    status, second, _ = seams(argv, settings=settings, database_url=server)
    assert status == 0
    url, again = first.strip(), second.strip()
    params = psycopg.conninfo.conninfo_to_dict(url)
    assert params["user"] == tenants.tenant_role(a) and len(params["password"]) >= 32
    assert psycopg.conninfo.conninfo_to_dict(again)["password"] != params["password"]
    with psycopg.connect(server, autocommit=True) as owner:
        # Both tenants were synced (the other one too), with their collections.
        assert tenants.assignments(owner) == {"alpha": a, "beta": b}
        with owner.transaction():
            for seq, collection in enumerate(("alpha", "beta", "gamma"), start=1):
                _insert(owner, schema.CHUNKS, collection, seq)
    with psycopg.connect(again) as mine:
        assert mine.execute("SELECT collection FROM seams.chunks").fetchall() == [("alpha",)]
    # The tenant's URL given to `seams` itself: one line saying whose URL it needs.
    monkeypatch.setenv(database.DAGSTER_URL_ENV, again)
    status, _, err = seams(["check"], settings=settings, database_url=again)
    assert status == cli.EXIT_ERROR and err.count("\n") == 1, err
    assert "refused this role what the command needs (permission denied" in err
    assert "a tenant's URL (`seams db url --tenant`) is for your application's reads" in err


def test_db_upgrade_follows_the_settings_and_says_so(
    server: str,
    names: tuple[str, str],
    tmp_path: Path,
    seams: Seams,
) -> None:
    a, b = names
    role_a, role_b = tenants.tenant_role(a), tenants.tenant_role(b)

    def upgrade(assignments: dict[str, str | None]) -> list[str]:
        settings = write_settings(tmp_path, assignments)
        argv = ["db", "upgrade"]
        status, out, err = seams(argv, settings=settings, database_url=server)
        assert status == 0 and err == "", err
        return out.splitlines()

    def role_exists(role: str) -> bool:
        with psycopg.connect(server) as conn:
            return conn.execute("SELECT to_regrole(%s) IS NOT NULL", (role,)).fetchone()[0]

    lines = upgrade({"alpha": a, "beta": b, "gamma": None})
    assert lines[0].startswith("created the seams schema at ")
    assert lines[1:] == [f"tenants: {a} reads alpha; {b} reads beta (created {role_a}, {role_b})"]
    with psycopg.connect(server, autocommit=True) as owner, owner.transaction():
        for seq, collection in enumerate(("alpha", "beta", "gamma"), start=1):
            _insert(owner, schema.CHUNKS, collection, seq)

    # b named nowhere any more: its role goes; a reads beta too.
    lines = upgrade({"alpha": a, "beta": a, "gamma": None})
    assert lines[1:] == [
        f"tenants: {a} reads alpha, beta (removed {role_b}: no collection names it any more)"
    ]
    assert role_exists(role_a) and not role_exists(role_b)
    url = tenants.tenant_url(server, a)
    with psycopg.connect(url) as mine:
        assert mine.execute("SELECT collection FROM seams.chunks ORDER BY 1").fetchall() == [
            ("alpha",),
            ("beta",),
        ]
    # beta's tenant removed: a, connected all along, no longer reads beta's rows.
    with psycopg.connect(url) as mine:
        assert upgrade({"alpha": a, "beta": None, "gamma": None})[1:] == [
            f"tenants: {a} reads alpha"
        ]
        assert mine.execute("SELECT collection FROM seams.chunks").fetchall() == [("alpha",)]
    # No tenant left: the last role goes, and a project without tenants prints no line.
    assert upgrade({"alpha": None})[1:] == [
        f"tenants: none (removed {role_a}: no collection names it any more)"
    ]
    assert not role_exists(role_a)
    assert len(upgrade({"alpha": None})) == 1


def test_db_upgrade_with_broken_settings_upgrades_the_schema_and_says_tenants_were_not_synced(
    server: str,
    tmp_path: Path,
    seams: Seams,
) -> None:
    settings = tmp_path / "seams.yaml"
    settings.write_text("collections: {x: {source: x, tenant: Bad-Name}}\n", encoding="utf-8")
    argv = ["db", "upgrade"]
    status, out, err = seams(argv, settings=settings, database_url=server)
    assert status == cli.EXIT_ERROR
    assert out.startswith("created the seams schema at ") and out.count("\n") == 1
    assert err.startswith(f"seams: error: tenants not synced with the settings: {settings}: ")
    assert "tenant='Bad-Name'" in err and err.count("\n") == 1


def test_check_names_the_settings_tenants_without_a_role_and_what_differs(
    server: str, names: tuple[str, str]
) -> None:
    a, b = names
    postgres = PostgresResource(url=server)
    postgres.ensure_schema()
    declared = {"alpha": a, "beta": b, "gamma": None}
    upgrade = f"`{seams_command()} db upgrade`"
    report, status = check.tenancy_report(postgres, declared)
    assert status == 0
    assert report.splitlines() == [
        "Tenants: 0 tenants reading 0 collections",
        f"Tenants: {a}, {b} named in the settings, without a role yet: {upgrade} creates them",
    ]
    with psycopg.connect(server, autocommit=True) as conn:
        tenants.sync_project(conn, {"alpha": a, "gamma": a})
    report, status = check.tenancy_report(postgres, declared)
    assert status == check.EXIT_ISOLATION
    assert report.splitlines() == [
        "Tenants: 1 tenant reading 2 collections; each reads only its collections' rows",
        f"Tenants: {b} named in the settings, without a role yet: {upgrade} creates it",
        f"Tenants: {a} reads gamma, which the settings do not say: {upgrade} takes it away",
    ]
    with psycopg.connect(server, autocommit=True) as conn:
        tenants.sync_project(conn, declared)
    assert check.tenancy_report(postgres, declared) == (
        "Tenants: 2 tenants reading 2 collections; each reads only its collections' rows",
        0,
    )
    # Every tenant taken out of the settings: their roles go, and nothing is left to say
    # beyond the count.
    with psycopg.connect(server, autocommit=True) as conn:
        tenants.sync_project(conn, {"alpha": None})
    assert check.tenancy_report(postgres, {"alpha": None}) == (
        "Tenants: 0 tenants reading 0 collections",
        0,
    )


# --- servers of their own -----------------------------------------------------------------------


@pytest.mark.slow
def test_on_the_embedded_server_the_url_is_the_role_alone(
    names: tuple[str, str],
    tmp_path: Path,
    seams: Seams,
) -> None:
    """The data dir's own embedded server (the session's): trust on its private socket, so the
    URL carries no password, and the role it names reads what a tenant may."""
    a, _ = names
    settings = write_settings(tmp_path, {"alpha": a})
    argv = ["db", "url", "--tenant", a]
    status, out, err = seams(argv, settings=settings, database_url=None)
    assert status == 0 and err == "", err
    owner_url = resolve_owner_url()
    try:
        params = psycopg.conninfo.conninfo_to_dict(out.strip())
        assert params["user"] == tenants.tenant_role(a) and "password" not in params
        assert params["host"] == psycopg.conninfo.conninfo_to_dict(owner_url)["host"]
        with psycopg.connect(out.strip()) as mine:
            assert mine.execute("SELECT current_user").fetchone() == (tenants.tenant_role(a),)
            assert mine.execute("SELECT count(*) FROM seams.current_chunks").fetchone() == (0,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                mine.execute("SELECT 1 FROM seams.embedding_cache")
    finally:
        with psycopg.connect(owner_url, autocommit=True) as conn:
            tenants.sync_project(conn, {})


def resolve_owner_url() -> str:
    """The owner's URL of the data dir's embedded server (the one `seams db url` used)."""
    return database.resolve(SeamsEnvironment.from_os()).data


HBA_TENANTS = "local all /^seams_tenant_ scram-sha-256\n"
"""pg_hba.conf's first line on the password server: tenant roles authenticate with SCRAM on
the socket (the embedded server listens on no TCP port); the owner keeps trust."""


@pytest.mark.slow
def test_on_a_server_that_demands_passwords_the_printed_one_logs_in_and_is_never_logged(
    names: tuple[str, str],
    tmp_path: Path,
    seams: Seams,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, _ = names
    root = server_tempdir("seams-pw-")
    server = EmbeddedPostgres(root / "pgdata")
    try:
        server_url = server.start()
        hba = server.pgdata / "pg_hba.conf"
        hba.write_text(HBA_TENANTS + hba.read_text())
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET log_statement = 'all'")
            admin.execute("SELECT pg_reload_conf()")
        data_url = database_url_for(server_url, database.DATA_DATABASE)
        monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "data"))
        settings = write_settings(tmp_path, {"alpha": a})
        argv = ["db", "url", "--tenant", a]
        printed = []
        for _ in range(2):
            status, out, err = seams(argv, settings=settings, database_url=data_url)
            assert status == 0 and err == "", err
            printed.append(out.strip())
        old, new = printed
        password = psycopg.conninfo.conninfo_to_dict(new)["password"]
        with psycopg.connect(new) as mine:
            assert mine.execute("SELECT current_user").fetchone() == (tenants.tenant_role(a),)
        for refused in (old, psycopg.conninfo.make_conninfo(new, password="")):
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(refused).close()
        # Neither the server's statement log nor anything Seams wrote holds the password.
        written = [p for p in (server.pgdata / "log", tmp_path / "data") if p.exists()]
        for folder in written:
            files = [folder] if folder.is_file() else [f for f in folder.rglob("*") if f.is_file()]
            for file in files:
                assert password.encode() not in file.read_bytes(), file
        assert "ALTER ROLE" in (server.pgdata / "log").read_text(errors="replace")
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def test_a_run_syncs_the_tenants_first_and_says_so_only_when_a_role_changes(
    server: str, names: tuple[str, str], tmp_path: Path
) -> None:
    """What `seams run` and `seams backfill` call before any batch is written."""
    from seams.orchestration.cli.db import sync_before_writing
    from seams.settings import load_settings

    a, _ = names
    postgres = PostgresResource(url=server)
    said: list[str] = []
    settings = load_settings(write_settings(tmp_path, {"alpha": a, "gamma": None}))
    sync_before_writing(postgres, settings, said.append)
    assert said == [f"tenants: {a} reads alpha (created {tenants.tenant_role(a)})"]
    sync_before_writing(postgres, settings, said.append)  # nothing changed: nothing said
    assert len(said) == 1
    with psycopg.connect(server) as conn:
        assert tenants.assignments(conn) == {"alpha": a}


def test_check_names_each_collection_and_the_ones_the_settings_dropped(
    pg_server_url: str,
) -> None:
    with fresh_database(pg_server_url) as url:
        postgres = PostgresResource(url=url)
        try:
            assert check.collections_report(postgres, []) == []  # no schema, no collections
            postgres.ensure_schema()
            with psycopg.connect(url) as owner:
                for key, collection in [("b1", "alpha"), ("b2", "alpha"), ("b3", "old"),
                                        ("b4", "default")]:  # fmt: skip
                    owner.execute(
                        "INSERT INTO seams.batches (batch_key, source, document_count, collection)"
                        " VALUES (%s, 'cli:/x', 1, %s)",
                        (key, collection),
                    )
            dropped = (
                " is not in the settings but holds 1 batch and 0 searchable chunks; no job "
                "builds its batches (name it under `collections:` again to build them)"
            )
            assert check.collections_report(postgres, ["alpha", "beta"]) == [
                "Collections: alpha (2 batches), beta (0 batches)",
                "Collections: default" + dropped,
                "Collections: old" + dropped,
            ]
            # Without `collections:` the project is the default collection: others are named.
            assert check.collections_report(postgres, []) == [
                "Collections: alpha" + dropped.replace("1 batch ", "2 batches "),
                "Collections: old" + dropped,
            ]
        finally:
            close_pool(url)
