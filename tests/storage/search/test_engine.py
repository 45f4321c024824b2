"""Retrieval against real PostgreSQL + pgvector and the real ONNX model: `chunk_index` and search.

The pipeline runs in-process with `dagster.materialize` on an ephemeral instance; documents are
small, so a whole batch takes seconds. The read-mostly tests share one indexed database per module
(a test that changes the index restores it); the staleness test gets a fresh database.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from seams.assets.retrieval import index_mode
from seams.errors import InputError
from seams.models.chunk_vectors import RETRIEVAL_MODES
from seams.models.model_store import ModelManifest
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.postgres import PostgresResource
from seams.settings import ChunkingSettings
from seams.storage.search import MAX_QUERY_CHARS, SearchHit, search_response
from tests.support.databases import rows
from tests.support.search_index import (
    GARDEN,
    HARBOUR_V1,
    SETTINGS,
    Indexed,
    indexed_corpus_fixture,
    materialize_batch,
    pipeline_resources,
    register_folder,
    write_corpus,
)

DEFAULT_MODE = index_mode(SETTINGS.retrieval.mode, SETTINGS.chunking_config())

HARBOUR_V2 = """\
The harbour authority replaced the old lighthouse station with a radar tower in 2019.
The tower tracks container ships with a rotating radar antenna and broadcasts their positions to
pilots on the harbour launch, who guide every large vessel through the narrow dredged channel.
Automatic identification system receivers pick up the name, speed and heading of each ship.

