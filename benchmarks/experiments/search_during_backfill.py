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

`--variants` runs the backfill several ways in every run (rotating their order), each against
an idle phase measured just before it: `shipped` (the default settings: `seams backfill` lowers
its own priority and its embedded-server backends' to `execution.niceness`, 10), `normal`
(`execution.niceness: 0`, the backfill at the readers' priority), `threads1` (as shipped, the
backfill's embedder on one onnxruntime thread, `embedder.threads: 1`). Per backfill it also
records where the CPU went: the backfill command's CPU (every thread), the PostgreSQL server's
CPU (all backends, the reader's included) and the reader's own, and the reader's involuntary
context switches per search (preemptions).

    .venv/bin/python benchmarks/experiments/search_during_backfill.py
    .venv/bin/python benchmarks/experiments/search_during_backfill.py \
        --json benchmarks/experiments/results/search_during_backfill.json
    PYTHONPATH=. .venv/bin/python benchmarks/experiments/search_during_backfill.py \
        --variants shipped,normal \
        --json benchmarks/experiments/results/search_during_backfill_variants.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.experiments.process_cpu import postmaster_of, server_cpu_s, wait_measured
from benchmarks.header import with_header

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "experiments" / "results" / "search_during_backfill.json"
RECUTS = ("{overlap_tokens: 24, chunk_size_max: 200}", "{overlap_tokens: 48, chunk_size_max: 230}")
"""The backfills' chunking overrides, alternating: each one changes every chunk's text (the
overlap each chunk repeats) and moves the size-capped boundaries."""
_LAUNCH = """
import sys
import seams.storage
print("imports", seams.storage.__path__[0], flush=True)
sys.argv = ["seams", "backfill", "--json"]
from seams.orchestration.cli import main
raise SystemExit(main())
"""
VARIANTS = ("shipped", "normal", "threads1")
VARIANT_SETTINGS = {
    "shipped": "",
    "normal": "execution:\n  niceness: 0\n",
    "threads1": "embedder:\n  threads: 1\n",
}
"""What each variant adds to the backfill's seams.yaml."""


def _command() -> list[str]:
    """`seams backfill --json`, started through a launcher that prints where `seams` was
    imported from (checked against this process's)."""
    return [sys.executable, "-c", _LAUNCH]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def _summary(samples: list[tuple[float, ...]]) -> dict[str, float]:
    """Percentiles of the whole call, its database part (`search_ms`: the pool's SQL and the
    hits' reads) and its query embedding (`embed_ms`, in the reader's process)."""
    total = [s[0] for s in samples]
    database = [s[1] for s in samples]
    embed = [s[2] for s in samples]
    return {
        "n": len(samples),
        "p50_ms": round(_percentile(total, 50), 2),
        "p95_ms": round(_percentile(total, 95), 2),
        "db_p50_ms": round(_percentile(database, 50), 2),
        "db_p95_ms": round(_percentile(database, 95), 2),
        "embed_p50_ms": round(_percentile(embed, 50), 2),
        "embed_p95_ms": round(_percentile(embed, 95), 2),
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


def _report(
    args: argparse.Namespace, variants: list[str], runs: list[dict[str, Any]], chunks: int
) -> dict[str, Any]:
    """The result so far: every backfill, and medians per variant."""
    ratios = ("ratio_p50", "ratio_p95", "ratio_db_p50", "ratio_db_p95", "ratio_embed_p50")
    costs = ("backfill_s", "backfill_cpu_s", "server_cpu_s", "reader_cpu_s")
    per_variant: dict[str, dict[str, float]] = {}
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        if not mine:
            continue
        medians = {name: round(statistics.median(r[name] for r in mine), 3) for name in ratios}
        for phase in ("idle", "during"):
            for part in ("p50_ms", "p95_ms", "db_p50_ms", "db_p95_ms", "embed_p50_ms"):
                medians[f"{phase}_{part}"] = round(
                    statistics.median(r[phase][part] for r in mine), 2
                )
        for name in (*costs, "preemptions_per_search_idle", "preemptions_per_search_during"):
            medians[name] = round(statistics.median(r[name] for r in mine), 2)
        medians["backfills"] = len(mine)
        per_variant[variant] = medians
    return {
        "documents": args.documents,
        "words_per_document": args.words,
        "chunks": chunks,
        "k": args.k,
        "cores": os.cpu_count(),
        "affinity": sorted(os.sched_getaffinity(0)),
        "reader_threads": len(os.listdir("/proc/self/task")),
        "runs": runs,
        "median": per_variant.get(variants[0], {}) if len(variants) == 1 else per_variant,
        "goal": "during/idle p50 and p95 <= 1.5",
        "short_answers": sum(r["short_answers"] for r in runs),
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=40)
    parser.add_argument("--words", type=int, default=1500, help="words per document")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--idle", type=int, default=60, help="idle searches per run")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument(
        "--variants",
        default="shipped",
        help=f"comma-separated, of {', '.join(VARIANTS)}",
    )
    parser.add_argument(
        "--models", type=Path, default=None, help="an exported models folder to reuse"
    )
    parser.add_argument("--json", type=Path, default=None, help=f"write results (e.g. {RESULTS})")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = sorted(v for v in variants if v not in VARIANTS)
    if unknown or not variants:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")

    from seams.resources.embedded_server import server_tempdir

    work = server_tempdir("seams-bench-")
    os.environ["SEAMS_DATA_DIR"] = str(work / "data")
    os.environ.pop("SEAMS_DATABASE_URL", None)
    # The defaults, whatever seams.yaml the current folder holds (each backfill names its own).
    (work / "seams.yaml").write_text("chunking:\n  overrides: {}\n", encoding="utf-8")
    os.environ["SEAMS_CONFIG"] = str(work / "seams.yaml")
    existing = (args.models or Path(".seams/models")).resolve()
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
    from seams.storage import schema as storage_module
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

    def ask(query: str) -> tuple[float, float, float, int, int | None]:
        started = time.perf_counter()
        response = search_response(postgres, embedder, query, args.k)  # type: ignore[arg-type]
        wall = (time.perf_counter() - started) * 1000
        hits = len(response.hits)
        return wall, response.search_ms, response.embed_ms, hits, response.published_seq

    def chunk_ids() -> set[str]:
        with postgres.connection() as conn:
            return {r[0] for r in conn.execute("SELECT chunk_id FROM seams.current_chunks")}

    def _measure(variant: str, run: int, number: int) -> dict[str, Any]:
        """One idle phase, then one backfill of `variant` with searches until it exits."""
        usage = resource.getrusage(resource.RUSAGE_SELF)
        idle = [ask(queries[i % len(queries)])[:3] for i in range(args.idle)]
        after_idle = resource.getrusage(resource.RUSAGE_SELF)
        settings = work / f"seams-{number}.yaml"
        overrides = RECUTS[number % len(RECUTS)]
        settings.write_text(
            f"chunking:\n  overrides: {overrides}\n{VARIANT_SETTINGS[variant]}", encoding="utf-8"
        )
        before = chunk_ids()
        log = work / f"backfill-{number}.log"
        load = os.getloadavg()
        server_before = server_cpu_s(server)
        during: list[tuple[float, ...]] = []
        state = {"short": 0, "n": 0}
        seen: set[int | None] = set()

        def search_once() -> None:
            query = queries[state["n"] % len(queries)]
            wall, search_ms, embed_ms, hits, seq = ask(query)
            during.append((wall, search_ms, embed_ms))
            state["short"] += hits < baseline[query]
            seen.add(seq)
            state["n"] += 1

        with log.open("w", encoding="utf-8") as output:  # a file: a pipe could fill and block
            child = subprocess.Popen(
                _command(),
                env={**seams_instance.environment(), "SEAMS_CONFIG": str(settings)},
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd=work,  # not a checkout: `seams` comes from sys.path as this process has it
            )
        done = wait_measured(child, search_once)
        server_cpu = server_cpu_s(server) - server_before
        end = resource.getrusage(resource.RUSAGE_SELF)
        if done.returncode != 0:
            print(log.read_text(encoding="utf-8")[-4000:], file=sys.stderr)
            raise SystemExit(f"seams backfill failed (exit {done.returncode})")
        imported = log.read_text(encoding="utf-8").split("\n", 1)[0].removeprefix("imports ")
        if imported != str(Path(storage_module.__file__).parent):
            raise SystemExit(f"the backfill imported {imported}, this process {storage_module}")
        after = chunk_ids()
        reader_cpu = (end.ru_utime + end.ru_stime) - (after_idle.ru_utime + after_idle.ru_stime)
        result: dict[str, Any] = {
            "variant": variant,
            "run": run,
            "overrides": overrides,
            "backfill_s": round(done.wall_s, 2),
            "backfill_cpu_s": round(done.user_s + done.system_s, 2),
            "server_cpu_s": round(server_cpu, 2),
            "reader_cpu_s": round(reader_cpu, 2),
            "backfill_threads_max": done.threads_max,
            "backfill_nice": done.nice,
            "loadavg_1m_before": round(load[0], 2),
            "idle": _summary(idle),
            "during": _summary(during),
            "preemptions_per_search_idle": round(
                (after_idle.ru_nivcsw - usage.ru_nivcsw) / max(1, len(idle)), 2
            ),
            "preemptions_per_search_during": round(
                (end.ru_nivcsw - after_idle.ru_nivcsw) / max(1, len(during)), 2
            ),
            "short_answers": state["short"],
            "publications_seen": len(seen),
            "chunk_ids_changed": round(1 - len(before & after) / max(1, len(before | after)), 3),
        }
        for part in ("p50_ms", "p95_ms", "db_p50_ms", "db_p95_ms", "embed_p50_ms", "embed_p95_ms"):
            result[f"ratio_{part.removesuffix('_ms')}"] = round(
                result["during"][part] / result["idle"][part], 3
            )
        return result

    for query in queries[:5]:  # warm-up: sessions, prepared statements, caches
        ask(query)
    with postgres.connection() as conn:
        server = postmaster_of(conn.info.backend_pid)
    baseline = {q: ask(q)[3] for q in queries}
    runs: list[dict[str, Any]] = []
    backfills = 0
    try:
        for run in range(args.runs):
            for variant in variants[run % len(variants) :] + variants[: run % len(variants)]:
                runs.append(_measure(variant, run, backfills))
                backfills += 1
                print(json.dumps(runs[-1]), flush=True)
                report = _report(args, variants, runs, len(chunk_ids()))
                if args.json:  # after every backfill: a long study keeps what it measured
                    args.json.parent.mkdir(parents=True, exist_ok=True)
                    text = json.dumps(with_header(report), indent=2) + "\n"
                    args.json.write_text(text, encoding="utf-8")
    finally:
        EmbeddedPostgres.for_environment(environment).stop()
    print(json.dumps(report["median"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
