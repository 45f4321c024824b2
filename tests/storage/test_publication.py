"""Builds beside the published state, published atomically by the `chunk_index` write.

Frames go through `write_table` exactly as the IO manager writes them; what readers see is read
through `seams.current_chunks`, the BM25 tables and `read_table` (what a step loads). The BM25
statistics are checked against an oracle computed here from `current_chunks` with PostgreSQL's
own analyzer, and against a from-scratch rebuild.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
import pytest

from seams.resources.postgres import PostgresResource, close_pool
from seams.storage import batches as batch_store
from seams.storage import builds, publication, schema
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import read_table, write_table
from seams.storage.search import lexical_index
from tests.support.concurrency import run_together

CONFIG = "english"


def build_parts(conn: psycopg.Connection[Any], batch_keys: list[str]) -> dict[str, builds.Build]:
    """Per batch of `batch_keys` with an open build, that build (batches without one: absent)."""
    rows = conn.execute(
        builds.BUILD_SELECT
        + f" WHERE o.batch_key = ANY(%s) AND o.state IN {schema.OPEN_STATES_SQL}",
        (batch_keys,),
    ).fetchall()
    return {row[0]: builds.build_from_row(row) for row in rows}


def published_generations(conn: psycopg.Connection[Any]) -> dict[str, int]:
    """Per batch, the generation readers see; unpublished: absent."""
    rows = conn.execute(
        "SELECT batch_key, generation FROM seams.batch_builds WHERE state = 'published'"
    )
    return {b: int(g) for b, g in rows}


def register(postgres: PostgresResource, key: str, docs: dict[str, str], day: int) -> None:
    """Register batch `key` holding `docs` (document -> version), on day `day` of 2026-01."""
    with postgres.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count) VALUES (%s, 'test', %s)",
            (key, len(docs)),
        )
        for document_id, version in docs.items():
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes, registered_at) VALUES (%s, %s, %s, %s, 0, %s)",
                (key, document_id, f"file:///{document_id}", version, f"2026-01-{day:02d}"),
            )


def chunks_frame(key: str, docs: dict[str, tuple[str, list[str]]], method: str = "semantic"):
    """`chunks` rows of batch `key`: per document (version, chunk texts)."""
    rows = []
    for document_id, (version, texts) in docs.items():
        for i, text in enumerate(texts):
            rows.append({
                "batch_key": key, "chunk_id": f"{document_id}:{text}", "document_id": document_id,
                "chunk_index": i, "total_chunks": len(texts), "text": text, "start_char": 0,
                "end_char": len(text), "overlap_start": 0, "overlap_end": 0,
                "token_count": len(text.split()), "sentence_count": 1, "page_start": None,
                "page_end": None, "section": "", "cohesion": None, "boundary_method": method,
                "strategy": "context_aware", "metadata": {}, "run_id": "r",
                "config_hash": "c", "model_id": "m", "source_sha256": version,
                "code_version": "v",
            })  # fmt: skip
    return pd.DataFrame(rows, columns=["batch_key", *(c.name for c in schema.CHUNKS.data_columns)])


def index_frame(chunks: pd.DataFrame, mode: str = "text") -> pd.DataFrame:
    """One `chunk_index` row per chunk (a different vector per chunk text)."""
    rows = []
    for r in chunks.itertuples(index=False):
        seed = sum(map(ord, r.chunk_id)) % 1000
        vector = np.random.default_rng(seed).normal(size=schema.EMBEDDING_DIM).astype(np.float32)
        rows.append({
            "batch_key": r.batch_key, "chunk_id": r.chunk_id, "document_id": r.document_id,
            "mode": mode, "model_id": "m", "embedding": vector / np.linalg.norm(vector),
            "text_search_config": CONFIG,
        })  # fmt: skip
    return pd.DataFrame(
        rows, columns=["batch_key", *(c.name for c in schema.CHUNK_INDEX.data_columns)]
    )


def build(postgres: PostgresResource, key: str, docs: dict[str, tuple[str, list[str]]]) -> None:
    """A whole build of `key` as the pipeline's last two steps write it: chunks, then index."""
    frame = chunks_frame(key, docs)
    write_table(postgres, schema.CHUNKS, frame, [key], run_id="run-" + key)
    write_and_publish(postgres, index_frame(frame), [key], run_id="run-" + key)


