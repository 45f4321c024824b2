"""A model switch built batch by batch is published whole (real PostgreSQL + pgvector).

The index of three batches is built with a 384-d model; then each batch's `chunk_index` is
written again with a 96-d model, one write per batch as a multi-run backfill or `seams run` does
(and, for an embedder switch, its `chunks` too, with new chunk ids). While the new model's
builds are written, search answers from the complete old index; the write that completes the
last batch publishes the three in one publication; then search answers from the new model, the
old model's vectors are gone and its HNSW index can be dropped. A reader querying all along
never sees an error, an empty answer, or an answer mixing models: every hit's dense score is
the exact cosine of the query with that hit's vector of the answer's model.

Rows go through `write_table` as the IO manager writes them; the vectors are hand-made, so the
oracle is numpy's exact cosine.
"""

from __future__ import annotations

import itertools
import threading

import dagster as dg
import numpy as np
import pytest

from seams.orchestration.cli.check import index_report
from seams.orchestration.sync import sync_evaluation
from seams.resources.io_manager import write_metadata
from seams.resources.postgres import PostgresResource
from seams.storage import publication, schema, vector_indexes
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import WriteResult, read_table, write_table
from seams.storage.search import SearchResponse, search_response
from tests.storage.search.test_model_choice import FixedQueries
from tests.storage.test_vector_indexes import (
    DIMENSIONS,
    PACKAGED,
    SMALL,
    chunk_rows,
    index_rows,
    publish,
    unit_vectors,
)
from tests.support.concurrency import run_together

BATCHES = ("b1", "b2", "b3")
CHUNKS = 30
QUERIES = {m: unit_vectors(1, d, seed=7)[0] for m, d in DIMENSIONS.items()}
QUERY = "chunk 7"  # BM25 finds chunks too: the hybrid answer has both sides


def vectors_of(model_id: str) -> dict[str, np.ndarray]:
    """Per batch, its chunks' vectors of `model_id` (in chunk order)."""
    dimension = DIMENSIONS[model_id]
    return {
        b: unit_vectors(CHUNKS, dimension, seed=100 * i + dimension) for i, b in enumerate(BATCHES)
    }


@pytest.fixture
def old_index(postgres: PostgresResource) -> dict[str, np.ndarray]:
    """Three published batches indexed with the 384-d model; their vectors by batch."""
    vectors = vectors_of(PACKAGED)
    for batch, values in vectors.items():
        publish(postgres, batch, PACKAGED, values)
    return vectors


def cosines(vectors: dict[str, np.ndarray], model_id: str) -> dict[tuple[str, str], float]:
    """Per (batch, chunk id), the exact cosine of `model_id`'s query with its vector."""
    query = QUERIES[model_id].astype(np.float64)
    return {
        (batch, f"c{i:05d}"): float(v.astype(np.float64) @ query)
        for batch, values in vectors.items()
        for i, v in enumerate(values)
    }


def answer(postgres: PostgresResource, search: str = "hybrid") -> SearchResponse:
    return search_response(
        postgres, FixedQueries(QUERIES, PACKAGED), QUERY, 10, search=search, sentence_weight=0.0
    )  # type: ignore[arg-type]


def assert_one_model(response: SearchResponse, oracle: dict[str, dict[tuple[str, str], float]]):
    """A full answer of one model: every hit's dense score is its exact cosine with the query of
    the answer's model (a chunk without a vector of that model would score 0)."""
    assert response.hits, response.notes
    assert response.model_id in oracle, response.model_id
    expected = oracle[response.model_id]
    for hit in response.hits:
        key = (hit.batch_key, hit.chunk_id)
        assert hit.dense_score == pytest.approx(expected[key], abs=1e-5), (response.model_id, key)


def switch_batch(postgres: PostgresResource, batch: str, values: np.ndarray, *, new_ids: bool):
    """Rebuild `batch`'s index with the 96-d model, as `chunk_index`'s write does (an embedder
    switch rewrites its chunks first, with new chunk ids)."""
    chunks = chunk_rows(batch, CHUNKS)
    if new_ids:
        chunks = chunks.assign(chunk_id=[f"n{c[1:]}" for c in chunks["chunk_id"]])
        write_table(postgres, schema.CHUNKS, chunks, [batch], run_id=f"switch-{batch}")
    with postgres.connection() as conn:
        vector_indexes.ensure_model_index(conn, SMALL, DIMENSIONS[SMALL])
    frame = index_rows(chunks, SMALL, values)
    return write_and_publish(postgres, frame, [batch], run_id=f"switch-{batch}")


