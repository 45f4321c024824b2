"""Public evaluation data for Seams' quality benchmarks: loaders, metrics, and the shared model.

Text nobody on the team wrote (see `../shared/data/README.md`): Choi's topic-segmentation corpus
(sets 2 and 3; set 1 is held out and refused here) and five SQuAD 2.0 articles with answer spans.
Every loader takes the data folder as an argument (default `../shared/data` beside the checkout);
nothing here copies the data into the package.

Three parts, used by `benchmarks/choi.py` and `benchmarks/squad.py`:

- loaders: Choi `.ref` files -> `ChoiDocument` (sentences joined by single spaces, with the char
  offset of every sentence and the reference segment starts in sentence indices); SQuAD json ->
  one `SquadDocument` per article (paragraphs joined by a blank line) and its answerable
  `SquadQuestion`s (reference = the sentence(s) of the paragraph holding the first answer, plus
  the exact answer span, both as char offsets into the document);
- metrics (pure): Pk / WindowDiff over sentence positions, boundary recall, chunk start chars ->
  sentence boundaries; character-level recall / precision / IoU of a reference span against the
  union of the retrieved chunk spans, and whether the answer lies inside one retrieved chunk;
- the systems under test, all on the same all-MiniLM-L6-v2: Seams' `OnnxEmbedder` behind a disk
  cache keyed by sha256 of the text (reruns and variants embed nothing twice; the cache never
  changes a score), Seams presets, a fixed-size split, LangChain's and chonkie's semantic chunkers.
  Heavy imports (onnxruntime, LangChain, chonkie) happen only when a system is built.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import logging
import os
import re
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.header import write_result
from benchmarks.qa_metrics import merge_spans
from benchmarks.topic_shift import CachedEmbedder, fixed_size_starts, pk_windowdiff

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
"""`../shared/data` relative to the checkout (the data is never shipped with Seams)."""
DEFAULT_CACHE_DIR = Path(tempfile.gettempdir()) / "seams-bench-cache"
CHOI_SETS: tuple[str, ...] = ("2/3-11", "2/3-5", "2/6-8", "2/9-11", "3/3-11")
CHOI_SEPARATOR = "=========="
SQUAD_FILE = "squad-dev-5.json"

Span = tuple[int, int]
Segmenter = Callable[[str], Sequence[int]]
"""text -> char offsets where its chunks start (the contract of `evaluate_choi`)."""


# --- Choi -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChoiDocument:
    """One Choi document: `text` is the sentences joined by single spaces, `sentence_starts[i]`
    the char offset of sentence i in it, `segment_starts` the sentence indices where reference
    segments begin (0 first)."""

    name: str
    sentences: tuple[str, ...]
    segment_starts: tuple[int, ...]
    text: str
    sentence_starts: tuple[int, ...]

    @property
    def boundaries(self) -> tuple[int, ...]:
        """Reference boundaries: index of the sentence after each topic change."""
        return self.segment_starts[1:]


def parse_choi(name: str, content: str) -> ChoiDocument:
    """A `.ref` file's content: one sentence per line, segments separated by `==========` lines.

    Lines are stripped (the corpus ends every sentence with a space); empty lines are skipped.
    """
    sentences: list[str] = []
    segment_starts: list[int] = []
    open_segment = True
    for line in content.splitlines():
        line = line.strip()
        if line == CHOI_SEPARATOR:
            open_segment = True
            continue
        if not line:
            continue
        if open_segment:
            segment_starts.append(len(sentences))
            open_segment = False
        sentences.append(line)
    if not sentences:
        raise ValueError(f"{name}: no sentences; is it a Choi .ref file?")
    starts, cursor = [], 0
    for sentence in sentences:
        starts.append(cursor)
        cursor += len(sentence) + 1
    return ChoiDocument(
        name, tuple(sentences), tuple(segment_starts), " ".join(sentences), tuple(starts)
    )


def choi_folder(data: Path | str, choi_set: str) -> Path:
    """The folder of one Choi set ("2/3-11", ...); set 1 is held out and refused."""
    if choi_set.split("/", 1)[0] == "1":
        raise ValueError(
            f"Choi set {choi_set!r}: set 1 is kept for independent evaluation and must not be "
            f"used here; choose from {', '.join(CHOI_SETS)}"
        )
    folder = Path(data) / "choi" / choi_set
    if not folder.is_dir():
        raise FileNotFoundError(
            f"Choi set {choi_set!r}: no folder {folder}; pass the data folder that holds "
            f"choi/<set>/*.ref (see ../shared/data/README.md) with --data"
        )
    return folder


def load_choi_set(
    data: Path | str = DEFAULT_DATA, choi_set: str = "2/3-11", limit: int | None = None
) -> list[ChoiDocument]:
    """The documents of one set, in numeric file order (0.ref, 1.ref, ...); `limit` keeps the
    first N (for quick runs)."""
    folder = choi_folder(data, choi_set)
    paths = sorted(folder.glob("*.ref"), key=lambda p: (not p.stem.isdigit(), _number(p.stem)))
    if not paths:
        raise FileNotFoundError(f"Choi set {choi_set!r}: no .ref files in {folder}")
    if limit is not None:
        paths = paths[:limit]
    return [parse_choi(f"{choi_set}/{p.name}", p.read_text(encoding="utf-8")) for p in paths]


def _number(stem: str) -> tuple[int, str]:
    return (int(stem), stem) if stem.isdigit() else (0, stem)


# --- SQuAD ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SquadDocument:
    """One article: paragraphs joined by a blank line; `paragraph_starts` their char offsets."""

    title: str
    text: str
    paragraph_starts: tuple[int, ...]


@dataclass(frozen=True)
class SquadQuestion:
    """An answerable question; spans are char offsets into its document's text."""

    id: str
    question: str
    document: str  # SquadDocument.title
    reference: Span  # the sentence(s) of the paragraph that hold the answer
    answer: Span  # the first crowd answer, exactly


