"""Every stored row names its collection: the batch's, set by the writer, never by the frame.

A project without collections stores 'default' everywhere (the column's default, so writers
that name none are unchanged); a batch registered for another collection has every row its
builds write, publish and retire carry that collection. A database made before collections
existed, once migrated, has exactly the schema of a fresh one (columns, views, row-level
security), every old row the default collection's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from seams.errors import InputError
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import batches as batch_store
from seams.storage import publication, schema, tenants
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import read_table, write_table
from tests.storage.test_publication import LEGACY_SQL, chunks_frame, index_frame
from tests.support.databases import fresh_database, migrated_postgres


@pytest.fixture(scope="module")
def module_url(pg_server_url: str) -> Iterator[str]:
    with fresh_database(pg_server_url) as url:
        yield url


@pytest.fixture(scope="module")
def postgres(module_url: str) -> Iterator[PostgresResource]:
    yield from migrated_postgres(module_url)


def _files(tmp_path: Path, names: dict[str, str]) -> list[batch_store.SourceFile]:
    for name, text in names.items():
        (tmp_path / name).write_text(text)
    found, refused = batch_store.scan_inbox(tmp_path)
    assert not refused
    return found


def _build(postgres: PostgresResource, key: str, docs: list[batch_store.SourceFile]) -> None:
    """chunks then chunk_index of `key`, from frames that claim another collection."""
    frame = chunks_frame(key, {f.document_id: (f.sha256, [f"{f.path.name} text."]) for f in docs})
    frame["collection"] = "forged"  # the writer's column: replaced by the batch's
    write_table(postgres, schema.CHUNKS, frame, [key], run_id="run-" + key)
    index = index_frame(frame.drop(columns="collection"))
    write_and_publish(postgres, index, [key], run_id="run-" + key)


def _collections(conn: psycopg.Connection[Any], relation: str, key: str) -> set[str]:
    rows = conn.execute(
        f"SELECT DISTINCT collection FROM seams.{relation} WHERE batch_key = %s", (key,)
    ).fetchall()
    return {r[0] for r in rows}


def test_every_row_of_a_batch_carries_its_collection(
    postgres: PostgresResource, tmp_path: Path
) -> None:
    (tmp_path / "hb").mkdir()
    (tmp_path / "plain").mkdir()
    handbook = _files(tmp_path / "hb", {"a.txt": "Alpha.", "b.txt": "Beta."})
    plain = _files(tmp_path / "plain", {"c.txt": "Gamma."})
    with postgres.connection() as conn:
        conn.autocommit = True
        hb_key = batch_store.register_batch(conn, handbook, source="test", collection="handbook")
        plain_key = batch_store.register_batch(conn, plain, source="test")
    assert hb_key and plain_key
    _build(postgres, hb_key, handbook)
    _build(postgres, plain_key, plain)

    relations = (
        "batches", "batch_documents", "batch_builds", "chunks", "chunk_index",
        "current_documents", "publications", "current_chunks", "published_chunks",
        "chunk_parents", "current_versions",
    )  # fmt: skip
    with postgres.connection() as conn:
        for relation in relations:
            assert _collections(conn, relation, hb_key) == {"handbook"}, relation
            assert _collections(conn, relation, plain_key) == {"default"}, relation
    # A step loads its rows with their collection, and writing them back keeps the batch's.
    loaded = read_table(postgres, schema.CHUNKS, [hb_key])
    assert set(loaded["collection"]) == {"handbook"}
    loaded["collection"] = "default"
    write_table(postgres, schema.CHUNKS, loaded, [hb_key], run_id="rerun")
    with postgres.connection() as conn:
        assert _collections(conn, "chunks", hb_key) == {"handbook"}

    # Retirement logs the collection of what it retired.
    with postgres.connection() as conn:
        conn.autocommit = True
        (tmp_path / "hb" / "a.txt").unlink()
        found, _ = batch_store.scan_inbox(tmp_path / "hb")
        retired = batch_store.retire_missing(conn, tmp_path / "hb", [f.path for f in found])
        assert [r.last_batch_key for r in retired] == [hb_key]
        kinds = conn.execute(
            "SELECT kind, collection FROM seams.publications WHERE batch_key = %s ORDER BY seq",
            (hb_key,),
        ).fetchall()
    assert kinds[-1] == ("retire", "handbook")


@pytest.mark.parametrize("bad", ["", "Handbook", "a-b", "a__b", "x" * 41, "1a", "a;drop"])
def test_a_bad_collection_name_is_refused_before_anything_is_stored(bad: str) -> None:
    with pytest.raises(InputError, match="a collection name is 1-40 characters"):
        batch_store.check_collection(bad)


def test_one_collections_publication_does_not_wait_for_anothers(
    postgres: PostgresResource, module_url: str, tmp_path: Path
) -> None:
    """A transaction holding the publication lock of `handbook` holds up its publications,
    not those of the default collection."""
    files = _files(tmp_path, {"d.txt": "Delta."})
    with postgres.connection() as conn:
        conn.autocommit = True
        key = batch_store.register_batch(conn, files, source="test")
    assert key
    holder = psycopg.connect(module_url)
    try:
        holder.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
            (publication.publish_lock_name("handbook"),),
        )
        done = threading.Event()

        def publish_default() -> None:
            _build(postgres, key, files)
            done.set()

        worker = threading.Thread(target=publish_default)
        worker.start()
        worker.join(60)
        assert done.is_set(), "the default collection's publication waited for handbook's lock"
    finally:
        holder.rollback()
        holder.close()


def _catalog(url: str) -> dict[str, Any]:
    """What a reader and the policies see of the schema: each table's columns (name, type, NOT
    NULL, default), each view's columns in order and options, row-level security and
    policies."""
    with psycopg.connect(url) as conn:
        tables: dict[str, set[tuple[Any, ...]]] = {}
        views: dict[str, list[tuple[Any, ...]]] = {}
        for relation, kind, column, pg_type, not_null, default in conn.execute(
            """SELECT c.relname, c.relkind, a.attname, format_type(a.atttypid, a.atttypmod),
                      a.attnotnull, pg_get_expr(d.adbin, d.adrelid)
               FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
               JOIN pg_namespace AS n ON n.oid = c.relnamespace
               LEFT JOIN pg_attrdef AS d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
               WHERE n.nspname = 'seams' AND c.relkind IN ('r', 'v') AND a.attnum > 0
                 AND NOT a.attisdropped
               ORDER BY c.relname, a.attnum"""
        ):
            if kind == "v":
                views.setdefault(relation, []).append((column, pg_type))
            else:
                tables.setdefault(relation, set()).add((column, pg_type, not_null, default))
        security = conn.execute(
            """SELECT c.relname, c.relkind, c.relrowsecurity, c.reloptions
               FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
               WHERE n.nspname = 'seams' AND c.relkind IN ('r', 'v') ORDER BY 1"""
        ).fetchall()
        policies = conn.execute(
            "SELECT tablename, policyname, qual FROM pg_policies WHERE schemaname = 'seams'"
            " ORDER BY 1, 2"
        ).fetchall()
    return {"tables": tables, "views": views, "security": security, "policies": policies}


def test_a_migrated_database_has_the_schema_of_a_fresh_one(
    module_url: str, database_url: str, postgres: PostgresResource
) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        for statement in LEGACY_SQL.read_text().split("\n--;;\n"):
            conn.execute(statement)
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count) VALUES ('b1', 't', 1)"
        )
    PostgresResource(url=database_url).ensure_schema()
    try:
        migrated, fresh = _catalog(database_url), _catalog(module_url)
        assert migrated == fresh
        with psycopg.connect(database_url) as conn:
            assert conn.execute("SELECT batch_key, collection FROM seams.batches").fetchall() == [
                ("b1", "default")
            ]
    finally:
        close_pool(database_url)
    # The views readers use, each with `collection`, read with the reader's rights; every
    # table that holds documents has row-level security.
    for view in tenants.VIEWS:
        assert ("collection", "text") in fresh["views"][view], view
    secured = {name for name, kind, rls, _ in fresh["security"] if kind == "r" and rls}
    assert {t.name for t in (*tenants.PROTECTED, *tenants.PRIVATE)} <= secured
    assert all(
        "security_invoker=true" in (options or []) for _, kind, _, options in fresh["security"]
        if kind == "v"
    )  # fmt: skip
    # Every row of a protected table belongs to a collection, 'default' unless named.
    for table in tenants.PROTECTED:
        assert ("collection", "text", True, "'default'::text") in fresh["tables"][table.name]
