"""Chunking speed: the non-model path in words/s, and chunk_text against the model and LangChain.

Part 1 (no model in the timed loop): embeddings are precomputed, and everything else in
`chunk_text` -- segmentation, token counting, similarities, boundaries, assembly, ids -- is timed
on one core (the process is pinned to one CPU) on ~12k words of prose from
`benchmarks/corpus/topics`. Target: >= 300,000 words/s. Rows: the real MiniLM tokenizer as
token counter with a warm word cache (steady state of a worker that has seen similar text) and
a cold one (cache emptied before each run: every distinct word goes through the tokenizer), and
the heuristic counter; plus the median time of each stage.

Part 2 (with the real model): `chunk_text` with the embedder, against (a) embedding each
candidate once with the same model and settings (`encode` of the candidates' texts; target
<= 1.1x) and (b) LangChain's SemanticChunker (buffer_size=1, same model and settings; target
<= 0.5x), measured interleaved in the same run, wall and CPU time, medians of --rounds rounds.
torch runs with --threads intra-op threads (default 1) for every system alike.

    .venv/bin/python benchmarks/chunking_speed.py
    .venv/bin/python benchmarks/chunking_speed.py --skip-model            # part 1 only
    .venv/bin/python benchmarks/chunking_speed.py --embedder onnx --onnx-model-dir DIR
    .venv/bin/python benchmarks/chunking_speed.py --json benchmarks/results/chunking_speed.json
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script: `benchmarks.*` from the repository root
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from benchmarks.header import write_result  # noqa: E402
from benchmarks.topic_shift import (  # noqa: E402  (it keeps the hub offline)
    langchain_chunker,
    load_minilm,
    load_passages,
    minilm_path,
    token_counter,
)
from seams.chunking import (  # noqa: E402
    ChunkingConfig,
    assemble_chunks,
    candidate_texts,
    chunk_text,
    detect_boundaries,
    embed_candidates,
    gap_similarities,
    load_token_counter,
    segment,
)
from seams.chunking.similarity import candidate_vectors  # noqa: E402


def prose(copies: int) -> str:
    """The topic passages in a fixed shuffled order, `copies` times (~6k words per copy)."""
    passages = load_passages()
    names = sorted(passages)
    ordered = []
    for copy in range(copies):
        ordered += [passages[n] for n in names[copy % 3 :: 1] + names[: copy % 3]]
    return "\n\n".join(ordered)


def median_time(
    fn: Callable[[], object], runs: int, setup: Callable[[], object] | None = None
) -> float:
    """Median wall time of `fn` over `runs` runs; `setup` runs untimed before each."""
    times = []
    for _ in range(runs):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def hashed_vectors(texts: list[str], dims: int = 384) -> np.ndarray:
    """Deterministic stand-in vectors (bag of hashed words) when the model is skipped."""
    out = np.zeros((len(texts), dims), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, hash(word) % dims] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def part_one(doc: str, config: ChunkingConfig, model, runs: int) -> dict:
    """The non-model path on one core, embeddings looked up from a precomputed table."""
    words = len(doc.split())
    tokenizer_json = minilm_path() / "tokenizer.json"
    counter = load_token_counter(tokenizer_json)
    candidates = segment(doc, config, counter)
    texts = candidate_texts(doc, candidates)
    if model is not None:
        vectors = model.encode(texts, batch_size=32, normalize_embeddings=True)
    else:
        vectors = hashed_vectors(texts)
    table = dict(zip(texts, np.asarray(vectors, dtype=np.float32), strict=True))

    def lookup(batch: list[str]) -> np.ndarray:
        return np.stack([table[t] for t in batch])

    affinity = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    if affinity:
        os.sched_setaffinity(0, {min(affinity)})
    try:
        rows = {}

        def run(chosen, setup=None) -> float:
            return median_time(
                lambda: chunk_text(
                    doc, document_id="bench", config=config, embed=lookup, token_counter=chosen
                ),
                runs,
                setup,
            )

        rows["tokenizer counter, warm word cache"] = run(counter)
        rows["tokenizer counter, cold word cache"] = run(counter, counter.clear_cache)
        rows["heuristic counter (no tokenizer)"] = run(None)

        # Stage breakdown with the warm counter.
        stages: dict[str, float] = {}
        stages["segment + count tokens"] = median_time(lambda: segment(doc, config, counter), runs)
        vectors_now = embed_candidates(doc, candidates, config, lookup)
        stages["embed (table lookup, not a model)"] = median_time(
            lambda: embed_candidates(doc, candidates, config, lookup), runs
        )
        sims = gap_similarities(vectors_now, len(candidates), config)
        stages["similarities"] = median_time(
            lambda: gap_similarities(vectors_now, len(candidates), config), runs
        )
        cvecs = candidate_vectors(vectors_now, len(candidates), config)
        boundaries = detect_boundaries(sims, candidates, config, vectors=cvecs)
        stages["boundaries"] = median_time(
            lambda: detect_boundaries(sims, candidates, config, vectors=cvecs), runs
        )
        stages["assemble + ids + cohesion"] = median_time(
            lambda: assemble_chunks(
                doc, candidates, boundaries, config, document_id="bench", embeddings=cvecs
            ),
            runs,
        )
    finally:
        if affinity:
            os.sched_setaffinity(0, affinity)
    print(
        f"\nPart 1: non-model path, one core, {words} words, {len(candidates)} candidates, "
        f"median of {runs} runs (target >= 300,000 words/s)\n"
    )
    print(f"{'token counter':50s} {'ms':>8s} {'words/s':>12s}")
    for name, seconds in rows.items():
        print(f"{name:50s} {seconds * 1000:8.1f} {words / seconds:12,.0f}")
    print(f"\n{'stage (warm tokenizer counter)':50s} {'ms':>8s}")
    for name, seconds in stages.items():
        print(f"{name:50s} {seconds * 1000:8.2f}")
    return {
        "words": words,
        "candidates": len(candidates),
        "runs": runs,
        "seconds": rows,
        "words_per_second": {name: words / s for name, s in rows.items()},
        "stage_seconds": stages,
    }


def part_two(doc: str, config: ChunkingConfig, embed, rounds: int, label: str) -> dict:
    """chunk_text with the model vs embedding each candidate once vs LangChain, interleaved.

    Wall time and process CPU time (all threads) are both recorded: on a shared machine wall
    time swings with other load, while CPU time measures the work each system does."""
    words = len(doc.split())
    counter = token_counter()
    texts = candidate_texts(doc, segment(doc, config, counter))
    splitter = langchain_chunker(embed)
    names = ["encode", "chunk_text", "langchain"]
    wall: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    chunk_counts: dict[str, int] = {}

    def timed(name: str) -> None:
        start, start_cpu = time.perf_counter(), time.process_time()
        if name == "encode":
            embed(texts)
        elif name == "chunk_text":
            chunks = chunk_text(
                doc, document_id="bench", config=config, embed=embed, token_counter=counter
            )
            chunk_counts[name] = len(chunks)
        else:
            chunk_counts[name] = len(splitter.split_text(doc))
        wall[name].append(time.perf_counter() - start)
        cpu[name].append(time.process_time() - start_cpu)

    # Rotate the order every round so that drifting machine load hits all three alike.
    for number in range(rounds):
        for name in names[number % 3 :] + names[: number % 3]:
            timed(name)

    def summary(times: dict[str, list[float]]) -> dict:
        med = {k: statistics.median(v) for k, v in times.items()}
        paired = {
            "chunk_text_vs_encode": statistics.median(
                c / e for c, e in zip(times["chunk_text"], times["encode"], strict=True)
            ),
            "langchain_vs_encode": statistics.median(
                lc / e for lc, e in zip(times["langchain"], times["encode"], strict=True)
            ),
            "chunk_text_vs_langchain": statistics.median(
                c / lc for c, lc in zip(times["chunk_text"], times["langchain"], strict=True)
            ),
        }
        return {"median_seconds": med, "paired_ratio_medians": paired, "all_seconds": times}

    results = {"wall": summary(wall), "cpu": summary(cpu)}
    print(
        f"\nPart 2: with the model ({label}), {words} words, {len(texts)} candidates, "
        f"{rounds} interleaved rounds; medians, and medians of per-round ratios\n"
    )
    print(
        f"{'system':44s} {'wall s':>7s} {'cpu s':>7s} {'wall x enc':>10s} {'cpu x enc':>9s} "
        f"{'chunks':>6s}"
    )
    rows = [
        ("embed each candidate once (reference)", "encode"),
        ("seams chunk_text (target <= 1.1x)", "chunk_text"),
        ("langchain SemanticChunker buffer_size=1", "langchain"),
    ]
    for title, name in rows:
        w = results["wall"]["median_seconds"][name]
        c = results["cpu"]["median_seconds"][name]
        ratio_key = f"{name}_vs_encode"
        w_ratio = results["wall"]["paired_ratio_medians"].get(ratio_key, 1.0)
        c_ratio = results["cpu"]["paired_ratio_medians"].get(ratio_key, 1.0)
        count = chunk_counts.get(name, "")
        print(f"{title:44s} {w:7.2f} {c:7.2f} {w_ratio:10.2f} {c_ratio:9.2f} {count!s:>6s}")
    print(
        "\nchunk_text / langchain (target <= 0.5): wall "
        f"{results['wall']['paired_ratio_medians']['chunk_text_vs_langchain']:.2f}, cpu "
        f"{results['cpu']['paired_ratio_medians']['chunk_text_vs_langchain']:.2f}"
    )
    return {
        "words": words,
        "candidates": len(texts),
        "rounds": rounds,
        "embedder": label,
        "chunks": chunk_counts,
        **results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per part-1 measurement")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved part-2 rounds")
    parser.add_argument("--copies", type=int, default=2, help="corpus copies for part 1")
    parser.add_argument("--model-copies", type=int, default=1, help="corpus copies, part 2")
    parser.add_argument("--skip-model", action="store_true", help="part 1 only, no model")
    parser.add_argument(
        "--embedder", choices=("sentence-transformers", "onnx"), default="sentence-transformers"
    )
    parser.add_argument("--onnx-model-dir", type=Path, help="exported model for --embedder onnx")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch intra-op threads in part 2 (same for every system; default 1: on a shared "
        "machine one thread keeps CPU time a stable measure of work)",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    logging.getLogger("seams.chunking").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")

    config = ChunkingConfig()
    model = None if args.skip_model else load_minilm()
    if model is not None and args.threads:
        import torch

        torch.set_num_threads(args.threads)
    results: dict = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "torch_threads": args.threads,
        "config_fingerprint": config.fingerprint(),
    }
    results["non_model_path"] = part_one(prose(args.copies), config, model, args.runs)
    if model is not None:
        if args.embedder == "onnx":
            from seams.models.embedders import OnnxEmbedder

            onnx = OnnxEmbedder(model_dir=str(args.onnx_model_dir) if args.onnx_model_dir else None)
            embed, label = onnx.embed, "onnxruntime OnnxEmbedder"
        else:

            def embed(texts: list[str]) -> np.ndarray:
                return model.encode(texts, batch_size=32, normalize_embeddings=True)

            label = "sentence-transformers encode, batch 32"
        embed(["warm up"])
        results["with_model"] = part_two(
            prose(args.model_copies), config, embed, args.rounds, label
        )
    write_result(args.json, results, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
