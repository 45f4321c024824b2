"""Large documents: peak memory and words/s of the chunking path at 1, 10 and 60 MB of text.

Issue 19 found a 60 MB text file at 15.5 GB RSS after 16 minutes in the pipeline. This measures
the pure part of that path (`extract_document` + `chunk_text`, no Dagster, no database) on one
document of each size, each in a fresh child process so every peak is its own:

- `peak RSS`: the child's `ru_maxrss`, and the RSS growth after each stage (its outputs kept
  alive, as `chunk_text` keeps them), which says where the memory goes;
- `words/s`: `chunk_text` end to end, against 1 MB of the same text cut into ~10 KB documents
  (the per-word rate on small documents), measured right before each size.

Text: the topic passages of `benchmarks/corpus/topics` (public-domain-style prose written for
the benchmarks) in a seeded shuffled order, paragraphs kept, repeated up to the size. Token
counts use the real MiniLM tokenizer. Embeddings come from a deterministic stand-in (hashed bag
of words, 384-d float32 unit vectors: the model's shape, so the same memory) because ONNX
inference of 10 M words would take hours on two cores and is not what grows here.

A watchdog kills a child whose RSS passes --rss-cap-gb (default 6) so the benchmark never takes
a shared machine down; such a row reports "> cap".

    .venv/bin/python benchmarks/large_document.py                      # 1, 10, 60 MB
    .venv/bin/python benchmarks/large_document.py --json benchmarks/results/large_document.json
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.header import write_result

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for path in (str(ROOT), str(HERE)):
    if path not in sys.path:
        sys.path.insert(0, path)

SMALL_DOC_BYTES = 10_000
DIMS = 384


def build_text(size_bytes: int, seed: int = 19) -> str:
    """Prose paragraphs from the topic corpus, shuffled per round, up to `size_bytes` (UTF-8)."""
    from topic_shift import load_passages

    paragraphs = [p for text in load_passages().values() for p in text.split("\n\n") if p.strip()]
    rng = random.Random(seed)
    out: list[str] = []
    total = 0
    while total < size_bytes:
        rng.shuffle(paragraphs)
        for paragraph in paragraphs:
            out.append(paragraph)
            total += len(paragraph.encode()) + 2
            if total >= size_bytes:
                break
    return "\n\n".join(out)


def hashed_vectors(texts: list[str]) -> Any:
    """Deterministic unit vectors with the model's shape (a stand-in for ONNX inference)."""
    import zlib

    import numpy as np

    out = np.zeros((len(texts), DIMS), dtype=np.float32)
    out[:, 0] = 1e-3
    for row, text in enumerate(texts):
        for word in text.lower().split():
            out[row, zlib.crc32(word.encode()) % DIMS] += 1.0
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def _rss_mib() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_stages(size_mb: float) -> dict[str, Any]:
    """One document through each stage of `chunk_text`, RSS after each (outputs kept alive)."""
    from topic_shift import token_counter

    from seams.chunking import (
        ChunkingConfig,
        assemble_chunks,
        candidate_vectors,
        detect_boundaries,
        embed_candidates,
        gap_similarities,
        segment,
    )
    from seams.extraction import ExtractionLimits, extract_document

    config = ChunkingConfig()
    counter = token_counter()
    content = build_text(int(size_mb * 2**20)).encode()
    baseline = _rss_mib()
    growth: dict[str, float] = {}
    peaks: dict[str, float] = {}
    times: dict[str, float] = {}
    last = baseline

    def mark(stage: str, started: float) -> None:
        nonlocal last
        times[stage] = time.perf_counter() - started
        now = _rss_mib()
        growth[stage] = now - last
        peaks[stage] = _peak_mib()
        last = now

    started = time.perf_counter()
    limits = ExtractionLimits(chars_max=2**40, seconds_max=1e9)  # measuring, not limiting
    doc = extract_document(content, "large.txt", limits)
    assert doc.error is None, doc.error
    text = doc.text
    mark("extract (decode)", started)
    started = time.perf_counter()
    candidates = segment(text, config, counter)
    mark("segment + count tokens", started)
    started = time.perf_counter()
    vectors = embed_candidates(text, candidates, config, hashed_vectors)
    mark("embed (stand-in, 384-d float32)", started)
    started = time.perf_counter()
    similarities = gap_similarities(vectors, len(candidates), config)
    own = candidate_vectors(vectors, len(candidates), config)
    mark("similarities", started)
    started = time.perf_counter()
    boundaries = detect_boundaries(similarities, candidates, config, vectors=own)
    mark("boundaries", started)
    started = time.perf_counter()
    chunks = assemble_chunks(text, candidates, boundaries, config, document_id="large",
                             embeddings=own, window_counter=counter)  # fmt: skip
    mark("assemble + ids", started)
    return {
        "size_mb": size_mb,
        "chars": len(text),
        "words": len(text.split()),
        "candidates": len(candidates),
        "chunks": len(chunks),
        "baseline_mib": baseline,
        "growth_mib": growth,
        "peak_after_mib": peaks,
        "seconds": times,
        "peak_mib": _peak_mib(),
    }


