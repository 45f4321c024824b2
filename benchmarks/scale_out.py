"""Scale-out on Celery: the same 20-document workload in-process and on 1 and 2 workers.

    .venv/bin/python -m benchmarks.scale_out [--documents 20] [--words 1500] [--batches 2]

Every variant gets a fresh database on one embedded PostgreSQL (nothing cached from the others)
and registers the same files as `--batches` batches, then runs them as one backfill:

- `in_process`: what `seams run` does by default: one run over all batches, every step here;
- `celery_1`, `celery_2`: `execution.executor: celery`, `backfill.max_batches_per_run` = one
  batch per run, 1 or 2 `seams worker` processes (concurrency 1 each) on a private redis-server;
  the backfill's runs go at once, their steps on the workers. Workers start before the clock
  and are cold (their first step loads Dagster, the code location and the model).

Reported: wall time of the backfill, words/s, and the per-step hand-off: for every step, the
time from the previous step's end in its run (or the run's start) to the step's start, i.e.
what it costs to hand a step to the executor and have it picked up (median and max).
Writes benchmarks/results/scale_out.json. On a 2-core machine two workers share two cores with
the run orchestration and PostgreSQL, which caps the gain; read the ratios, not the absolutes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from benchmarks.header import write_result
from tests.support.processes import start_redis, start_workers, stop_group

RESULTS = Path(__file__).parent / "results" / "scale_out.json"


def _handoffs(instance, run_ids: list[str]) -> tuple[list[float], float]:
    """Per-step hand-off gaps (s) and total step compute time (s) over `run_ids`."""
    gaps, compute = [], 0.0
    for run_id in run_ids:
        record = instance.get_run_record_by_id(run_id)
        previous_end = record.start_time
        started = {}
        for entry in instance.all_logs(run_id):
            event = entry.dagster_event
            if event is None:
                continue
            if event.is_step_start:
                started[event.step_key] = entry.timestamp
                gaps.append(entry.timestamp - previous_end)
            elif event.is_step_success and event.step_key in started:
                compute += entry.timestamp - started[event.step_key]
                previous_end = entry.timestamp
    return gaps, compute


def _variant(
    name: str, workers: int, base_url: str, redis_url: str, files: list[list[Path]], work: Path
) -> dict[str, object]:
    import psycopg
    from psycopg import sql

    from seams.orchestration import runner
    from seams.orchestration.definitions import build_definitions
    from seams.orchestration.instance import prepare_instance
    from seams.resources.database import DAGSTER_URL_ENV, URL_ENV, database_url_for
    from seams.settings import load_settings

    database = f"bench_{name}"
    with psycopg.connect(base_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    url = database_url_for(base_url, database)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    settings_file = work / f"{name}.yaml"
    executor = "celery" if workers else "in_process"
    per_run = "" if not workers else "backfill:\n  max_batches_per_run: 1\n"
    settings_file.write_text(f"execution:\n  executor: {executor}\n{per_run}", encoding="utf-8")
    os.environ[URL_ENV] = url
    os.environ.pop(DAGSTER_URL_ENV, None)
    os.environ["SEAMS_CONFIG"] = str(settings_file)
    os.environ["SEAMS_CELERY_BROKER_URL"] = f"{redis_url}/0"
    os.environ["SEAMS_CELERY_BACKEND_URL"] = f"{redis_url}/1"
    sys.modules.pop("seams.orchestration.location", None)

    seams_instance = prepare_instance()
    defs = build_definitions(load_settings(settings_file))
    names = [f"bench{number}" for number in range(1, workers + 1)]
    procs = start_workers(names, seams_instance.environment(), work)
    try:
        with seams_instance.open() as instance:
            keys = []
            for number, batch in enumerate(files):
                folder = work / name / f"batch_{number}"
                folder.mkdir(parents=True)
                for path in batch:
                    shutil.copy(path, folder / path.name)
                keys.extend(runner.register_path(folder, lambda _m: None, defs=defs))
            summary = runner.RunSummary(batches=keys)
            started = time.perf_counter()
            runner.materialize_batches(instance, keys, lambda _m: None, summary, defs=defs)
            wall_s = time.perf_counter() - started
            gaps, compute_s = _handoffs(instance, summary.run_ids)
    finally:
        stop_group(*procs)
    runner.summarize(summary, defs=defs)
    return {
        "variant": name,
        "workers": workers,
        "runs": len(summary.run_ids),
        "wall_s": round(wall_s, 2),
        "words": summary.words,
        "words_per_s": round(summary.words / wall_s),
        "chunks": summary.chunks,
        "steps": len(gaps),
        "step_compute_s": round(compute_s, 2),
        "handoff_median_s": round(statistics.median(gaps), 3),
        "handoff_max_s": round(max(gaps), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--words", type=int, default=1500, help="words per document")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--variants", default="in_process,celery_1,celery_2")
    args = parser.parse_args()

    from benchmarks.scratch import scratch_data_dir, write_inbox

    work = scratch_data_dir("seams-scale-")

    from benchmarks.synthetic import document
    from seams.models.model_export import export_model
    from seams.resources.database import EmbeddedPostgres

    export_model()
    inbox = work / "inbox"
    paths = write_inbox(inbox, [document(number, args.words) for number in range(args.documents)])
    files = [paths[i :: args.batches] for i in range(args.batches)]

    server = EmbeddedPostgres(work / "pg")
    base_url = server.start()
    redis_proc, redis_url = start_redis(work)
    results = []
    try:
        for variant in args.variants.split(","):
            workers = 0 if variant == "in_process" else int(variant.rsplit("_", 1)[1])
            results.append(_variant(variant, workers, base_url, redis_url, files, work))
            print(json.dumps(results[-1]), flush=True)
    finally:
        stop_group(redis_proc)
        server.stop()
    baseline = next((r for r in results if r["variant"] == "in_process"), results[0])
    for row in results:
        row["speed_vs_in_process"] = round(baseline["wall_s"] / row["wall_s"], 2)
    columns = list(results[0])
    print("\n| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in results:
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    write_result(
        RESULTS,
        {
            "cores": os.cpu_count(),
            "documents": args.documents,
            "batches": args.batches,
            "results": results,
        },
    )
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
