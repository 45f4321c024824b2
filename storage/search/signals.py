"""What a ranking signal gives a query's candidate pool, the one shape every signal has.

A signal reads in two steps inside the answer's snapshot: its own best `pool` chunks (`top`,
best first), which the pool unites with the other signals' tops; then a score for every chunk
of that union (`scored`), so each entry of the pool carries every signal's score and the
fusion can weigh them with any weight. `signal_dense` (cosine, re-scored by the best sentence)
and `signal_lexical` (BM25) are the two signals today; a new one is a module beside them with
this shape, a score field on `pool.PoolEntry` and its term in `pool.ranked_entries`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg

ChunkKey = tuple[str, str, str]
"""(batch_key, document_id, chunk_id): one chunk of the index."""


@dataclass(frozen=True)
class SignalScores:
    """A signal's scores for every chunk of a pool, and the ranks (1-based) of its own top."""

    scores: dict[ChunkKey, float]
    ranks: dict[ChunkKey, int]


class Signal(Protocol):
    """One signal's read of a query: its own best chunks, then scores for any chunks."""

    @property
    def top(self) -> tuple[ChunkKey, ...]:
        """Its best chunks for the query, best first (what it adds to the pool)."""
        ...

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader should know about this read (e.g. nothing indexed for it)."""
        ...

    def scored(self, conn: psycopg.Connection[Any], keys: Sequence[ChunkKey]) -> SignalScores:
        """The score of each of `keys` (the pool) in the same snapshot as `top`."""
        ...
