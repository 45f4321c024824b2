"""Secrets come only from the environment and never reach a log, the event log, metadata, a
stored row or the CLI's output. The run uses a real password-protected, least-privilege role
(the privileges docs/reliability.md lists), so this also proves those privileges suffice.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from seams.models.model_store import ModelManifest
from seams.orchestration import cli
from seams.resources import database
from seams.resources.postgres import close_pool
from tests.support.instances import current_definitions, export_instance, keep_environment
from tests.support.samples import SHORT_DOC, run_path

PASSWORD = "Sekr1t-" + uuid.uuid4().hex[:10]


@pytest.fixture
def app_role_url(database_url: str, pg_server_url: str) -> Iterator[str]:
    """A LOGIN role with a password and only the privileges Seams needs in a fresh database
    (pgvector was created there by the admin, as the database_url fixture does)."""
    role = f"seams_app_{uuid.uuid4().hex[:8]}"
    dbname = database_url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(PASSWORD)
            )
        )
        conn.execute(
            sql.SQL("GRANT CONNECT, CREATE ON DATABASE {} TO {}").format(
                sql.Identifier(dbname), sql.Identifier(role)
            )
        )
    with psycopg.connect(database_url, autocommit=True) as conn:  # Dagster's own tables
        conn.execute(
            sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(sql.Identifier(role))
        )
    url = database_url.replace("postgres:@", f"{role}:{PASSWORD}@", 1)
    assert PASSWORD in url
    try:
        yield url
    finally:
        close_pool(url)
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (role,),
            )
            conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(role)))
        with psycopg.connect(pg_server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def _rows_mentioning(url: str, needle: str) -> dict[str, int]:
    """Per table of schemas public (Dagster) and seams: rows whose text form contains `needle`."""
    found = {}
    with psycopg.connect(url) as conn:
        tables = conn.execute(
            "SELECT schemaname, tablename FROM pg_tables WHERE schemaname IN ('public', 'seams')"
        ).fetchall()
        assert len(tables) > 10
        for schema_name, table in tables:
            query = sql.SQL("SELECT count(*) FROM {} t WHERE t::text LIKE %s").format(
                sql.Identifier(schema_name, table)
            )
            count = conn.execute(query, (f"%{needle}%",)).fetchone()[0]
            if count:
                found[f"{schema_name}.{table}"] = count
    return found


def test_the_database_password_never_reaches_logs_metadata_or_rows(
    app_role_url: str,
    database_url: str,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    keep_environment(monkeypatch)
    monkeypatch.setenv(database.URL_ENV, app_role_url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    export_instance(monkeypatch)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    with dg.DagsterInstance.get() as instance:
        summary = run_path(instance, inbox, defs=current_definitions())
        (run_id,) = summary.run_ids
        records = instance.all_logs(run_id)
        assert any(r.dagster_event and r.dagster_event.is_step_materialization for r in records)
        assert PASSWORD not in dg.serialize_value(records)
        assert PASSWORD not in dg.serialize_value(instance.get_run_by_id(run_id))
    # Everything Dagster (runs, event log = UI metadata) and Seams stored, as the admin sees it.
    assert _rows_mentioning(database_url, PASSWORD) == {}

    # The CLI: a second file makes a second run; nothing it prints shows the password.
    (inbox / "harbour.md").write_text(SHORT_DOC.replace("Tides", "Harbour"), encoding="utf-8")
    capfd.readouterr()
    assert cli.main(["run", str(inbox)]) == 0
    assert cli.main(["db", "status"]) == 0
    assert cli.main(["check"]) == 0
    out, err = capfd.readouterr()
    assert "documents:" in out
    assert PASSWORD not in out + err, [
        line for line in (out + err).splitlines() if PASSWORD in line
    ]
    assert _rows_mentioning(database_url, PASSWORD) == {}
