"""Retrieval evaluation: do our chunks retrieve known answer passages better than the baselines?

Corpus (deterministic): the six bundled sample documents (`orchestration/sample_corpus`, minus
its README) and nine documents made by concatenating the 36 topic passages of
`benchmarks/corpus/topics` four at a time, in a seeded order. Every passage appears exactly once.

Questions (deterministic, no paraphrasing model, no LLM): sentences of >= 12 words are picked from
every document with a seeded RNG; the sentence's character span is the answer. Each becomes two
queries:

- "keywords": the sentence's 6 rarest content words (by sentence-level IDF over the corpus), in
  their original order: a terse search-box query that shares only the distinctive words;
- "masked": the sentence with every second content word deleted: a query that keeps the
  sentence's structure but only half of its content.

Both are easier than real questions in that they reuse the answer's words; they are harder than
the sentence itself, and they do not favour any chunker. The question set is written to
`benchmarks/retrieval/questions.json` so anyone can read what was asked.

Systems: our chunker (`chunk_text`, default config, the real ONNX embedder) with each retrieval
embedding mode (text, pooled, late), fixed-size 200- and 400-token chunks (cut at word
boundaries, MiniLM tokens), and LangChain's SemanticChunker (buffer_size=1, default percentile
breakpoints; sentences embedded by sentence-transformers with the same packaged MiniLM). Every
system's chunks are embedded with the same `OnnxEmbedder` (texts over 256 tokens: the mean of
their windows) unless the mode says otherwise, and retrieved by exact cosine top-k.

Scores, at character level, for the top k chunks (union of their spans) against the answer span:
recall (share of the answer covered), precision (share of retrieved text that is answer) and
IoU; plus recall@1 and hit@5 (answer at least half inside one retrieved chunk).

    .venv/bin/python benchmarks/retrieval_eval.py                 # table
    .venv/bin/python benchmarks/retrieval_eval.py --json benchmarks/results/retrieval.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from topic_shift import (  # noqa: E402
    CachedEmbedder,
    fixed_size_starts,
    langchain_chunker,
    langchain_starts,
    load_minilm,
)

from benchmarks.header import with_header  # noqa: E402
from seams.chunking import ChunkingConfig, chunk_text  # noqa: E402
from seams.models.chunk_vectors import late_vectors  # noqa: E402
from seams.models.embedders import OnnxEmbedder  # noqa: E402

SEED = 20261122
TOPICS = ROOT / "benchmarks" / "corpus" / "topics"
SAMPLES = ROOT / "orchestration" / "sample_corpus"
QUESTIONS_FILE = ROOT / "benchmarks" / "retrieval" / "questions.json"
QUESTIONS_PER_DOC = 12
KEYWORDS = 6
K = 5
_STOPWORD_TEXT = """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers him his how i if in into is it its itself just
    may might more most much must my no nor not now of off often on once one only or other our
    out over own same she should so some such than that the their them then there these they
    this those through to too under until up upon very was we were what when where which while
    who whom why will with would you your usually many every make made uses used called"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]+")


@dataclass(frozen=True)
class Document:
    name: str
    text: str


@dataclass(frozen=True)
class Question:
    document: str
    start: int
    end: int
    answer: str
    keywords: str
    masked: str


Span = tuple[int, int]


# --- corpus and questions --------------------------------------------------------------------


def build_corpus(seed: int = SEED) -> list[Document]:
    docs = [
        Document(p.name, p.read_text(encoding="utf-8").replace("\r\n", "\n"))
        for p in sorted(SAMPLES.iterdir())
        if p.suffix in (".md", ".txt") and p.name != "README.md"
    ]
    topics = sorted(TOPICS.glob("*.txt"))
    random.Random(seed).shuffle(topics)
    for number in range(0, len(topics), 4):
        group = topics[number : number + 4]
        text = "\n\n".join(p.read_text(encoding="utf-8").strip() for p in group) + "\n"
        docs.append(Document(f"topics-{number // 4:02d}.txt", text))
    return docs


def _sentences(text: str) -> list[Span]:
    """Prose sentences of >= 12 words (no headings, list items, table rows or code)."""
    spans = []
    for line_match in re.finditer(r"[^\n]+(?:\n(?!\n)[^\n]+)*", text):  # paragraphs
        block = line_match.group()
        if block.lstrip().startswith(("#", "-", "*", "|", "```", "    ")) or re.match(
            r"\s*\d+\.", block
        ):
            continue
        for m in _SENTENCE.finditer(block):
            sentence = m.group().strip()
            if len(_WORD.findall(sentence)) >= 12 and sentence.isascii():
                start = line_match.start() + m.start() + (len(m.group()) - len(m.group().lstrip()))
                spans.append((start, start + len(sentence)))
    return spans


