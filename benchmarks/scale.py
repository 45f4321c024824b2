"""A growing corpus: what adding a batch, searching and the indexes cost at 10k, 100k, 1M chunks.

One throwaway embedded PostgreSQL (in a temp dir, stopped and deleted afterwards) grows through
`--sizes` current chunks. At each size:

- (c) the model's HNSW index is built over every vector (`vector_indexes.ensure_model_index`, as
  the `chunk_index` asset calls it), timed; the load up to that size ran without it;
- (a) `--batches` new batches of 1,000 chunks (100 documents of 10 chunks) are added one at a
  time through the pipeline's write path: `partition_tables.write_table` for every per-batch
  asset table in pipeline order (`sentence_candidates` and `candidate_embeddings` empty, three
  `semantic_boundaries` sentences per chunk), the `chunk_index` write last, which writes the
  vectors into the HNSW index, publishes the build and brings the BM25 index to it
  (`seams.lexical_sync`) in one transaction. Median and max per batch, for that write and for
  the whole batch, and what each batch cost the server's processes (`server_usage`: CPU seconds,
  bytes read and written through system calls), which a loaded machine does not inflate;
- (e) the peak RSS of this (the writing) process while those batches are written (VmHWM, reset
  before them through /proc/self/clear_refs);
- (d) disk: `pg_total_relation_size` of each `seams` table (indexes, HNSW included) over the
  current chunks;
- (b) `search_response` (what `seams search` calls) p50 / p95, hybrid, dense and lexical in
  rotating order, one query at a time. Query vectors are precomputed (the query embedding is
  excluded: `benchmarks/search_latency.py` measures MiniLM's, ~10 ms on this machine);
- (f) the lexical side's exactness: the share of queries whose top-5 by the product's read
  (`lexical.exact_read` at the pool `search_response` asks for: impact-ordered postings read
  until a bound proves nothing else can enter the first k, at most `lexical.MAX_DEPTH` per
  lexeme; the same read with no depth limit, and with its whole pool proven) has the same
  BM25 scores as the exhaustive top-5 (`exhaustive=True`: every posting of every query lexeme),
  the recall of the exhaustive top-5 (a chunk counts when its score reaches the exhaustive 5th:
  ties are interchangeable), and what the read took (rounds, postings depth reached, chunks
  scored exactly); the same for the fixed read of `lexical.TERM_DEPTH` postings per lexeme (the
  read before the exact one) and `--depths`. The searches of (b) run with the exact read and
  with the fixed depth 200, side by side.

The server's memory is what the embedded server sizes to the machine
(`resources.embedded_server.memory_settings`, recorded per size as `server_settings`), or
PostgreSQL's defaults with `--postgres-defaults` (the store as it ran before).

Texts and vectors are synthetic, seeded and deterministic: pseudo-words drawn from a Zipf law
(so some terms occur in most chunks, as in real text) with a topic's own words mixed in, and
vectors clustered around the topic's direction (a sentence's vector near its topic, a chunk's the
mean of its sentences'). Queries are three words of a chunk with that chunk's vector plus noise.
Fine for the storage layer; not a retrieval-quality figure.

    nice -n 10 .venv/bin/python -m benchmarks.scale --sizes 10000,100000 \\
        --json benchmarks/results/scale.json
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psycopg
from psycopg import sql

from benchmarks.database import benchmark_server
from benchmarks.header import write_result
from seams.resources.database import DATA_DATABASE, EmbeddedPostgres, database_url_for
from seams.resources.postgres import PostgresResource
from seams.settings import RetrievalSettings
from seams.storage import schema, vector_indexes
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import write_table
from seams.storage.search import lexical, pool_size, search_response

SEED = 11
DIMENSION = 384
"""MiniLM's dimension, the default model's: the HNSW index and the rows have its shape."""
MODEL_ID = "synthetic-384"
MODE = RetrievalSettings().mode
TEXT_SEARCH_CONFIG = RetrievalSettings().text_search_config
DOCS_PER_BATCH = 100
CHUNKS_PER_DOC = 10
CHUNKS_PER_BATCH = DOCS_PER_BATCH * CHUNKS_PER_DOC
SENTENCES_PER_CHUNK = 3
WORDS_PER_SENTENCE = (12, 28)
"""Inclusive range of a sentence's words: chunks of ~60 words, ~150-200 model tokens."""
VOCABULARY = 40_000
ZIPF_S = 1.07
TOPICS = 256
TOPIC_WORDS = 300
TOPIC_SHARE = 0.3
"""Share of a sentence's words drawn from its topic's own words (the rest: the Zipf law)."""
LOAD_GROUP = 10
"""Batches written per `write_table` call while loading up to a size (bounded memory)."""
_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in ("a", "e", "i", "o", "u", "ai", "ou")]