def parse_squad(payload: dict[str, Any]) -> tuple[list[SquadDocument], list[SquadQuestion]]:
    """SQuAD json (v1.1 or v2.0 layout) -> documents and their answerable questions.

    The first listed answer is the answer span (SQuAD's dev set lists several crowd answers,
    usually the same span). Unanswerable questions (`is_impossible`) are skipped."""
    from benchmarks.correctness import reference_units

    documents: list[SquadDocument] = []
    questions: list[SquadQuestion] = []
    for article in payload["data"]:
        title = article["title"]
        text, starts = "", []
        for number, paragraph in enumerate(article["paragraphs"]):
            if number:
                text += "\n\n"
            offset = len(text)
            starts.append(offset)
            context = paragraph["context"]
            text += context
            sentences = reference_units(context)
            for qa in paragraph["qas"]:
                if qa.get("is_impossible") or not qa.get("answers"):
                    continue
                answer = qa["answers"][0]
                a = answer["answer_start"]
                b = a + len(answer["text"])
                if context[a:b] != answer["text"]:
                    raise ValueError(
                        f"SQuAD question {qa['id']} ({title}): answer_start {a} does not point "
                        f"at {answer['text']!r} in its paragraph; is the file intact?"
                    )
                ref = _covering_span(sentences, (a, b))
                questions.append(
                    SquadQuestion(
                        qa["id"],
                        qa["question"],
                        title,
                        (offset + ref[0], offset + ref[1]),
                        (offset + a, offset + b),
                    )
                )
        documents.append(SquadDocument(title, text, tuple(starts)))
    return documents, questions


def _covering_span(sentences: Sequence[Span], answer: Span) -> Span:
    """From the first to the last sentence that overlaps the answer (the answer itself if none
    does, which only happens for an answer made of whitespace)."""
    touched = [s for s in sentences if s[0] < answer[1] and answer[0] < s[1]]
    if not touched:
        return answer
    return (min(answer[0], touched[0][0]), max(answer[1], touched[-1][1]))


def load_squad(
    data: Path | str = DEFAULT_DATA, name: str = SQUAD_FILE
) -> tuple[list[SquadDocument], list[SquadQuestion]]:
    path = Path(data) / name
    if not path.is_file():
        raise FileNotFoundError(
            f"SQuAD file {path} not found; pass the data folder that holds {name} "
            f"(see ../shared/data/README.md) with --data"
        )
    return parse_squad(json.loads(path.read_text(encoding="utf-8")))


