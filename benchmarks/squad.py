"""Retrieval on SQuAD: do a chunker's chunks bring back the sentence that answers a real question?

Five Wikipedia articles from the SQuAD 2.0 development set (`../shared/data/squad-dev-5.json`,
CC BY-SA 4.0, never shipped with Seams), each one document (paragraphs joined by a blank line);
the 705 answerable questions, written by crowd workers. Reference: the sentence of the paragraph
that holds the (first) answer. Every system's chunks of all five articles form one collection;
chunks and questions are embedded with the same all-MiniLM-L6-v2 through Seams' `OnnxEmbedder`
(a chunk over the model window is the mean of its windows: "text mode"), and each question
retrieves its top k (5) chunks by cosine. Scores, averaged over questions: character-level
recall, precision and IoU of the reference sentence against the union of the retrieved chunks,
and recall@k = the share of questions whose exact answer span lies inside one retrieved chunk.

Systems: Seams `default` and `fast`, fixed 200- and 400-token splits, LangChain's and chonkie's
SemanticChunker at their defaults (same model, embeddings disk-cached by text).

Retrievers (`--retriever`), each applied to every system's chunks alike:

- `text` (the default, the issue's protocol): each chunk's text embedded, top k by cosine.
- `seams`: as `seams search` ranks with the default seams.yaml: a chunk's vector is the
  token-weighted mean of the vectors of Seams' sentence candidates inside it (`retrieval.mode:
  pooled`), the `pool_size(k)` nearest are re-scored with their best sentence
  (`storage.search.sentence_rerank`, `retrieval.sentence_weight`, or `--sentence-weight`), then
  the top k are kept. The candidates are Seams' own (default preset with the `--seams`
  overrides) for every system, so the retriever is the same.

    .venv/bin/python -m benchmarks.squad --json benchmarks/results/squad.json
    .venv/bin/python -m benchmarks.squad --retriever seams \
        --json benchmarks/results/squad-seams-search.json

In-process (`segmenter`: text -> chunk start chars, or -> (start, end) spans)::

    from benchmarks.squad import evaluate_squad
    evaluate_squad(lambda text: [(c.start_char, c.end_char) for c in chunk_text(text, ...)])
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.public_data import (
    DEFAULT_CACHE_DIR,
    DEFAULT_DATA,
    CachedOnnxEmbedder,
    Span,
    SquadDocument,
    SquadQuestion,
    add_common_arguments,
    cached_embedder,
    load_squad,
    make_system,
    retrieval_scores,
    run_and_report,
    spans_from_starts,
)

SYSTEMS: tuple[str, ...] = (
    "seams_default",
    "seams_fast",
    "fixed_200",
    "fixed_400",
    "langchain",
    "chonkie",
)
K = 5
RETRIEVERS = ("text", "seams")
ChunkSpans = Callable[[str], Sequence[int] | Sequence[Span]]
__all__ = ["RETRIEVERS", "SYSTEMS", "K", "evaluate_squad"]


@functools.lru_cache(maxsize=4)
def _corpus(data: str) -> tuple[tuple[SquadDocument, ...], tuple[SquadQuestion, ...]]:
    documents, questions = load_squad(data)
    return tuple(documents), tuple(questions)


@functools.lru_cache(maxsize=4)
def _embedder(cache_dir: str | None) -> CachedOnnxEmbedder:
    return cached_embedder(Path(cache_dir) if cache_dir else None, "squad")


def _as_spans(text: str, chunks: Sequence[int] | Sequence[Span]) -> list[Span]:
    """A segmenter's output as trimmed, non-empty spans (starts are turned into spans)."""
    items = list(chunks)
    if items and not isinstance(items[0], int | np.integer):
        spans = [(int(a), int(b)) for a, b in items]
        return [(a, b) for a, b in spans if text[a:b].strip()]
    return spans_from_starts(text, [int(s) for s in items])


