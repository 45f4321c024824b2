"""The dense signal of a query's pool: the nearest visible chunk vectors (`dense`), and every
pooled chunk's cosine with the query, re-scored by its best sentence (`sentence_rerank`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from seams.storage.search.dense import (
    IndexTarget,
    chunk_distances,
    configure_scan,
    nearest_vectors,
    rescored,
)
from seams.storage.search.signals import ChunkKey, SignalScores


@dataclass(frozen=True)
class DenseSignal:
    """A query's nearest chunk vectors of the index's mode and model (`read_dense`)."""

    target: IndexTarget
    vector: np.ndarray = field(repr=False, compare=False)
    sentence_weight: float
    nearest: tuple[tuple[str, str, str, float], ...]
    """(batch_key, document_id, chunk_id, cosine distance), nearest first."""
    notes: tuple[str, ...] = ()
    direct: bool = True
    """Whether the connection reads chunk vectors itself (a tenant's does not:
    `dense.configure_scan`)."""

    @property
    def top(self) -> tuple[ChunkKey, ...]:
        return tuple((b, d, c) for b, d, c, _ in self.nearest)

    def scored(self, conn: psycopg.Connection[Any], keys: Sequence[ChunkKey]) -> SignalScores:
        """Every key's dense score (1 - cosine distance, mixed with its best sentence's cosine
        by `sentence_weight`; a chunk without a visible vector scores 0), and the ranks of the
        nearest by that score (ties: chunk_id, batch_key)."""
        if not keys:
            return SignalScores({}, {})
        have = set(self.top)
        extra = chunk_distances(
            conn,
            self.vector,
            self.target,
            [k for k in keys if k not in have],
            direct=self.direct,
        )
        every = list(self.nearest) + extra
        if self.sentence_weight > 0:
            every = rescored(conn, self.vector, every, self.target.model_id, self.sentence_weight)
        scores = {(b, d, c): 1.0 - dist for b, d, c, dist in every}
        ranked = sorted(self.nearest, key=lambda r: (-scores[r[:3]], r[2], r[0]))
        return SignalScores(scores, {r[:3]: rank for rank, r in enumerate(ranked, 1)})


def read_dense(
    conn: psycopg.Connection[Any],
    target: IndexTarget,
    vector: np.ndarray,
    size: int,
    collections: Sequence[str] | None,
    sentence_weight: float,
) -> DenseSignal:
    """The `size` nearest visible chunk vectors of `vector` among `collections`."""
    direct = configure_scan(conn, size)
    nearest = nearest_vectors(conn, vector, target, size, collections, direct=direct)
    return DenseSignal(target, vector, sentence_weight, tuple(nearest), direct=direct)