# --- the synthetic corpus (pure: no database) ----------------------------------------------


def vocabulary(size: int, seed: int = SEED) -> list[str]:
    """`size` distinct pseudo-words of 2-4 syllables, deterministic for a seed (none is an
    English stop word: every one has at least four letters)."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < size:
        count = int(rng.integers(2, 5))
        word = "".join(_SYLLABLES[i] for i in rng.integers(0, len(_SYLLABLES), count))
        words.setdefault(word, None)
    return list(words)


@dataclass
class Corpus:
    """The synthetic corpus: batch `n` is the same rows whenever and wherever it is made."""

    seed: int = SEED
    dimension: int = DIMENSION
    words: list[str] = field(init=False)
    vocabulary_array: np.ndarray = field(init=False)
    zipf: np.ndarray = field(init=False)
    topic_words: np.ndarray = field(init=False)
    centroids: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.words = vocabulary(VOCABULARY, self.seed)
        self.vocabulary_array = np.array(self.words, dtype=object)
        weights = 1.0 / np.arange(1, VOCABULARY + 1) ** ZIPF_S
        self.zipf = np.cumsum(weights / weights.sum())
        self.topic_words = rng.integers(200, VOCABULARY, size=(TOPICS, TOPIC_WORDS))
        centroids = rng.normal(size=(TOPICS, self.dimension))
        self.centroids = centroids / np.linalg.norm(centroids, axis=1, keepdims=True)

    def batch_key(self, number: int) -> str:
        return f"s{number:06d}"

    def batch(self, number: int) -> Batch:
        """Batch `number`: DOCS_PER_BATCH documents of CHUNKS_PER_DOC chunks."""
        rng = np.random.default_rng([self.seed, number])
        key = self.batch_key(number)
        n_chunks = CHUNKS_PER_BATCH
        n_sentences = n_chunks * SENTENCES_PER_CHUNK
        topics = np.repeat(rng.integers(0, TOPICS, DOCS_PER_BATCH), CHUNKS_PER_DOC)
        lengths = rng.integers(WORDS_PER_SENTENCE[0], WORDS_PER_SENTENCE[1] + 1, n_sentences)
        sentence_topics = np.repeat(topics, SENTENCES_PER_CHUNK)
        total = int(lengths.sum())
        draw = np.searchsorted(self.zipf, rng.random(total))
        own = rng.random(total) < TOPIC_SHARE
        word_topics = np.repeat(sentence_topics, lengths)
        draw[own] = self.topic_words[word_topics[own], rng.integers(0, TOPIC_WORDS, own.sum())]
        words = self.vocabulary_array[draw].tolist()
        ends = np.cumsum(lengths).tolist()
        sentences = [
            " ".join(words[a:b]).capitalize() + "."
            for a, b in zip([0, *ends[:-1]], ends, strict=True)
        ]
        noise = rng.normal(0, 1.2 / np.sqrt(self.dimension), (n_sentences, self.dimension))
        sentence_vectors = self.centroids[sentence_topics] + noise
        sentence_vectors /= np.linalg.norm(sentence_vectors, axis=1, keepdims=True)
        chunk_vectors = sentence_vectors.reshape(n_chunks, SENTENCES_PER_CHUNK, -1).mean(axis=1)
        chunk_vectors /= np.linalg.norm(chunk_vectors, axis=1, keepdims=True)
        return Batch(key, number, sentences, sentence_vectors.astype(np.float32),
                     chunk_vectors.astype(np.float32))  # fmt: skip


@dataclass
class Batch:
    """One batch's sentences and vectors; `frames` gives the asset tables' rows."""

    key: str
    number: int
    sentences: list[str]
    sentence_vectors: np.ndarray
    chunk_vectors: np.ndarray

    def document_id(self, doc: int) -> str:
        return f"doc-{self.number * DOCS_PER_BATCH + doc:09d}"

    def chunk_text(self, chunk: int) -> str:
        start = chunk * SENTENCES_PER_CHUNK
        return " ".join(self.sentences[start : start + SENTENCES_PER_CHUNK])

    def chunk_id(self, chunk: int) -> str:
        return f"{self.document_id(chunk // CHUNKS_PER_DOC)}-{chunk % CHUNKS_PER_DOC}"

    def manifest(self) -> list[tuple[str, str, str, str, int]]:
        """(batch_key, document_id, source_uri, source_sha256, size_bytes) per document."""
        return [(self.key, self.document_id(d), f"file:///synthetic/{self.document_id(d)}.txt",
                 f"sha-{self.document_id(d)}", 0) for d in range(DOCS_PER_BATCH)]  # fmt: skip

    def frames(self) -> dict[str, pd.DataFrame]:
        """The rows of every per-batch asset table, in pipeline order (the two candidate
        tables empty: search never reads them)."""
        extracted, boundaries, chunks, index = [], [], [], []
        for doc in range(DOCS_PER_BATCH):
            document_id = self.document_id(doc)
            uri, sha = f"file:///synthetic/{document_id}.txt", f"sha-{document_id}"
            offset = 0
            texts = []
            for local in range(CHUNKS_PER_DOC):
                chunk = doc * CHUNKS_PER_DOC + local
                text = self.chunk_text(chunk)
                texts.append(text)
                position = offset
                for j in range(SENTENCES_PER_CHUNK):
                    s = chunk * SENTENCES_PER_CHUNK + j
                    sentence = self.sentences[s]
                    boundaries.append({
                        "document_id": document_id, "candidate_index": s % (
                            CHUNKS_PER_DOC * SENTENCES_PER_CHUNK),
                        "start_char": position, "end_char": position + len(sentence),
                        "kind": "sentence", "section": "", "token_count": len(sentence) // 4,
                        "paragraph": local, "split": False, "gap_before": "",
                        "text": sentence, "source_uri": uri, "source_sha256": sha,
                        "model_id": MODEL_ID, "embedding": self.sentence_vectors[s],
                        "is_boundary": j == 0, "reason": "semantic" if j == 0 else "",
                        "method": "semantic",
                    })  # fmt: skip
                    position += len(sentence) + 1
                chunks.append({
                    "chunk_id": self.chunk_id(chunk), "document_id": document_id,
                    "chunk_index": local, "total_chunks": CHUNKS_PER_DOC, "text": text,
                    "start_char": offset, "end_char": offset + len(text),
                    "overlap_start": offset, "overlap_end": offset,
                    "token_count": len(text) // 4, "sentence_count": SENTENCES_PER_CHUNK,
                    "section": "", "boundary_method": "semantic", "strategy": "context_aware",
                    "metadata": {}, "run_id": "scale", "config_hash": "scale",
                    "model_id": MODEL_ID, "source_sha256": sha, "code_version": "scale",
                })  # fmt: skip
                index.append({"chunk_id": self.chunk_id(chunk), "document_id": document_id,
                              "mode": MODE, "model_id": MODEL_ID,
                              "embedding": self.chunk_vectors[chunk],
                              "text_search_config": TEXT_SEARCH_CONFIG})  # fmt: skip
                offset += len(text) + 2
            source = "\n\n".join(texts)
            extracted.append({"document_id": document_id, "source_uri": uri,
                              "source_sha256": sha, "mime": "text/plain", "text": source,
                              "char_count": len(source)})  # fmt: skip
        rows = {"extracted_text": extracted, "sentence_candidates": [],
                "candidate_embeddings": [], "semantic_boundaries": boundaries,
                "chunks": chunks, "chunk_index": index}  # fmt: skip
        return {name: table_frame(name, values, self.key) for name, values in rows.items()}


def table_frame(table: str, rows: list[dict[str, Any]], batch_key: str) -> pd.DataFrame:
    """`rows` as the frame `write_table` takes for `table`: every declared column present
    (nullable ones we did not fill as NULL), `batch_key` set."""
    declared = schema.ASSET_TABLES[table].data_columns
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(columns=[c.name for c in declared])
    for column in declared:
        if column.name not in frame.columns:
            frame[column.name] = pd.Series([None] * len(frame), dtype=object)
    frame.insert(0, "batch_key", batch_key)
    return frame


def combine(batches: Sequence[Batch]) -> dict[str, pd.DataFrame]:
    """The frames of several batches, one per table (one `write_table` call for them all)."""
    per = [b.frames() for b in batches]
    return {name: pd.concat([f[name] for f in per], ignore_index=True) for name in per[0]}


@dataclass(frozen=True)
class Query:
    text: str
    vector: np.ndarray


def queries(corpus: Corpus, batches: int, count: int, seed: int = SEED) -> list[Query]:
    """`count` queries over the first `batches` batches: three distinct words of a random chunk
    and that chunk's vector plus noise (deterministic for the seed and the corpus size)."""
    rng = np.random.default_rng([seed, batches, count])
    picks = sorted(zip(rng.integers(0, batches, count).tolist(),
                       rng.integers(0, CHUNKS_PER_BATCH, count).tolist(), strict=True))  # fmt: skip
    out: list[Query] = []
    cache: dict[int, Batch] = {}
    for number, chunk in picks:
        if number not in cache:
            cache = {number: corpus.batch(number)}
        batch = cache[number]
        words = sorted({w.strip(".").lower() for w in batch.chunk_text(chunk).split()})
        chosen = [words[i] for i in rng.choice(len(words), size=3, replace=False)]
        vector = batch.chunk_vectors[chunk] + rng.normal(0, 0.6 / np.sqrt(DIMENSION), DIMENSION)
        out.append(Query(" ".join(chosen), (vector / np.linalg.norm(vector)).astype(np.float32)))
    order = rng.permutation(len(out))
    return [out[i] for i in order]


