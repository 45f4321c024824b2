"""Search latency at 100k chunks: HNSW (pgvector, cosine) + current-version filter + context.

Builds a throwaway embedded PostgreSQL (in a temp dir, stopped and deleted afterwards) holding a
synthetic corpus: `--docs` documents of `--chunks-per-doc` chunks (100k by default) in batches of
1,000 documents, plus a newer version of 10 % of the documents in a later batch, so 10 % of the
older rows are stale and must be filtered out (110k index rows, 100k searchable). Chunk texts
are sentences of the bundled topic corpus; chunk vectors are real MiniLM embeddings of those
sentences plus Gaussian noise (clustered like real data, unlike uniform random vectors, which are
HNSW's worst case). Queries are the retrieval evaluation's keyword queries.

Each chunk's three sentences are also stored as `semantic_boundaries` rows with their own
vectors (330k rows at the default size), as the pipeline stores its candidates, so the sentence
step (`retrieval.sentence_weight`) scores the pooled chunks by their best sentence over real rows.

Reported: query embedding time (OnnxEmbedder, one query at a time) and search time
(`tests.support.search_probes.search_vector`: ANN over-fetch + join to current chunks, parent and
neighbours, and the sentence step's grouped query), p50/p95 over
`--queries` queries after a warm-up; the same search with the step off (`sentence_weight` 0),
run in alternating order with it; the same search forced to an exact scan (index off, step on)
for reference; and recall of the HNSW top-k against it (both lists re-scored by the step).
`search_response` end to end for hybrid, dense and lexical search, the two with BM25 also with
the fixed-depth BM25 read of 200 postings per lexeme (the read before the exact one), in
rotating order. And BM25 (`--exact-queries` queries): the product's exact read (its first k
proven within `lexical.MAX_DEPTH` postings per lexeme, as search asks; the same with no depth
limit; its whole pool proven) and the fixed depth 200
against the exhaustive sum: top-k equal share, recall@k, read time, rounds, postings depth
reached and chunks scored exactly.

    .venv/bin/python benchmarks/search_latency.py
    .venv/bin/python benchmarks/search_latency.py --json benchmarks/results/search_latency.json
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from retrieval_eval import build_corpus, build_questions  # noqa: E402

from benchmarks.database import benchmark_server  # noqa: E402
from benchmarks.header import write_result  # noqa: E402
from benchmarks.scale import lexical_table, measure_lexical, timed_searches  # noqa: E402
from seams.models.embedders import OnnxEmbedder  # noqa: E402
from seams.resources.database import DATA_DATABASE, database_url_for  # noqa: E402
from seams.resources.postgres import PostgresResource  # noqa: E402
from seams.settings import RetrievalSettings  # noqa: E402
from seams.storage import schema, vector_indexes  # noqa: E402
from seams.storage.index_publication import write_and_publish  # noqa: E402
from seams.storage.partition_tables import write_table  # noqa: E402
from seams.storage.search import SENTENCE_WEIGHT  # noqa: E402
from tests.support.search_probes import search_vector  # noqa: E402

RETRIEVAL_MODE = RetrievalSettings().mode
"""The mode the benchmark indexes in: the settings' default."""
TEXT_SEARCH_CONFIG = RetrievalSettings().text_search_config
SEED = 7
DOCS_PER_BATCH = 1000