def models_in_index(postgres: PostgresResource) -> dict[str, int]:
    with postgres.connection() as conn:
        return dict(
            conn.execute("SELECT model_id, count(*) FROM seams.chunk_index GROUP BY 1").fetchall()
        )


def test_an_index_switch_built_batch_by_batch_is_published_whole(
    postgres: PostgresResource, old_index: dict[str, np.ndarray]
) -> None:
    new = vectors_of(SMALL)
    oracle = {PACKAGED: cosines(old_index, PACKAGED), SMALL: cosines(new, SMALL)}
    before = answer(postgres)
    assert_one_model(before, oracle)
    assert before.model_id == PACKAGED

    for done, batch in enumerate(BATCHES[:-1], 1):
        written = switch_batch(postgres, batch, new[batch], new_ids=False)
        assert written.published == {}
        assert f"{done} of 3 batches ready" in written.held[batch], written.held
        for search in ("hybrid", "dense", "lexical"):  # the old index, whole, on every side
            during = answer(postgres, search)
            assert during.model_id == PACKAGED and during.published_seq == before.published_seq
            assert [h.chunk_id for h in during.hits] == [
                h.chunk_id for h in answer(postgres, search).hits
            ]
        assert_one_model(answer(postgres), oracle)
        assert answer(postgres).hits == before.hits
        with postgres.connection() as conn:
            switch = publication.model_switch(conn)
            left = {u.batch_key: u for u in publication.unpublished(conn)}
        assert switch is not None
        assert (switch.serving, switch.target) == (PACKAGED, SMALL)
        assert switch.ready == BATCHES[:done] and switch.waiting == BATCHES[done:]
        assert set(left) == set(BATCHES[:done])
        waiting = ", ".join(f"batch {b} (collection default)" for b in BATCHES[done:])
        assert all(u.reason.startswith(f"held: waiting for {waiting} ") for u in left.values())
        assert all(u.state == "complete" for u in left.values())
        lines, status = index_report(postgres)
        assert status == 1
        assert (
            f"Index: switching models from {PACKAGED} to {SMALL}: {done} of 3 batches ready, "
            f"waiting for {waiting}; "
            f"search answers with {PACKAGED} until every batch is: run `"
        ) in lines, lines
        assert lines.endswith(" backfill`"), lines  # the held batches are that one line

    last = switch_batch(postgres, BATCHES[-1], new[BATCHES[-1]], new_ids=False)
    assert last.held == {} and sorted(last.published) == list(BATCHES)
    after = answer(postgres)
    assert after.model_id == SMALL
    assert_one_model(after, oracle)
    dense = answer(postgres, "dense")
    order = sorted(oracle[SMALL], key=lambda key: (-round(oracle[SMALL][key], 6), key[1], key[0]))
    assert [(h.batch_key, h.chunk_id) for h in dense.hits] == order[:10]
    with postgres.connection() as conn:
        seqs = conn.execute(
            "SELECT seq, array_agg(batch_key ORDER BY batch_key),"
            " array_agg(run_id ORDER BY batch_key) FROM seams.publications"
            " WHERE seq > %s GROUP BY seq",
            (before.published_seq,),
        ).fetchall()
        runs = [f"switch-{b}" for b in BATCHES]  # each batch names the run that built it
        assert seqs == [(after.published_seq, list(BATCHES), runs)]  # one publication, all three
        assert publication.model_switch(conn) is None
        assert publication.unpublished(conn) == []
        assert [i.model_id for i in vector_indexes.model_indexes(conn)] == [SMALL]  # and its index
    assert models_in_index(postgres) == {SMALL: 3 * CHUNKS}  # the old vectors are gone


def test_an_embedder_switch_keeps_the_old_chunks_searchable_until_every_batch_is_rebuilt(
    postgres: PostgresResource, old_index: dict[str, np.ndarray]
) -> None:
    """New chunk ids in the held builds: readers keep the old chunks (and their vectors) until
    the last batch completes, then see only the new ones; a reader querying throughout never
    sees an error, an empty answer or two models in one answer, and flips model once."""
    new = vectors_of(SMALL)
    renamed = {b: {f"n{c[1:]}": v for (bb, c), v in cosines(new, SMALL).items() if bb == b}
               for b in BATCHES}  # fmt: skip
    oracle = {
        PACKAGED: cosines(old_index, PACKAGED),
        SMALL: {(b, c): v for b, per in renamed.items() for c, v in per.items()},
    }
    seen: list[str] = [answer(postgres).model_id]
    failures: list[str] = []
    done = threading.Event()

    def reader() -> None:
        while True:
            finished = done.is_set()  # one more answer after the last write
            try:
                response = answer(postgres)
                assert_one_model(response, oracle)
            except AssertionError as exc:
                failures.append(str(exc)[:300])
                return
            seen.append(response.model_id)
            if finished:
                return

    def writer() -> None:
        try:
            for batch in BATCHES:
                written = switch_batch(postgres, batch, new[batch], new_ids=True)
                if batch != BATCHES[-1]:
                    assert written.published == {}, written.published
        finally:
            done.set()

    assert run_together(reader, writer) == []
    assert failures == []
    assert seen[0] == PACKAGED and seen[-1] == SMALL
    flips = sum(a != b for a, b in itertools.pairwise(seen))
    assert flips == 1, seen  # old model until the switch, new model after, never back
    with postgres.connection() as conn:
        ids = {r[0][0] for r in conn.execute("SELECT chunk_id FROM seams.current_chunks")}
    assert ids == {"n"}
    assert models_in_index(postgres) == {SMALL: 3 * CHUNKS}


