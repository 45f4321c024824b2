"""The growing-corpus benchmark's pure parts: its synthetic corpus is deterministic, its rows are
what the storage layer accepts, and its exactness and size arguments judge what they claim to."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from benchmarks import scale
from seams.storage import schema
from seams.storage.frame_codec import coerce_frame


@pytest.fixture(scope="module")
def corpus() -> scale.Corpus:
    return scale.Corpus()


def test_a_batch_is_the_same_rows_whenever_it_is_made(corpus: scale.Corpus) -> None:
    first, again = corpus.batch(3), scale.Corpus().batch(3)
    assert first.sentences == again.sentences
    assert np.array_equal(first.chunk_vectors, again.chunk_vectors)
    other = corpus.batch(4)
    assert other.sentences != first.sentences
    assert other.document_id(0) != first.document_id(0)  # batches never share a document


def test_frames_are_accepted_by_every_asset_table_with_consistent_spans(
    corpus: scale.Corpus,
) -> None:
    batch = corpus.batch(0)
    frames = batch.frames()
    assert list(frames) == list(schema.ASSET_TABLES)  # pipeline order: the write publishes
    for name, frame in frames.items():
        # `write_table` fills in the batch's collection before it checks the rest, as here.
        written = frame.assign(**{schema.COLLECTION: schema.DEFAULT_COLLECTION})
        coerce_frame(schema.ASSET_TABLES[name], written, [batch.key], asset=name)
    chunks, documents = frames["chunks"], frames["extracted_text"].set_index("document_id")
    assert len(chunks) == scale.CHUNKS_PER_BATCH
    assert len(frames["semantic_boundaries"]) == scale.CHUNKS_PER_BATCH * scale.SENTENCES_PER_CHUNK
    for row in chunks.head(25).itertuples():
        assert documents.loc[row.document_id, "text"][row.start_char : row.end_char] == row.text
    for row in frames["semantic_boundaries"].head(25).itertuples():
        assert documents.loc[row.document_id, "text"][row.start_char : row.end_char] == row.text
    norms = np.linalg.norm(np.stack(frames["chunk_index"]["embedding"]), axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_word_frequencies_follow_a_long_tail(corpus: scale.Corpus) -> None:
    batch = corpus.batch(0)
    words = " ".join(batch.sentences).lower().replace(".", "").split()
    counts = sorted(np.unique(words, return_counts=True)[1], reverse=True)
    chunks = scale.CHUNKS_PER_BATCH
    assert counts[0] > chunks / 2  # a term in most chunks: the exact BM25 read must go deeper
    assert sum(c == 1 for c in counts) > 100  # and many rare ones


def test_queries_are_words_of_the_corpus_and_deterministic(corpus: scale.Corpus) -> None:
    first = scale.queries(corpus, 2, 6)
    assert [q.text for q in first] == [q.text for q in scale.queries(corpus, 2, 6)]
    text = " ".join(" ".join(corpus.batch(n).sentences) for n in range(2)).lower()
    for query in first:
        assert len(query.text.split()) == 3
        assert all(word in text for word in query.text.split())
        assert abs(float(np.linalg.norm(query.vector)) - 1.0) < 1e-5


def test_top_k_agreement_counts_ties_as_interchangeable() -> None:
    truth = [9.0, 8.0, 7.0, 7.0, 6.0]
    assert scale.same_top([9.0, 8.0, 7.0, 7.0, 6.0, 5.0], truth, 5)
    assert not scale.same_top([9.0, 8.0, 7.0, 6.0, 6.0], truth, 5)
    assert not scale.same_top([9.0, 8.0, 7.0], truth, 5)
    assert scale.recall_by_score([9.0, 8.0, 7.0, 6.0, 6.0], truth, 5) == 1.0
    assert scale.recall_by_score([9.0, 8.0, 5.0, 4.0, 3.0], truth, 5) == 0.4
    assert scale.recall_by_score([], [], 5) == 1.0


def test_sizes_must_be_ascending_whole_batches() -> None:
    assert scale.parse_sizes("10000,100000") == [10_000, 100_000]
    for bad in ("100000,10000", "1500", "", "10000,10000"):
        with pytest.raises(argparse.ArgumentTypeError, match="--sizes"):
            scale.parse_sizes(bad)


def test_the_before_read_is_the_fixed_depth_one_only_inside_and_tables_show_every_read() -> None:
    from seams.storage.search import lexical

    exact = lexical.exact_read_of
    with scale.fixed_depth_reads():
        assert lexical.exact_read_of is not exact
    assert lexical.exact_read_of is exact
    with pytest.raises(RuntimeError), scale.fixed_depth_reads(7):
        raise RuntimeError("a failed search restores the exact read")
    assert lexical.exact_read_of is exact
    spread = {"median": 1, "max": 3}
    read = {"p50_ms": 1.0, "p95_ms": 2.0, "mean_ms": 1.5}
    figures = {
        "by_read": {
            "exact, whole pool": {"top_k_equal_share": 1.0, "recall_at_k": 1.0, "read": read,
                                  "rounds": spread, "depth": spread, "scored": spread},
            "depth 200": {"top_k_equal_share": 0.7, "recall_at_k": 0.9, "read": read,
                          "rounds": spread, "depth": spread, "scored": spread},
        },
        "exhaustive": read,
    }  # fmt: skip
    lines = scale.lexical_table([("100,000", figures)]).splitlines()
    assert [line.split(" | ")[1] for line in lines[2:]] == [
        "exact, whole pool", "depth 200", "exhaustive"
    ]  # fmt: skip
    assert "| 0.70 | 0.900 |" in lines[3]
