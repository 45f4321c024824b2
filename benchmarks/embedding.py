"""Embedding throughput: `OnnxEmbedder` vs sentence-transformers `encode`, same run, same text.

Usage:
    python -m benchmarks.embedding [--rounds 5] [--words 10000] [--threads N] [--text FILE]
        [--json PATH]

The text (>= 10k words of technical prose, generated deterministically unless `--text` is given)
is split into sentences; each round embeds all of them once with every contender, in interleaved
order, so machine noise hits all alike. Reported: median seconds, sentences/s, words/s, the ratio
against sentence-transformers measured in the same run, and the minimum cosine of each
contender's embeddings against sentence-transformers' (the fidelity bar: 0.999 for fp32, 0.99
for int8 against fp32). The exported model is created first if missing (needs the export extra).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.header import write_result  # noqa: E402
from seams.models.embedders import OnnxEmbedder  # noqa: E402
from seams.models.model_export import export_model, packaged_model_dir  # noqa: E402

DEFAULT_JSON = REPO / "benchmarks" / "results" / "embedding.json"
BATCH_SIZES = (16, 32, 64)

_TERMS = (
    "the scheduler",
    "each partition",
    "the write-ahead log",
    "a consumer group",
    "the tokenizer",
    "the embedding cache",
    "an index scan",
    "the connection pool",
    "a retry policy",
    "the sensor",
    "the vector index",
    "every worker",
    "the planner",
    "a materialized view",
    "the load balancer",
    "the batch manifest",
    "a checkpoint",
    "the garbage collector",
    "the replication slot",
)
_ACTIONS = (
    "reads",
    "invalidates",
    "throttles",
    "serialises",
    "compacts",
    "validates",
    "shards",
    "replays",
    "deduplicates",
    "streams",
    "caches",
    "rebalances",
    "prunes",
    "locks",
)
_QUALIFIERS = (
    "under sustained load",
    "after a failover",
    "when the queue is empty",
    "in constant memory",
    "before the transaction commits",
    "without blocking readers",
    "once per partition",
    "at the cost of extra latency",
    "unless the cache is cold",
    "as long as clocks agree",
)
_CONNECTIVES = ("Therefore", "However", "In practice", "As a result", "By contrast", "Meanwhile")


def technical_text(n_words: int, seed: int = 0) -> str:
    """Deterministic technical prose of at least `n_words` words, in paragraphs."""
    rng = random.Random(seed)
    sentences: list[str] = []
    words = 0
    while words < n_words:
        clause = f"{rng.choice(_TERMS)} {rng.choice(_ACTIONS)} {rng.choice(_TERMS)}"
        parts = [clause, rng.choice(_QUALIFIERS)]
        if rng.random() < 0.5:
            parts += ["while", f"{rng.choice(_TERMS)} {rng.choice(_ACTIONS)} {rng.choice(_TERMS)}"]
        if rng.random() < 0.3:
            parts.append(f"(about {rng.randint(2, 950)} ms at p{rng.choice((50, 95, 99))})")
        sentence = " ".join(parts)
        if rng.random() < 0.25:
            sentence = f"{rng.choice(_CONNECTIVES)}, {sentence}"
        sentences.append(sentence[0].upper() + sentence[1:] + ".")
        words += len(sentence.split())
    paragraphs = [" ".join(sentences[i : i + 6]) for i in range(0, len(sentences), 6)]
    return "\n\n".join(paragraphs)


def split_sentences(text: str) -> list[str]:
    """A plain regex splitter: good enough to give both contenders the same inputs."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


def _time(fn: Callable[[], np.ndarray]) -> tuple[float, np.ndarray]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def run(rounds: int, text: str, model_dir: Path | None, threads: int = 0) -> dict[str, object]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    if threads:  # like for like: both engines get the same number of intra-op threads
        torch.set_num_threads(threads)

    manifest = export_model(model_dir, quantize=True)
    sentences = split_sentences(text)
    n_words = len(text.split())
    st_model = SentenceTransformer(str(packaged_model_dir()), device="cpu")

    contenders: dict[str, Callable[[], np.ndarray]] = {
        "sentence-transformers encode (bs 32)": lambda: st_model.encode(
            sentences, batch_size=32, normalize_embeddings=True, convert_to_numpy=True
        ),
    }
    meta: dict[str, dict[str, object]] = {
        "sentence-transformers encode (bs 32)": {"engine": "torch", "variant": "fp32", "batch": 32}
    }
    for variant in ("fp32", "int8"):
        if variant not in manifest.variants:
            continue
        for size in BATCH_SIZES:
            resource = OnnxEmbedder(
                model_dir=str(manifest.directory),
                variant=variant,
                batch_size=size,
                intra_op_threads=threads,
            )
            name = f"OnnxEmbedder {variant} (bs {size})"
            contenders[name] = lambda r=resource: r.embed(sentences)
            meta[name] = {"engine": "onnxruntime", "variant": variant, "batch": size}

    outputs = {name: fn() for name, fn in contenders.items()}  # warm-up (and fidelity inputs)
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            seconds, _out = _time(fn)
            times[name].append(seconds)

    reference_name = next(iter(contenders))
    reference = outputs[reference_name]
    ref_median = statistics.median(times[reference_name])
    rows = []
    for name in contenders:
        median = statistics.median(times[name])
        cosines = np.einsum("nd,nd->n", outputs[name], reference)
        rows.append(
            {
                "contender": name,
                **meta[name],
                "median_s": round(median, 4),
                "s_per_10k_words": round(median * 10_000 / n_words, 4),
                "sentences_per_s": round(len(sentences) / median, 1),
                "words_per_s": round(n_words / median, 1),
                "speedup_vs_st": round(ref_median / median, 2),
                "min_cosine_vs_st": round(float(cosines.min()), 5),
                "runs_s": [round(t, 4) for t in times[name]],
            }
        )
    return {
        "benchmark": "embedding",
        "words": n_words,
        "sentences": len(sentences),
        "rounds": rounds,
        "threads": threads or "default",
        "model_id": manifest.model_id,
        "int8_evaluation": manifest.int8_evaluation,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            **manifest.versions,
        },
        "results": rows,
    }


def markdown(report: dict[str, object]) -> str:
    lines = [
        f"{report['words']} words, {report['sentences']} sentences, median of "
        f"{report['rounds']} interleaved rounds, {report['machine']['cpus']} CPUs, "  # type: ignore[index]
        f"threads: {report['threads']}",
        "",
        "| contender | s / 10k words | sentences/s | words/s | vs ST | min cos vs ST |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in report["results"]:  # type: ignore[attr-defined]
        lines.append(
            f"| {row['contender']} | {row['s_per_10k_words']:.3f} | {row['sentences_per_s']:.0f} "
            f"| {row['words_per_s']:.0f} | {row['speedup_vs_st']:.2f}x "
            f"| {row['min_cosine_vs_st']:.4f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--words", type=int, default=10_000, help="size of the generated text")
    parser.add_argument("--text", type=Path, help="embed this file's text instead")
    parser.add_argument("--model-dir", type=Path, help="exported model folder (default data dir)")
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (0: default)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where to write JSON")
    args = parser.parse_args(argv)

    text = args.text.read_text() if args.text else technical_text(args.words)
    report = run(args.rounds, text, args.model_dir, args.threads)
    print(markdown(report))
    write_result(args.json, report, argv)
    print(f"\nJSON: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