class PrecomputedEmbedder:
    """A query embedder whose vectors are known in advance: search time without the model."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    @property
    def model_id(self) -> str:
        return MODEL_ID

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])

    embed_queries = embed

    def for_model(self, model_id: str) -> PrecomputedEmbedder:
        if model_id != MODEL_ID:
            raise ValueError(f"index model {model_id!r}: this benchmark embeds for {MODEL_ID!r}")
        return self


def percentiles(values: Sequence[float]) -> dict[str, float]:
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2),
            "mean_ms": round(statistics.mean(values), 2)}  # fmt: skip


def same_top(found: Sequence[float], truth: Sequence[float], k: int) -> bool:
    """Whether the first `k` scores of `found` are those of `truth` (ties interchangeable)."""
    return len(found[:k]) == len(truth[:k]) and all(
        abs(a - b) <= 1e-9 for a, b in zip(found[:k], truth[:k], strict=True)
    )


def recall_by_score(found: Sequence[float], truth: Sequence[float], k: int) -> float:
    """Share of `truth`'s top `k` that `found`'s top `k` matches (a score at or above truth's
    k-th counts: ties are interchangeable)."""
    if not truth:
        return 1.0
    floor = truth[:k][-1] - 1e-9
    return sum(s >= floor for s in found[:k]) / len(truth[:k])


# --- the database --------------------------------------------------------------------------


def register(conn: psycopg.Connection[Any], batches: Sequence[Batch]) -> None:
    """The batches and their documents registered (what `seams.storage.batches` records)."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO seams.batches (batch_key, source, document_count)"
            " SELECT unnest(%s::text[]), 'scale', %s",
            ([b.key for b in batches], DOCS_PER_BATCH),
        )
        with conn.cursor().copy(
            "COPY seams.batch_documents (batch_key, document_id, source_uri, source_sha256,"
            " size_bytes) FROM STDIN"
        ) as copy:
            for batch in batches:
                for row in batch.manifest():
                    copy.write_row(row)