def current(postgres: PostgresResource) -> list[tuple[str, str, str]]:
    """What readers see: (document, version, text) of every current chunk."""
    with postgres.connection() as conn:
        return conn.execute(
            "SELECT document_id, source_sha256, text FROM seams.current_chunks"
            " ORDER BY document_id, chunk_index"
        ).fetchall()


def generations(postgres: PostgresResource, table: str) -> dict[str, list[int]]:
    with postgres.connection() as conn:
        rows = conn.execute(
            f"SELECT batch_key, array_agg(DISTINCT generation ORDER BY generation)"
            f" FROM seams.{table} GROUP BY 1"
        ).fetchall()
    return dict(rows)


def lexical_state(conn: psycopg.Connection[Any]) -> tuple[Any, ...]:
    """Everything BM25 reads: totals, document frequencies, chunk entries and postings."""
    return (
        conn.execute(
            "SELECT text_search_config, chunks, length_sum FROM seams.lexical_totals"
            " WHERE chunks > 0 ORDER BY 1"
        ).fetchall(),
        conn.execute(
            "SELECT text_search_config, lexeme, df FROM seams.lexical_terms WHERE df > 0"
            " ORDER BY 1, 2"
        ).fetchall(),
        conn.execute(
            "SELECT text_search_config, batch_key, document_id, chunk_id, length,"
            " lexemes::text FROM seams.lexical_chunks ORDER BY 2, 4"
        ).fetchall(),
        conn.execute(
            "SELECT lexeme, round(impact::numeric, 5), batch_key, chunk_id"
            " FROM seams.lexical_postings ORDER BY 1, 3, 4"
        ).fetchall(),
    )


def assert_bm25_exact(postgres: PostgresResource) -> None:
    """N, df and avgdl are those of the published current chunks (oracle), and the whole index
    equals one rebuilt from scratch."""
    with postgres.connection() as conn:
        with conn.transaction():
            state = lexical_state(conn)
            totals = conn.execute(
                "SELECT count(*), coalesce(sum(length(to_tsvector(%s::regconfig, c.text))), 0)"
                " FROM seams.current_chunks AS c",
                (CONFIG,),
            ).fetchone()
            dfs = conn.execute(
                "SELECT u.lexeme, count(*) FROM seams.current_chunks AS c"
                " CROSS JOIN LATERAL unnest(to_tsvector(%s::regconfig, c.text)) AS u"
                " GROUP BY 1 ORDER BY 1",
                (CONFIG,),
            ).fetchall()
        stored = {row[0]: row[1:] for row in state[0]}
        if totals[0]:
            assert stored == {CONFIG: (totals[0], totals[1])}
        else:
            assert stored == {}
        assert [(lexeme, df) for _, lexeme, df in state[1]] == dfs
        with pytest.raises(_Rollback), conn.transaction():
            lexical_index.rebuild(conn)
            assert lexical_state(conn) == state
            raise _Rollback


class _Rollback(Exception):
    pass


def assert_one_generation_per_batch(postgres: PostgresResource) -> None:
    """The GC invariant: per (table, batch) at most one generation at or below the published."""
    with postgres.connection() as conn:
        for table in schema.ASSET_TABLES.values():
            rows = conn.execute(
                f"SELECT t.batch_key, count(DISTINCT t.generation) FROM {table.qualified_name} t"
                " JOIN seams.batch_builds b ON b.batch_key = t.batch_key"
                " AND b.state = 'published' AND t.generation <= b.generation GROUP BY 1"
            ).fetchall()
            assert all(n == 1 for _, n in rows), (table.name, rows)


V1 = {"guide": ("g1", ["Cats sit on warm mats.", "Dogs chase cats."]), "faq": ("f1", ["Maps."])}