# --- segmentation metrics ---------------------------------------------------------------------
def starts_to_boundaries(starts: Iterable[int], sentence_starts: Sequence[int]) -> list[int]:
    """Chunk start chars -> sorted boundary sentence indices (> 0).

    A chunk that starts inside a sentence counts as a boundary before the sentence whose start
    is nearest (the earlier one on a tie)."""
    found = set()
    for start in starts:
        i = bisect.bisect_right(sentence_starts, start) - 1
        if i < 0:
            i = 0
        elif i + 1 < len(sentence_starts) and (
            sentence_starts[i + 1] - start < start - sentence_starts[i]
        ):
            i += 1
        if i > 0:
            found.add(i)
    return sorted(found)


def segmentation_scores(
    sentences: int, reference: Sequence[int], hypothesis: Sequence[int]
) -> dict[str, float]:
    """Pk, WindowDiff (over sentence positions, k = half the mean reference segment length) and
    boundary recall, exact and within +-1 sentence, for one document's boundary indices."""
    pk, wd = pk_windowdiff(sentences, reference, hypothesis)
    return {
        "pk": pk,
        "windowdiff": wd,
        "recall_exact": boundary_recall(reference, hypothesis, 0),
        "recall_within_1": boundary_recall(reference, hypothesis, 1),
    }


def boundary_recall(reference: Sequence[int], hypothesis: Sequence[int], tolerance: int) -> float:
    """Share of reference boundaries with a hypothesised boundary at most `tolerance` sentences
    away (1.0 when there is no reference boundary)."""
    if not reference:
        return 1.0
    hyp = sorted(hypothesis)
    hits = 0
    for boundary in reference:
        i = bisect.bisect_left(hyp, boundary - tolerance)
        hits += i < len(hyp) and hyp[i] <= boundary + tolerance
    return hits / len(reference)


def document_scores(segmenter: Segmenter, doc: ChoiDocument) -> tuple[dict[str, Any], list[int]]:
    """One document's scores (Pk, WindowDiff, recall, chunk count) and the boundaries the
    segmenter put, as sentence indices."""
    starts = list(segmenter(doc.text))
    hypothesis = starts_to_boundaries(starts, doc.sentence_starts)
    row = segmentation_scores(len(doc.sentences), doc.boundaries, hypothesis)
    row["chunks"] = len(starts)
    return row, hypothesis


def score_segmenter(segmenter: Segmenter, documents: Sequence[ChoiDocument]) -> dict[str, Any]:
    """Mean per-document scores of one segmenter over one set."""
    rows = [document_scores(segmenter, doc)[0] for doc in documents]
    keys = ("pk", "windowdiff", "recall_exact", "recall_within_1")
    result: dict[str, Any] = {key: statistics.mean(r[key] for r in rows) for key in keys}
    result["chunks_per_doc"] = statistics.mean(r["chunks"] for r in rows)
    result["segments_per_doc"] = statistics.mean(len(d.segment_starts) for d in documents)
    result["docs"] = len(documents)
    return result


# --- retrieval metrics ------------------------------------------------------------------------
def _length(spans: Iterable[Span]) -> int:
    return sum(b - a for a, b in spans)


def _intersection(spans: Sequence[Span], target: Span) -> int:
    return sum(max(0, min(b, target[1]) - max(a, target[0])) for a, b in spans)


def retrieval_scores(
    document: str, reference: Span, answer: Span, retrieved: Sequence[tuple[str, Span]]
) -> dict[str, float]:
    """One question: char-level recall, precision and IoU of `reference` against the union of the
    retrieved chunk spans, and `answer_inside` (1.0 if one retrieved chunk holds the whole answer).

    `retrieved` is (document, span) per chunk; chunks of other documents add to the retrieved
    length (they cost precision) but cover nothing."""
    by_document: dict[str, list[Span]] = {}
    for doc, span in retrieved:
        by_document.setdefault(doc, []).append(span)
    retrieved_length = sum(_length(merge_spans(spans)) for spans in by_document.values())
    own = merge_spans(by_document.get(document, []))
    covered = _intersection(own, reference)
    ref_length = reference[1] - reference[0]
    union = retrieved_length + ref_length - covered
    inside = any(a <= answer[0] and answer[1] <= b for doc, (a, b) in retrieved if doc == document)
    return {
        "recall": covered / ref_length if ref_length else 0.0,
        "precision": covered / retrieved_length if retrieved_length else 0.0,
        "iou": covered / union if union else 0.0,
        "answer_inside": float(inside),
    }