def test_the_last_two_batches_completed_at_once_publish_the_switch_once(
    postgres: PostgresResource, old_index: dict[str, np.ndarray]
) -> None:
    """Two writers complete the switch's last two batches at the same instant: each checks the
    switch under the publication lock, so the later sees the earlier's held build and publishes
    all three, once (no switch left waiting, no deadlock)."""
    new = vectors_of(SMALL)
    switch_batch(postgres, "b1", new["b1"], new_ids=False)
    results: dict[str, object] = {}

    def job(batch: str):
        return lambda: results.setdefault(
            batch, switch_batch(postgres, batch, new[batch], new_ids=False)
        )

    assert run_together(job("b2"), job("b3")) == []
    published = [set(r.published) for r in results.values()]  # type: ignore[attr-defined]
    assert set(BATCHES) in published and set() in published
    with postgres.connection() as conn:
        assert publication.unpublished(conn) == []
    assert answer(postgres).model_id == SMALL
    assert models_in_index(postgres) == {SMALL: 3 * CHUNKS}


def test_a_batch_built_with_the_serving_model_is_published_at_once_and_joins_the_switch(
    postgres: PostgresResource, old_index: dict[str, np.ndarray]
) -> None:
    """Switched back before the end: a batch rebuilt with the serving model is published as
    before; a new batch of the serving model is published too and the switch then waits for
    it as well."""
    new = vectors_of(SMALL)
    switch_batch(postgres, "b1", new["b1"], new_ids=False)
    chunks = chunk_rows("b1", CHUNKS)
    again = write_and_publish(postgres, index_rows(chunks, PACKAGED, old_index["b1"]), ["b1"])
    assert list(again.published) == ["b1"]
    with postgres.connection() as conn:
        assert publication.model_switch(conn) is None
    switch_batch(postgres, "b2", new["b2"], new_ids=False)
    publish(postgres, "b4", PACKAGED, unit_vectors(CHUNKS, 384, seed=44))
    with postgres.connection() as conn:
        switch = publication.model_switch(conn)
    assert switch is not None and (switch.ready, switch.waiting) == (("b2",), ("b1", "b3", "b4"))
    assert answer(postgres).model_id == PACKAGED


def test_a_switch_whose_last_check_skipped_a_busy_build_is_published_by_publish_ready(
    postgres: PostgresResource, old_index: dict[str, np.ndarray]
) -> None:
    """The last batch's write finds b1's held build locked (a writer on it): b1 counts as not
    ready, so the write holds its own build instead of waiting. `publish_ready` (what the next
    `seams run` calls) then publishes the three at once and drops the old model's HNSW index
    concurrently: no search waits for it."""
    new = vectors_of(SMALL)
    for batch in ("b1", "b2"):
        switch_batch(postgres, batch, new[batch], new_ids=False)
    with postgres.connection() as busy, busy.transaction():
        busy.execute(
            "SELECT 1 FROM seams.batch_builds WHERE batch_key = 'b1' AND state = 'complete'"
            " FOR UPDATE"
        )
        last = switch_batch(postgres, "b3", new["b3"], new_ids=False)
    assert last.published == {}
    assert "2 of 3 batches ready" in last.held["b3"], last.held  # b1 skipped, not waited for
    assert answer(postgres).model_id == PACKAGED
    old_hnsw = schema.chunk_index_hnsw_name(PACKAGED, DIMENSIONS[PACKAGED])
    with postgres.connection() as conn:
        assert old_hnsw in {i.name for i in vector_indexes.model_indexes(conn)}
        done = publication.publish_ready(conn)
        assert sorted(done.published) == list(BATCHES) and done.held == {}
        assert done.retired_models == (PACKAGED,)
        assert [i.model_id for i in vector_indexes.model_indexes(conn)] == [SMALL]
        assert publication.unpublished(conn) == []
    assert answer(postgres).model_id == SMALL
    assert models_in_index(postgres) == {SMALL: 3 * CHUNKS}