During storms the harbour master closes the channel when the swell at the breakwater exceeds four
metres, and ships wait at anchor in the bay until the sea calms down and the pilots can board.
"""


shared = indexed_corpus_fixture("retrieval")
"""One indexed database for the tests that leave the index as they found it."""


INDEX_SNAPSHOT = (
    "SELECT batch_key, document_id, chunk_id, mode, model_id, embedding::text"
    " FROM seams.chunk_index ORDER BY batch_key, document_id, chunk_id"
)


def top_hits(*args: object, **options: object) -> list[SearchHit]:
    """The hits of `search_response`: what most of these tests look at."""
    return search_response(*args, **options).hits  # type: ignore[arg-type]


def _index_metadata(result: dg.ExecuteInProcessResult) -> dict[str, object]:
    (event,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("chunk_index")
    ]
    meta = event.step_materialization_data.materialization.metadata
    return {name: value.value for name, value in meta.items()}


def test_index_is_built_and_rebuilt_idempotently_per_partition(shared: Indexed) -> None:
    chunk_ids = rows(shared.url, "SELECT chunk_id FROM seams.chunks WHERE batch_key = %s",
                      shared.key)  # fmt: skip
    before = rows(shared.url, INDEX_SNAPSHOT)
    assert len(before) == len(chunk_ids) >= 4  # one row per chunk
    assert {r[2] for r in before} == {r[0] for r in chunk_ids}
    assert {r[3] for r in before} == {DEFAULT_MODE}
    assert _index_metadata(shared.result)["chunks_indexed"] == len(before)

    again = shared.rebuild_index()
    assert rows(shared.url, INDEX_SNAPSHOT) == before  # same rows, no duplicates
    meta = _index_metadata(again)
    assert meta["chunks_indexed"] == len(before) and meta["chunks_skipped"] == 0
    if DEFAULT_MODE != "pooled":  # pooled never calls the model
        assert meta["texts_embedded"] == 0 and meta["cache_hits"] == len(before)
    (index,) = rows(
        shared.url,
        "SELECT indexdef FROM pg_indexes WHERE schemaname = 'seams' AND tablename = 'chunk_index'"
        " AND indexdef LIKE '%%hnsw%%'",
    )
    assert "vector_cosine_ops" in index[0]


PLANTED = {
    "why does my compost heap smell of ammonia": "## Compost",
    "drip emitters and a timer to water plants": "## Irrigation",
    "pinching out tomato side shoots": "## Tomatoes",
    "fog horn and keepers climbing steps to light the lamp": "granite blocks in 1841",
}


@pytest.mark.parametrize("mode", RETRIEVAL_MODES)
def test_every_mode_finds_planted_queries(mode: str, shared: Indexed) -> None:
    default = DEFAULT_MODE
    if mode != default:
        meta = _index_metadata(shared.rebuild_index(mode))
        assert meta["mode"] == mode and meta["chunks_indexed"] >= 4
    try:
        for query, passage in PLANTED.items():
            # No mode given: search reads the mode (and model) back from the index's rows.
            response = search_response(shared.postgres, shared.embedder, query, k=3)  # type: ignore[arg-type]
            hits = response.hits
            assert response.mode == mode, response.notes
            assert len(hits) == 3, query
            assert passage in hits[0].text, (mode, query, hits[0].text[:80])
            assert [h.rank for h in hits] == [1, 2, 3]
            assert hits[0].score > hits[1].score >= hits[2].score
    finally:
        if mode != default:
            shared.rebuild_index()  # leave the shared index in the default mode


def test_hits_carry_parent_section_neighbours_and_the_exact_source(shared: Indexed) -> None:
    postgres, embedder = shared.postgres, shared.embedder
    (hit,) = top_hits(postgres, embedder, "turning the compost heap with a fork", k=1)  # type: ignore[arg-type]
    assert hit.source_uri.endswith("garden.md") and hit.title
    assert GARDEN[hit.start_char : hit.end_char] == hit.text
    parent = hit.context.parent
    assert parent.kind == "section" and parent.title == "Compost"
    assert parent.start_char <= hit.start_char and hit.end_char <= parent.end_char
    assert GARDEN[parent.text_start : parent.text_end] == parent.text
    assert "crumbly dark humus" in parent.text and "Drip irrigation" not in parent.text
    assert parent.first_chunk_index <= hit.chunk_index <= parent.last_chunk_index
    previous, following = hit.context.previous, hit.context.next
    assert previous is not None and previous.chunk_index == hit.chunk_index - 1
    assert following is not None and following.chunk_index == hit.chunk_index + 1
    assert "Tomato" in previous.text and "Drip irrigation" in following.text
    window = hit.context.window_text
    assert window == GARDEN[previous.start_char : following.end_char]
    assert hit.to_dict()["context"]["parent"]["truncated"] is False

    (doc_hit,) = top_hits(postgres, embedder, "granite lighthouse built in 1841", k=1)  # type: ignore[arg-type]
    assert doc_hit.source_uri.endswith("harbour.txt")
    whole = doc_hit.context.parent
    assert whole.kind == "document" and whole.section == ""
    assert whole.chunk_count == doc_hit.total_chunks
    assert HARBOUR_V1[whole.text_start : whole.text_end] == whole.text

    capped = top_hits(postgres, embedder, "granite lighthouse", k=1, parent_chars=50)[0]  # type: ignore[arg-type]
    assert capped.context.parent.truncated and len(capped.context.parent.text) <= 50


def test_stale_versions_are_never_returned(database_url: str, exported_model: ModelManifest,
                                           tmp_path: Path) -> None:  # fmt: skip
    fresh = Indexed(database_url, write_corpus(tmp_path / "docs"))
    old_key, instance, resources = fresh.key, fresh.instance, fresh.resources
    postgres, embedder = fresh.postgres, fresh.embedder
    corpus = fresh.folder
    old_query = "keepers climbed steps to light the paraffin lamp in the granite lighthouse"
    assert top_hits(postgres, embedder, old_query, k=1)[0].batch_key == old_key  # type: ignore[arg-type]

    (corpus / "harbour.txt").write_text(HARBOUR_V2, encoding="utf-8")
    new_key = register_folder(postgres, corpus)  # type: ignore[arg-type]
    materialize_batch(instance, resources, new_key)
    stale = {
        r[0]
        for r in rows(database_url, "SELECT chunk_id FROM seams.chunks WHERE batch_key = %s "
                       "AND document_id IN (SELECT document_id FROM seams.batch_documents "
                       "WHERE batch_key = %s)", old_key, new_key)
    }  # fmt: skip
    assert stale  # the old version's rows are still stored (and indexed) ...
    for query in (old_query, "fog horn every thirty seconds", "radar tower tracks container ships"):
        hits = top_hits(postgres, embedder, query, k=10)  # type: ignore[arg-type]
        assert hits and not stale & {h.chunk_id for h in hits}  # ... but never returned
        harbour = [h for h in hits if h.source_uri.endswith("harbour.txt")]
        assert harbour and all(h.batch_key == new_key for h in harbour)
    best = top_hits(postgres, embedder, "radar tower tracks container ships", k=1)[0]  # type: ignore[arg-type]
    assert best.batch_key == new_key and "radar" in best.text


def test_bad_queries_get_clear_errors_or_notes_never_crashes(shared: Indexed) -> None:
    postgres, embedder = shared.postgres, shared.embedder
    for empty in ("", "   \n\t ", "\x01\x02"):
        with pytest.raises(InputError, match="empty"):
            top_hits(postgres, embedder, empty)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="NUL"):
        top_hits(postgres, embedder, "\x00\x01")
    for bad_k in (0, -1, 101, True, 2.5):
        with pytest.raises(InputError, match="k must be"):
            top_hits(postgres, embedder, "compost", k=bad_k)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="string"):
        top_hits(postgres, embedder, b"compost")  # type: ignore[arg-type]

    huge = ("compost heap smells of ammonia, turn it with a fork. " * 20_000)[: 1 << 20]
    response = search_response(postgres, embedder, huge, k=2)  # type: ignore[arg-type]
    assert response.hits and "truncated" in response.notes[0]
    assert len(response.query) <= MAX_QUERY_CHARS
    assert response.hits[0].section.endswith("Compost")

    for odd in ("東京の港の灯台 🙂", "naïve café ☕ with compost", "\ud800 lone surrogate fog",
                "RTL: מגדלור", "emoji only 🌊🌊🌊"):  # fmt: skip
        hits = top_hits(postgres, embedder, odd, k=2)  # type: ignore[arg-type]
        assert 1 <= len(hits) <= 2


def _vectors(url: str, query: str, *params: object) -> list[np.ndarray]:
    return [np.array(json.loads(text), np.float64) for (text,) in rows(url, query, *params)]


def _expected_score(
    url: str, q: np.ndarray, w: float, batch_key: str, chunk_id: str, core: tuple[str, int, int]
) -> float:
    """A chunk's search score recomputed from the stored rows: (1 - w) cos(its index vector) +
    w max cos(a sentence inside its core, `core` = (document_id, first char, end char))."""
    (chunk,) = _vectors(
        url,
        "SELECT embedding::text FROM seams.chunk_index WHERE batch_key = %s AND chunk_id = %s",
        batch_key, chunk_id,
    )  # fmt: skip
    document_id, start, end = core
    sentences = _vectors(
        url,
        "SELECT embedding::text FROM seams.semantic_boundaries WHERE batch_key = %s AND"
        " document_id = %s AND start_char >= %s AND start_char < %s AND end_char <= %s",
        batch_key, document_id, start, end, end,
    )  # fmt: skip
    assert sentences  # the model's candidate vectors are stored
    return (1 - w) * float(q @ chunk) + w * max(float(q @ s) for s in sentences)


def test_search_scores_each_chunk_by_its_vector_and_its_best_sentence(shared: Indexed) -> None:
    """Recomputed here from the stored rows: score = (1 - w) cos(chunk) + w max cos(sentence)
    over the candidates inside the chunk's span, hits ordered by it; w = 0 is the chunk alone."""
    postgres, embedder = shared.postgres, shared.embedder
    query = "what makes a compost heap smell and how to fix it"
    q = embedder.embed([query])[0].astype(np.float64)
    weight = SETTINGS.retrieval.sentence_weight
    assert 0 < weight < 1
    for w in (weight, 0.0):
        hits = top_hits(postgres, embedder, query, k=4, search="dense", sentence_weight=w)  # type: ignore[arg-type]
        assert len(hits) == 4
        expected = [  # the default preset has no overlap: a chunk's core is its span
            _expected_score(shared.url, q, w, hit.batch_key, hit.chunk_id,
                            (hit.document_id, hit.start_char, hit.end_char))
            for hit in hits
        ]  # fmt: skip
        assert [h.score for h in hits] == pytest.approx(expected, abs=1e-4)
        assert [h.dense_score for h in hits] == [h.score for h in hits]
        assert expected == sorted(expected, reverse=True)


