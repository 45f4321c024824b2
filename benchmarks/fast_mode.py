"""Fast mode: the `fast` preset (static boundary model) against the default and two peers.

Part 1, speed (one core: the process is pinned to one CPU, onnxruntime gets one thread):
`chunk_text` on ~10k words of prose from `benchmarks/corpus/topics` with the `fast` preset and
`StaticEmbedder` (embedding included), against the default preset with `OnnxEmbedder` (fp32), run
interleaved, medians of --runs runs; the target is <= 0.1 s per 10k words for `fast`. Steady
state (the embedder's per-word cache warm, as in a worker that has seen similar text) and cold
(the cache emptied before each run: every distinct word is tokenized); also the static
embedding alone and the cold start (loading and verifying the model).

Part 2, boundary quality: Pk / WindowDiff (lower is better) on the topic-shift documents of
`benchmarks/topic_shift.py` (dev split: used to choose the preset; test split: held out) for
Seams `fast`, Seams default (MiniLM), the default config on the static model (what the preset's
tuning buys), LangChain's SemanticChunker (buffer_size=1, default percentile, MiniLM) and
chonkie's SemanticChunker given the same static model (its defaults; and chunk_size=254).
`--grid` adds the variants the preset was chosen from (dev split).

    .venv/bin/python benchmarks/fast_mode.py
    .venv/bin/python benchmarks/fast_mode.py --grid --json benchmarks/results/fast_mode.json

Models come from the data dir (`SEAMS_DATA_DIR`, default ./.seams): the ONNX export and the
distilled static model are made there first if missing (needs the `export` extra).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `benchmarks.*` from the repository root
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.chunking_speed import prose  # noqa: E402
from benchmarks.header import write_result  # noqa: E402
from benchmarks.topic_shift import (  # noqa: E402  (it keeps the hub offline)
    CachedEmbedder,
    _langchain_system,
    add_topic_shift_arguments,
    build_documents,
    evaluate_splits,
    load_minilm,
    load_passages,
    ours,
    token_counter,
)
from seams.chunking import ChunkingConfig, chunk_text  # noqa: E402

TARGET_SECONDS_PER_10K = 0.1


def provision() -> tuple[object, object]:
    """(OnnxEmbedder, StaticEmbedder) on one thread, exporting/distilling first if missing."""
    from seams.models.distill import distill_static_model
    from seams.models.embedders import OnnxEmbedder, StaticEmbedder
    from seams.models.model_export import export_model
    from seams.models.model_store import default_model_dir, default_static_dir

    if not (default_model_dir() / "manifest.json").is_file():
        export_model(quantize=False)
    if not (default_static_dir() / "manifest.json").is_file():
        distill_static_model()
    return OnnxEmbedder(intra_op_threads=1), StaticEmbedder()


# --- chonkie, given our static model -----------------------------------------------------------
def chonkie_system(static, **kwargs) -> Callable[[str], list[int]]:
    """chonkie's SemanticChunker with `StaticEmbedder` as its embeddings (same vectors as ours)."""
    from chonkie import SemanticChunker
    from chonkie.embeddings import BaseEmbeddings

    runtime = static._runtime()

    class StaticEmbeddings(BaseEmbeddings):
        def __init__(self) -> None:
            super().__init__()
            self._dimension = runtime.dims

        @property
        def dimension(self) -> int:
            return self._dimension

        def embed(self, text: str) -> np.ndarray:
            return runtime.embed([text])[0]

        def embed_batch(self, texts: list[str]) -> list[np.ndarray]:
            return list(runtime.embed(texts))

        def similarity(self, u: np.ndarray, v: np.ndarray) -> np.float32:
            return np.float32(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v)))

        def get_tokenizer(self):
            return runtime.tokenizer

    chunker = SemanticChunker(embedding_model=StaticEmbeddings(), **kwargs)

    def run(text: str) -> list[int]:
        return [c.start_index for c in chunker.chunk(text)]

    return run


