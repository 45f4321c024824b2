"""`EmbeddingCache`: embeddings by (model_id, sha256 of the exact text) in `seams.embedding_cache`.

Reruns and backfills (a new threshold, a new chunk size) re-embed nothing they embedded before:
`get_or_embed` looks every text up, sends only the misses (each distinct text once) to the model,
stores them, and returns the full matrix in input order. The key is the exact text: any change,
even whitespace, is a different text. `model_id` must name everything that changes a vector
(weights, quantisation, pooling); Seams' embedders put all of that in their `model_id`.

Stores are append-only and idempotent (`ON CONFLICT DO NOTHING`, rows inserted in key order so
two processes caching overlapping texts cannot deadlock), so a lost race only costs a skipped row.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import psycopg
from psycopg import sql

from seams.errors import EmbeddingError, StorageError
from seams.storage import schema
from seams.storage.connections import ConnectionSource, connection_lost

Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class CacheLookup:
    """The cached vector of each text, in input order (None where the cache has none)."""

    vectors: list[np.ndarray | None]

    @property
    def hits(self) -> int:
        return sum(v is not None for v in self.vectors)

    @property
    def misses(self) -> int:
        return len(self.vectors) - self.hits

    @property
    def missing(self) -> list[int]:
        """Positions of the texts with no cached vector."""
        return [i for i, v in enumerate(self.vectors) if v is None]


@dataclass(frozen=True)
class CacheStats:
    """What `get_or_embed` did: report these as asset metadata (`cache_hits`, ...)."""

    texts: int
    hits: int
    embedded: int
    """Distinct texts sent to the model (a text repeated in the input is embedded once)."""
    stored: int
    """Rows newly stored (less than `embedded` when a concurrent run stored some first)."""

    @property
    def hit_rate(self) -> float:
        return self.hits / self.texts if self.texts else 1.0


def text_sha256(text: str) -> bytes:
    """The cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    """Look up, store, and fill-through embeddings for one Seams database."""

    def __init__(self, postgres: ConnectionSource) -> None:
        self.postgres = postgres

    def get(self, model_id: str, texts: Sequence[str]) -> CacheLookup:
        """The cached float32 vector of each text of `texts` under `model_id`, or None."""
        digests = [text_sha256(t) for t in texts]
        found = self._fetch(model_id, list(dict.fromkeys(digests)))
        return CacheLookup([found.get(d) for d in digests])

    def put(self, model_id: str, texts: Sequence[str], embeddings: np.ndarray) -> int:
        """Store `embeddings[i]` for `texts[i]`; existing entries are kept. Returns rows added."""
        matrix = _check_matrix(embeddings, len(texts))
        if not len(texts):
            return 0
        rows = dict(zip((text_sha256(t) for t in texts), matrix.astype(">f4"), strict=True))
        table = schema.EMBEDDING_CACHE.identifier()
        try:
            with self.postgres.connection() as conn, conn.transaction():
                conn.execute(
                    "CREATE TEMP TABLE seams_cache_in (text_sha256 bytea, embedding vector) "
                    "ON COMMIT DROP"
                )
                with conn.cursor().copy(
                    "COPY seams_cache_in (text_sha256, embedding) FROM STDIN (FORMAT BINARY)"
                ) as copy:
                    copy.set_types(["bytea", "vector"])
                    for row in rows.items():
                        copy.write_row(row)
                inserted = conn.execute(
                    sql.SQL(
                        "INSERT INTO {} (model_id, text_sha256, embedding) "
                        "SELECT %s, text_sha256, embedding FROM seams_cache_in "
                        "ORDER BY text_sha256 ON CONFLICT DO NOTHING"
                    ).format(table),
                    (model_id,),
                ).rowcount
        except psycopg.OperationalError as exc:
            raise connection_lost(self.postgres.redacted_url, "storing embeddings", exc) from exc
        return inserted

    def get_or_embed(
        self, model_id: str, texts: Sequence[str], embed: Embed
    ) -> tuple[np.ndarray, CacheStats]:
        """The (n, d) float32 embeddings of `texts`, calling `embed` only for uncached texts.

        `embed` receives each distinct missing text once and must return an (m, d) array; what
        it returns is stored before this returns, so a crash later in the run loses nothing.
        """
        lookup = self.get(model_id, texts)
        pending = list(dict.fromkeys(texts[i] for i in lookup.missing))
        fresh: dict[str, np.ndarray] = {}
        stored = 0
        if pending:
            vectors = _check_matrix(np.asarray(embed(pending)), len(pending), source="embed")
            stored = self.put(model_id, pending, vectors)
            fresh = dict(zip(pending, vectors, strict=True))
        pairs = zip(lookup.vectors, texts, strict=True)
        rows = [v if v is not None else fresh[t] for v, t in pairs]
        matrix = _stack(rows, model_id)
        stats = CacheStats(len(texts), lookup.hits, len(pending), stored)
        return matrix, stats

    def _fetch(self, model_id: str, digests: list[bytes]) -> dict[bytes, np.ndarray]:
        if not digests:
            return {}
        query = sql.SQL(
            "SELECT text_sha256, embedding FROM {} WHERE model_id = %s AND text_sha256 = ANY(%s)"
        ).format(schema.EMBEDDING_CACHE.identifier())
        try:
            with self.postgres.connection() as conn, conn.cursor(binary=True) as cur:
                cur.execute(query, (model_id, digests))
                return {bytes(d): v for d, v in cur.fetchall()}
        except psycopg.OperationalError as exc:
            raise connection_lost(self.postgres.redacted_url, "reading embeddings", exc) from exc


def _check_matrix(embeddings: np.ndarray, rows: int, *, source: str = "embeddings") -> np.ndarray:
    matrix = np.asarray(embeddings, dtype=np.float32)
    if rows == 0 and matrix.size == 0:
        return matrix.reshape(0, matrix.shape[-1] if matrix.ndim == 2 else 0)
    if matrix.ndim != 2 or matrix.shape[0] != rows or matrix.shape[1] == 0:
        raise EmbeddingError(f"{source} returned shape {matrix.shape}, expected ({rows}, dim)")
    if not np.isfinite(matrix).all():
        raise EmbeddingError(f"{source} returned NaN or infinite values: not cached")
    return matrix


def _stack(rows: list[np.ndarray], model_id: str) -> np.ndarray:
    if not rows:
        return np.zeros((0, 0), dtype=np.float32)
    dims = {r.shape[0] for r in rows}
    if len(dims) != 1:
        raise StorageError(
            f"the embedding cache holds vectors of dimensions {sorted(dims)} for model "
            f"{model_id!r}: model_id must change whenever the model does; delete its rows with "
            "DELETE FROM seams.embedding_cache WHERE model_id = '<id>'"
        )
    return np.stack(rows).astype(np.float32, copy=False)