def test_a_sentence_in_an_overlap_counts_for_the_chunk_whose_core_holds_it(
    database_url: str, exported_model: ModelManifest, tmp_path: Path
) -> None:
    """With overlapping chunks (32 tokens carried over, small chunks so every section has
    several), a query that is one overlapped sentence word for word does not lift the chunk that
    merely repeats it: that chunk keeps the score of its own core."""
    small = {"overlap_tokens": 32, "chunk_size_min": 16, "chunk_size_target": 40}
    overrides = ChunkingSettings(overrides={**small, "chunk_size_max": 60})
    settings = SETTINGS.model_copy(update={"chunking": overrides})
    resources = pipeline_resources(database_url)
    postgres: PostgresResource = resources["seams_postgres"]  # type: ignore[assignment]
    key = register_folder(postgres, write_corpus(tmp_path / "docs"))
    instance = dg.DagsterInstance.ephemeral()
    materialize_batch(instance, resources, key, settings=settings)
    instance.dispose()

    chunks = rows(
        database_url,
        "SELECT chunk_id, document_id, start_char, overlap_end, end_char FROM seams.chunks"
        " WHERE overlap_end > start_char ORDER BY document_id, chunk_index",
    )
    assert chunks, "the settings must produce overlapping chunks"
    chunk_id, document_id, start, core, end = chunks[0]
    in_overlap = rows(
        database_url,
        "SELECT text FROM seams.semantic_boundaries WHERE document_id = %s AND start_char >= %s"
        " AND end_char <= %s ORDER BY start_char LIMIT 1",
        document_id, start, core,
    )  # fmt: skip
    assert in_overlap, "the overlap must hold a whole stored sentence"
    sentence = in_overlap[0][0]
    embedder: OnnxEmbedderResource = resources["seams_embedder"]  # type: ignore[assignment]
    q = embedder.embed([sentence])[0].astype(np.float64)
    hits = {h.chunk_id: h for h in top_hits(postgres, embedder, sentence, k=10)}  # type: ignore[arg-type]
    assert chunk_id in hits
    w = SETTINGS.retrieval.sentence_weight
    expected = _expected_score(database_url, q, w, key, chunk_id, (document_id, core, end))
    assert hits[chunk_id].dense_score == pytest.approx(expected, abs=1e-4)
    (chunk_vector,) = _vectors(
        database_url, "SELECT embedding::text FROM seams.chunk_index WHERE chunk_id = %s", chunk_id
    )
    repeated = (1 - w) * float(q @ chunk_vector) + w * 0.99
    assert hits[chunk_id].dense_score < repeated  # not the repeat
