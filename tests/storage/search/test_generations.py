"""Readers see only published index generations, one per answer (real PostgreSQL + pgvector, the
real pipeline and ONNX model).

A batch's rows are built beside the published ones (same tables, a higher `generation`) and
published in one transaction (`seams.publications`, `seams.current_documents`). These tests
write such builds with SQL, as the writers lay them out: an open build of a published batch, a
batch never published whose HNSW neighbours crowd the query, and publications racing the
searches. Search (dense, lexical, hybrid), the retrievers' entry point and export must never
show an unpublished row, and every hit of an answer must come from the build of its batch
published at the answer's `published_seq`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import psycopg
import pytest
from psycopg import sql

from seams.assets.partitions import document_batches
from seams.models.model_store import ModelManifest
from seams.orchestration.definitions import build_assets
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.io_manager import PostgresIOManager
from seams.resources.postgres import PostgresResource
from seams.resources.static_embedder import StaticEmbedderResource
from seams.settings import load_settings
from seams.storage import schema
from seams.storage.batches import register_batch, scan_inbox
from seams.storage.export_rows import ExportRequest, stream_rows
from seams.storage.search import SearchResponse, search_response
from seams.storage.search.dense import configure_scan, nearest_statement
from tests.support.databases import fresh_database, rows

SETTINGS = load_settings()
KINDS = ("dense", "lexical", "hybrid")

GARDEN = """# Garden Notes

## Tomatoes

Tomato plants need at least six hours of direct sunlight every day and a deep, loose soil rich in
organic matter. Gardeners pinch out the side shoots that grow in the angle between the stem and a
leaf, so the plant puts its energy into fruit rather than foliage. Tall varieties are tied to a
stake or grown inside a wire cage, because a heavy truss of green fruit can snap an unsupported
stem after a summer storm.

## Compost

A compost heap turns kitchen scraps and garden waste into crumbly dark humus. It works best with
a mix of green material such as grass clippings and brown material such as dry leaves and straw.
A heap that smells of ammonia is too wet and has too little air: turning it with a fork and adding
brown material fixes the smell within a few days.

## Irrigation

Drip irrigation delivers water slowly through thin tubes with small emitters placed next to each
plant, so almost nothing is lost to evaporation or runoff. A timer opens the valve early in the
morning, before the heat of the day.
"""

HARBOUR = """\
The old harbour lighthouse was built from granite blocks in 1841. Its keepers climbed
one hundred and twelve steps every evening to light the paraffin lamp and wind the clockwork that
turned the great glass lens. The beam could be seen twenty nautical miles out at sea.

Fog was the keepers' worst enemy. On thick nights they sounded a fog horn driven by compressed
air every thirty seconds until dawn, and they logged every ship that passed the point.
"""

QUERIES = (
    "why does my compost heap smell of ammonia",
    "fog horn and keepers climbing steps to light the lamp",
    "drip emitters and a timer to water plants",
)
CROWD = 1000
"""Hidden vectors nearer to a query than any visible one."""
DECOY = "zanzibar quokka "
"""Prefixed to the text of every unpublished chunk: a hit showing it read a hidden row."""


# --- the published corpus ------------------------------------------------------------------


class Published:
    """A database whose one batch went through the real pipeline and is published."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.postgres = PostgresResource(url=url)
        self.embedder = OnnxEmbedderResource()
        files, _ = scan_inbox(folder)
        self.postgres.ensure_schema()
        with self.postgres.connection() as conn:
            key = register_batch(conn, files, source="test")
        assert key
        self.key = key
        instance = dg.DagsterInstance.ephemeral()
        instance.add_dynamic_partitions(document_batches.name, [key])
        pipeline = build_assets(SETTINGS)
        resources = {
            "seams_postgres": self.postgres,
            "seams_io_manager": PostgresIOManager(postgres=self.postgres),
            "seams_embedder": self.embedder,
            "seams_static_embedder": StaticEmbedderResource(),
        }
        result = dg.materialize(
            pipeline[1:], partition_key=key, instance=instance, resources=resources
        )
        assert result.success
        instance.dispose()
        (self.generation,) = rows(
            url,
            "SELECT generation FROM seams.batch_builds WHERE batch_key = %s"
            " AND state = 'published'",
            key,
        )[0]

    def search(self, query: str, kind: str, k: int = 5) -> SearchResponse:
        return search_response(self.postgres, self.embedder, query, k, search=kind)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def published(
    pg_server_url: str, exported_model: ModelManifest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Published]:
    folder = tmp_path_factory.mktemp("generations") / "docs"
    folder.mkdir()
    (folder / "garden.md").write_text(GARDEN, encoding="utf-8")
    (folder / "harbour.txt").write_text(HARBOUR, encoding="utf-8")
    with fresh_database(pg_server_url) as url:
        yield Published(url, folder)