def write_batches(postgres: PostgresResource, batches: Sequence[Batch]) -> dict[str, float]:
    """Register `batches` and write every asset table for them, in pipeline order, through
    `write_table` (`write_and_publish` for `chunk_index`, which publishes them); seconds per
    table."""
    frames = combine(batches)
    keys = [b.key for b in batches]
    with postgres.connection() as conn:
        register(conn, batches)
    seconds: dict[str, float] = {}
    for name, frame in frames.items():
        if name == schema.CHUNK_INDEX.name:
            result = write_and_publish(postgres, frame, keys)
        else:
            result = write_table(postgres, schema.ASSET_TABLES[name], frame, keys)
        seconds[name] = result.seconds
        if name == "chunk_index" and sorted(result.published) != sorted(keys):
            raise RuntimeError(f"batches {keys} not published: {result.held}")
    return seconds


def memory_kib(field_name: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS, VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field_name}")


def reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def server_usage(pgdata: Path) -> dict[str, float]:
    """CPU seconds and bytes read / written through system calls by the server's processes so
    far (the postmaster's children: backends, background writer, checkpointer, WAL writer;
    Linux `/proc`). Per batch, the differences are what the batch cost the server whatever the
    machine's load: bytes read are shared-buffer misses (from the page cache or the disk),
    bytes written evicted dirty pages, checkpoints and WAL."""
    postmaster = (pgdata / "postmaster.pid").read_text().split()[0]
    tick = os.sysconf("SC_CLK_TCK")
    usage = {"cpu_s": 0.0, "read_mib": 0.0, "written_mib": 0.0}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[1] != postmaster:  # ppid
                continue
            io = dict(line.split(": ") for line in (entry / "io").read_text().splitlines())
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read
        usage["cpu_s"] += (int(fields[11]) + int(fields[12])) / tick
        usage["read_mib"] += int(io["rchar"]) / 2**20
        usage["written_mib"] += int(io["wchar"]) / 2**20
    return usage


def build_hnsw(url: str) -> float | None:
    """Seconds to build the model's HNSW index with `ensure_model_index`, with the server's
    `maintenance_work_mem` (what the `chunk_index` asset gets); None when a kept database
    (`--keep`) has it already."""
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.perf_counter()
        built = vector_indexes.ensure_model_index(conn, MODEL_ID, DIMENSION)
        seconds = time.perf_counter() - started
        conn.execute("VACUUM ANALYZE")
    return seconds if built else None


def drop_hnsw(url: str) -> None:
    """The model's HNSW index dropped, so the next size's build is timed from scratch and the
    load up to it runs without it (a bulk load; the measured batches run with it)."""
    with psycopg.connect(url, autocommit=True) as conn:
        name = schema.chunk_index_hnsw_name(MODEL_ID, DIMENSION)
        conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(schema.SCHEMA, name)))


