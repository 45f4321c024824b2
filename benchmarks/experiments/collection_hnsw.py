"""How much faster is one small collection's dense search with its own HNSW index?

`seams.chunk_index` holds every collection's vectors. A search of one collection either walks
the model's HNSW index over all its rows, dropping other collections' rows as it goes (the
iterative scan keeps walking until the pool is full), or the model's index over that
collection's rows alone (`vector_indexes.ensure_model_index(..., collection=...)`). This builds
a throwaway embedded PostgreSQL with `--rows` unit vectors (around 24 topics, as embeddings of a
corpus are) of which `--share` lie in one collection, published as the pipeline writes them,
then times `dense.nearest_vectors` of that collection (the product's statement, a pool of 40,
one session, prepared) with the collection's index, and again with it dropped; the recall of
the top 10 against numpy's exact order is printed for both.

    nice -n 10 .venv/bin/python benchmarks/experiments/collection_hnsw.py --rows 50000
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from psycopg import sql

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import vector_probes as corpus  # noqa: E402
from seams.resources.postgres import PostgresResource  # noqa: E402
from seams.storage import schema, vector_indexes  # noqa: E402
from seams.storage.search.dense import IndexTarget, configure_scan, nearest_vectors  # noqa: E402
from tests.storage.test_collection_vector_indexes import publish_in  # noqa: E402
from tests.storage.test_vector_indexes import unit_vectors  # noqa: E402

TENANT = "tenant"


def publish(postgres: PostgresResource, collection: str, key: str, vectors: np.ndarray) -> None:
    """Batch `key` of `collection`: its chunks, then their vectors (which publishes it); no
    index yet (each is built and timed on its own)."""
    written = publish_in(postgres, collection, key, corpus.MODEL, vectors, make_indexes=False)
    assert key in written["published"], written["held"]


def timed(
    postgres: PostgresResource, queries: np.ndarray, tenant: np.ndarray
) -> tuple[float, float]:
    """Median ms of one collection's nearest-vector probe, and its mean recall@10."""
    target = IndexTarget(corpus.MODE, corpus.MODEL)
    times, recalls = [], []
    with postgres.connection() as conn:
        for warm in (True, False):
            for query in queries:
                with conn.transaction():
                    configure_scan(conn, corpus.POOL)
                    started = time.perf_counter()
                    found = nearest_vectors(conn, query, target, corpus.POOL, [TENANT])
                    elapsed = (time.perf_counter() - started) * 1000
                if warm:
                    continue
                times.append(elapsed)
                best = sorted(found, key=lambda r: r[3])[:10]
                exact = np.argsort(-(tenant.astype(np.float64) @ query.astype(np.float64)))[:10]
                recalls.append(len({int(r[2][1:]) for r in best} & set(exact.tolist())) / 10)
    return statistics.median(times), statistics.mean(recalls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus.arguments(parser)
    args = parser.parse_args()
    own = max(1, round(args.rows * args.share))
    others = unit_vectors(args.rows - own, args.dimension, seed=1)
    tenant = unit_vectors(own, args.dimension, seed=2)
    queries = corpus.probes(tenant, args.queries, args.dimension)

    with corpus.database("seams-collection-hnsw-") as (_, postgres):
        started = time.perf_counter()
        publish(postgres, schema.DEFAULT_COLLECTION, "b0", others)
        publish(postgres, TENANT, "b1", tenant)
        print(f"wrote {args.rows:,} vectors ({own:,} in {TENANT}) in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        with postgres.connection() as conn:
            started = time.perf_counter()
            vector_indexes.ensure_model_index(conn, corpus.MODEL, args.dimension)
            model_seconds = time.perf_counter() - started
            started = time.perf_counter()
            vector_indexes.ensure_model_index(conn, corpus.MODEL, args.dimension, collection=TENANT)
            own_seconds = time.perf_counter() - started
            conn.execute("ANALYZE seams.chunk_index")
        with_ms, with_recall = timed(postgres, queries, tenant)
        with postgres.connection() as conn:
            name = vector_indexes.index_name(conn, corpus.MODEL, args.dimension, TENANT)
            assert name is not None
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(schema.SCHEMA, name)))
        without_ms, without_recall = timed(postgres, queries, tenant)
    print(f"HNSW build: model's index {model_seconds:.1f} s, the collection's {own_seconds:.2f} s")
    print(
        f"one-collection probe (pool {corpus.POOL}, median of {args.queries}, recall@10 vs exact):"
    )
    print(f"  collection's own index: {with_ms:.2f} ms (recall {with_recall:.3f})")
    print(f"  model's index, filtered: {without_ms:.2f} ms (recall {without_recall:.3f})")
    print(f"  ratio: {without_ms / with_ms:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
