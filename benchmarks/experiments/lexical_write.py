"""What the BM25 index costs a pipeline run: the same run with its triggers on and off.

Each round registers the same documents in a fresh database on one embedded PostgreSQL and
materializes the whole pipeline in-process (the real model; no embedding cache carried over), once
with the lexical index's triggers enabled (the default: writing `chunk_index` analyses the chunks
and updates the BM25 statistics in the same transaction, `search.lexical_index`) and once with
them disabled, alternating which goes first. Reported: medians over the rounds of the whole run
and of the `chunk_index` write (its `write_seconds`: where the BM25 work happens),
and the BM25 share of a run, (write on - write off) / run off.

    .venv/bin/python benchmarks/experiments/lexical_write.py   # the bundled sample corpus
    .venv/bin/python benchmarks/experiments/lexical_write.py --rounds 5 --json /tmp/lw.json
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import dagster as dg  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from benchmarks.database import benchmark_server  # noqa: E402
from benchmarks.header import write_result  # noqa: E402
from seams.assets.partitions import document_batches  # noqa: E402
from seams.orchestration.definitions import build_assets  # noqa: E402
from seams.paths import sample_corpus  # noqa: E402
from seams.resources.database import database_url_for  # noqa: E402
from seams.resources.embedder import OnnxEmbedderResource  # noqa: E402
from seams.resources.io_manager import PostgresIOManager  # noqa: E402
from seams.resources.postgres import PostgresResource, close_pool  # noqa: E402
from seams.resources.static_embedder import StaticEmbedderResource  # noqa: E402
from seams.settings import SeamsSettings  # noqa: E402
from seams.storage.batches import register_batch, scan_inbox  # noqa: E402

LEXICAL_TRIGGERS = ("chunk_index_lexical_insert", "chunk_index_lexical_delete")


def run_once(server_url: str, folder: Path, *, lexical: bool) -> tuple[float, float, int]:
    """(run seconds, chunk_index write seconds, chunks) of one fresh pipeline run."""
    name = f"lex_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url = database_url_for(server_url, name)
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        postgres = PostgresResource(url=url)
        postgres.ensure_schema()
        with postgres.connection() as conn:
            for trigger in LEXICAL_TRIGGERS:
                conn.execute(
                    sql.SQL("ALTER TABLE seams.chunk_index {} TRIGGER {}").format(
                        sql.SQL("ENABLE" if lexical else "DISABLE"), sql.Identifier(trigger)
                    )
                )
            files, _ = scan_inbox(folder)
            key = register_batch(conn, files, source="bench")
        resources = {"seams_postgres": postgres,
                     "seams_io_manager": PostgresIOManager(postgres=postgres),
                     "seams_embedder": OnnxEmbedderResource(),
                     "seams_static_embedder": StaticEmbedderResource()}  # fmt: skip
        with dg.DagsterInstance.ephemeral() as instance:
            instance.add_dynamic_partitions(document_batches.name, [key])
            started = time.perf_counter()
            result = dg.materialize(build_assets(SeamsSettings())[1:], partition_key=key,
                                    instance=instance, resources=resources)  # fmt: skip
            seconds = time.perf_counter() - started
            assert result.success
            (event,) = [e for e in result.get_asset_materialization_events()
                        if e.asset_key.path[-1] == "chunk_index"]  # fmt: skip
            meta = event.materialization.metadata
            write = float(meta["write_seconds"].value)
            rows = int(meta["rows_written"].value)
        with postgres.connection() as conn:
            indexed = conn.execute("SELECT count(*) FROM seams.lexical_chunks").fetchone()[0]
        assert indexed == (rows if lexical else 0)
        return seconds, write, rows
    finally:
        close_pool(url)
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=Path, default=sample_corpus(),
                        help="documents (default: the bundled sample corpus)")  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    runs: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
    with benchmark_server("seams-lexwrite-") as server:
        server_url = server.start()
        run_once(server_url, args.docs, lexical=True)  # warm-up: model load, imports
        for n in range(args.rounds):
            for lexical in (True, False)[:: 1 if n % 2 else -1]:
                runs[lexical].append(run_once(server_url, args.docs, lexical=lexical))
                print(f"round {n + 1} lexical={lexical}: run {runs[lexical][-1][0]:.1f} s, "
                      f"chunk_index write {runs[lexical][-1][1]:.3f} s", flush=True)  # fmt: skip

    def med(lexical: bool, field: int) -> float:
        return statistics.median(r[field] for r in runs[lexical])

    result = {
        "documents_folder": str(args.docs),
        "rounds": args.rounds,
        "chunks": runs[True][0][2],
        "run_seconds": {"bm25_on": med(True, 0), "bm25_off": med(False, 0)},
        "chunk_index_write_seconds": {"bm25_on": med(True, 1), "bm25_off": med(False, 1)},
        "bm25_share_of_run": (med(True, 1) - med(False, 1)) / med(False, 0),
        "run_ratio_on_vs_off": med(True, 0) / med(False, 0),
    }
    print(f"\nPipeline run of {args.docs} ({result['chunks']} chunks), medians of "
          f"{args.rounds} rounds each, BM25 triggers on vs off (alternating)\n")  # fmt: skip
    print("| | BM25 on | BM25 off | on / off |")
    print("|---|---|---|---|")
    for label, key in (("whole run, s", "run_seconds"),
                       ("chunk_index write, s", "chunk_index_write_seconds")):  # fmt: skip
        on, off = result[key]["bm25_on"], result[key]["bm25_off"]
        print(f"| {label} | {on:.3f} | {off:.3f} | {on / off:.2f} |")
    print(f"\nBM25 index share of a run: {100 * result['bm25_share_of_run']:.2f} %")
    write_result(args.json, result, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