def test_an_open_build_is_invisible_until_its_chunk_index_commits(
    postgres: PostgresResource,
) -> None:
    register(postgres, "b1", {"guide": "g1", "faq": "f1"}, 1)
    frame = chunks_frame("b1", V1)
    write_table(postgres, schema.CHUNKS, frame, ["b1"])
    assert current(postgres) == []  # chunks without their index: nothing to read yet
    with postgres.connection() as conn:
        (pending,) = publication.unpublished(conn)
    assert (pending.batch_key, pending.generation, pending.parts) == ("b1", 1, ("chunks",))
    assert "stopped after chunks" in pending.reason
    write_and_publish(postgres, index_frame(frame), ["b1"])
    first = current(postgres)
    assert [t for _, _, t in first] == ["Maps.", "Cats sit on warm mats.", "Dogs chase cats."]
    assert_bm25_exact(postgres)

    # A backfill re-cuts b1: its new chunks sit beside the published ones, unseen, while the
    # step after them reads the new ones.
    recut = {"guide": ("g1", ["Cats sit.", "On warm mats.", "Dogs chase cats."]), "faq": V1["faq"]}
    write_table(postgres, schema.CHUNKS, chunks_frame("b1", recut), ["b1"])
    assert current(postgres) == first
    assert generations(postgres, "chunks") == {"b1": [1, 2]}
    loaded = read_table(postgres, schema.CHUNKS, ["b1"])
    assert set(loaded["generation"]) == {2} and len(loaded) == 4
    assert_bm25_exact(postgres)
    write_and_publish(postgres, index_frame(chunks_frame("b1", recut)), ["b1"])
    assert [t for _, _, t in current(postgres)] == [
        "Maps.", "Cats sit.", "On warm mats.", "Dogs chase cats."
    ]  # fmt: skip
    assert generations(postgres, "chunks") == {"b1": [2]}
    assert generations(postgres, "chunk_index") == {"b1": [2]}
    assert_bm25_exact(postgres)
    with postgres.connection() as conn:
        assert publication.unpublished(conn) == []
        log = conn.execute(
            "SELECT seq, batch_key, generation, kind FROM seams.publications ORDER BY seq"
        ).fetchall()
    assert [row[1:] for row in log] == [("b1", 1, "batch"), ("b1", 2, "batch")]
    assert log[0][0] < log[1][0]


def test_rewriting_a_table_drops_the_builds_later_parts(postgres: PostgresResource) -> None:
    register(postgres, "b1", {"guide": "g1", "faq": "f1"}, 1)
    build(postgres, "b1", V1)
    boundaries = schema.SEMANTIC_BOUNDARIES
    empty = pd.DataFrame(columns=[c.name for c in boundaries.data_columns])
    write_table(postgres, boundaries, empty, ["b1"])  # build 2: boundaries rewritten
    recut = {"guide": ("g1", ["Cats.", "Mats."]), "faq": V1["faq"]}
    write_table(postgres, schema.CHUNKS, chunks_frame("b1", recut), ["b1"])
    with postgres.connection() as conn:
        assert build_parts(conn, ["b1"])["b1"].parts == (
            "semantic_boundaries", "chunks"
        )  # fmt: skip
    # Boundaries again (their upstream changed): the build's chunks were cut from the old ones.
    write_table(postgres, boundaries, empty, ["b1"])
    with postgres.connection() as conn:
        open_build = build_parts(conn, ["b1"])["b1"]
    assert open_build.parts == ("semantic_boundaries",)
    assert open_build.remaining == ("chunks", "chunk_index")
    assert generations(postgres, "chunks") == {"b1": [1]}  # build 2's chunks are gone
    assert set(read_table(postgres, schema.CHUNKS, ["b1"])["generation"]) == {1}
    # chunk_index alone now would pair vectors with chunks cut from other boundaries: held.
    write_and_publish(postgres, index_frame(chunks_frame("b1", V1)), ["b1"])
    with postgres.connection() as conn:
        (held,) = publication.unpublished(conn)
    assert "rewrote semantic_boundaries but not chunks" in held.reason
    assert [t for _, _, t in current(postgres)][1:] == V1["guide"][1]
    assert_one_generation_per_batch(postgres)
    # Finishing the build in order publishes it; the GC leaves one generation per table.
    write_table(postgres, schema.CHUNKS, chunks_frame("b1", recut), ["b1"])
    write_and_publish(postgres, index_frame(chunks_frame("b1", recut)), ["b1"])
    assert [t for _, _, t in current(postgres)] == ["Maps.", "Cats.", "Mats."]
    assert generations(postgres, "semantic_boundaries") == {}
    assert generations(postgres, "chunks") == {"b1": [2]}
    assert_one_generation_per_batch(postgres)
    assert_bm25_exact(postgres)


def test_a_table_written_empty_by_a_build_hides_the_older_rows(
    postgres: PostgresResource,
) -> None:
    register(postgres, "b1", {"guide": "g1", "faq": "f1"}, 1)
    build(postgres, "b1", V1)
    build(postgres, "b1", {})  # every document now yields no chunk
    assert current(postgres) == []
    assert generations(postgres, "chunks") == {}
    assert_one_generation_per_batch(postgres)
    assert_bm25_exact(postgres)