def build_questions(docs: Sequence[Document], seed: int = SEED) -> list[Question]:
    all_sentences = {d.name: _sentences(d.text) for d in docs}
    frequency: Counter[str] = Counter()
    total = 0
    for doc in docs:
        for start, end in all_sentences[doc.name]:
            frequency.update({w.lower() for w in _WORD.findall(doc.text[start:end])})
            total += 1
    rng = random.Random(f"{seed}:questions")
    questions = []
    for doc in docs:
        spans = all_sentences[doc.name]
        for start, end in sorted(rng.sample(spans, min(QUESTIONS_PER_DOC, len(spans)))):
            answer = doc.text[start:end]
            words = [w for w in _WORD.findall(answer) if w.lower() not in STOPWORDS]
            idf = {w: math.log(total / frequency[w.lower()]) for w in words}
            rare = set(sorted(dict.fromkeys(words), key=lambda w: (-idf[w], w))[:KEYWORDS])
            keywords = " ".join(dict.fromkeys(w for w in words if w in rare))
            content = iter(range(len(words) * 2))
            masked = " ".join(
                w for w in _WORD.findall(answer) if w.lower() in STOPWORDS or next(content) % 2 == 0
            )
            questions.append(Question(doc.name, start, end, answer, keywords, masked))
    return questions


# --- systems: documents -> chunk spans ----------------------------------------------------------


def _spans_from_starts(text: str, starts: Sequence[int]) -> list[Span]:
    bounds = [*sorted(set(starts)), len(text)]
    spans = []
    for a, b in itertools.pairwise(bounds):
        piece = text[a:b]
        if piece.strip():
            lead = len(piece) - len(piece.lstrip())
            spans.append((a + lead, a + len(piece.rstrip())))
    return spans


def ours(
    config: ChunkingConfig, embedder: OnnxEmbedder, boundary_embed: Callable | None = None
) -> Callable[[str], list[Span]]:
    """Seams' chunks; `boundary_embed` replaces the transformer for boundaries (`fast`)."""

    def run(text: str) -> list[Span]:
        made = chunk_text(text, document_id="eval", config=config,
                          embed=boundary_embed or embedder.embed,
                          token_counter=embedder.count_tokens)  # fmt: skip
        return [(c.start_char, c.end_char) for c in made]

    return run


def fixed(size: int, embedder: OnnxEmbedder) -> Callable[[str], list[Span]]:
    def run(text: str) -> list[Span]:
        return _spans_from_starts(text, fixed_size_starts(text, embedder.count_tokens, size))

    return run


def langchain(st_embed: CachedEmbedder) -> Callable[[str], list[Span]]:
    chunker = langchain_chunker(st_embed)
    return lambda text: _spans_from_starts(text, langchain_starts(text, chunker.split_text(text)))


# --- embedding modes: chunk spans -> vectors ----------------------------------------------------


def embed_text(embedder: OnnxEmbedder, docs, spans_by_doc) -> np.ndarray:
    texts = [d.text[a:b] for d in docs for a, b in spans_by_doc[d.name]]
    return embedder.embed(texts)


def embed_late(embedder: OnnxEmbedder, docs, spans_by_doc) -> np.ndarray:
    runtime = embedder.runtime()
    vectors = late_vectors(runtime, [(d.text, spans_by_doc[d.name]) for d in docs])
    return np.vstack(vectors)


def embed_pooled(embedder: OnnxEmbedder, docs, spans_by_doc) -> np.ndarray:
    """Mean of the candidate embeddings inside each chunk (as the pipeline's `pooled` mode):
    candidates are our segmenter's sentences, embedded once per document."""
    from seams.chunking import segment
    from seams.models.chunk_vectors import pooled_vectors

    out = []
    for d in docs:
        candidates = segment(d.text, ChunkingConfig(), embedder.count_tokens)
        vectors = embedder.embed([d.text[c.start_char : c.end_char] for c in candidates])
        out.append(
            pooled_vectors(
                spans_by_doc[d.name],
                [(c.start_char, c.end_char) for c in candidates],
                [c.token_count for c in candidates],
                vectors,
            )
        )
    return np.vstack(out)


MODES = {"text": embed_text, "pooled": embed_pooled, "late": embed_late}


# --- scoring ---------------------------------------------------------------------------------


def _overlap(a: Span, b: Span) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _union_length(spans: list[Span]) -> int:
    total, end = 0, -1
    for a, b in sorted(spans):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def score(
    questions: Sequence[Question],
    query_vectors: np.ndarray,
    chunk_vectors: np.ndarray,
    chunk_refs: list[tuple[str, Span]],
    k: int = K,
) -> dict[str, float]:
    sims = query_vectors @ chunk_vectors.T
    top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    recall, recall1, precision, iou, hit = [], [], [], [], []
    for q, ranked in zip(questions, top, strict=True):
        answer = (q.start, q.end)
        retrieved = [chunk_refs[i] for i in ranked]
        same_doc = [span for doc, span in retrieved if doc == q.document]
        # Chunks may overlap (our optional overlap): intersect the answer with their union.
        covered = _union_length([(max(a, q.start), min(b, q.end)) for a, b in same_doc
                                 if _overlap((a, b), answer)])  # fmt: skip
        retrieved_chars = sum(_union_length([s for d, s in retrieved if d == doc])
                              for doc in {d for d, _ in retrieved})  # fmt: skip
        length = q.end - q.start
        recall.append(covered / length)
        precision.append(covered / retrieved_chars if retrieved_chars else 0.0)
        iou.append(covered / (retrieved_chars + length - covered))
        first_doc, first_span = retrieved[0]
        recall1.append(_overlap(first_span, answer) / length if first_doc == q.document else 0.0)
        hit.append(any(_overlap(s, answer) >= length / 2 for s in same_doc))
    return {
        "recall@1": statistics.mean(recall1),
        f"recall@{k}": statistics.mean(recall),
        f"precision@{k}": statistics.mean(precision),
        f"iou@{k}": statistics.mean(iou),
        f"hit@{k}": statistics.mean(hit),
    }