def synthetic_rows(
    docs: int, per_doc: int, sentences: list[str], vectors: np.ndarray, model_id: str
) -> tuple[dict[str, pd.DataFrame], list[tuple[str, str]]]:
    """Frames for extracted_text, chunks, chunk_index and semantic_boundaries (all batches),
    and the batch_documents manifest."""
    rng = np.random.default_rng(SEED)
    batches: list[tuple[str, list[int]]] = [
        (f"b{n:03d}", list(range(start, min(docs, start + DOCS_PER_BATCH))))
        for n, start in enumerate(range(0, docs, DOCS_PER_BATCH))
    ]
    batches.append((f"b{len(batches):03d}", list(range(0, docs, 10))))  # new versions: 10 %
    manifest, extracted, chunks, index, sentence_rows = [], [], [], [], []
    for batch_key, members in batches:
        for doc in members:
            document_id = f"doc-{doc:06d}"
            sha = f"{batch_key}-{doc}"
            picks = rng.integers(0, len(sentences), size=(per_doc, 3))
            texts = [" ".join(sentences[i] for i in row) for row in picks]
            starts = np.cumsum([0] + [len(t) + 2 for t in texts])[:-1]
            source = "\n\n".join(texts)
            manifest.append((batch_key, document_id, f"file:///synthetic/{doc}.txt", sha, 0))
            extracted.append({"batch_key": batch_key, "document_id": document_id,
                              "source_uri": f"file:///synthetic/{doc}.txt",
                              "source_sha256": sha, "mime": "text/plain", "title": None,
                              "text": source, "page_spans": None, "char_count": len(source),
                              "error": None})  # fmt: skip
            noise = rng.normal(0, 0.35 / np.sqrt(vectors.shape[1]), (per_doc, vectors.shape[1]))
            chunk_vectors = vectors[picks].mean(axis=1) + noise
            chunk_vectors /= np.linalg.norm(chunk_vectors, axis=1, keepdims=True)
            for i, text in enumerate(texts):
                chunk_id = f"{document_id}-{sha}-{i}"
                start = int(starts[i])
                chunks.append({
                    "batch_key": batch_key, "chunk_id": chunk_id, "document_id": document_id,
                    "chunk_index": i, "total_chunks": per_doc, "text": text,
                    "start_char": start, "end_char": start + len(text), "overlap_start": start,
                    "overlap_end": start, "token_count": len(text) // 4, "sentence_count": 3,
                    "page_start": None, "page_end": None,
                    "section": f"Part {i // 4 + 1}", "cohesion": None,
                    "boundary_method": "semantic", "strategy": "context_aware", "metadata": {},
                    "run_id": "bench", "config_hash": "bench", "model_id": model_id,
                    "source_sha256": sha, "code_version": "bench",
                })  # fmt: skip
                index.append({"batch_key": batch_key, "chunk_id": chunk_id,
                              "document_id": document_id, "mode": RETRIEVAL_MODE,
                              "model_id": model_id,
                              "embedding": chunk_vectors[i].astype(np.float32),
                              "text_search_config": TEXT_SEARCH_CONFIG})  # fmt: skip
                offset = start
                for j, pick in enumerate(picks[i].tolist()):
                    sentence = sentences[pick]
                    sentence_rows.append({
                        "batch_key": batch_key, "document_id": document_id,
                        "candidate_index": i * 3 + j, "start_char": offset,
                        "end_char": offset + len(sentence), "kind": "sentence",
                        "section": f"Part {i // 4 + 1}", "token_count": len(sentence) // 4,
                        "paragraph": i, "split": False, "gap_before": "",
                        "text": sentence, "source_uri": f"file:///synthetic/{doc}.txt",
                        "source_sha256": sha, "model_id": model_id,
                        "embedding": vectors[pick].astype(np.float32), "similarity": None,
                        "threshold": None, "is_boundary": j == 0,
                        "reason": "semantic" if j == 0 else "", "method": "semantic",
                    })  # fmt: skip
                    offset += len(sentence) + 1
    frames = {
        "extracted_text": _declared(pd.DataFrame(extracted), "extracted_text"),
        "chunks": _declared(pd.DataFrame(chunks), "chunks"),
        "chunk_index": pd.DataFrame(index),
        "semantic_boundaries": _declared(pd.DataFrame(sentence_rows), "semantic_boundaries"),
    }
    return frames, manifest


def _declared(frame: pd.DataFrame, table: str) -> pd.DataFrame:
    """`frame` with any nullable column the schema declares but we did not fill set to NULL."""
    for column in schema.ASSET_TABLES[table].data_columns:
        if column.name not in frame.columns and column.nullable:
            frame[column.name] = None
    return frame