def test_a_new_version_replaces_the_old_at_publication_not_registration(
    postgres: PostgresResource,
) -> None:
    register(postgres, "b1", {"guide": "g1", "faq": "f1"}, 1)
    build(postgres, "b1", V1)
    register(postgres, "b2", {"guide": "g2"}, 2)
    assert {v for _, v, _ in current(postgres)} == {"g1", "f1"}  # registered: still v1
    chunks = chunks_frame("b2", {"guide": ("g2", ["Lighthouse keepers log ships."])})
    write_table(postgres, schema.CHUNKS, chunks, ["b2"])
    assert {v for _, v, _ in current(postgres)} == {"g1", "f1"}  # chunked: still v1
    assert_bm25_exact(postgres)
    write_and_publish(postgres, index_frame(chunks), ["b2"])
    assert current(postgres) == [
        ("faq", "f1", "Maps."), ("guide", "g2", "Lighthouse keepers log ships.")
    ]  # fmt: skip
    assert_bm25_exact(postgres)
    # An old batch rebuilt (a backfill) changes nothing that is current.
    build(postgres, "b1", V1)
    assert current(postgres) == [
        ("faq", "f1", "Maps."), ("guide", "g2", "Lighthouse keepers log ships.")
    ]  # fmt: skip
    assert_bm25_exact(postgres)
    with postgres.connection() as conn:
        rows = conn.execute(
            "SELECT document_id, batch_key, generation FROM seams.current_documents ORDER BY 1"
        ).fetchall()
    assert rows == [("faq", "b1", 2), ("guide", "b2", 1)]


def test_retiring_a_missing_file_leaves_search_at_once(
    postgres: PostgresResource, tmp_path: Path
) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name, text in (("a.txt", "alpha"), ("b.txt", "beta")):
        (inbox / name).write_text(text)
    files, _ = batch_store.scan_inbox(inbox)
    with postgres.connection() as conn:
        key = batch_store.register_batch(conn, files, source="test")
    ids = {f.path.name: f.document_id for f in files}
    docs = {ids[f.path.name]: (f.sha256, [f"{f.path.name} text"]) for f in files}
    build(postgres, key, docs)
    assert len(current(postgres)) == 2
    (inbox / "b.txt").unlink()
    with postgres.connection() as conn:
        still, _ = batch_store.scan_inbox(inbox)
        retired = batch_store.retire_missing(conn, inbox, [f.path for f in still])
        assert [r.document_id for r in retired] == [ids["b.txt"]]
        kinds = conn.execute("SELECT kind FROM seams.publications ORDER BY seq").fetchall()
    assert [d for d, _, _ in current(postgres)] == [ids["a.txt"]]  # no run needed
    assert kinds == [("batch",), ("retire",)]
    assert_bm25_exact(postgres)
    # Its batch rebuilt later does not bring it back.
    build(postgres, key, docs)
    assert [d for d, _, _ in current(postgres)] == [ids["a.txt"]]
    assert_bm25_exact(postgres)


def test_a_build_whose_index_lacks_vectors_is_not_published(postgres: PostgresResource) -> None:
    register(postgres, "b1", {"guide": "g1", "faq": "f1"}, 1)
    build(postgres, "b1", V1)
    register(postgres, "b2", {"guide": "g2"}, 2)
    chunks = chunks_frame("b2", {"guide": ("g2", ["New one.", "New two."])})
    write_table(postgres, schema.CHUNKS, chunks, ["b2"])
    # The model was unavailable: chunk_index wrote nothing (or only part of the chunks).
    for index in (index_frame(chunks.iloc[0:0]), index_frame(chunks.iloc[:1])):
        result = write_and_publish(postgres, index, ["b2"])
        assert result.published == {} and "no vector for" in result.held["b2"]
        assert {v for _, v, _ in current(postgres)} == {"g1", "f1"}
        with postgres.connection() as conn:
            (held,) = publication.unpublished(conn)
        assert (held.batch_key, held.state, held.parts) == (
            "b2",
            "building",
            ("chunks", "chunk_index"),
        )
        assert "chunk_index holds no vector for" in held.reason
    assert_bm25_exact(postgres)
    result = write_and_publish(postgres, index_frame(chunks), ["b2"])
    assert result.published == {"b2": 1}
    assert {v for _, v, _ in current(postgres)} == {"g2", "f1"}