# --- main ------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--k", type=int, default=K)
    parser.add_argument(
        "--systems", help="comma-separated names of the systems to run (default: all)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    import logging

    logging.getLogger("seams.chunking").setLevel(logging.ERROR)
    embedder = OnnxEmbedder()
    docs = build_corpus()
    questions = build_questions(docs)
    QUESTIONS_FILE.parent.mkdir(parents=True, exist_ok=True)
    QUESTIONS_FILE.write_text(
        json.dumps({"seed": SEED, "documents": [d.name for d in docs],
                    "questions": [asdict(q) for q in questions]}, indent=1, ensure_ascii=False)
        + "\n", encoding="utf-8",
    )  # fmt: skip
    styles = {
        style: embedder.embed([getattr(q, style) for q in questions])
        for style in ("keywords", "masked")
    }
    st_embed = CachedEmbedder(load_minilm())
    default = ChunkingConfig()
    systems: list[tuple[str, Callable[[str], list[Span]], tuple[str, ...]]] = [
        ("seams default", ours(default, embedder), ("text", "pooled", "late")),
        ("fixed 200 tokens", fixed(200, embedder), ("text", "late")),
        ("fixed 400 tokens", fixed(400, embedder), ("text",)),
        ("langchain SemanticChunker", langchain(st_embed), ("text",)),
    ]
    if args.systems is None or "seams fast" in args.systems:
        from seams.models.distill import distill_static_model
        from seams.models.embedders import StaticEmbedder

        distill_static_model()
        fast = ours(ChunkingConfig.preset("fast"), embedder, StaticEmbedder().embed)
        # The fast preset's index embeds chunk texts with the transformer (pooled static
        # vectors would not match transformer queries), as the chunk_index asset does.
        systems.insert(1, ("seams fast", fast, ("text",)))
    if args.systems:
        wanted = {name.strip() for name in args.systems.split(",")}
        systems = [s for s in systems if s[0] in wanted]
    results = []
    for name, chunker, modes in systems:
        t0 = time.perf_counter()
        spans_by_doc = {d.name: chunker(d.text) for d in docs}
        chunk_seconds = time.perf_counter() - t0
        refs = [(d.name, s) for d in docs for s in spans_by_doc[d.name]]
        tokens = embedder.count_tokens([docs_by_name_text(docs, doc)[a:b] for doc, (a, b) in refs])
        for mode in modes:
            t1 = time.perf_counter()
            vectors = MODES[mode](embedder, docs, spans_by_doc)
            embed_seconds = time.perf_counter() - t1
            for style, query_vectors in styles.items():
                row = {
                    "system": name,
                    "mode": mode,
                    "queries": style,
                    "chunks": len(refs),
                    "tokens_p50": float(np.median(tokens)),
                    "tokens_max": int(max(tokens)),
                    "chunk_seconds": round(chunk_seconds, 2),
                    "embed_seconds": round(embed_seconds, 2),
                    **score(questions, query_vectors, vectors, refs, args.k),
                }
                results.append(row)
    print_table(results, args.k, len(questions), len(docs))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "seed": SEED,
            "k": args.k,
            "documents": len(docs),
            "questions": len(questions),
            "config_default": default.model_dump(mode="json"),
            "results": results,
        }
        args.json.write_text(
            json.dumps(with_header(payload, argv), indent=2) + "\n", encoding="utf-8"
        )
    return 0


def docs_by_name_text(docs: Sequence[Document], name: str) -> str:
    return next(d.text for d in docs if d.name == name)


def print_table(results: list[dict], k: int, n_questions: int, n_docs: int) -> None:
    for style in ("keywords", "masked"):
        print(
            f"\nRetrieval, {style} queries ({n_questions} questions over {n_docs} documents, "
            f"top {k}, char-level; all-MiniLM-L6-v2)\n"
        )
        print(
            f"| system | embedding | chunks | tokens p50 | recall@1 | recall@{k} | hit@{k} "
            f"| precision@{k} | IoU@{k} |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        rows = [r for r in results if r["queries"] == style]
        for r in sorted(rows, key=lambda r: -r[f"recall@{k}"]):
            print(
                f"| {r['system']} | {r['mode']} | {r['chunks']} | {r['tokens_p50']:.0f} "
                f"| {r['recall@1']:.3f} | {r[f'recall@{k}']:.3f} | {r[f'hit@{k}']:.3f} "
                f"| {r[f'precision@{k}']:.4f} | {r[f'iou@{k}']:.4f} |"
            )


if __name__ == "__main__":
    raise SystemExit(main())