def load(
    postgres: PostgresResource, frames: dict[str, pd.DataFrame], manifest: list
) -> tuple[float, float]:
    """Bulk-load everything (a fresh schema has no vector index yet), then build the model's
    HNSW index as the chunk_index asset does.
    Returns the HNSW build time and the time of the chunk_index write, whose triggers analyse
    every chunk and build the BM25 index (`seams.storage.search.lexical_index`)."""
    postgres.ensure_schema()
    keys = sorted({row[0] for row in manifest})
    with postgres.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count) "
            "SELECT unnest(%s::text[]), 'bench', 0",
            (keys,),
        )
        with conn.cursor().copy(
            "COPY seams.batch_documents (batch_key, document_id, source_uri, source_sha256,"
            " size_bytes) FROM STDIN"
        ) as copy:
            for row in manifest:
                copy.write_row(row)
    index_seconds = 0.0
    for table in schema.ASSET_TABLES.values():  # pipeline order: chunk_index's write publishes
        frame = frames.get(table.name)
        if frame is None:  # a step search never reads (the candidate tables): no rows
            frame = pd.DataFrame(columns=["batch_key", *(c.name for c in table.data_columns)])
        if table is schema.CHUNK_INDEX:
            result = write_and_publish(postgres, frame, keys)
        else:
            result = write_table(postgres, table, frame, keys)
        if table.name == "chunk_index":
            index_seconds = result.seconds
            if sorted(result.published) != keys:
                raise RuntimeError(f"batches not published: {result.held}")
    started = time.perf_counter()
    with postgres.connection() as conn:
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        index = frames["chunk_index"]  # one model: its own HNSW index, as the asset makes it
        model_id, dims = index["model_id"].iloc[0], len(index["embedding"].iloc[0])
        vector_indexes.ensure_model_index(conn, model_id, dims)
        conn.execute("VACUUM ANALYZE")
    return time.perf_counter() - started, index_seconds


def exact(postgres: PostgresResource, vector: np.ndarray, k: int, model_id: str):
    """The same search without the ANN index (a sequential scan: exact cosine order)."""
    with postgres.connection() as conn:
        conn.execute("SET enable_indexscan = off")
        conn.execute("SET enable_bitmapscan = off")
    try:
        started = time.perf_counter()
        hits, _ = search_vector(postgres, vector, k, model_id=model_id, mode=RETRIEVAL_MODE)
        return hits, (time.perf_counter() - started) * 1000
    finally:
        with postgres.connection() as conn:
            conn.execute("RESET enable_indexscan")
            conn.execute("RESET enable_bitmapscan")


