"""EmbeddingCache against a real PostgreSQL: hits skip the model, misses are embedded once."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from seams.errors import EmbeddingError
from seams.resources.postgres import PostgresResource, close_pool
from seams.storage.embedding_cache import EmbeddingCache
from tests.support.concurrency import run_together


@pytest.fixture
def cache(database_url: str) -> Iterator[EmbeddingCache]:
    yield EmbeddingCache(PostgresResource(url=database_url))
    close_pool(database_url)


class FakeModel:
    """Deterministic unit vectors per text; records what it was asked to embed."""

    def __init__(self, dim: int = 8) -> None:
        self.dim = dim
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        rows = []
        for text in texts:
            rng = np.random.default_rng(abs(hash(text)) % 2**32)
            v = rng.normal(size=self.dim).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.stack(rows) if rows else np.zeros((0, self.dim), np.float32)


def test_misses_are_embedded_once_and_hits_skip_the_model(cache: EmbeddingCache) -> None:
    model = FakeModel()
    texts = ["alpha", "beta", "alpha", "gamma ü\n", ""]
    first, stats = cache.get_or_embed("m1", texts, model)
    assert model.calls == [["alpha", "beta", "gamma ü\n", ""]]  # each distinct text once
    assert (stats.texts, stats.hits, stats.embedded, stats.stored) == (5, 0, 4, 4)
    assert first.shape == (5, 8) and first.dtype == np.float32
    np.testing.assert_array_equal(first[0], first[2])

    again, stats = cache.get_or_embed("m1", texts, model)
    assert len(model.calls) == 1 and stats.hits == 5 and stats.hit_rate == 1.0
    np.testing.assert_array_equal(again, first)  # exact float32 round trip

    mixed, stats = cache.get_or_embed("m1", ["beta", "delta"], model)
    assert model.calls[-1] == ["delta"] and (stats.hits, stats.embedded) == (1, 1)
    np.testing.assert_array_equal(mixed[0], first[1])


def test_entries_are_per_model_and_per_exact_text(cache: EmbeddingCache) -> None:
    model = FakeModel()
    cache.get_or_embed("m1", ["same text"], model)
    assert cache.get("m2", ["same text"]).misses == 1
    assert cache.get("m1", ["same text "]).misses == 1  # a space makes another text
    lookup = cache.get("m1", ["same text", "other"])
    assert (lookup.hits, lookup.misses, lookup.missing) == (1, 1, [1])


def test_put_is_idempotent_and_rejects_bad_embeddings(cache: EmbeddingCache) -> None:
    vectors = np.eye(3, 4, dtype=np.float32)
    assert cache.put("m", ["a", "b", "c"], vectors) == 3
    assert cache.put("m", ["a", "b", "c"], vectors * 2) == 0  # first write wins
    np.testing.assert_array_equal(cache.get("m", ["b"]).vectors[0], vectors[1])
    with pytest.raises(EmbeddingError, match="shape"):
        cache.put("m", ["a"], vectors)
    with pytest.raises(EmbeddingError, match="NaN"):
        cache.put("m", ["x"], np.full((1, 4), np.nan, dtype=np.float32))
    with pytest.raises(EmbeddingError, match="embed returned shape"):
        cache.get_or_embed("m", ["new"], lambda texts: np.zeros((2, 4), np.float32))
    assert cache.get("m", ["new"]).misses == 1


def test_concurrent_overlapping_stores_neither_deadlock_nor_duplicate(
    cache: EmbeddingCache, database_url: str
) -> None:
    texts = [f"sentence {i}" for i in range(3000)]
    vectors = np.random.default_rng(0).normal(size=(3000, 16)).astype(np.float32)
    halves = [(texts[:2000], vectors[:2000]), (texts[1000:][::-1], vectors[1000:][::-1])]
    added: list[int] = []
    errors = run_together(
        *(lambda part=part: added.append(cache.put("m", *part)) for part in halves), timeout=60
    )
    assert errors == [] and sum(added) == 3000
    lookup = cache.get("m", texts)
    assert lookup.hits == 3000
    np.testing.assert_array_equal(np.stack(lookup.vectors), vectors)
