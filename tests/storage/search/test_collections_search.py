"""BM25 statistics per collection, and search, the retrievers and export restricted to
collections.

One database holds three collections, written the way the pipeline writes them (registered
batches, `chunks` then `chunk_index`, whose write publishes the batch and syncs BM25): `a` and
`b` analysed with `english`, `c` with `simple`. A chunk's BM25 score must be computed from its
own collection's chunks only (the reference below does it in Python from `to_tsvector`'s
lexemes), so documents published in `b` leave every score of `a` bit for bit as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from seams.errors import InputError
from seams.models.model_store import ModelManifest
from seams.orchestration import cli
from seams.orchestration.cli.search import format_response
from seams.resources import database
from seams.resources.postgres import PostgresResource, close_pool
from seams.settings import SeamsSettings
from seams.storage import batches as batch_store
from seams.storage import publication, schema
from seams.storage.export_files import export_chunks
from seams.storage.export_rows import ExportRequest
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import write_table
from seams.storage.search import lexical, search_response
from seams.storage.search.lexical_index import LOCK_PREFIX
from tests.storage.test_publication import chunks_frame, index_frame
from tests.support.bm25 import bm25_scores
from tests.support.databases import fresh_database, migrated_postgres
from tests.support.instances import keep_environment

CONFIGS = {"a": "english", "b": "english", "c": "simple", schema.DEFAULT_COLLECTION: "english"}
NAMES = ("a", "b", "c")
A_DOCS = {
    "a1": ["The cat sat on the mat. Cats like warm mats.", "Dogs chase cats across the garden."],
    "a2": ["A quiet library holds old maps and older books."],
}
B_FIRST = {"b1": ["Cats, cats, cats everywhere: the cat house.", "Maps of the harbour."]}
B_SECOND = {"b2": ["Garden dogs and garden cats.", "Old maps, older cats, a dog."]}
C_DOCS = {"c1": ["Cats and dogs in the simple index.", "The old library maps."]}
QUERIES = ["cats and dogs", "old maps", "garden cat", "library books", "the of and"]


class FixedEmbedder:
    """A query embedder that embeds every query as one given vector (of model `m`)."""

    model_id = "m"

    def __init__(self, vector: np.ndarray) -> None:
        self.vector = vector

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vector] * len(texts))

    embed_queries = embed

    def for_model(self, model_id: str) -> FixedEmbedder:
        assert model_id == self.model_id
        return self


@pytest.fixture(scope="module")
def module_url(pg_server_url: str) -> Iterator[str]:
    with fresh_database(pg_server_url) as url:
        yield url


@pytest.fixture(scope="module")
def postgres(module_url: str) -> Iterator[PostgresResource]:
    yield from migrated_postgres(module_url)


def publish(
    postgres: PostgresResource, folder: Path, collection: str, docs: dict[str, list[str]]
) -> str:
    """Register `docs` (one file each) as a batch of `collection` and write its extracted
    text, chunks and index (analysed with the collection's configuration): the `chunk_index`
    write publishes."""
    folder.mkdir(parents=True)
    for name, texts in docs.items():
        (folder / f"{name}.txt").write_text(" ".join(texts))
    files, refused = batch_store.scan_inbox(folder)
    assert not refused
    with postgres.connection() as conn:
        conn.autocommit = True
        key = batch_store.register_batch(conn, files, source="test", collection=collection)
    assert key
    by_name = {f.path.stem: f for f in files}
    with postgres.connection() as conn:  # the text the hits' context is cut from
        for f in files:
            text = " ".join(docs[f.path.stem])
            conn.execute(
                "INSERT INTO seams.extracted_text (batch_key, document_id, source_uri,"
                " source_sha256, mime, text, char_count, collection)"
                " VALUES (%s, %s, %s, %s, 'text/plain', %s, %s, %s)",
                (key, f.document_id, f.source_uri, f.sha256, text, len(text), collection),
            )
    frame = chunks_frame(
        key, {by_name[n].document_id: (by_name[n].sha256, texts) for n, texts in docs.items()}
    )
    write_table(postgres, schema.CHUNKS, frame, [key], run_id="run-" + key)
    index = index_frame(frame)
    index["text_search_config"] = CONFIGS[collection]
    write_and_publish(postgres, index, [key], run_id="run-" + key)
    return key


@pytest.fixture(scope="module")
def corpus(postgres: PostgresResource, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Collections a, b (its first batch) and c published."""
    root = tmp_path_factory.mktemp("collections")
    publish(postgres, root / "a", "a", A_DOCS)
    publish(postgres, root / "b", "b", B_FIRST)
    publish(postgres, root / "c", "c", C_DOCS)
    return root


def reference(conn: psycopg.Connection[Any], collection: str, query: str) -> dict[Any, float]:
    """BM25 of every current chunk of `collection`, from its chunks alone, in Python."""
    rows = conn.execute(
        "SELECT batch_key, chunk_id, text FROM seams.current_chunks WHERE collection = %s",
        (collection,),
    ).fetchall()
    return bm25_scores(conn, CONFIGS[collection], query, {(b, c): text for b, c, text in rows})


def collection_scores(conn: psycopg.Connection[Any], collection: str) -> list[Any]:
    """Per query: the collection's BM25 top list and every one of its chunks' exact score."""
    keys = conn.execute(
        "SELECT batch_key, chunk_id FROM seams.current_chunks WHERE collection = %s ORDER BY 1, 2",
        (collection,),
    ).fetchall()
    out = []
    for query in QUERIES:
        groups = lexical.group_terms(conn, query, [collection])
        assert [(g.collection, g.config) for g in groups] == [(collection, CONFIGS[collection])]
        top = lexical.top_chunks_of(conn, groups, 50)
        every = lexical.score_chunks_of(conn, groups, keys)
        out.append((query, top, sorted(every.items())))
    return out


def assert_exact(conn: psycopg.Connection[Any], collection: str) -> None:
    for query, top, every in collection_scores(conn, collection):
        want = reference(conn, collection, query)
        if not every:  # only stop words: nothing to score
            assert not any(want.values()), query
            continue
        assert {k: s.score for k, s in every} == pytest.approx(want, abs=1e-9), query
        assert {(h.batch_key, h.chunk_id) for h in top} == {k for k, s in want.items() if s > 0}
        assert all(h.collection == collection for h in top)


def test_one_collections_documents_never_change_anothers_bm25_scores(
    postgres: PostgresResource, corpus: Path
) -> None:
    with postgres.connection() as conn:
        before = collection_scores(conn, "a")
        assert_exact(conn, "a")
        assert_exact(conn, "c")
    publish(postgres, corpus / "b2", "b", B_SECOND)
    with postgres.connection() as conn:
        # Byte for byte: the same chunks, scores, matched words and order.
        assert collection_scores(conn, "a") == before
        assert_exact(conn, "a")
        assert_exact(conn, "b")  # b's own statistics: its chunks alone
        assert_exact(conn, "c")
        totals = conn.execute(
            "SELECT collection, text_search_config, chunks FROM seams.lexical_totals"
            " WHERE chunks > 0 ORDER BY 1"
        ).fetchall()
        # The same words in `a` and `b` (one configuration): their counters are apart.
        both = conn.execute(
            "SELECT collection, df FROM seams.lexical_terms WHERE lexeme = 'cat'"
            " AND text_search_config = 'english' ORDER BY 1"
        ).fetchall()
    assert totals == [("a", "english", 3), ("b", "english", 4), ("c", "simple", 2)]
    assert both == [("a", 2), ("b", 3)]
    # lexical_sync takes the collections' own publication locks.
    assert publication.publish_lock_name("a") == LOCK_PREFIX + "a"


def test_search_reads_only_the_collections_asked_for(
    postgres: PostgresResource, corpus: Path
) -> None:
    with postgres.connection() as conn:
        own = {
            c: {(h.batch_key, h.chunk_id): h.score for h in collection_scores(conn, c)[0][1]}
            for c in NAMES
        }
    query = QUERIES[0]  # "cats and dogs": in every collection
    for among, expected in ((["a"], {"a"}), (["b", "c"], {"b", "c"}), (None, {"a", "b", "c"})):
        response = search_response(
            postgres,
            None,
            query,
            k=20,
            search="lexical",
            collections=among,  # type: ignore[arg-type]
        )
        assert {h.collection for h in response.hits} == expected, among
        # Each hit is scored with its own collection's statistics, whoever else is searched.
        for hit in response.hits:
            assert hit.lexical_score == own[hit.collection][(hit.batch_key, hit.chunk_id)]
        found = json.loads(json.dumps(response.to_dict()))
        assert {h["collection"] for h in found["hits"]} == expected
    # `simple` keeps "cats" as it is, `english` stems it: each collection parses the query
    # with its own configuration.
    response = search_response(postgres, None, "cats", k=5, search="lexical")  # type: ignore[arg-type]
    assert {h.collection for h in response.hits} == {"a", "b", "c"}
    assert set(response.lexemes) == {"cat", "cats"}

    # Dense: the query vector is one of b's chunk vectors; asked for `a`, no b chunk comes.
    with postgres.connection() as conn:
        vector, chunk_id = conn.execute(
            "SELECT embedding, chunk_id FROM seams.chunk_index WHERE collection = 'b'"
            " ORDER BY chunk_id LIMIT 1"
        ).fetchone()
    embedder = FixedEmbedder(np.asarray(vector, dtype=np.float32))
    every = search_response(postgres, embedder, "x", k=3, search="dense")
    assert (every.hits[0].chunk_id, every.hits[0].collection) == (chunk_id, "b")
    only_a = search_response(postgres, embedder, "x", k=3, search="dense", collections=["a"])
    assert len(only_a.hits) == 3 and {h.collection for h in only_a.hits} == {"a"}
    hybrid = search_response(postgres, embedder, "cats", k=5, collections=["c"])
    assert hybrid.hits and {h.collection for h in hybrid.hits} == {"c"}
    assert "c: " in format_response(hybrid, collections=True)
    assert "c: " not in format_response(hybrid)
    with pytest.raises(InputError, match="at least one collection"):
        search_response(postgres, embedder, "x", collections=[])


def _settings_file(root: Path) -> Path:
    blocks = "".join(
        f"  {name}:\n    source: {root / name}\n    retrieval: {{text_search_config: {config}}}\n"
        for name, config in CONFIGS.items()
        if name in NAMES
    )
    path = root / "seams.yaml"
    path.write_text(f"retrieval: {{lexical_weight: 0.5}}\ncollections:\n{blocks}")
    return path


def test_the_retrievers_and_export_take_collections(
    postgres: PostgresResource, corpus: Path, tmp_path: Path
) -> None:
    from seams.integrations.langchain_retriever import SeamsRetriever
    from seams.integrations.llama_index_retriever import SeamsLlamaIndexRetriever
    from seams.integrations.retrieval import SeamsSearch

    settings = SeamsSettings.model_validate(
        {"collections": {n: {"source": str(corpus / n)} for n in NAMES}}
    )
    options: dict[str, Any] = {"postgres": postgres, "embedder": None, "search": "lexical"}
    langchain = SeamsRetriever(k=10, settings=settings, collections=["b"], **options)
    docs = langchain.invoke("cats")
    assert docs and {d.metadata["collection"] for d in docs} == {"b"}
    nodes = SeamsLlamaIndexRetriever(k=10, settings=settings, collections=["a"], **options)
    found = nodes.retrieve("cats")
    assert found and {n.node.metadata["collection"] for n in found} == {"a"}
    every = SeamsSearch.from_settings(settings, k=10, **options).response("cats")
    assert {h.collection for h in every.hits} == {"a", "b", "c"}
    with pytest.raises(InputError, match=r"collections 'nope': no such collection; .*'a', 'b'"):
        SeamsSearch.from_settings(settings, collections=["a", "nope"], **options)

    out = tmp_path / "b.jsonl"
    with postgres.connection() as conn:
        stored = dict(
            conn.execute("SELECT collection, count(*) FROM seams.chunks GROUP BY 1").fetchall()
        )
    summary = export_chunks(postgres, ExportRequest(out, "jsonl", collection="b"))
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary.rows == len(rows) == stored["b"] and {r["collection"] for r in rows} == {"b"}
    export_chunks(postgres, ExportRequest(out, "jsonl"))
    assert len(out.read_text().splitlines()) == sum(stored.values())


def test_the_commands_search_and_export_one_collection_and_name_unknown_ones(
    module_url: str,
    corpus: Path,
    exported_model: ModelManifest,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    keep_environment(monkeypatch)
    monkeypatch.setenv("SEAMS_CONFIG", str(_settings_file(corpus)))
    monkeypatch.setenv(database.URL_ENV, module_url)
    monkeypatch.delenv(database.DAGSTER_URL_ENV, raising=False)
    for command in (["search", "cats"], ["export", str(tmp_path / "x.jsonl")]):
        capsys.readouterr()
        assert cli.main([*command, "--collection", "nope"]) != 0
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "'nope': no such collection" in err and "'a', 'b', 'c'" in err, err
    assert cli.main(["search", "cats", "--search", "lexical", "--collection", "c", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["collections"] == ["c"]
    assert printed["hits"] and {h["collection"] for h in printed["hits"]} == {"c"}, (
        printed["lexemes"],
        printed["model_id"],
    )
    assert cli.main(["search", "cats", "--search", "lexical"]) == 0
    out = capsys.readouterr().out
    assert all(f"{c}: " in out for c in NAMES)  # several collections: each hit names its own
    assert cli.main(["export", str(tmp_path / "c.jsonl"), "--collection", "c"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and {r["collection"] for r in rows} == {"c"}
    twice = ["export", str(tmp_path / "ab.jsonl"), "--collection", "a", "--collection", "b"]
    assert cli.main(twice) != 0  # one collection per export, never silently the last
    assert "--collection given 2 times" in capsys.readouterr().err
    assert not (tmp_path / "ab.jsonl").exists()


def test_statistics_shared_by_every_collection_are_upgraded_and_score_as_before(
    database_url: str, tmp_path: Path
) -> None:
    """A database whose BM25 tables have no `collection` (the shape before collections): the
    migration keys them by collection and every score stays exactly what it was."""
    postgres = PostgresResource(url=database_url)
    postgres.ensure_schema()
    try:
        publish(postgres, tmp_path / "d", "default", {**A_DOCS, **B_FIRST})
        with postgres.connection() as conn:
            before = [
                (q, lexical.top_chunks(conn, lexical.query_terms(conn, "english", q), 50))
                for q in QUERIES
            ]
            conn.execute("""
                ALTER TABLE seams.lexical_terms DROP CONSTRAINT lexical_terms_pkey;
                ALTER TABLE seams.lexical_terms DROP COLUMN collection CASCADE;
                ALTER TABLE seams.lexical_terms ADD PRIMARY KEY (text_search_config, lexeme);
                ALTER TABLE seams.lexical_totals DROP CONSTRAINT lexical_totals_pkey;
                ALTER TABLE seams.lexical_totals DROP COLUMN collection CASCADE;
                ALTER TABLE seams.lexical_totals ADD PRIMARY KEY (text_search_config);
                DROP INDEX seams.lexical_postings_key;
                CREATE UNIQUE INDEX lexical_postings_key ON seams.lexical_postings
                    (text_search_config, lexeme, impact, batch_key, chunk_id);
                UPDATE seams.schema_version SET ddl_sha256 = 'before collections';
            """)
        close_pool(database_url)
        postgres = PostgresResource(url=database_url)
        postgres.ensure_schema()
        with postgres.connection() as conn:
            after = [
                (q, lexical.top_chunks(conn, lexical.query_terms(conn, "english", q), 50))
                for q in QUERIES
            ]
            keys = conn.execute(
                "SELECT i.indexrelid::regclass::text, array_agg(a.attname ORDER BY k.n)"
                " FROM pg_index AS i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY"
                " AS k(attnum, n) JOIN pg_attribute AS a ON a.attrelid = i.indrelid"
                " AND a.attnum = k.attnum WHERE i.indexrelid::regclass::text IN"
                " ('seams.lexical_terms_pkey', 'seams.lexical_totals_pkey',"
                " 'seams.lexical_postings_key') GROUP BY 1 ORDER BY 1"
            ).fetchall()
        assert after == before and any(hits for _, hits in after)
        assert keys == [
            ("seams.lexical_postings_key", ["collection", *schema.LEXICAL_POSTINGS.key[1:]]),
            ("seams.lexical_terms_pkey", list(schema.LEXICAL_TERMS.primary_key)),
            ("seams.lexical_totals_pkey", list(schema.LEXICAL_TOTALS.primary_key)),
        ]
        # Publications go on keeping the upgraded counters exact.
        publish(postgres, tmp_path / "e", "a", B_SECOND)
        with postgres.connection() as conn:
            groups = lexical.group_terms(conn, "cats", None)
            assert {(g.collection, g.config) for g in groups} == {
                ("default", "english"),
                ("a", "english"),
            }
    finally:
        close_pool(database_url)
