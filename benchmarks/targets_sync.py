"""Target sync throughput per store, and what a backfill that changes 1 % of the chunks sends.

Builds a throwaway embedded PostgreSQL (a temp dir, stopped and deleted afterwards) holding a
published corpus of `--chunks` chunks (documents of 10 chunks, batches of 100 documents,
written through `write_table` as the pipeline writes them; 384-d random unit vectors), and for
each store (pgvector in another database of the same server, LanceDB in a folder, Qdrant in
qdrant-client's local mode, Chroma's own server started by `chroma run`, Milvus Lite in a
file) measures:

- the first sync into an empty store (records/s: every record sent), median of `--runs` runs,
  each into a fresh store, with the machine's 1-minute load average after each;
- `--runs` backfills, each rewriting every batch with 1 % of the chunks' texts changed (then
  changed back; the chunking config unchanged), each store synced after each: the records it
  sends and deletes, and the time of that sync (medians).

A settings change that changes the chunking config gives every chunk a new `config_hash`, a
provenance field of every record: such a backfill re-sends every record, and is not what this
measures.

    .venv/bin/python benchmarks/targets_sync.py --chunks 10000
    .venv/bin/python benchmarks/targets_sync.py --chunks 10000 \
        --json benchmarks/results/targets_sync.json
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import psycopg

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.header import write_result  # noqa: E402
from seams.chunking.ids import assign_chunk_ids  # noqa: E402
from seams.environment import SeamsEnvironment  # noqa: E402
from seams.resources.database import DATA_DATABASE, EmbeddedPostgres, database_url_for  # noqa: E402
from seams.resources.embedded_server import server_tempdir  # noqa: E402
from seams.resources.postgres import PostgresResource, close_pool  # noqa: E402
from seams.storage import schema  # noqa: E402
from seams.storage.index_publication import write_and_publish  # noqa: E402
from seams.storage.partition_tables import write_table  # noqa: E402
from seams.storage.targets import TargetStore, open_target  # noqa: E402
from seams.storage.targets.sync import sync_target  # noqa: E402
from seams.targets import TargetSettings  # noqa: E402

MODEL, DIMENSION = "bench-model", 384
CHUNKS_PER_DOC, DOCS_PER_BATCH = 10, 100
KINDS = ("pgvector", "lancedb", "qdrant", "chroma", "milvus")


def texts_of(doc: int, changed: set[tuple[int, int]]) -> list[str]:
    return [
        f"document {doc} chunk {i} about topic {(doc * 7 + i) % 97}"
        + (" (revised)" if (doc, i) in changed else "")
        for i in range(CHUNKS_PER_DOC)
    ]


def write_batch(
    postgres: PostgresResource, batch: int, changed: set[tuple[int, int]], register: bool
) -> None:
    key = f"b{batch:05d}"
    docs = range(batch * DOCS_PER_BATCH, (batch + 1) * DOCS_PER_BATCH)
    if register:
        with postgres.connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO seams.batches (batch_key, source, document_count)"
                " VALUES (%s, 'b', %s)",
                (key, len(docs)),
            )
            conn.cursor().executemany(
                "INSERT INTO seams.batch_documents (batch_key, document_id, source_uri,"
                " source_sha256, size_bytes) VALUES (%s, %s, %s, %s, 0)",
                [(key, f"d{d}", f"file:///corpus/d{d}.txt", f"sha-{d}") for d in docs],
            )
    chunk_rows, index_rows = [], []
    rng = np.random.default_rng(batch)
    for doc in docs:
        texts = texts_of(doc, changed)
        for i, (chunk_id, text) in enumerate(
            zip(assign_chunk_ids(f"d{doc}", texts), texts, strict=True)
        ):
            chunk_rows.append({
                "batch_key": key, "chunk_id": chunk_id, "document_id": f"d{doc}",
                "chunk_index": i, "total_chunks": CHUNKS_PER_DOC, "text": text,
                "start_char": 100 * i, "end_char": 100 * i + len(text), "overlap_start": 100 * i,
                "overlap_end": 100 * i, "token_count": 12, "sentence_count": 1,
                "page_start": None, "page_end": None, "section": "", "cohesion": None,
                "boundary_method": "semantic", "strategy": "context_aware", "metadata": {},
                "run_id": "r", "config_hash": "cfg", "model_id": "boundary",
                "source_sha256": f"sha-{doc}", "code_version": "v",
            })  # fmt: skip
            vector = rng.normal(size=DIMENSION) if (doc, i) in changed else _stable(chunk_id)
            unit = (vector / np.linalg.norm(vector)).astype(np.float32)
            index_rows.append({
                "batch_key": key, "chunk_id": chunk_id, "document_id": f"d{doc}",
                "mode": "pooled", "model_id": MODEL, "embedding": unit,
                "text_search_config": "english",
            })  # fmt: skip
    chunks = pd.DataFrame(
        chunk_rows, columns=["batch_key", *(c.name for c in schema.CHUNKS.data_columns)]
    )
    index = pd.DataFrame(
        index_rows, columns=["batch_key", *(c.name for c in schema.CHUNK_INDEX.data_columns)]
    )
    write_table(postgres, schema.CHUNKS, chunks, [key], run_id="r")
    written = write_and_publish(postgres, index, [key], run_id="r")
    assert key in written.published, written.held


def _stable(chunk_id: str) -> np.ndarray:
    return np.random.default_rng(int(chunk_id[:12], 16)).normal(size=DIMENSION)


def store_settings(kind: str, folder: Path, run: int) -> TargetSettings:
    if kind == "pgvector":
        return TargetSettings(kind="pgvector", table=f"bench_{run}", url_env="BENCH_TARGET_URL")
    if kind == "lancedb":
        return TargetSettings(kind="lancedb", table="bench", path=str(folder / f"lance{run}"))
    if kind == "chroma":  # one server (`main` starts it), a collection per run
        return TargetSettings(kind="chroma", collection=f"bench_{run}", url_env="BENCH_CHROMA_URL")
    if kind == "milvus":
        return TargetSettings(kind="milvus", collection="bench", path=str(folder / f"m{run}.db"))
    return TargetSettings(kind="qdrant", collection="bench", path=str(folder / f"qdrant{run}"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--chunks", type=int, default=10_000, help="published chunks (default 10000)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)

    batches = max(1, args.chunks // (CHUNKS_PER_DOC * DOCS_PER_BATCH))
    total = batches * DOCS_PER_BATCH * CHUNKS_PER_DOC
    rng = np.random.default_rng(1)
    picks = rng.choice(total, size=max(1, total // 100), replace=False)
    changed = {(int(p) // CHUNKS_PER_DOC, int(p) % CHUNKS_PER_DOC) for p in picks}
    root = server_tempdir("seams-targets-bench-")
    server = EmbeddedPostgres(root / "pgdata")
    folder = Path(tempfile.mkdtemp(prefix="seams-targets-"))
    # Also at exit: Milvus Lite writes its files once more when the process ends, after the
    # `finally` below removed them (exit handlers run last registered first).
    atexit.register(shutil.rmtree, folder, True)
    results: dict[str, dict[str, float]] = {}
    stores: dict[str, TargetStore] = {}
    try:
        started = server.start()
        url = database_url_for(started, DATA_DATABASE)
        with psycopg.connect(started, autocommit=True) as conn:
            conn.execute("CREATE DATABASE bench_target")
        os.environ["BENCH_TARGET_URL"] = database_url_for(started, "bench_target")
        postgres = PostgresResource(url=url, max_connections=4)
        postgres.ensure_schema()
        # No HNSW index on chunk_index: a sync never searches, and inserting every vector into
        # the graph one at a time made publishing 100k chunks the benchmark's longest step.
        for batch in range(batches):
            write_batch(postgres, batch, set(), register=True)
        print(f"published {total:,} chunks in {batches} batches", flush=True)
        if "chroma" in args.kinds:
            from tests.storage.targets.stores import chroma_server

            os.environ["BENCH_CHROMA_URL"] = chroma_server()
        environment = SeamsEnvironment.from_os()
        for kind in args.kinds:  # first syncs: a fresh store per run, the last one kept open
            first, loads = [], []
            for run in range(args.runs):
                settings = store_settings(kind, folder, run)
                store = open_target(f"bench_{kind}_{run}", settings, environment)
                try:
                    done = sync_target(postgres, f"bench_{kind}_{run}", store, ["default"])
                finally:
                    if run < args.runs - 1:
                        store.close()
                    else:
                        stores[kind] = store
                assert done.written == total, done
                first.append(done.seconds)
                loads.append(os.getloadavg()[0])
                print(f"  {kind} run {run + 1}: first sync {done.seconds:.2f} s", flush=True)
            results[kind] = {
                "chunks": total,
                "first_sync_runs_s": first,
                "first_sync_s": statistics.median(first),
                "first_sync_records_per_s": total / statistics.median(first),
                "load_average_1m": statistics.median(loads),
            }
        # Backfills: every batch rewritten with 1 % of the chunks changed (then changed back,
        # and so on), each store of the last run synced after each.
        rounds: dict[str, list[tuple[float, int, int]]] = {kind: [] for kind in args.kinds}
        for round_ in range(args.runs):
            for batch in range(batches):
                write_batch(postgres, batch, changed if round_ % 2 == 0 else set(), False)
            for kind in args.kinds:
                done = sync_target(
                    postgres, f"bench_{kind}_{args.runs - 1}", stores[kind], ["default"]
                )
                rounds[kind].append((done.seconds, done.written, done.deleted))
        for kind in args.kinds:
            r = results[kind]
            r.update({
                "backfill_changed_chunks": len(changed),
                "backfill_written": statistics.median(w for _, w, _ in rounds[kind]),
                "backfill_deleted": statistics.median(d for _, _, d in rounds[kind]),
                "backfill_sync_s": statistics.median(s for s, _, _ in rounds[kind]),
            })  # fmt: skip
            print(
                f"{kind:9} {total:>7,} chunks: first sync {r['first_sync_s']:7.2f} s "
                f"({r['first_sync_records_per_s']:8,.0f} records/s, "
                f"load {r['load_average_1m']:.1f}); backfill changing {len(changed)} chunks: "
                f"wrote {r['backfill_written']:.0f}, "
                f"deleted {r['backfill_deleted']:.0f} in {r['backfill_sync_s']:.2f} s",
                flush=True,
            )
    finally:
        for store in stores.values():
            store.close()
        close_pool(url) if "url" in locals() else None
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
    write_result(args.json, {"runs": args.runs, "results": results}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