def test_pooled_chunks_of_lexical_fallback_documents_need_no_vector(
    postgres: PostgresResource,
) -> None:
    register(postgres, "b1", {"guide": "g1", "faq": "f1"}, 1)
    semantic = chunks_frame("b1", {"guide": V1["guide"]})
    fallback = chunks_frame("b1", {"faq": V1["faq"]}, method="jaccard")
    chunks = pd.concat([semantic, fallback], ignore_index=True)
    write_table(postgres, schema.CHUNKS, chunks, ["b1"])
    result = write_and_publish(postgres, index_frame(semantic, "pooled"), ["b1"])
    assert result.published == {"b1": 1}


def test_a_single_run_backfill_publishes_all_its_batches_at_once(
    postgres: PostgresResource,
) -> None:
    register(postgres, "b1", {"guide": "g1"}, 1)
    register(postgres, "b2", {"faq": "f1"}, 2)
    chunks = pd.concat(
        [chunks_frame("b1", {"guide": V1["guide"]}), chunks_frame("b2", {"faq": V1["faq"]})],
        ignore_index=True,
    )
    write_table(postgres, schema.CHUNKS, chunks, ["b1", "b2"])
    result = write_and_publish(postgres, index_frame(chunks), ["b1", "b2"])
    assert result.published == {"b1": 1, "b2": 1}
    with postgres.connection() as conn:
        seqs = conn.execute("SELECT DISTINCT seq FROM seams.publications").fetchall()
    assert len(seqs) == 1
    assert_bm25_exact(postgres)


def test_concurrent_chunk_index_writers_serialise_without_deadlock(
    postgres: PostgresResource,
) -> None:
    keys = ["a", "b", "c"]
    frames = {}
    for day, key in enumerate(keys, start=1):
        register(postgres, key, {f"doc-{key}": f"v-{key}", "shared": f"s-{key}"}, day)
        frames[key] = chunks_frame(
            key, {f"doc-{key}": (f"v-{key}", ["One cat."]), "shared": (f"s-{key}", ["Dogs."])}
        )
        write_table(postgres, schema.CHUNKS, frames[key], [key])
    # Overlapping batch ranges in opposite orders, several rounds each: partition locks, build
    # rows and the publication lock are always taken in one order.
    ranges = [["a", "b"], ["c", "b"], ["b", "a", "c"], ["c", "a"]]

    def writer(batches: list[str]) -> None:
        for _ in range(3):
            frame = pd.concat([index_frame(frames[k]) for k in batches], ignore_index=True)
            write_and_publish(postgres, frame, batches)

    assert run_together(*(lambda r=r: writer(r) for r in ranges)) == []
    with postgres.connection() as conn:
        published = published_generations(conn)
        count = conn.execute("SELECT count(*) FROM seams.publications").fetchone()[0]
    assert sorted(published) == keys
    assert count == sum(len(r) for r in ranges) * 3
    assert [d for d, _, _ in current(postgres)] == ["doc-a", "doc-b", "doc-c", "shared"]
    assert_one_generation_per_batch(postgres)
    assert_bm25_exact(postgres)


# --- a database made before builds existed -------------------------------------------------------

LEGACY_SQL = Path(__file__).with_name("legacy_schema.sql")