def child_whole(size_mb: float) -> dict[str, Any]:
    """`chunk_text` end to end on one document of `size_mb`, or on 10 KB pieces of the same text
    when `size_mb` is negative (the small-document reference rate)."""
    from topic_shift import token_counter

    from seams.chunking import ChunkingConfig, chunk_text

    config = ChunkingConfig()
    counter = token_counter()
    text = build_text(int(abs(size_mb) * 2**20))
    if size_mb > 0:
        documents = [text]
    else:
        documents, piece = [], []
        for paragraph in text.split("\n\n"):
            piece.append(paragraph)
            if sum(len(p) for p in piece) >= SMALL_DOC_BYTES:
                documents.append("\n\n".join(piece))
                piece = []
    words = sum(len(d.split()) for d in documents)
    baseline = _rss_mib()
    started = time.perf_counter()
    chunks = 0
    for number, document in enumerate(documents):
        chunks += len(chunk_text(document, document_id=f"d{number}", config=config,
                                 embed=hashed_vectors, token_counter=counter))  # fmt: skip
    seconds = time.perf_counter() - started
    return {
        "size_mb": size_mb,
        "documents": len(documents),
        "words": words,
        "chunks": chunks,
        "seconds": seconds,
        "words_per_s": words / seconds,
        "baseline_mib": baseline,
        "peak_mib": _peak_mib(),
    }


def run_child(mode: str, size_mb: float, cap_gb: float) -> dict[str, Any]:
    """Run one measurement in a fresh process; kill it when its RSS passes `cap_gb`."""
    import psutil

    command = [sys.executable, str(Path(__file__).resolve()), "--child", mode, str(size_mb)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    watched = psutil.Process(proc.pid)
    peak = 0.0
    while proc.poll() is None:
        try:
            rss = watched.memory_info().rss / 2**30
        except psutil.NoSuchProcess:
            break
        peak = max(peak, rss)
        if rss > cap_gb:
            proc.kill()
            proc.wait()
            return {"size_mb": size_mb, "mode": mode, "killed_over_gb": cap_gb}
        time.sleep(0.2)
    out = proc.stdout.read() if proc.stdout else ""
    if proc.returncode != 0:
        raise SystemExit(f"child {mode} {size_mb} MB failed ({proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    result["mode"] = mode
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1, 10, 60], help="MB")
    parser.add_argument("--rss-cap-gb", type=float, default=6.0)
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "SIZE_MB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, size = args.child[0], float(args.child[1])
        result = child_stages(size) if mode == "stages" else child_whole(size)
        print(json.dumps(result), flush=True)
        return 0

    header = (
        f"{'size':>6s} {'words':>11s} {'cands':>9s} {'chunks':>8s} {'peak RSS':>10s} "
        f"{'words/s':>10s} {'small docs':>11s} {'ratio':>6s}"
    )
    rows = [header]
    results: list[dict[str, Any]] = []
    for size in args.sizes:
        # The small-document rate is measured right before each size: on a shared machine the
        # load changes within minutes, and only neighbouring measurements compare.
        reference = run_child("whole", -1.0, args.rss_cap_gb)  # 1 MB as ~10 KB documents
        whole = run_child("whole", size, args.rss_cap_gb)
        stages = run_child("stages", size, args.rss_cap_gb)
        whole["reference_words_per_s"] = reference["words_per_s"]
        results += [reference, whole, stages]
        if "killed_over_gb" in whole:
            rows.append(f"{size:5g}M  > {args.rss_cap_gb:g} GiB RSS: stopped")
        else:
            ratio = whole["words_per_s"] / reference["words_per_s"]
            rows.append(
                f"{size:5g}M {whole['words']:11,d} {stages.get('candidates', 0):9,d} "
                f"{whole['chunks']:8,d} {whole['peak_mib'] / 1024:8.2f}Gi "
                f"{whole['words_per_s']:10,.0f} {reference['words_per_s']:11,.0f} {ratio:6.2f}"
            )
        if "growth_mib" in stages:
            rows.append(f"        {'stage':34s} {'kept MiB':>9s} {'peak MiB':>9s} {'s':>7s}")
            for stage, kept in stages["growth_mib"].items():
                rows.append(
                    f"        {stage:34s} {kept:9,.0f} {stages['peak_after_mib'][stage]:9,.0f} "
                    f"{stages['seconds'][stage]:7.1f}"
                )
    print("\n".join(rows))
    write_result(args.json, {"results": results}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