def spans_from_starts(text: str, starts: Iterable[int]) -> list[Span]:
    """Chunk spans from chunk start offsets: each runs to the next start, trimmed of whitespace;
    whitespace-only pieces are dropped."""
    bounds = [*sorted({s for s in starts if 0 < s < len(text)} | {0}), len(text)]
    spans = []
    for a, b in itertools.pairwise(bounds):
        piece = text[a:b]
        if piece.strip():
            spans.append((a + len(piece) - len(piece.lstrip()), a + len(piece.rstrip())))
    return spans


# --- the shared model -------------------------------------------------------------------------
class _EmbedAsEncode:
    """Presents `OnnxEmbedder.embed` as the sentence-transformers `encode` that
    `topic_shift.CachedEmbedder` calls (OnnxEmbedder's rows are already unit length)."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def encode(self, texts: list[str], **_: Any) -> np.ndarray:
        return self.embedder.embed(list(texts))


class CachedOnnxEmbedder(CachedEmbedder):
    """Seams' `OnnxEmbedder` memoised by sha256 of the text, on disk under `cache_file`.

    An embedder object in Seams' sense: callable, `embed`, `count_tokens` (the
    model's word pieces, without [CLS]/[SEP]) and `model_id`. Texts over the model window are the
    mean of their windows (`OnnxEmbedder`'s default), so chunk texts embed as in "text mode"."""

    def __init__(self, onnx: Any, cache_file: Path | None = None) -> None:
        super().__init__(_EmbedAsEncode(onnx), cache_file)
        self.onnx = onnx
        self._saved_size = len(self.cache)

    def embed(self, texts: list[str]) -> np.ndarray:
        return self(list(texts))

    @property
    def count_tokens(self) -> Callable[[list[str]], list[int]]:
        """The model's own word-cached token counter."""
        return self.onnx.count_tokens

    @property
    def model_id(self) -> str:
        return self.onnx.model_id

    def save(self) -> None:
        """Write the cache if it grew, atomically (a concurrent reader never sees half a file)."""
        if self.cache_file is None or len(self.cache) == self._saved_size:
            return
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.cache))
        vectors = np.stack(list(self.cache.values()))
        handle, temp = tempfile.mkstemp(dir=self.cache_file.parent, suffix=".npz.part")
        try:
            with os.fdopen(handle, "wb") as out:
                np.savez(out, keys=keys, vectors=vectors)
            os.replace(temp, self.cache_file)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        self._saved_size = len(self.cache)


def _models_dir() -> Path | None:
    """The checkout's exported models (`./.seams/models`), unless SEAMS_DATA_DIR says otherwise."""
    folder = ROOT / ".seams" / "models"
    return None if os.environ.get("SEAMS_DATA_DIR") or not folder.is_dir() else folder


def onnx_embedder() -> Any:
    """Seams' fp32 `OnnxEmbedder` on the exported all-MiniLM-L6-v2 (`seams model export`)."""
    from seams.models.embedders import OnnxEmbedder

    models = _models_dir()
    return OnnxEmbedder(model_dir=str(models / "all-MiniLM-L6-v2") if models else None)


def static_embedder() -> Any:
    """Seams' static boundary model (the `fast` preset's)."""
    from seams.models.embedders import StaticEmbedder

    models = _models_dir()
    return StaticEmbedder(model_dir=str(models / "all-MiniLM-L6-v2-static") if models else None)


def cached_embedder(cache_dir: Path | None, name: str) -> CachedOnnxEmbedder:
    """The cached MiniLM; the cache file is named by the model's sha256, so another export never
    reads stale vectors. `cache_dir=None`: memory only."""
    onnx = onnx_embedder()
    cache_file = None
    if cache_dir is not None:
        cache_file = Path(cache_dir) / f"public-{name}-minilm-{onnx.model_id[:16]}.npz"
    return CachedOnnxEmbedder(onnx, cache_file)


# --- systems under test -----------------------------------------------------------------------
@dataclass
class System:
    """A chunker under test: `spans(text)` returns its chunks as (start, end) char spans."""

    key: str
    label: str
    spans: Callable[[str], list[Span]]
    settings: str = ""
    core_starts: Callable[[str], list[int]] | None = None
    """Where each chunk's own text begins, if chunks overlap (Seams' `overlap_tokens`)."""

    def starts(self, text: str) -> list[int]:
        """Chunk start offsets: the `Segmenter` view of this system."""
        if self.core_starts is not None:
            return self.core_starts(text)
        return [a for a, _ in self.spans(text)]


