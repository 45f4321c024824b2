"""The whole pipeline on a 100-document, ~300k-word batch: Dagster + storage overhead, backfill.

    .venv/bin/python -m benchmarks.pipeline [--documents 100] [--words 3000]

Measures, in one process on a fresh embedded PostgreSQL and Dagster instance:
1. `chunk_text` alone on every document with the real ONNX embedder (the reference), before
   and after step 2 (the mean is the reference; the two show how much the load drifted);
2. the `chunk_batches` job over the same documents as one batch, one run, all assets
   (extraction, segmentation, embedding through the cache, boundaries, chunks, checks, storage);
3. `seams backfill` after a boundary-threshold change (a new process, as after a code-location
   reload): only `semantic_boundaries` and `chunks` recompute, embeddings come from the cache.
Writes benchmarks/results/pipeline.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.header import write_result

RESULTS = Path(__file__).parent / "results" / "pipeline.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=100)
    parser.add_argument("--words", type=int, default=3000, help="words per document")
    args = parser.parse_args()

    from benchmarks.scratch import scratch_data_dir, write_inbox
    from benchmarks.synthetic import document

    work = scratch_data_dir("seams-bench-")
    inbox = work / "inbox"
    texts = [document(seed, args.words) for seed in range(args.documents)]
    write_inbox(inbox, texts)
    words = sum(len(t.split()) for t in texts)

    from seams.chunking import chunk_text
    from seams.environment import SeamsEnvironment
    from seams.models.embedders import OnnxEmbedder
    from seams.models.model_export import export_model
    from seams.orchestration import runner
    from seams.orchestration.definitions import build_definitions
    from seams.orchestration.instance import prepare_instance
    from seams.settings import load_settings

    environment = SeamsEnvironment.from_os()
    seams_instance = prepare_instance(environment)
    defs = build_definitions(load_settings(environment=environment), environment=environment)
    export_model()
    embedder = OnnxEmbedder()
    embedder.embed(["warm up the session"])

    def chunk_all() -> tuple[float, int]:
        started = time.perf_counter()
        made = 0
        for number, text in enumerate(texts):
            made += len(
                chunk_text(
                    text, document_id=f"doc{number}", embed=embedder.embed,
                    token_counter=embedder.count_tokens,
                )
            )  # fmt: skip
        return time.perf_counter() - started, made

    # A-B-A: chunk_text before and after the pipeline run, so a change in machine load during
    # the benchmark shows up as a spread instead of biasing the ratio.
    before_s, reference_chunks = chunk_all()

    with seams_instance.open() as instance:
        keys = runner.register_path(inbox, print, defs=defs)
        summary = runner.RunSummary(batches=keys)
        started = time.perf_counter()
        runner.materialize_batches(instance, keys, print, summary, defs=defs)
        pipeline_s = time.perf_counter() - started
    runner.summarize(summary, defs=defs)
    after_s, _ = chunk_all()
    reference_s = (before_s + after_s) / 2

    settings = work / "seams.yaml"
    settings.write_text("chunking:\n  overrides: {percentile: 35.0}\n", encoding="utf-8")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "seams", "backfill", "--json"],
        env={**seams_instance.environment(), "SEAMS_CONFIG": str(settings)},
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    backfill_wall_s = time.perf_counter() - started
    backfill = json.loads(done.stdout.strip().splitlines()[-1])

    result = {
        "documents": args.documents,
        "words": words,
        "cores": os.cpu_count(),
        "chunk_text_s": round(reference_s, 2),
        "chunk_text_before_after_s": [round(before_s, 2), round(after_s, 2)],
        "chunk_text_chunks": reference_chunks,
        "pipeline_s": round(pipeline_s, 2),
        "pipeline_chunks": summary.chunks,
        "pipeline_words_per_s": round(words / pipeline_s),
        "overhead_vs_chunk_text": round(pipeline_s / reference_s - 1, 3),
        "backfill_s": round(backfill["seconds"], 2),
        "backfill_wall_s": round(backfill_wall_s, 2),
        "backfill_fraction_of_first_run": round(backfill["seconds"] / pipeline_s, 3),
        "backfill_texts_embedded": backfill["texts_embedded"],
    }
    print(
        "\n| measure | value |\n|---|---|\n"
        + "\n".join(f"| {k} | {v} |" for k, v in result.items())
    )
    write_result(RESULTS, result)
    from seams.environment import SeamsEnvironment
    from seams.resources.database import EmbeddedPostgres

    EmbeddedPostgres.for_environment(SeamsEnvironment.from_os()).stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