def evaluate_squad(
    segmenter: ChunkSpans,
    data: Path | str = DEFAULT_DATA,
    k: int = K,
    embedder: CachedOnnxEmbedder | None = None,
    cache_dir: Path | str | None = DEFAULT_CACHE_DIR,
    retriever: str = "text",
    sentence_config: Any = None,
    sentence_weight: float | None = None,
) -> dict[str, Any]:
    """Top-k retrieval scores of `segmenter`'s chunks on the SQuAD articles.

    Returns char_recall, char_precision, char_iou, recall_at_k (answer inside a retrieved chunk),
    questions, documents, chunks and mean_chunk_tokens. `embedder`: a `CachedOnnxEmbedder` (by
    default one per `cache_dir` and process, saved after each call). `retriever`: see the module
    doc; for `seams`, `sentence_config` is the `ChunkingConfig` whose candidates are the sentences
    (default preset when None) and `sentence_weight` their share (the settings' default when
    None)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if retriever not in RETRIEVERS:
        raise ValueError(f"retriever must be one of {RETRIEVERS}, got {retriever!r}")
    documents, questions = _corpus(str(data))
    embedder = embedder or _embedder(str(cache_dir) if cache_dir else None)
    refs: list[tuple[str, Span]] = []
    for doc in documents:
        refs += [(doc.title, span) for span in _as_spans(doc.text, segmenter(doc.text))]
    texts = {doc.title: doc.text for doc in documents}
    chunk_texts = [texts[title][a:b] for title, (a, b) in refs]
    question_vectors = embedder([q.question for q in questions])
    if retriever == "text":
        similarities = question_vectors @ embedder(chunk_texts).T
        top = np.argsort(-similarities, axis=1, kind="stable")[:, :k]
    else:
        top = _seams_search_top(
            documents, refs, question_vectors, k, embedder, sentence_config, sentence_weight
        )
    embedder.save()
    rows = [
        retrieval_scores(q.document, q.reference, q.answer, [refs[i] for i in ranked])
        for q, ranked in zip(questions, top, strict=True)
    ]
    return {
        "k": k,
        "char_recall": statistics.mean(r["recall"] for r in rows),
        "char_precision": statistics.mean(r["precision"] for r in rows),
        "char_iou": statistics.mean(r["iou"] for r in rows),
        "recall_at_k": statistics.mean(r["answer_inside"] for r in rows),
        "questions": len(questions),
        "documents": len(documents),
        "chunks": len(refs),
        "mean_chunk_tokens": statistics.mean(embedder.count_tokens(chunk_texts)),
    }


def _seams_search_top(
    documents: Sequence[SquadDocument],
    refs: Sequence[tuple[str, Span]],
    question_vectors: np.ndarray,
    k: int,
    embedder: CachedOnnxEmbedder,
    config: Any = None,
    sentence_weight: float | None = None,
) -> list[np.ndarray]:
    """Per question, the top k chunk positions ranked as `seams search` ranks them (module doc)."""
    from seams import ChunkingConfig
    from seams.chunking.segment import segment
    from seams.chunking.similarity import embedding_texts
    from seams.models.chunk_vectors import pooled_vectors
    from seams.storage.search import pool_size
    from seams.storage.search.sentence_rerank import SENTENCE_WEIGHT, rerank_order

    config = config or ChunkingConfig.preset("default")
    weight = SENTENCE_WEIGHT if sentence_weight is None else sentence_weight
    chunk_vectors = np.zeros((len(refs), question_vectors.shape[1]), np.float32)
    # Per question and chunk, the best cosine of the candidates inside the chunk's span (NaN:
    # none inside, the chunk keeps its own score), as `seams search` asks PostgreSQL for it.
    best = np.full((len(question_vectors), len(refs)), np.nan)
    for doc in documents:
        candidates = segment(doc.text, config, embedder.count_tokens)
        vectors = embedder(embedding_texts(doc.text, candidates, config))
        spans = [(c.start_char, c.end_char) for c in candidates]
        rows = [i for i, (title, _) in enumerate(refs) if title == doc.title]
        chunk_vectors[rows] = pooled_vectors(
            [refs[i][1] for i in rows], spans, [c.token_count for c in candidates], vectors
        )
        for i in rows:
            a, b = refs[i][1]
            inside = [j for j, (s, e) in enumerate(spans) if a <= s < b and e <= b]
            if inside:
                best[:, i] = (question_vectors @ vectors[inside].T).max(axis=1)
    chunk_scores = question_vectors @ chunk_vectors.T
    pool = pool_size(k)
    top = []
    for row, scores in enumerate(chunk_scores):
        nearest = np.argsort(-scores, kind="stable")[:pool]
        order, _ = rerank_order(scores[nearest], best[row, nearest], weight)
        top.append(nearest[order][:k])
    return top


def run(args: argparse.Namespace) -> dict[str, Any]:
    from seams import ChunkingConfig

    embedder = cached_embedder(args.cache_dir, "squad")
    # The `seams` retriever's sentences: the candidates the pipeline makes under these overrides.
    sentence_config = ChunkingConfig.preset("default", **dict(args.seams))
    results, systems = {}, {}
    for key in args.systems:
        system = make_system(key, embedder, dict(args.seams))
        systems[key] = {"label": system.label, "settings": system.settings}
        started = time.perf_counter()
        row = evaluate_squad(
            system.spans, args.data, args.k, embedder, retriever=args.retriever,
            sentence_config=sentence_config, sentence_weight=args.sentence_weight,
        )  # fmt: skip
        row["seconds"] = round(time.perf_counter() - started, 1)
        results[key] = row
        print(
            f"{system.label:45s} recall {row['char_recall']:.3f} IoU {row['char_iou']:.3f} "
            f"recall@{args.k} {row['recall_at_k']:.3f} ({row['seconds']:.0f} s)",
            flush=True,
        )
    return {
        "benchmark": "squad",
        "data": str(args.data),
        "k": args.k,
        "retriever": args.retriever,
        "sentence_weight": args.sentence_weight,
        "model": {"name": "all-MiniLM-L6-v2", "onnx_sha256": embedder.model_id},
        "systems": systems,
        "results": results,
        "texts_embedded": embedder.embedded,
    }


def print_table(payload: dict[str, Any]) -> None:
    k = payload["k"]
    first = next(iter(payload["results"].values()), None)
    if first is None:
        return
    print(
        f"\nSQuAD retrieval, {payload.get('retriever', 'text')} retriever, top {k} "
        f"({first['questions']} questions, {first['documents']} "
        "articles; character-level scores of the answer sentence, higher is better)\n"
    )
    print(
        f"{'system':45s} {'recall':>7s} {'precision':>9s} {'IoU':>6s} {f'recall@{k}':>9s} "
        f"{'chunks':>7s} {'tokens/chunk':>12s}"
    )
    for key, row in payload["results"].items():
        print(
            f"{payload['systems'][key]['label']:45s} {row['char_recall']:7.3f} "
            f"{row['char_precision']:9.3f} {row['char_iou']:6.3f} {row['recall_at_k']:9.3f} "
            f"{row['chunks']:7d} {row['mean_chunk_tokens']:12.1f}"
        )
    print(
        f"\nrecall@{k}: answer span inside one retrieved chunk. "
        f"{payload['texts_embedded']} texts embedded, {payload['seconds']:.0f} s."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help="folder holding squad-dev-5.json"
    )
    parser.add_argument(
        "--systems", nargs="+", default=list(SYSTEMS), choices=[*SYSTEMS, "paragraphs"]
    )
    parser.add_argument("--k", type=int, default=K, help="chunks retrieved per question")
    parser.add_argument(
        "--retriever", choices=RETRIEVERS, default="text",
        help="text: chunk texts by cosine; seams: as `seams search` ranks (module doc)",
    )  # fmt: skip
    parser.add_argument(
        "--sentence-weight", type=float, default=None, metavar="W",
        help="with --retriever seams: the best sentence's share, 0-1 (default: the settings')",
    )  # fmt: skip
    add_common_arguments(parser)
    args = parser.parse_args(argv)
    if args.k < 1:
        parser.error("--k must be >= 1")
    if args.sentence_weight is not None and not 0.0 <= args.sentence_weight <= 1.0:
        parser.error("--sentence-weight must lie within [0, 1]")
    return run_and_report(args, argv, run, print_table)


if __name__ == "__main__":
    raise SystemExit(main())