def measure_kinds(
    postgres: PostgresResource, embedder: OnnxEmbedder, questions: list, args: argparse.Namespace
) -> dict[str, dict[str, dict[str, float]]]:
    """`search_response` wall time per query (embedding + search + context) for each of
    `scale.SEARCHES` (hybrid, dense and lexical; the two with BM25 also with the fixed-depth
    read before the exact one) in rotating order, for the keyword and the masked queries."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for style in ("keywords", "masked"):
        texts = [getattr(questions[i % len(questions)], style) for i in range(args.queries)]
        out[style] = timed_searches(postgres, embedder, texts, args.k)
    return out


def percentiles(values: Sequence[float]) -> dict[str, float]:
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2),
            "mean_ms": round(statistics.mean(values), 2)}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--chunks-per-doc", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--exact-queries", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    embedder = OnnxEmbedder()
    model_id = embedder.model_id
    docs = build_corpus()
    questions = build_questions(docs)
    sentences = sorted({q.answer for q in questions} | {
        s.strip() for d in docs for s in d.text.split(". ") if 40 < len(s.strip()) < 300
    })  # fmt: skip
    random.Random(SEED).shuffle(sentences)
    sentences = sentences[:1500]
    t0 = time.perf_counter()
    vectors = embedder.embed(sentences)
    print(f"embedded {len(sentences)} seed sentences in {time.perf_counter() - t0:.1f} s")
    frames, manifest = synthetic_rows(args.docs, args.chunks_per_doc, sentences, vectors, model_id)
    rows = len(frames["chunk_index"])
    with benchmark_server("seams-latency-") as server:
        url = database_url_for(server.start(), DATA_DATABASE)
        postgres = PostgresResource(url=url, max_connections=1)  # one session: SETs stick
        t0 = time.perf_counter()
        build_seconds, index_write_seconds = load(postgres, frames, manifest)
        print(f"loaded {rows:,} index rows in {time.perf_counter() - t0:.0f} s "
              f"(HNSW build {build_seconds:.0f} s)")  # fmt: skip
        with postgres.connection() as conn:
            current = conn.execute(
                "SELECT count(*) FROM seams.current_chunks"
            ).fetchone()[0]  # fmt: skip

        queries = [questions[i % len(questions)].keywords for i in range(args.queries)]
        embed_ms, search_ms, plain_ms, scanned = [], [], [], []
        for q in queries[:20]:  # warm-up: sessions, caches, index pages
            search_vector(
                postgres, embedder.embed([q])[0], args.k, model_id=model_id, mode=RETRIEVAL_MODE
            )
        query_vectors = []
        for number, q in enumerate(queries):
            t0 = time.perf_counter()
            vector = embedder.embed([q])[0]
            embed_ms.append((time.perf_counter() - t0) * 1000)
            # The same search with and without the sentence step, in alternating order so that
            # neither always runs on the pages the other just warmed.
            for weight in (SENTENCE_WEIGHT, 0.0)[:: 1 if number % 2 else -1]:
                t1 = time.perf_counter()
                found, fetched = search_vector(
                    postgres, vector, args.k, model_id=model_id, mode=RETRIEVAL_MODE,
                    sentence_weight=weight,
                )  # fmt: skip
                (search_ms if weight else plain_ms).append((time.perf_counter() - t1) * 1000)
                if weight:
                    hits = found
                    scanned.append(fetched)
            assert len(hits) == args.k
            query_vectors.append((vector, [h.chunk_id for h in hits]))
        recalls, exact_ms = [], []
        for vector, ann_ids in query_vectors[: args.exact_queries]:
            truth, ms = exact(postgres, vector, args.k, model_id)
            exact_ms.append(ms)
            recalls.append(len(set(ann_ids) & {h.chunk_id for h in truth}) / args.k)
        total = [a + b for a, b in zip(embed_ms, search_ms, strict=True)]
        kinds = measure_kinds(postgres, embedder, questions, args)
        exactness = measure_lexical(postgres, queries[: args.exact_queries], args.k)
        result = {
            "index_rows": rows,
            "current_chunks": current,
            "documents": args.docs,
            "k": args.k,
            "queries": len(queries),
            "hnsw_build_seconds": round(build_seconds, 1),
            "embed": percentiles(embed_ms),
            "search": percentiles(search_ms),
            "search_without_sentence_step": percentiles(plain_ms),
            "semantic_boundaries_rows": len(frames["semantic_boundaries"]),
            "embed_plus_search": percentiles(total),
            "exact_scan_search": percentiles(exact_ms),
            "hnsw_recall_at_k_vs_exact": round(statistics.mean(recalls), 4),
            "chunk_index_write_seconds_with_bm25": round(index_write_seconds, 1),
            "search_response_ms": kinds,
            "bm25_exactness": exactness,
        }

    print(f"\nSearch latency, {current:,} current chunks ({rows:,} index rows, 10 % stale), "
          f"k={args.k}, {len(queries)} queries, one at a time\n")  # fmt: skip
    print("| step | p50 ms | p95 ms | mean ms |")
    print("|---|---|---|---|")
    for label, key in (("query embedding (ONNX, CPU)", "embed"),
                       ("search: HNSW + current filter + best sentence + parent + neighbours",
                        "search"),
                       ("search without the sentence step (sentence_weight 0)",
                        "search_without_sentence_step"),
                       ("embedding + search", "embed_plus_search"),
                       (f"search, exact scan (index off, {len(exact_ms)} queries)",
                        "exact_scan_search")):  # fmt: skip
        r = result[key]
        print(f"| {label} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['mean_ms']:.1f} |")
    print(f"\nHNSW recall@{args.k} vs exact: {result['hnsw_recall_at_k_vs_exact']:.3f}; "
          f"HNSW build {build_seconds:.0f} s")  # fmt: skip
    print(
        f"\n`search_response` end to end (query embedding included), {args.queries} queries "
        "per style, the three searches alternating per query\n"
    )
    print("| queries | search | p50 ms | p95 ms | mean ms |")
    print("|---|---|---|---|---|")
    for style, by_kind in kinds.items():
        for kind, r in by_kind.items():
            print(f"| {style} | {kind} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | "
                  f"{r['mean_ms']:.1f} |")  # fmt: skip
    print(f"\nBM25 top-{args.k} against the exhaustive sum, {exactness['queries']} queries, "
          "by read\n")  # fmt: skip
    print(lexical_table([(f"{current:,} chunks", exactness)]))
    print(f"\nchunk_index write with the BM25 index: {index_write_seconds:.0f} s for {rows:,} rows")
    write_result(args.json, result, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