# --- builds written with SQL, laid out as the writers lay them out --------------------------


def _columns(conn: psycopg.Connection, table: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = %s ORDER BY ordinal_position",
            (schema.SCHEMA, table),
        )
    ]


def _copy_rows(
    conn: psycopg.Connection,
    table: str,
    batch: str,
    generation: int,
    to_batch: str,
    to_generation: int,
    replace: dict[str, sql.Composable] | None = None,
) -> int:
    """Copy one build's rows of `table` to another (batch, generation), with some columns
    replaced by SQL expressions over the source row `r`."""
    columns = _columns(conn, table)
    values = {"batch_key": sql.Literal(to_batch), "generation": sql.Literal(to_generation)}
    values.update(replace or {})
    selected = [values.get(c, sql.SQL("r.{}").format(sql.Identifier(c))) for c in columns]
    statement = sql.SQL(
        "INSERT INTO {t} ({cols}) SELECT {sel} FROM {t} AS r"
        " WHERE r.batch_key = %s AND r.generation = %s"
    ).format(
        t=sql.Identifier(schema.SCHEMA, table),
        cols=sql.SQL(", ").join(map(sql.Identifier, columns)),
        sel=sql.SQL(", ").join(selected),
    )
    return conn.execute(statement, (batch, generation)).rowcount


def _decoy(table: str, vector: str) -> dict[str, sql.Composable]:
    """Hidden rows that would win every query: their text is marked, their vectors are the
    query's own."""
    if table == "chunks":
        return {"text": sql.SQL("{} || r.text").format(sql.Literal(DECOY))}
    if table == "chunk_index":
        return {"embedding": sql.SQL("{}::vector").format(sql.Literal(vector))}
    return {}


def _query_vector(published: Published, query: str) -> str:
    vector = published.embedder.embed([query])[0]
    return "[" + ",".join(f"{x:.7f}" for x in vector) + "]"


def _hits_ok(published: Published, response: SearchResponse) -> None:
    """Every hit from its batch's build published at the answer's publication (the oracle is
    the publication log), never a hidden row."""
    assert response.published_seq is not None
    for hit in response.hits:
        assert not hit.text.startswith(DECOY.strip()), hit.text[:40]
        assert DECOY.strip() not in hit.context.window_text
        assert hit.published_seq == response.published_seq
        (oracle,) = rows(
            published.url,
            "SELECT generation FROM seams.publications WHERE batch_key = %s AND seq <= %s"
            " ORDER BY seq DESC LIMIT 1",
            hit.batch_key,
            response.published_seq,
        )[0]
        assert hit.generation == oracle, (hit.batch_key, hit.generation, oracle)
    ids = [(h.batch_key, h.chunk_id) for h in response.hits]
    assert len(ids) == len(set(ids))  # a chunk in two builds is still one hit


def _signature(response: SearchResponse) -> list[tuple[str, str, str, float]]:
    return [(h.batch_key, h.chunk_id, h.text, round(h.score, 6)) for h in response.hits]


def _export(published: Published, **options: object) -> list[tuple]:
    request = ExportRequest(out=Path("unused"), format="jsonl", **options)  # type: ignore[arg-type]
    with psycopg.connect(published.url, autocommit=True) as conn:
        return [row for batch in stream_rows(conn, request) for row in batch]


