"""Search latency while a backfill re-cuts every chunk, against idle, in the same run.

Builds a throwaway embedded PostgreSQL holding `--documents` synthetic documents run through the
real pipeline (ONNX model), then, `--runs` times: searches `--idle` queries back to back with
nothing else running (idle), then starts `seams backfill` in a child process with a chunking
setting that changes every chunk (`RECUTS`: another overlap and size cap, alternating, so each
backfill re-cuts the whole corpus) and searches the same queries in a loop until it exits
(during). Readers see only published builds, so a backfill costs a search only the hidden rows
its HNSW scan walks past, plus the machine's CPU the backfill takes.

Reported per run and as medians over runs: p50/p95 of the whole `search_response` call (query
embedding included) and of its database part (`search_ms`), idle vs during, and their ratios
(goal: within 1.5x); answers shorter than the same query's idle answer (goal: none); how many
publications the answers saw during the backfill; the share of chunk ids each backfill changed.

    .venv/bin/python benchmarks/experiments/search_during_backfill.py
    .venv/bin/python benchmarks/experiments/search_during_backfill.py \
        --json benchmarks/experiments/results/search_during_backfill.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.header import with_header

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "experiments" / "results" / "search_during_backfill.json"
RECUTS = ("{overlap_tokens: 24, chunk_size_max: 200}", "{overlap_tokens: 48, chunk_size_max: 230}")
"""The backfills' chunking overrides, alternating: each one changes every chunk's text (the
overlap each chunk repeats) and moves the size-capped boundaries."""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _summary(samples: list[tuple[float, float]]) -> dict[str, float]:
    total = [s[0] for s in samples]
    database = [s[1] for s in samples]
    return {
        "n": len(samples),
        "p50_ms": round(_percentile(total, 50), 2),
        "p95_ms": round(_percentile(total, 95), 2),
        "db_p50_ms": round(_percentile(database, 50), 2),
        "db_p95_ms": round(_percentile(database, 95), 2),
    }


def _queries(texts: list[str], count: int) -> list[str]:
    """Phrases of the documents themselves (eight words from a paragraph's start)."""
    found = []
    for text in texts:
        for paragraph in text.split("\n\n"):
            words = paragraph.replace("#", " ").split()
            if len(words) >= 12:
                found.append(" ".join(words[2:10]))
            if len(found) >= count:
                return found
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--words", type=int, default=1500, help="words per document")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=int, default=60, help="idle searches per run")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None, help=f"write results (e.g. {RESULTS})")
    args = parser.parse_args()

    from seams.resources.embedded_server import server_tempdir

    work = server_tempdir("seams-bench-")
    os.environ["SEAMS_DATA_DIR"] = str(work / "data")
    os.environ.pop("SEAMS_DATABASE_URL", None)
    existing = Path(".seams/models").resolve()
    if existing.is_dir():  # reuse an export (it is verified by sha256 on load)
        (work / "data").mkdir(parents=True)
        (work / "data" / "models").symlink_to(existing)

    from benchmarks.synthetic import document

    inbox = work / "inbox"
    inbox.mkdir()
    texts = [document(seed, args.words) for seed in range(args.documents)]
    for number, text in enumerate(texts):
        (inbox / f"doc{number:03d}.md").write_text(text, encoding="utf-8")

    from seams.environment import SeamsEnvironment
    from seams.models.embedders import OnnxEmbedder
    from seams.models.model_export import export_model
    from seams.orchestration import runner
    from seams.orchestration.definitions import build_definitions
    from seams.orchestration.instance import prepare_instance
    from seams.resources.database import EmbeddedPostgres
    from seams.resources.postgres import PostgresResource
    from seams.settings import load_settings
    from seams.storage.search import search_response

    environment = SeamsEnvironment.from_os()
    seams_instance = prepare_instance(environment)
    defs = build_definitions(load_settings(environment=environment), environment=environment)
    export_model()
    embedder = OnnxEmbedder()
    with seams_instance.open() as instance:
        keys = runner.register_path(inbox, print, defs=defs)
        summary = runner.RunSummary(batches=keys)
        runner.materialize_batches(instance, keys, print, summary, defs=defs)
    postgres = PostgresResource.for_environment(environment)
    queries = _queries(texts, 30)

    def ask(query: str) -> tuple[float, float, int, int | None]:
        started = time.perf_counter()
        response = search_response(postgres, embedder, query, args.k)  # type: ignore[arg-type]
        wall = (time.perf_counter() - started) * 1000
        return wall, response.search_ms, len(response.hits), response.published_seq

    def chunk_ids() -> set[str]:
        with postgres.connection() as conn:
            return {r[0] for r in conn.execute("SELECT chunk_id FROM seams.current_chunks")}

    for query in queries[:5]:  # warm-up: sessions, prepared statements, caches
        ask(query)
    baseline = {q: ask(q)[2] for q in queries}
    runs: list[dict[str, Any]] = []
    for run in range(args.runs):
        idle = [ask(queries[i % len(queries)])[:2] for i in range(args.idle)]
        settings = work / f"seams-{run}.yaml"
        overrides = RECUTS[run % len(RECUTS)]
        settings.write_text(f"chunking:\n  overrides: {overrides}\n", encoding="utf-8")
        before = chunk_ids()
        log = work / f"backfill-{run}.log"
        with log.open("w", encoding="utf-8") as output:  # a file: a pipe could fill and block
            child = subprocess.Popen(
                [sys.executable, "-m", "seams", "backfill", "--json"],
                env={**seams_instance.environment(), "SEAMS_CONFIG": str(settings)},
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        during: list[tuple[float, float]] = []
        short = 0
        seen: set[int | None] = set()
        n = 0
        started = time.perf_counter()
        while child.poll() is None:
            query = queries[n % len(queries)]
            wall, search_ms, hits, seq = ask(query)
            during.append((wall, search_ms))
            short += hits < baseline[query]
            seen.add(seq)
            n += 1
        backfill_s = time.perf_counter() - started
        if child.wait() != 0:
            print(log.read_text(encoding="utf-8")[-4000:], file=sys.stderr)
            raise SystemExit(f"seams backfill failed (exit {child.returncode})")
        after = chunk_ids()
        result = {
            "overrides": overrides,
            "backfill_s": round(backfill_s, 2),
            "idle": _summary(idle),
            "during": _summary(during),
            "short_answers": short,
            "publications_seen": len(seen),
            "chunk_ids_changed": round(1 - len(before & after) / max(1, len(before | after)), 3),
        }
        for part in ("p50_ms", "p95_ms", "db_p50_ms", "db_p95_ms"):
            result[f"ratio_{part.removesuffix('_ms')}"] = round(
                result["during"][part] / result["idle"][part], 3
            )
        runs.append(result)
        print(json.dumps(result))

    medians = {
        name: round(statistics.median(r[name] for r in runs), 3)
        for name in ("ratio_p50", "ratio_p95", "ratio_db_p50", "ratio_db_p95")
    }
    for phase in ("idle", "during"):
        for part in ("p50_ms", "p95_ms", "db_p50_ms", "db_p95_ms"):
            medians[f"{phase}_{part}"] = round(statistics.median(r[phase][part] for r in runs), 2)
    report = {
        "documents": args.documents,
        "words_per_document": args.words,
        "chunks": len(chunk_ids()),
        "k": args.k,
        "cores": os.cpu_count(),
        "runs": runs,
        "median": medians,
        "goal": "during/idle p50 and p95 <= 1.5",
        "short_answers": sum(r["short_answers"] for r in runs),
    }
    print(json.dumps(report["median"], indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_header(report), indent=2) + "\n", encoding="utf-8")
    EmbeddedPostgres.for_environment(environment).stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