def unbounded(config: Any) -> Any:
    """`config` with no size limits, as a user says it (`chunk_size_max=None`; min and target
    stay, the target as a soft pull only): what the literature's Pk figures mean.

    Before `ChunkingConfig` accepted None this was emulated with min 1, target = max = 100000
    tokens (Pk within 0.001 of None's on Choi 2/3-11)."""
    return config.with_overrides(chunk_size_max=None)


def seams_system(key: str, label: str, config: Any, embed: Any, counter: Any) -> System:
    """`seams.chunk_text` with `config`; `counter` sizes in the model's tokens (passed explicitly,
    so this works whether or not `chunk_text` takes the counter from the embedder)."""
    import seams

    def chunks(text: str) -> list[Any]:
        return seams.chunk_text(
            text, document_id="bench", config=config, embed=embed, token_counter=counter
        )

    return System(
        key,
        label,
        lambda text: [(c.start_char, c.end_char) for c in chunks(text)],
        _describe(config),
        lambda text: [c.core_start for c in chunks(text)],
    )


def _describe(config: Any) -> str:
    """The settings that shape boundaries and sizes, for the results' "settings" column."""
    segmenter = getattr(config, "segmenter", "threshold")
    rule = f"{segmenter} segmenter"
    if segmenter == "threshold":
        rule += f" ({config.threshold_type} p{config.percentile:g})"
    maximum = "none" if config.chunk_size_max is None else config.chunk_size_max
    return (
        f"{rule}, {config.window_mode} window {config.window_size}, sizes min/target/max "
        f"{config.chunk_size_min}/{config.chunk_size_target}/{maximum}"
    )


def fixed_system(size: int, counter: Callable[[list[str]], list[int]]) -> System:
    """A plain split every `size` model tokens at word boundaries (`topic_shift`'s)."""
    return System(
        f"fixed_{size}",
        f"fixed {size} tokens",
        lambda text: spans_from_starts(text, fixed_size_starts(text, counter, size)),
        f"cut every {size} MiniLM tokens at a word boundary",
    )


def paragraph_system() -> System:
    """The text's own paragraphs (blank-line separated) as chunks: an oracle on SQuAD, whose
    questions were written per paragraph."""
    return System(
        "paragraphs",
        "paragraphs as given (oracle)",
        lambda text: spans_from_starts(
            text, [0, *(m.end() for m in re.finditer(r"\n\s*\n", text))]
        ),
        "one chunk per blank-line separated paragraph",
    )


def langchain_system(embed: Callable[[list[str]], np.ndarray]) -> System:
    """LangChain's SemanticChunker at its defaults (`peers.langchain_system`), located in the
    source by its non-whitespace characters (it joins sentences with single spaces)."""
    from benchmarks import peers

    peer = peers.langchain_system(embed)
    return System("langchain", peer.label, _aligned(peer.chunk), peer.settings)


def chonkie_system(embedder: CachedOnnxEmbedder) -> System:
    """chonkie's SemanticChunker at its defaults (threshold 0.8, similarity_window 3, chunk_size
    2048), given MiniLM through chonkie's own `BaseEmbeddings` interface (it accepts any
    subclass; the tokenizer is the model's `tokenizer.json`, without truncation)."""
    from chonkie import SemanticChunker
    from chonkie.embeddings import BaseEmbeddings
    from tokenizers import Tokenizer

    from benchmarks.correctness import Piece

    tokenizer = Tokenizer.from_file(str(embedder.onnx.manifest.tokenizer_path))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    class MiniLM(BaseEmbeddings):
        def embed(self, text: str) -> np.ndarray:
            return embedder([text])[0]

        def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
            return list(embedder(list(texts))) if texts else []

        @property
        def dimension(self) -> int:
            return 384

        def get_tokenizer(self) -> Any:
            return tokenizer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunker = SemanticChunker(embedding_model=MiniLM())

    def pieces(text: str) -> list[Piece]:
        return [Piece(c.text, c.start_index, c.end_index) for c in chunker.chunk(text)]

    return System(
        "chonkie",
        "chonkie SemanticChunker",
        _aligned(pieces),
        "threshold 0.8, similarity_window 3, chunk_size 2048 (defaults)",
    )