def test_a_batch_without_current_documents_does_not_hold_the_switch_and_loses_its_vectors(
    postgres: PostgresResource, old_index: dict[str, np.ndarray]
) -> None:
    """b1's documents are all superseded by newer versions in b4: the switch waits only for the
    batches with current chunks (b2, b3, b4), and its publication deletes b1's old vectors too,
    so the old model keeps no vector and its index can go."""
    newer = chunk_rows("b1", CHUNKS).assign(batch_key="b4")
    with postgres.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count) VALUES ('b4', 't', 2)"
        )
        for document_id in sorted(set(newer["document_id"])):
            conn.execute(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes) VALUES ('b4', %s, %s, 'v2', 0)",
                (document_id, f"file:///{document_id}"),
            )
    write_table(postgres, schema.CHUNKS, newer, ["b4"], run_id="r4")
    write_and_publish(postgres, index_rows(newer, PACKAGED, old_index["b1"]), ["b4"])
    with postgres.connection() as conn:
        current = conn.execute("SELECT DISTINCT batch_key FROM seams.current_documents").fetchall()
    assert sorted(current) == [("b2",), ("b3",), ("b4",)]
    new = vectors_of(SMALL)
    for batch in ("b2", "b3"):
        switch_batch(postgres, batch, new[batch], new_ids=False)
    with postgres.connection() as conn:
        vector_indexes.ensure_model_index(conn, SMALL, DIMENSIONS[SMALL])
    last = write_and_publish(postgres, index_rows(newer, SMALL, new["b1"]), ["b4"])
    assert sorted(last.published) == ["b2", "b3", "b4"], last.held  # b1 not waited for
    assert models_in_index(postgres) == {SMALL: 3 * CHUNKS}  # b1's old vectors deleted too
    with postgres.connection() as conn:  # the publishing write dropped the old model's index
        assert [i.model_id for i in vector_indexes.model_indexes(conn)] == [SMALL]
    assert answer(postgres).model_id == SMALL


def test_a_held_switch_names_what_it_waits_for_and_retires_nothing_until_published(
    postgres: PostgresResource,
) -> None:
    for batch, seed in (("b1", 1), ("b2", 2)):
        publish(postgres, batch, PACKAGED, unit_vectors(CHUNKS, DIMENSIONS[PACKAGED], seed))
    with postgres.connection() as conn:
        vector_indexes.ensure_model_index(conn, SMALL, DIMENSIONS[SMALL])
    new = {b: unit_vectors(CHUNKS, DIMENSIONS[SMALL], seed=s) for b, s in (("b1", 3), ("b2", 4))}

    def switch(batch: str) -> WriteResult:
        chunks = read_table(postgres, schema.CHUNKS, [batch])
        frame = index_rows(chunks, SMALL, new[batch])
        return write_and_publish(postgres, frame, [batch], run_id="r")

    held = switch("b2")
    reason = held.held["b2"]
    assert reason == (
        f"held: waiting for batch b1 (collection default) to switch models from {PACKAGED} to "
        f"{SMALL} (1 of 2 batches ready; search answers with {PACKAGED} until every batch "
        "is): run `seams backfill`"
    )
    # The page of the held write says why, and retired nothing: readers still search those rows.
    meta = write_metadata(held, schema.CHUNK_INDEX)
    assert meta["held"] == reason
    assert (meta["rows_deleted"], meta["rows_replaced"]) == (0, CHUNKS)
    assert answer(postgres).model_id == PACKAGED
    assert count_rows(postgres, "b2", PACKAGED) == CHUNKS
    # in_sync fails on chunk_index with that text; `seams check` names the batch and command.
    evaluation = sync_evaluation(dg.AssetKey("chunk_index"), [], 2, None, reason)
    assert not evaluation.passed and evaluation.description == reason
    lines, status = index_report(postgres)
    assert status == 1 and "waiting for batch b1 (collection default); search" in lines, lines

    done = switch("b1")  # what `seams backfill` builds for a batch no job builds
    assert sorted(done.published) == ["b1", "b2"] and done.held == {}
    assert (done.batches["b1"].rows_deleted, done.batches["b1"].rows_replaced) == (CHUNKS, 0)
    assert answer(postgres).model_id == SMALL
    assert count_rows(postgres, "b2", PACKAGED) == 0


def count_rows(postgres: PostgresResource, batch: str, model_id: str) -> int:
    with postgres.connection() as conn:
        return conn.execute(
            "SELECT count(*) FROM seams.chunk_index WHERE batch_key = %s AND model_id = %s",
            (batch, model_id),
        ).fetchone()[0]