def test_an_existing_database_migrates_to_published_and_open_builds(database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        for statement in LEGACY_SQL.read_text().split("\n--;;\n"):
            conn.execute(statement)
        with conn.transaction():
            for key in ("b1", "b2", "b3"):
                conn.execute(
                    "INSERT INTO seams.batches (batch_key, source, document_count)"
                    " VALUES (%s, 'test', 1)",
                    (key,),
                )
            for key, doc, version, day in (
                ("b1", "guide", "g1", 1), ("b1", "faq", "f1", 1), ("b1", "gone", "x1", 1),
                ("b2", "guide", "g2", 2), ("b3", "faq", "f2", 3),
            ):  # fmt: skip
                conn.execute(
                    "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                    " source_sha256, size_bytes, registered_at) VALUES (%s, %s, %s, %s, 0, %s)",
                    (
                        key,
                        doc,
                        f"file:///docs/{doc}%20n%C3%B6tes.md",
                        version,
                        f"2026-01-{day:02d}",
                    ),
                )
            conn.execute(
                "INSERT INTO seams.document_tombstones (document_id, source_uri, last_batch_key,"
                " reason) VALUES ('gone', 'file:///gone', 'b1', 'gone')"
            )
        # b1 fully built (chunks and index), b2 stopped after chunks, b3 after extraction.
        b1 = chunks_frame("b1", {**V1, "gone": ("x1", ["Gone."])})
        b2 = chunks_frame("b2", {"guide": ("g2", ["Guide two."])})
        _legacy_insert(conn, "chunks", pd.concat([b1, b2], ignore_index=True))
        _legacy_insert(conn, "chunk_index", index_frame(b1))
        conn.execute(
            "INSERT INTO seams.extracted_text (batch_key, document_id, source_uri, source_sha256,"
            " mime, text, char_count) VALUES ('b3', 'faq', 'file:///faq', 'f2', 'text/plain',"
            " 'x', 1)"
        )
    postgres = PostgresResource(url=database_url)
    try:
        postgres.ensure_schema()
        with postgres.connection() as conn:
            stored = conn.execute(
                "SELECT batch_key, generation, state, parts FROM seams.batch_builds ORDER BY 1"
            ).fetchall()
            triggers = conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgname LIKE '%lexical%'"
            ).fetchall()
            unpublished = publication.unpublished(conn)
        assert stored == [
            ("b1", 1, "published", list(schema.BATCH_ASSETS)),
            ("b2", 1, "building", list(schema.BATCH_ASSETS[:5])),
            ("b3", 1, "building", ["extracted_text"]),
        ]
        assert triggers == []
        assert [(u.batch_key, u.parts[-1]) for u in unpublished] == [
            ("b2", "chunks"), ("b3", "extracted_text")
        ]  # fmt: skip
        # Current: the newest *published* versions (guide g1, not b2's unpublished g2), minus
        # retired documents; BM25 exactly over them.
        assert {(d, v) for d, v, _ in current(postgres)} == {("guide", "g1"), ("faq", "f1")}
        assert_bm25_exact(postgres)
        # The next run finishes b2 and it is published.
        write_and_publish(postgres, index_frame(b2), ["b2"])
        assert {(d, v) for d, v, _ in current(postgres)} == {("guide", "g2"), ("faq", "f1")}
        assert_bm25_exact(postgres)
        # The upgraded view names each chunk's file, as registered, in its last two columns.
        with postgres.connection() as conn:
            files = conn.execute(
                "SELECT DISTINCT c.document_id, c.source_uri, c.file_name, f.source_uri"
                " FROM seams.current_chunks AS c JOIN seams.batch_documents AS f"
                " USING (batch_key, document_id) ORDER BY 1"
            ).fetchall()
            view = conn.execute("SELECT * FROM seams.current_chunks LIMIT 0")
            last = [column.name for column in view.description][-2:]
        assert last == ["source_uri", "file_name"]
        assert files == [
            (doc, uri, f"{doc} nötes.md", uri)
            for doc in ("faq", "guide")
            for uri in [f"file:///docs/{doc}%20n%C3%B6tes.md"]
        ]
        # The migration ran once: a second writer finds nothing to adopt.
        close_pool(database_url)
        PostgresResource(url=database_url).ensure_schema()
        with postgres.connection() as conn:
            assert conn.execute("SELECT count(*) FROM seams.batch_builds").fetchone()[0] == 3
    finally:
        close_pool(database_url)


def _legacy_insert(conn: psycopg.Connection[Any], table: str, frame: pd.DataFrame) -> None:
    """Rows into a table of the old schema (no `generation`), as its writer stored them."""
    columns = list(frame.columns)
    with conn.cursor() as cur:
        cur.executemany(
            f"INSERT INTO seams.{table} ({', '.join(columns)}) VALUES"
            f" ({', '.join(['%s'] * len(columns))})",
            [
                tuple(
                    psycopg.types.json.Jsonb(v)
                    if isinstance(v, dict)
                    else v.tolist()
                    if isinstance(v, np.ndarray)
                    else v
                    for v in row
                )
                for row in frame.itertuples(index=False)
            ],
        )


URIS = (
    "file:///srv/docs/notes.md",
    "file:///srv/My%20Notes%2B1%20%28draft%29.md",
    "file:///srv/%E6%97%A5%E6%9C%AC%E8%AA%9E.txt",
    "file:///srv/100%25%20sure.txt",
    "s3://bucket/reports/2026/q1.pdf",
)


def test_the_file_name_in_sql_is_the_one_the_ui_shows(postgres: PostgresResource) -> None:
    """`current_chunks.file_name` comes from `seams.uri_file_name`, which must name a file as
    the rest of Seams does (`seams.assets.display.file_name`)."""
    from seams.assets.display import file_name

    with postgres.connection() as conn:
        named = [conn.execute("SELECT seams.uri_file_name(%s)", (u,)).fetchone()[0] for u in URIS]
    assert named == [file_name(u) for u in URIS]
