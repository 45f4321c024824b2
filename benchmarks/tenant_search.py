"""Dense search latency of a tenant, reading vectors itself (the earlier grants) or through the
tenants' search functions (`seams.storage.tenant_search`), with the owner's direct read as the
peer in the same run.

Builds a throwaway embedded PostgreSQL with `--rows` unit vectors of one model (around 24
topics, as embeddings of a corpus are): `--share` of them in collection `tenant` (read by
tenant `acme`), as many in `rival` (tenant `rival`), the rest in `default` (no tenant), each
collection but `default` with the model's index over its own rows, as the pipeline makes them.
Then, per round and in rotating order, `--queries` queries of the dense signal as search reads
it (`signal_dense.read_dense`: a pool of 40 among `tenant`, then `DenseSignal.scored` of the
pool plus 40 other chunks of `tenant`, the exact distances a hybrid pool asks for), each in
its own transaction:

- `owner`: the tables' owner, reading the vectors directly;
- `tenant, direct`: acme's role with SELECT on the vectors granted again (the earlier shape:
  its own SQL reads them under row-level security);
- `tenant, functions`: acme's role without it, through the functions.

Medians in ms over every timed query of all rounds (first round of each a warm-up), and the
spread of the per-round medians.

    nice -n 10 .venv/bin/python benchmarks/tenant_search.py --rows 50000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import vector_probes as corpus  # noqa: E402
from seams.resources.postgres import PostgresResource, close_pool  # noqa: E402
from seams.storage import tenants  # noqa: E402
from seams.storage.search.dense import IndexTarget  # noqa: E402
from seams.storage.search.signal_dense import read_dense  # noqa: E402
from tests.storage.test_collection_vector_indexes import publish_in  # noqa: E402
from tests.storage.test_vector_indexes import unit_vectors  # noqa: E402

TENANT = "tenant"
WAYS = ("owner", "tenant, direct", "tenant, functions")


def dense_signal(
    conn: psycopg.Connection[Any], query: np.ndarray, extra: list[tuple[str, str, str]]
) -> float:
    """ms of one dense signal read as search reads it, in its own transaction."""
    target = IndexTarget(corpus.MODE, corpus.MODEL)
    started = time.perf_counter()
    with conn.transaction():
        signal = read_dense(conn, target, query, corpus.POOL, [TENANT], 0.0)
        keys = [*signal.top, *(k for k in extra if k not in set(signal.top))]
        scores = signal.scored(conn, keys)
    elapsed = (time.perf_counter() - started) * 1000
    assert len(signal.nearest) == corpus.POOL and len(scores.scores) == len(keys)
    return elapsed


def vectors_granted(owner: psycopg.Connection[Any], granted: bool) -> None:
    """The tenants' group reads `chunk_index` whole (the earlier grants), or not."""
    group = sql.Identifier(tenants.GROUP)
    if granted:
        owner.execute(sql.SQL("GRANT SELECT ON seams.chunk_index TO {}").format(group))
    else:
        owner.execute(sql.SQL("REVOKE SELECT ON seams.chunk_index FROM {}").format(group))
        tenants.ensure_group(owner)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    corpus.arguments(parser)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    own = max(corpus.POOL * 3, round(args.rows * args.share))
    others = unit_vectors(args.rows - 2 * own, args.dimension, seed=1)
    mine = unit_vectors(own, args.dimension, seed=2)
    rival = unit_vectors(own, args.dimension, seed=4)
    queries = corpus.probes(mine, args.queries, args.dimension)

    with corpus.database("seams-tenant-search-") as (url, owner_resource):
        started = time.perf_counter()
        for collection, key, vectors in (
            ("default", "b0", others),
            (TENANT, "b1", mine),
            ("rival", "b2", rival),
        ):
            written = publish_in(owner_resource, collection, key, corpus.MODEL, vectors)
            assert key in written["published"], written["held"]
        with psycopg.connect(url, autocommit=True) as owner:
            tenants.sync_tenants(owner, {TENANT: "acme", "rival": "rival", "default": None})
            owner.execute("ANALYZE seams.chunk_index")
            extra = owner.execute(
                "SELECT batch_key, document_id, chunk_id FROM seams.chunk_index"
                " WHERE collection = %s ORDER BY chunk_id OFFSET %s LIMIT %s",
                (TENANT, corpus.POOL, corpus.POOL),
            ).fetchall()
        print(f"wrote {args.rows:,} vectors ({own:,} in {TENANT}) in "
              f"{time.perf_counter() - started:.0f} s")  # fmt: skip
        tenant_resource = PostgresResource(url=tenants.tenant_url(url, "acme"), max_connections=1)
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        per_round: dict[str, list[float]] = {way: [] for way in WAYS}
        try:
            with (
                psycopg.connect(url, autocommit=True) as owner,
                owner_resource.connection() as owner_conn,
                tenant_resource.connection() as tenant_conn,
            ):
                for round_number in range(args.rounds + 1):
                    order = WAYS[round_number % 3 :] + WAYS[: round_number % 3]
                    for way in order:
                        vectors_granted(owner, way == "tenant, direct")
                        conn = owner_conn if way == "owner" else tenant_conn
                        taken = [dense_signal(conn, q, extra) for q in queries]
                        if round_number:  # the first round warms caches and plans
                            times[way] += taken
                            per_round[way].append(statistics.median(taken))
                vectors_granted(owner, False)
        finally:
            close_pool(tenant_resource.url)
    print(
        f"dense signal among one collection ({own:,} of {args.rows:,} vectors, {args.dimension}-d;"
        f" pool {corpus.POOL} + {corpus.POOL} exact distances), {args.rounds} rounds x "
        f"{args.queries} queries:"
    )
    for way in WAYS:
        spread = ", ".join(f"{m:.2f}" for m in per_round[way])
        print(f"  {way:18} median {statistics.median(times[way]):6.2f} ms (rounds: {spread})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