SERVER_SETTINGS = ("shared_buffers", "effective_cache_size", "maintenance_work_mem", "work_mem",
                   "max_wal_size")  # fmt: skip
POSTGRES_DEFAULTS = {"shared_buffers": "128MB", "effective_cache_size": "4GB",
                     "maintenance_work_mem": "64MB"}  # fmt: skip
"""PostgreSQL's own defaults of what the embedded server sizes to the machine (`--postgres-
defaults`: the store as it ran before it did)."""


def server_settings(url: str) -> dict[str, str]:
    """The server's memory and WAL settings, as `SHOW` gives them."""
    with psycopg.connect(url) as conn:
        return {name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[0]
                for name in SERVER_SETTINGS}  # fmt: skip


def use_postgres_defaults(server: EmbeddedPostgres, url: str) -> str:
    """Restart the server with PostgreSQL's defaults for the settings Seams sizes (ALTER
    SYSTEM: a start keeps those); its new URL."""
    with psycopg.connect(url, autocommit=True) as conn:
        for name, value in POSTGRES_DEFAULTS.items():
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(
                sql.Identifier(name), sql.Literal(value)))  # fmt: skip
    server.stop()
    return server.start()


def disk(url: str) -> tuple[int, dict[str, int]]:
    """(current chunks, bytes per `seams` table with its indexes and TOAST)."""
    with psycopg.connect(url) as conn:
        current = conn.execute("SELECT count(*) FROM seams.current_chunks").fetchone()[0]
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class AS c"
            " WHERE c.relnamespace = 'seams'::regnamespace AND c.relkind IN ('r', 'p')"
            " ORDER BY 2 DESC"
        ).fetchall()
    return int(current), {name: int(size) for name, size in rows if size > 0}


SEARCHES: tuple[tuple[str, str, int | None], ...] = (
    ("hybrid", "hybrid", None),
    ("hybrid, BM25 depth 200", "hybrid", lexical.TERM_DEPTH),
    ("dense", "dense", None),
    ("lexical", "lexical", None),
    ("lexical, BM25 depth 200", "lexical", lexical.TERM_DEPTH),
)
"""(label, search kind, fixed BM25 depth or None for the product's exact read) measured."""


def measure_search(
    postgres: PostgresResource, items: list[Query], k: int
) -> dict[str, dict[str, float]]:
    """`search_response` wall ms per query (query vectors precomputed)."""
    embedder = PrecomputedEmbedder({q.text: q.vector for q in items})
    return timed_searches(postgres, embedder, [q.text for q in items], k)


def timed_searches(
    postgres: PostgresResource, embedder: Any, texts: Sequence[str], k: int
) -> dict[str, dict[str, float]]:
    """`search_response` wall ms per query for each of `SEARCHES`, in rotating order per query
    (none always runs on the pages another just warmed), after a warm-up."""
    for text in texts[:10]:  # warm-up: sessions, plans, pages
        search_response(postgres, embedder, text, k, search="hybrid")
    times: dict[str, list[float]] = {label: [] for label, _, _ in SEARCHES}
    for number, text in enumerate(texts):
        turn = number % len(SEARCHES)
        for label, kind, depth in SEARCHES[turn:] + SEARCHES[:turn]:
            reads = contextlib.nullcontext() if depth is None else fixed_depth_reads(depth)
            with reads:
                started = time.perf_counter()
                response = search_response(postgres, embedder, text, k, search=kind)
                times[label].append((time.perf_counter() - started) * 1000)
            if not response.hits and kind != "lexical":
                raise RuntimeError(f"{label} search for {text!r} found nothing")
    return {label: percentiles(values) for label, values in times.items()}


@contextlib.contextmanager
def fixed_depth_reads(depth: int = lexical.TERM_DEPTH) -> Iterator[None]:
    """Inside, search's BM25 side reads `depth` postings per lexeme (the read before the exact
    one: not exact once a lexeme has more postings), for a before/after in one run."""
    exact = lexical.exact_read_of

    def fixed(
        conn: psycopg.Connection[Any], groups: Sequence[lexical.QueryTerms], pool: int, **_: Any
    ) -> lexical.LexicalRead:
        hits = lexical.top_chunks_of(conn, groups, pool, depth=depth)
        return lexical.LexicalRead(hits, depth, 2 * pool * len(groups), len(groups), False)

    lexical.exact_read_of = fixed
    try:
        yield
    finally:
        lexical.exact_read_of = exact


