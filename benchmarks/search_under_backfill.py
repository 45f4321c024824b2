"""Search latency while a `seams backfill` runs from the command line, against idle, same run.

A throwaway data dir (its own embedded PostgreSQL) is indexed once with `seams run` over a
corpus folder; then, per round, the settings' `chunking.overrides.chunk_size_max` is flipped so
every batch's boundaries, chunks and index are unsynced, and `seams backfill` (a child process,
at the settings' `execution.niceness`, as a user starts it) recomputes them while this process
searches back to back (`search_response`, hybrid, k=5, the queries of the retrieval evaluation),
as a reader would. Idle searches run just before each backfill. Reported: p50 / p95 of the
searches idle and during the backfill (medians over rounds), their ratio, the backfill's wall
time, and the niceness of the server, of a reader's backend and of the backfill's backends
(from /proc, sampled while it runs).

    .venv/bin/python benchmarks/search_under_backfill.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUERIES = (
    "how a honey bee colony is organised around its queen",
    "why emulsions like mayonnaise hold oil and water together",
    "what the chunk size limits do to a semantic chunker",
    "how search combines dense and lexical scores",
    "which settings change when a model is switched",
)


def niceness(pid: int) -> int | None:
    """A process's niceness (field 19 of /proc/<pid>/stat), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[16])
    except OSError:
        return None


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def write_settings(path: Path, size_max: int) -> None:
    path.write_text(
        f"chunking:\n  overrides:\n    chunk_size_max: {size_max}\nexecution:\n  niceness: 10\n",
        encoding="utf-8",
    )


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="seams-bf-", dir="/tmp"))
    try:
        measure(root)
    finally:  # the throwaway server and data dir go, whatever stopped the measurement
        env = {**os.environ, "SEAMS_DATA_DIR": str(root / "data")}
        env["SEAMS_CONFIG"] = str(root / "seams.yaml")
        stop = [sys.executable, "-m", "seams", "db", "stop"]
        subprocess.run(stop, env=env, check=False, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


def measure(root: Path) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=None, help="folder to index")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-searches", type=int, default=60)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    from seams.paths import sample_corpus

    corpus = args.corpus or sample_corpus()
    os.chmod(root, 0o755)  # the embedded server's user must enter it (as root)
    settings = root / "seams.yaml"
    write_settings(settings, 256)
    env = {**os.environ, "SEAMS_DATA_DIR": str(root / "data"), "SEAMS_CONFIG": str(settings)}
    for name in ("SEAMS_DATABASE_URL", "SEAMS_DAGSTER_DATABASE_URL", "DAGSTER_HOME"):
        env.pop(name, None)
    os.environ.update({k: env[k] for k in ("SEAMS_DATA_DIR", "SEAMS_CONFIG")})
    seams = [sys.executable, "-m", "seams"]
    started = time.perf_counter()
    subprocess.run([*seams, "run", str(corpus)], env=env, check=True, capture_output=True)
    print(f"indexed {corpus} in {time.perf_counter() - started:.1f} s", flush=True)

    from seams.environment import SeamsEnvironment
    from seams.resources.embedder import OnnxEmbedderResource
    from seams.resources.postgres import PostgresResource
    from seams.settings import load_settings
    from seams.storage.search import search_response

    environment = SeamsEnvironment.from_os()
    loaded = load_settings(environment=environment)
    postgres = PostgresResource.for_environment(environment)
    embedder = OnnxEmbedderResource.for_environment(environment, loaded.embedder)

    def search(i: int) -> float:
        begun = time.perf_counter()
        search_response(postgres, embedder, QUERIES[i % len(QUERIES)], 5)
        return (time.perf_counter() - begun) * 1000

    for i in range(10):  # warm: the model, the pool, the caches
        search(i)
    with postgres.connection() as conn:
        reader_backend = niceness(conn.info.backend_pid)
        pgdata = Path(conn.execute("SHOW data_directory").fetchone()[0])
    server = niceness(int((pgdata / "postmaster.pid").read_text().split()[0]))
    rounds = []
    for number in range(args.rounds):
        idle = [search(i) for i in range(args.idle_searches)]
        write_settings(settings, 200 if number % 2 == 0 else 256)
        begun = time.perf_counter()
        child = subprocess.Popen(
            [*seams, "backfill"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        during: list[float] = []
        batch_backends: set[int | None] = set()
        i = 0
        while child.poll() is None:
            during.append(search(i))
            i += 1
            if i % 20 == 0:
                with postgres.connection() as conn:
                    rows = conn.execute(
                        "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                        " AND pid <> pg_backend_pid() AND datname = 'seams'"
                    ).fetchall()
                batch_backends |= {niceness(pid) for (pid,) in rows}
        seconds = time.perf_counter() - begun
        if child.returncode != 0:
            raise SystemExit(f"seams backfill failed: {child.stderr.read().decode()[-2000:]}")
        rounds.append(
            {
                "idle_p50": percentile(idle, 0.5),
                "idle_p95": percentile(idle, 0.95),
                "during_p50": percentile(during, 0.5),
                "during_p95": percentile(during, 0.95),
                "searches_during": len(during),
                "backfill_seconds": round(seconds, 1),
                "backend_niceness_seen": sorted(n for n in batch_backends if n is not None),
            }
        )
        print(json.dumps(rounds[-1]), flush=True)
    result = {
        name: round(statistics.median(r[name] for r in rounds), 1)
        for name in ("idle_p50", "idle_p95", "during_p50", "during_p95", "backfill_seconds")
    }
    result["p50_ratio"] = round(result["during_p50"] / result["idle_p50"], 2)
    result["p95_ratio"] = round(result["during_p95"] / result["idle_p95"], 2)
    result.update({"server_niceness": server, "reader_backend_niceness": reader_backend})
    result["rounds"] = rounds
    print(
        f"search ms, medians of {len(rounds)} rounds: idle p50 {result['idle_p50']} / p95 "
        f"{result['idle_p95']}; during `seams backfill` p50 {result['during_p50']} / p95 "
        f"{result['during_p95']} ({result['p50_ratio']}x / {result['p95_ratio']}x); backfill "
        f"{result['backfill_seconds']} s; niceness: server {server}, reader's backend "
        f"{reader_backend}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