def test_rows_of_an_open_build_and_an_unpublished_batch_never_reach_readers(
    published: Published,
) -> None:
    before = {(q, kind): published.search(q, kind) for q in QUERIES for kind in KINDS}
    for response in before.values():
        assert response.hits, response.notes
        _hits_ok(published, response)
    exports = {
        name: _export(published, **options)
        for name, options in {
            "all": {},
            "current": {"current": True},
            "vectors": {"current": True, "vectors": True},
        }.items()
    }
    assert exports["current"] and len(exports["vectors"]) == len(exports["current"])

    hidden = "29991231-000000-hidden-00000000"
    vector = _query_vector(published, QUERIES[1])
    try:
        with psycopg.connect(published.url) as conn:
            # An open build of the published batch: every table rewritten, decoys everywhere.
            g = published.generation + 1
            conn.execute(
                "INSERT INTO seams.batch_builds (batch_key, generation, state) VALUES (%s, %s,"
                " 'building')",
                (published.key, g),
            )
            for table in schema.ASSET_TABLES:
                assert _copy_rows(conn, table, published.key, published.generation,
                                  published.key, g, _decoy(table, vector))  # fmt: skip
            # A batch registered later with a newer version of every document, never published.
            conn.execute(
                "INSERT INTO seams.batches (batch_key, source, document_count)"
                " SELECT %s, source, document_count FROM seams.batches WHERE batch_key = %s",
                (hidden, published.key),
            )
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes, registered_at) SELECT %s, document_id, source_uri,"
                " source_sha256, size_bytes, now() + interval '1 day' FROM seams.batch_documents"
                " WHERE batch_key = %s",
                (hidden, published.key),
            )
            conn.execute(
                "INSERT INTO seams.batch_builds (batch_key, generation, state) VALUES (%s, 1,"
                " 'building')",
                (hidden,),
            )
            for table in schema.ASSET_TABLES:
                _copy_rows(conn, table, published.key, published.generation, hidden, 1,
                           _decoy(table, vector))  # fmt: skip
            # Crowd the HNSW neighbourhood of the query with hidden vectors (the query's own, a
            # little noise each), so the scan must walk past them all to find visible rows.
            conn.execute(
                "INSERT INTO seams.chunk_index (batch_key, generation, chunk_id, document_id, mode,"
                " model_id, embedding, text_search_config)"
                " SELECT %(batch)s, 1, 'crowd-' || n, 'crowd-doc-' || mod(n, 50), i.mode,"
                "        i.model_id, (SELECT array_agg(x + (random() - 0.5) * 0.01 ORDER BY o)"
                "                     FROM unnest(%(q)s::real[]) WITH ORDINALITY AS u(x, o)"
                "                     WHERE n > 0)::vector,"
                "        i.text_search_config"
                " FROM generate_series(1, %(crowd)s) AS n,"
                "      (SELECT mode, model_id, text_search_config FROM seams.chunk_index"
                "       WHERE batch_key = %(published)s LIMIT 1) AS i",
                {"batch": hidden, "q": [float(x) for x in vector.strip("[]").split(",")],
                 "crowd": CROWD, "published": published.key},
            )  # fmt: skip
            conn.execute("ANALYZE seams.chunk_index")

        for (query, kind), response in before.items():
            after = published.search(query, kind)
            _hits_ok(published, after)
            assert after.published_seq == response.published_seq
            assert _signature(after) == _signature(response), (query, kind)
        for name, options in {
            "all": {},
            "current": {"current": True},
            "vectors": {"current": True, "vectors": True},
        }.items():
            assert _export(published, **options) == exports[name], name

        # Dense recall under the filter: k visible hits although the CROWD nearest are hidden.
        crowded = published.search(QUERIES[1], "dense", k=10)
        (visible,) = rows(published.url, "SELECT count(*) FROM seams.current_chunks")[0]
        assert visible >= 5 and len(crowded.hits) == min(10, visible)

    finally:
        with psycopg.connect(published.url) as conn:  # leave the module's database as it was
            for table in schema.ASSET_TABLES:
                conn.execute(
                    sql.SQL(
                        "DELETE FROM {} WHERE batch_key = %s"
                        " OR (batch_key = %s AND generation > %s)"
                    ).format(sql.Identifier(schema.SCHEMA, table)),
                    (hidden, published.key, published.generation),
                )
            conn.execute(
                "DELETE FROM seams.batch_builds WHERE batch_key = %s OR (batch_key = %s AND"
                " generation > %s)",
                (hidden, published.key, published.generation),
            )
            conn.execute("DELETE FROM seams.batch_documents WHERE batch_key = %s", (hidden,))
            conn.execute("DELETE FROM seams.batches WHERE batch_key = %s", (hidden,))


