"""The embedding cache: a second pass over the same text vs the first (model) pass.

    .venv/bin/python -m benchmarks.embedding_cache [--words 10000] [--rounds 3]

Each round uses a fresh database: pass 1 embeds every sentence with the ONNX model and stores
the vectors; pass 2 asks for the same texts and gets them from PostgreSQL. Medians over rounds.
Writes benchmarks/results/embedding_cache.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

from benchmarks.header import write_result

RESULTS = Path(__file__).parent / "results" / "embedding_cache.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from benchmarks.scratch import scratch_data_dir

    work = scratch_data_dir("seams-cache-bench-")

    import psycopg
    from psycopg import sql

    from benchmarks.synthetic import document
    from seams.models.embedders import OnnxEmbedder
    from seams.models.model_export import export_model
    from seams.resources.database import EmbeddedPostgres, database_url_for
    from seams.resources.postgres import PostgresResource
    from seams.storage.embedding_cache import EmbeddingCache

    export_model()
    text = document(7, args.words)
    sentences = [s.strip() + "." for s in text.replace("\n", " ").split(".") if s.strip()]
    embedder = OnnxEmbedder()
    embedder.embed(["warm up"])
    server = EmbeddedPostgres(work / "pg")
    server_url = server.start()
    first, second = [], []
    try:
        for _ in range(args.rounds):
            name = f"bench_{uuid.uuid4().hex[:8]}"
            with psycopg.connect(server_url, autocommit=True) as conn:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            cache = EmbeddingCache(PostgresResource(url=database_url_for(server_url, name)))
            cache.postgres.ensure_schema()
            started = time.perf_counter()
            cold, stats = cache.get_or_embed(embedder.model_id, sentences, embedder.embed)
            first.append(time.perf_counter() - started)
            assert stats.embedded == len(set(sentences))
            started = time.perf_counter()
            warm, stats = cache.get_or_embed(embedder.model_id, sentences, embedder.embed)
            second.append(time.perf_counter() - started)
            assert stats.embedded == 0 and (warm == cold).all()
    finally:
        server.stop()
    result = {
        "words": len(text.split()),
        "sentences": len(sentences),
        "first_pass_s": round(statistics.median(first), 3),
        "second_pass_s": round(statistics.median(second), 4),
        "speedup": round(statistics.median(first) / statistics.median(second), 1),
        "rounds": args.rounds,
    }
    print(
        "| measure | value |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in result.items())
    )
    write_result(RESULTS, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
