"""Topic segmentation on Choi's public corpus (sets 2 and 3): Pk, WindowDiff, boundary recall.

Each Choi document is ten segments, each the start of a different Brown-corpus text, so every
reference boundary is a real topic change. Documents are fed as plain text (the sentences joined
by single spaces); a chunk start maps to the nearest sentence start. Scores are over sentence
positions: Pk and WindowDiff with k = half the mean reference segment length (lower is better),
boundary recall exactly and within +-1 sentence, chunks per document beside the true segments.
Set 1 is held out for independent evaluation and refused. Data: `../shared/data/choi/` (from
the public koomri/text-segmentation repository), never shipped with Seams.

Systems, all with the same all-MiniLM-L6-v2 through Seams' `OnnxEmbedder` (disk-cached by text):
Seams `default` and `fast` (static boundary model), each with its default sizes and with no size
limits; a fixed 200-token split; LangChain's and chonkie's SemanticChunker at their defaults.

    .venv/bin/python -m benchmarks.choi --json benchmarks/results/choi.json
    .venv/bin/python -m benchmarks.choi --sets 2/3-11 --systems seams_default --limit 10

In-process, while tuning (`segmenter`: text -> chunk start chars)::

    from benchmarks.choi import evaluate_choi
    evaluate_choi(lambda text: [c.start_char for c in chunk_text(text, ...)], sets=["2/3-11"])
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.public_data import (
    CHOI_SETS,
    DEFAULT_DATA,
    ChoiDocument,
    Segmenter,
    add_common_arguments,
    cached_embedder,
    load_choi_set,
    make_system,
    parse_arguments,
    run_and_report,
    score_segmenter,
    unbounded,
)

SYSTEMS: tuple[str, ...] = (
    "seams_default",
    "seams_default_unbounded",
    "seams_fast",
    "seams_fast_unbounded",
    "fixed_200",
    "langchain",
    "chonkie",
)
__all__ = ["CHOI_SETS", "SYSTEMS", "evaluate_choi", "unbounded"]


@functools.lru_cache(maxsize=32)
def _documents(data: str, choi_set: str, limit: int | None) -> tuple[ChoiDocument, ...]:
    return tuple(load_choi_set(data, choi_set, limit))


def evaluate_choi(
    segmenter: Segmenter,
    sets: Sequence[str] = CHOI_SETS,
    data: Path | str = DEFAULT_DATA,
    limit: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Per-set mean scores of `segmenter` (text -> chunk start chars) on Choi's sets.

    Each set maps to pk, windowdiff, recall_exact, recall_within_1, chunks_per_doc,
    segments_per_doc and docs. `limit`: the first N documents of each set. Documents are read
    once per process."""
    return {s: score_segmenter(segmenter, _documents(str(data), s, limit)) for s in sets}


def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = cached_embedder(args.cache_dir, "choi")
    results: dict[str, dict[str, Any]] = {s: {} for s in args.sets}
    systems = {}
    for key in args.systems:
        system = make_system(key, embedder, dict(args.seams))
        systems[key] = {"label": system.label, "settings": system.settings}
        for choi_set in args.sets:
            started = time.perf_counter()
            row = evaluate_choi(system.starts, [choi_set], args.data, args.limit)[choi_set]
            row["seconds"] = round(time.perf_counter() - started, 1)
            results[choi_set][key] = row
            embedder.save()
            print(
                f"{choi_set:7s} {system.label:45s} Pk {row['pk']:.3f} WD {row['windowdiff']:.3f} "
                f"({row['seconds']:.0f} s, {embedder.embedded} texts embedded so far)",
                flush=True,
            )
    return {
        "benchmark": "choi",
        "data": str(args.data),
        "sets": list(args.sets),
        "limit": args.limit,
        "model": {"name": "all-MiniLM-L6-v2", "onnx_sha256": embedder.model_id},
        "unbounded_config": _unbounded_note(),
        "systems": systems,
        "results": results,
        "texts_embedded": embedder.embedded,
    }


def _unbounded_note() -> dict[str, Any]:
    from seams import ChunkingConfig

    config = unbounded(ChunkingConfig())
    return {
        "chunk_size_min": config.chunk_size_min,
        "chunk_size_target": config.chunk_size_target,
        "chunk_size_max": config.chunk_size_max,
    }


def print_tables(payload: dict[str, Any]) -> None:
    for choi_set, rows in payload["results"].items():
        if not rows:
            continue
        docs = next(iter(rows.values()))["docs"]
        print(f"\nChoi set {choi_set} ({docs} documents; Pk / WindowDiff lower is better)\n")
        print(
            f"{'system':45s} {'Pk':>6s} {'WD':>6s} {'recall':>7s} {'+-1':>6s} "
            f"{'chunks/doc':>10s} {'segments/doc':>12s}"
        )
        for key, row in rows.items():
            print(
                f"{payload['systems'][key]['label']:45s} {row['pk']:6.3f} {row['windowdiff']:6.3f} "
                f"{row['recall_exact']:7.2f} {row['recall_within_1']:6.2f} "
                f"{row['chunks_per_doc']:10.1f} {row['segments_per_doc']:12.1f}"
            )
    print(
        "\nrecall: share of reference boundaries hit exactly; +-1: within one sentence. "
        f"{payload['texts_embedded']} texts embedded, {payload['seconds']:.0f} s."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding choi/")
    parser.add_argument("--sets", nargs="+", default=list(CHOI_SETS), choices=CHOI_SETS)
    parser.add_argument(
        "--systems", nargs="+", default=list(SYSTEMS), choices=[*SYSTEMS, "fixed_400"]
    )
    add_common_arguments(parser, limit_help="documents per set (first N), for quick runs")
    return run_and_report(parse_arguments(parser, argv), argv, run, print_tables)


if __name__ == "__main__":
    raise SystemExit(main())