def measure_lexical(
    postgres: PostgresResource, texts: Sequence[str], k: int, depths: Sequence[int] = ()
) -> dict[str, Any]:
    """The product's BM25 read (`lexical.exact_read` at the pool `search_response` asks for,
    its first k proven by its stopping rule within `MAX_DEPTH` postings per lexeme; the same
    with no depth limit; its whole pool proven) against the exhaustive top-k, with what it
    took (rounds, postings depth reached, chunks scored exactly); and the fixed-depth read at
    `lexical.TERM_DEPTH` (the read before the exact one) and `depths`."""
    pool = pool_size(k)
    depths = sorted({lexical.TERM_DEPTH, *depths})
    reads: dict[str, Any] = {
        SEARCH_READ: lambda conn, terms: lexical.exact_read(conn, terms, pool, exact_k=k),
        "exact, first k, no depth limit": lambda conn, terms: lexical.exact_read(
            conn, terms, pool, exact_k=k, max_depth=None
        ),
        "exact, whole pool, no depth limit": lambda conn, terms: lexical.exact_read(
            conn, terms, pool, max_depth=None
        ),
        **{f"depth {d}": functools.partial(_fixed_read, pool=pool, depth=d) for d in depths},
    }
    found: dict[str, dict[str, list[float]]] = {
        name: {f: [] for f in ("equal", "recall", "ms", "depth", "scored", "rounds", "proven")}
        for name in reads
    }
    exhaustive_ms, df_max = [], []
    with postgres.connection() as conn:
        for text in texts:
            terms = lexical.query_terms(conn, TEXT_SEARCH_CONFIG, text)
            if terms is None:
                raise RuntimeError("nothing is in the BM25 index")
            started = time.perf_counter()
            truth = [h.score for h in lexical.top_chunks(conn, terms, k, exhaustive=True)]
            exhaustive_ms.append((time.perf_counter() - started) * 1000)
            df_max.append(max(terms.document_frequencies, default=0))
            for name, read_with in reads.items():
                started = time.perf_counter()
                read = read_with(conn, terms)
                figures = found[name]
                figures["ms"].append((time.perf_counter() - started) * 1000)
                scores = [h.score for h in read.hits]
                figures["equal"].append(same_top(scores, truth, k))
                figures["recall"].append(recall_by_score(scores, truth, k))
                for field_name in ("depth", "scored", "rounds"):
                    figures[field_name].append(getattr(read, field_name))
                figures["proven"].append(read.exact and not name.startswith("depth"))
    by_read = {}
    for name, figures in found.items():
        by_read[name] = {
            "top_k_equal_share": round(statistics.mean(figures["equal"]), 4),
            "recall_at_k": round(statistics.mean(figures["recall"]), 4),
            "read": percentiles(figures["ms"]),
            "proven_share": round(statistics.mean(figures["proven"]), 4),
            **{
                f: {"median": statistics.median(figures[f]), "max": max(figures[f])}
                for f in ("rounds", "depth", "scored")
            },
        }
    product = by_read[SEARCH_READ]
    return {
        "queries": len(texts),
        "k": k,
        "pool": pool,
        "top_k_equal_share": product["top_k_equal_share"],
        "recall_at_k": product["recall_at_k"],
        "queries_with_a_term_over_depth": sum(d > lexical.TERM_DEPTH for d in df_max),
        "read": product["read"],
        "exhaustive": percentiles(exhaustive_ms),
        "by_read": by_read,
    }


SEARCH_READ = "exact, first k (search)"
"""The read `search_response` runs: its first k proven within `lexical.MAX_DEPTH`."""


def _fixed_read(
    conn: psycopg.Connection[Any], terms: lexical.QueryTerms, *, pool: int, depth: int
) -> lexical.LexicalRead:
    """The fixed-depth read as a `LexicalRead` (one round; chunks scored: its shortlist)."""
    hits = lexical.top_chunks(conn, terms, pool, depth=depth)
    return lexical.LexicalRead(hits, depth, 2 * pool, 1, False)