def _aligned(chunk: Callable[[str], Sequence[Any]]) -> Callable[[str], list[Span]]:
    """Spans of a peer's chunks found in the source (by `correctness.align`, which tolerates
    changed whitespace); a chunk not found in the source is dropped."""
    from benchmarks import correctness

    def spans(text: str) -> list[Span]:
        placements = correctness.align(correctness.Source(text), chunk(text))
        return [(p.start, p.end) for p in placements if p.found]

    return spans


SYSTEM_LABELS: dict[str, str] = {
    "seams_default": 'Seams default (preset "default")',
    "seams_default_unbounded": "Seams default, no size limits",
    "seams_fast": 'Seams fast (preset "fast", StaticEmbedder)',
    "seams_fast_unbounded": "Seams fast, no size limits",
    "fixed_200": "fixed 200 tokens",
    "fixed_400": "fixed 400 tokens",
    "langchain": "LangChain SemanticChunker",
    "chonkie": "chonkie SemanticChunker",
    "paragraphs": "paragraphs as given (oracle)",
}


def make_system(
    key: str, embedder: CachedOnnxEmbedder, overrides: dict[str, Any] | None = None
) -> System:
    """One system by key (see `SYSTEM_LABELS`), on the shared cached MiniLM; `overrides` are
    `ChunkingConfig` fields applied to the Seams systems (`--seams FIELD=VALUE`)."""
    from seams import ChunkingConfig

    if key.startswith("seams_"):
        preset = key.split("_")[1]
        config = ChunkingConfig.preset(preset, **(overrides or {}))
        if key.endswith("_unbounded"):
            config = unbounded(config)
        embed: Any = embedder
        if preset == "fast":
            embed = static_embedder()
        label = SYSTEM_LABELS[key]
        if overrides:
            label += " " + ", ".join(f"{k}={v}" for k, v in overrides.items())
        system = seams_system(key, label, config, embed, _counter(embed))
        system.settings = f'preset("{preset}"): ' + system.settings
        return system
    if key.startswith("fixed_"):
        return fixed_system(int(key.split("_")[1]), _counter(embedder))
    if key == "langchain":
        return langchain_system(embedder)
    if key == "chonkie":
        return chonkie_system(embedder)
    if key == "paragraphs":
        return paragraph_system()
    raise ValueError(f"unknown system {key!r}; choose from {', '.join(SYSTEM_LABELS)}")


def _counter(embedder: Any) -> Callable[[list[str]], list[int]]:
    """The embedder's own token counter (`count_tokens`)."""
    return embedder.count_tokens


def add_common_arguments(parser: argparse.ArgumentParser, *, limit_help: str | None = None) -> None:
    """The options every public-data benchmark shares: the embedding cache and the JSON output;
    with `limit_help`, `--limit` (documents per set, checked by `parse_arguments`)."""
    if limit_help is not None:
        parser.add_argument("--limit", type=int, help=limit_help)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=DEFAULT_CACHE_DIR,
        help="embedding cache folder (never changes a score)",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--seams",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        type=_override,
        help="a ChunkingConfig field for the Seams systems (YAML value), e.g. chunk_size_target=80",
    )


def parse_arguments(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> argparse.Namespace:
    """`argv` parsed, with a `--limit` below 1 refused as the parser refuses a bad option."""
    args = parser.parse_args(argv)
    if getattr(args, "limit", None) is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    return args


def _override(text: str) -> tuple[str, Any]:
    import yaml

    field_name, sep, value = text.partition("=")
    if not sep or not field_name.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected FIELD=VALUE")
    return field_name.strip(), yaml.safe_load(value)


def run_and_report(
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    run: Callable[[argparse.Namespace], dict[str, Any]],
    report: Callable[[dict[str, Any]], None],
) -> int:
    """Run a benchmark, stamp its payload (seconds, date, argv), print it and write the JSON."""
    logging.getLogger("seams.chunking").setLevel(logging.ERROR)
    started = time.perf_counter()
    payload = run(args)
    payload["seconds"] = round(time.perf_counter() - started, 1)
    payload["date"] = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    payload["argv"] = list(sys.argv[1:] if argv is None else argv)
    report(payload)
    write_result(args.json, payload, argv)
    return 0