def test_the_hnsw_scan_filters_visibility_itself(published: Published) -> None:
    """The dense pool stays one ordered scan of its model's HNSW index (which the pipeline's
    `chunk_index` step made) with the visibility subquery as its filter (an EXISTS would be
    pulled up into a join and lose the index order)."""
    vector = _query_vector(published, QUERIES[0])
    with psycopg.connect(published.url) as conn:
        # The tiny test table would be scanned whole, or read by its key index and sorted:
        # only an ordered scan is left to choose, and it must be the model's HNSW index.
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        configure_scan(conn, 40)
        (mode, model) = conn.execute(
            "SELECT mode, model_id FROM seams.chunk_index LIMIT 1"
        ).fetchone()
        dimension = vector.count(",") + 1
        statement = sql.SQL("EXPLAIN (COSTS OFF) {}").format(nearest_statement(model, dimension))
        params = {"q": vector, "mode": mode, "fetch": 40}
        plan = "\n".join(r[0] for r in conn.execute(statement, params))
    scan = [line for line in plan.splitlines() if "Index Scan" in line]
    assert scan and schema.chunk_index_hnsw_name(model, dimension) in scan[0], plan
    assert "SubPlan" in plan and "current_documents" in plan, plan
    assert "Join" not in plan and "Sort" not in plan, plan


def _republish(url: str, batch: str, rounds: int, stop: threading.Event) -> int:
    """Publish `rounds` new builds of `batch` (same content), each in one transaction as a
    publication does: rows written beside, states flipped, current documents moved, the log
    appended, the older rows deleted."""
    done = 0
    with psycopg.connect(url) as conn:
        for _ in range(rounds):
            if stop.is_set():
                break
            with conn.transaction():
                (g,) = conn.execute(
                    "SELECT generation FROM seams.batch_builds WHERE batch_key = %s"
                    " AND state = 'published' FOR UPDATE",
                    (batch,),
                ).fetchone()
                for table in schema.ASSET_TABLES:
                    _copy_rows(conn, table, batch, g, batch, g + 1)
                (seq,) = conn.execute("SELECT nextval('seams.publication_seq')").fetchone()
                conn.execute(
                    "UPDATE seams.batch_builds SET state = 'superseded' WHERE batch_key = %s"
                    " AND generation = %s",
                    (batch, g),
                )
                conn.execute(
                    "INSERT INTO seams.batch_builds (batch_key, generation, state)"
                    " VALUES (%s, %s, 'published')",
                    (batch, g + 1),
                )
                conn.execute(
                    "UPDATE seams.current_documents SET generation = %s, published_seq = %s"
                    " WHERE batch_key = %s",
                    (g + 1, seq, batch),
                )
                conn.execute(
                    "INSERT INTO seams.publications (seq, batch_key, generation, kind)"
                    " VALUES (%s, %s, %s, 'batch')",
                    (seq, batch, g + 1),
                )
                for table in schema.ASSET_TABLES:
                    conn.execute(
                        sql.SQL("DELETE FROM {} WHERE batch_key = %s AND generation = %s").format(
                            sql.Identifier(schema.SCHEMA, table)
                        ),
                        (batch, g),
                    )
            done += 1
    return done


def test_every_answer_reads_one_publication_while_builds_are_published(
    published: Published,
) -> None:
    baseline = {(q, kind): _signature(published.search(q, kind)) for q in QUERIES
                for kind in KINDS}  # fmt: skip
    stop = threading.Event()
    failures: list[BaseException] = []
    seen: set[int] = set()
    answers = [0]

    def reader(offset: int) -> None:
        try:
            n = offset
            while not stop.is_set():
                query, kind = QUERIES[n % len(QUERIES)], KINDS[n // len(QUERIES) % len(KINDS)]
                response = published.search(query, kind)
                _hits_ok(published, response)
                # Same content in every build: the same hits, whatever was published meanwhile.
                assert [s[1:] for s in _signature(response)] == [
                    s[1:] for s in baseline[(query, kind)]
                ]
                seen.add(response.published_seq)  # type: ignore[arg-type]
                answers[0] += 1
                n += 1
        except BaseException as exc:
            failures.append(exc)
            stop.set()

    readers = [threading.Thread(target=reader, args=(i,)) for i in range(4)]
    for thread in readers:
        thread.start()
    try:
        published_rounds = _republish(published.url, published.key, 25, stop)
    finally:
        stop.set()
        for thread in readers:
            thread.join()
    if failures:
        raise failures[0]
    assert published_rounds == 25 and answers[0] > 25
    assert len(seen) > 3  # the answers really met several publications
    published.generation = rows(
        published.url,
        "SELECT generation FROM seams.batch_builds WHERE batch_key = %s AND state = 'published'",
        published.key,
    )[0][0]