def lexical_table(results: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """`measure_lexical`'s figures as a markdown table, a row per (label, read)."""
    lines = [
        "| corpus | read | top-k equal | recall@k | proven | read p50 ms | read p95 ms "
        "| rounds median / max | depth median / max | chunks scored median / max |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, figures in results:
        rows = {**figures["by_read"], "exhaustive": {"read": figures["exhaustive"]}}
        for name, x in rows.items():
            cells = [label, name]
            if "top_k_equal_share" in x:
                cells += [f"{x['top_k_equal_share']:.2f}", f"{x['recall_at_k']:.3f}"]
            else:
                cells += ["1.00", "1.000"]
            cells.append(f"{x['proven_share']:.2f}" if "proven_share" in x else "")
            cells += [f"{x['read']['p50_ms']:.1f}", f"{x['read']['p95_ms']:.1f}"]
            for f in ("rounds", "depth", "scored"):
                cells.append(f"{x[f]['median']:,.0f} / {x[f]['max']:,}" if f in x else "")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def measure_size(
    postgres: PostgresResource,
    url: str,
    pgdata: Path,
    corpus: Corpus,
    loaded: int,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Every figure at the current size (`loaded` batches written); adds `args.batches`."""
    print(f"[{time.strftime('%H:%M:%S')}] {loaded * CHUNKS_PER_BATCH:,} chunks: HNSW build",
          flush=True)  # fmt: skip
    hnsw_seconds = build_hnsw(url)
    current, sizes = disk(url)
    items = queries(corpus, loaded, args.queries)
    print(f"[{time.strftime('%H:%M:%S')}]   search ({len(items)} queries x 3 kinds)", flush=True)
    search = measure_search(postgres, items, args.k)
    print(f"[{time.strftime('%H:%M:%S')}]   BM25 exactness", flush=True)
    texts = [q.text for q in items[: args.exact_queries]]
    exactness = measure_lexical(postgres, texts, args.k, args.depths)
    print(f"[{time.strftime('%H:%M:%S')}]   adding {args.batches} batches", flush=True)
    rss_before = memory_kib("VmRSS")
    reset = reset_peak_rss()
    index_write, whole, per_table = [], [], []
    server: dict[str, list[float]] = {}
    for n in range(args.batches):
        batch = corpus.batch(loaded + n)
        before = server_usage(pgdata)
        started = time.perf_counter()
        seconds = write_batches(postgres, [batch])
        whole.append(time.perf_counter() - started)
        after = server_usage(pgdata)
        for name, value in after.items():
            server.setdefault(name, []).append(value - before[name])
        index_write.append(seconds["chunk_index"])
        per_table.append(seconds)
    peak = memory_kib("VmHWM")
    median_tables = {t: round(statistics.median(s[t] for s in per_table), 3) for t in per_table[0]}
    return {
        "chunks": current,
        "hnsw_build_seconds": None if hnsw_seconds is None else round(hnsw_seconds, 1),
        "add_batch": {
            "chunks_per_batch": CHUNKS_PER_BATCH,
            "batches": args.batches,
            "chunk_index_write_seconds": {
                "median": round(statistics.median(index_write), 3),
                "max": round(max(index_write), 3),
                "all": [round(s, 3) for s in index_write],
            },
            "whole_batch_seconds": {
                "median": round(statistics.median(whole), 3),
                "max": round(max(whole), 3),
            },
            "median_seconds_per_table": median_tables,
            "server_per_batch_median": {
                name: round(statistics.median(values), 2) for name, values in server.items()
            },
        },
        "writer_rss_mib": {
            "before_batches": round(rss_before / 1024, 1),
            "peak_during_batches": round(peak / 1024, 1),
            "peak_reset_before_batches": reset,
        },
        "disk": {
            "bytes_per_chunk": round(sum(sizes.values()) / current, 1),
            "bytes_per_chunk_by_table": {t: round(b / current, 1) for t, b in sizes.items()},
            "total_mib": round(sum(sizes.values()) / 2**20, 1),
        },
        "search_ms": search,
        "bm25_exactness": exactness,
    }


def load_to(
    postgres: PostgresResource, corpus: Corpus, loaded: int, target: int, group: int = LOAD_GROUP
) -> float:
    """Write batches `loaded`..`target` - 1 (`group` per call); seconds taken."""
    started = time.perf_counter()
    for first in range(loaded, target, group):
        write_batches(postgres, [corpus.batch(n) for n in range(first, min(target, first + group))])
        if (first // group) % 10 == 9:
            print(f"[{time.strftime('%H:%M:%S')}]   loaded {min(target, first + group) * 1000:,}",
                  flush=True)  # fmt: skip
    return time.perf_counter() - started


def parse_sizes(text: str) -> list[int]:
    """`--sizes`: ascending chunk counts, each a whole number of 1,000-chunk batches."""
    sizes = [int(s) for s in text.split(",") if s.strip()]
    if (
        not sizes
        or sizes != sorted(set(sizes))
        or any(s % CHUNKS_PER_BATCH or s <= 0 for s in sizes)
    ):
        raise argparse.ArgumentTypeError(
            f"--sizes {text!r}: give ascending multiples of {CHUNKS_PER_BATCH}, e.g. 10000,100000"
        )
    return sizes


def loaded_batches(url: str) -> int:
    """Batches a kept database holds already (0 for a new one)."""
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM seams.batches").fetchone()[0])


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    """Grow one database through `args.sizes`, yielding each size's figures. With `--keep` the
    database lives in that folder and is kept: a later run there resumes the load (or measures
    again at a size it reached) instead of starting over."""
    corpus = Corpus()
    with benchmark_server("seams-scale-", args.keep) as server:
        started = server.start()
        if args.postgres_defaults:
            started = use_postgres_defaults(server, started)
        url = database_url_for(started, DATA_DATABASE)
        postgres = PostgresResource(url=url, max_connections=2)
        postgres.ensure_schema()
        loaded = loaded_batches(url)
        for size in args.sizes:
            target = size // CHUNKS_PER_BATCH
            load_seconds = 0.0
            if target > loaded:
                print(f"[{time.strftime('%H:%M:%S')}] loading to {size:,} chunks", flush=True)
                load_seconds = load_to(postgres, corpus, loaded, target, args.load_group)
                loaded = target
            figures = measure_size(postgres, url, server.pgdata, corpus, loaded, args)
            figures["load_seconds_without_hnsw"] = round(load_seconds, 1)
            figures["server_settings"] = server_settings(url)
            figures["data_dir_mib"] = round(
                sum(p.stat().st_size for p in server.pgdata.rglob("*") if p.is_file()) / 2**20
            )
            loaded += args.batches
            if not (args.keep and size == args.sizes[-1]):
                drop_hnsw(url)
            yield {"size": size, **figures}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("10000,100000,1000000"))
    parser.add_argument("--batches", type=int, default=5, help="1,000-chunk batches added per size")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--exact-queries", type=int, default=50)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument(
        "--depths",
        type=lambda text: [int(d) for d in text.split(",") if d.strip()],
        default=[1000, 5000],
        help="postings read per lexeme to compare with the product's (comma-separated)",
    )
    parser.add_argument(
        "--postgres-defaults",
        action="store_true",
        help="run the server with PostgreSQL's default memory settings instead of Seams' sizing",
    )
    parser.add_argument(
        "--load-group", type=int, default=LOAD_GROUP, help="batches per write while loading"
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the database in this folder (a short path: the server's socket lives there);"
        " a later run with the same folder resumes from what it holds",
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    results = []
    for figures in run(args):
        results.append(figures)
        print(summary_row(figures), flush=True)
        # After every size: a long run keeps what it measured.
        write_result(args.json, {"sizes": results, "setup": setup()}, argv)
    print("\n" + table(results))
    print(f"\nBM25 top-{args.k} against the exhaustive sum, by read\n")
    print(lexical_table([(f"{f['chunks']:,}", f["bm25_exactness"]) for f in results]))
    print("\n`search_response` ms, the product's exact BM25 read and the fixed depth 200\n")
    print("| chunks | search | p50 ms | p95 ms |\n|---|---|---:|---:|")
    for f in results:
        for label, x in f["search_ms"].items():
            print(f"| {f['chunks']:,} | {label} | {x['p50_ms']:.1f} | {x['p95_ms']:.1f} |")
    return 0


def setup() -> dict[str, Any]:
    return {"chunks_per_batch": CHUNKS_PER_BATCH, "docs_per_batch": DOCS_PER_BATCH,
            "sentences_per_chunk": SENTENCES_PER_CHUNK, "dimension": DIMENSION,
            "vocabulary": VOCABULARY, "zipf_s": ZIPF_S, "topics": TOPICS, "mode": MODE,
            "start_depth": lexical.START_DEPTH, "growth": lexical.GROWTH,
            "fixed_depth": lexical.TERM_DEPTH, "max_query_terms": lexical.MAX_QUERY_TERMS,
            "query_embedding": "excluded (vectors precomputed)",
            "load_avg_at_end": os.getloadavg()}  # fmt: skip


def summary_row(f: dict[str, Any]) -> str:
    a, s, x = f["add_batch"], f["search_ms"]["hybrid"], f["bm25_exactness"]
    return (f"| {f['chunks']:,} | {a['chunk_index_write_seconds']['median']:.2f} | "
            f"{a['whole_batch_seconds']['median']:.2f} | "
            f"{a['server_per_batch_median']['cpu_s']:.2f} | "
            f"{a['server_per_batch_median']['read_mib']:,.0f} | "
            f"{a['server_per_batch_median']['written_mib']:,.0f} | "
            f"{s['p50_ms']:.1f} | {s['p95_ms']:.1f} | "
            f"{f['hnsw_build_seconds'] or 'kept'} | {f['disk']['bytes_per_chunk']:,.0f} | "
            f"{f['writer_rss_mib']['peak_during_batches']:.0f} | {x['top_k_equal_share']:.2f} | "
            f"{x['recall_at_k']:.3f} |")  # fmt: skip


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| chunks | add 1,000: chunk_index write s | add 1,000: whole batch s "
        "| server CPU s per batch | server read MiB per batch | server written MiB per batch "
        "| hybrid p50 ms | hybrid p95 ms | HNSW build s | disk B/chunk | writer peak RSS MiB "
        "| BM25 top-5 exact | BM25 recall@5 |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    return "\n".join([head, *(summary_row(f) for f in results)])


if __name__ == "__main__":
    raise SystemExit(main())