# --- part 1: speed -----------------------------------------------------------------------------
def speed(onnx, static, runs: int) -> dict:
    doc = prose(2)
    words = len(doc.split())
    counter = token_counter()
    fast, default = ChunkingConfig.preset("fast"), ChunkingConfig()
    texts = [doc[c.start_char : c.end_char] for c in _segment(doc, counter)]
    static.embed(texts[:2])  # warm: load the model once (cold start is timed separately)
    onnx.embed(texts[:2])
    chunk_text(doc, document_id="b", config=fast, embed=static, token_counter=counter)

    def cold_start() -> None:
        from seams.models.static_runtime import clear_static_cache

        clear_static_cache()
        static.embed(["warm"])

    systems: dict[str, Callable[[], object]] = {
        "fast preset, StaticEmbedder": lambda: chunk_text(
            doc, document_id="b", config=fast, embed=static, token_counter=counter
        ),
        "fast preset, cold word cache (first document)": lambda: (
            static._runtime().clear_cache(),
            chunk_text(doc, document_id="b", config=fast, embed=static, token_counter=counter),
        ),
        "static embedding alone (candidates)": lambda: static.embed(texts),
        "default preset, OnnxEmbedder fp32": lambda: chunk_text(
            doc, document_id="b", config=default, embed=onnx, token_counter=counter
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in systems}
    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if affinity:
        os.sched_setaffinity(0, {min(affinity)})
    try:
        for _ in range(runs):  # interleaved, so both see the same machine load
            for name, fn in systems.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
        cold = []
        for _ in range(3):
            start = time.perf_counter()
            cold_start()
            cold.append(time.perf_counter() - start)
    finally:
        if affinity:
            os.sched_setaffinity(0, affinity)
    per10k = {n: statistics.median(t) * 10_000 / words for n, t in times.items()}
    reference = per10k["default preset, OnnxEmbedder fp32"]
    print(f"\n### Speed: {words} words, one core, median of {runs} interleaved runs\n")
    print("| system | s / 10k words | vs default preset |")
    print("|---|---:|---:|")
    for name, value in per10k.items():
        print(f"| {name} | {value:.4f} | {value / reference:.4f}x |")
    print(f"| static model cold start (load + verify) | {statistics.median(cold):.3f} s | |")
    ok = per10k["fast preset, StaticEmbedder"] <= TARGET_SECONDS_PER_10K
    verdict = "met" if ok else "MISSED"
    print(f"\nfast preset target <= {TARGET_SECONDS_PER_10K} s / 10k words: {verdict}")
    return {
        "words": words,
        "runs": runs,
        "seconds": times,
        "seconds_per_10k_words": per10k,
        "ratio_vs_default": {n: v / reference for n, v in per10k.items()},
        "static_cold_start_seconds": statistics.median(cold),
        "target_met": ok,
    }


def _segment(doc: str, counter):
    from seams.chunking import segment

    return segment(doc, ChunkingConfig(), counter)


# --- part 2: boundary quality ------------------------------------------------------------------
def fast_grid() -> list[tuple[str, dict]]:
    """Window and threshold variants on the static model (the search behind the preset)."""
    grid = []
    for w in (2, 3, 4, 5, 6, 8):
        for p in (10.0, 15.0, 20.0, 25.0, 30.0):
            grid.append((f"static pooled{w} p{p:g}", {"window_size": w, "percentile": p}))
        grid.append(
            (f"static pooled{w} gradient p60", {"window_size": w, "threshold_type": "gradient"})
        )
    return grid


def quality(static, docs: int, grid: bool, cache_dir: Path) -> list[dict]:
    counter = token_counter()
    minilm = CachedEmbedder(load_minilm(), cache_dir / "minilm_topic_shift.npz")
    passages = load_passages()
    splits = {s: build_documents(passages, s, docs) for s in ("dev", "test")}
    fast = ChunkingConfig.preset("fast")
    systems: list[tuple[str, Callable[[str], list[int]]]] = [
        ("seams fast (static model)", ours(fast, static, counter)),
        ("seams default (MiniLM)", ours(ChunkingConfig(), minilm, counter)),
        (
            "seams default config on the static model",
            ours(ChunkingConfig(boundary_model="static"), static, counter),
        ),
        ("langchain SemanticChunker (MiniLM)", _langchain_system(minilm)),
        ("chonkie SemanticChunker (static model, defaults)", chonkie_system(static)),
        (
            "chonkie SemanticChunker (static model, chunk_size=254)",
            chonkie_system(static, chunk_size=254),
        ),
    ]
    grid_systems = [
        (f"seams {name}", ours(fast.with_overrides(**kw), static, counter))
        for name, kw in (fast_grid() if grid else [])
    ]
    results = evaluate_splits(splits, systems, grid_systems)
    minilm.save()
    print(
        f"\n### Topic-shift boundaries: Pk / WindowDiff (lower is better), {docs} docs per split\n"
    )
    print("| system | split | Pk | WindowDiff | chunks/doc | passages/doc |")
    print("|---|---|---:|---:|---:|---:|")
    shown = [r for r in results if not r["system"].startswith("seams static ")]
    for row in sorted(shown, key=lambda r: (r["split"] != "dev", r["pk"])):
        print(
            f"| {row['system']} | {row['split']} | {row['pk']:.3f} | {row['windowdiff']:.3f} "
            f"| {row['chunks_per_doc']:.1f} | {row['passages_per_doc']:.1f} |"
        )
    if grid:
        print("\n#### Tuning grid (dev split), best 10\n")
        print("| variant | Pk | WindowDiff | chunks/doc |")
        print("|---|---:|---:|---:|")
        tuned = [r for r in results if r["system"].startswith("seams static ")]
        for row in sorted(tuned, key=lambda r: r["pk"])[:10]:
            print(
                f"| {row['system']} | {row['pk']:.3f} | {row['windowdiff']:.3f} "
                f"| {row['chunks_per_doc']:.1f} |"
            )
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="speed runs (median)")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-quality", action="store_true")
    add_topic_shift_arguments(parser)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    onnx, static = provision()
    payload: dict = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "static_model_id": static.model_id,
        "fast_preset": ChunkingConfig.preset("fast").model_dump(mode="json"),
    }
    if not args.skip_speed:
        payload["speed"] = speed(onnx, static, args.runs)
    if not args.skip_quality:
        payload["quality"] = quality(static, args.docs, args.grid, args.cache_dir)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    write_result(args.json, payload, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
