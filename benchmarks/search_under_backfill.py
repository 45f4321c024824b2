"""Search latency during a backfill from the command line and one launched from the UI,
against idle, in the same run.

A throwaway data dir (its own embedded PostgreSQL) is indexed once with `seams run` over a
corpus folder, then `seams dev` (webserver and daemon) starts on it. Per round, the settings'
`chunking.overrides.chunk_size_max` is flipped so every batch's boundaries, chunks and index are
unsynced, and two backfills recompute them in turn while this process searches back to back
(`search_response`, hybrid, k=5, the queries of the retrieval evaluation), as a reader would:

- `cli`: `seams backfill` (a child process, at the settings' `execution.niceness`, as a user
  starts it);
- `ui`: the batch assets' backfill over every batch, launched through the webserver's GraphQL
  as the UI's "Materialize" does, run by the daemon's run workers. Only the searches while one
  of its runs is started count (the daemon picks a backfill up on its own tick).

Idle searches run just before each backfill. Reported per kind: p50 / p95 of the searches idle
and during the backfill (medians over rounds), their ratio, the backfill's wall time, and the
niceness of the server, of a reader's backend and of the backfills' backends (from /proc,
sampled while they run; the reader's own connections, named by their application, left out).

    .venv/bin/python benchmarks/search_under_backfill.py --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.graphql import BACKFILL_RUNS, LAUNCH_BACKFILL

READER_APPLICATION = "seams-benchmark-reader"
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


def start_dev(env: dict[str, str], root: Path) -> tuple[subprocess.Popen, object]:
    """`seams dev` on a free port; returns it and a GraphQL client once the UI answers."""
    import socket

    from tests.support.processes import answering_client

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (root / "seams-dev.log").open("w")
    dev = subprocess.Popen(
        [sys.executable, "-m", "seams", "dev", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )  # fmt: skip
    try:
        client = answering_client(
            port, dev, root / "seams-dev.log", timeout_s=300, what="seams dev"
        )
    except AssertionError as exc:
        raise SystemExit(str(exc)) from None
    return dev, client


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

    # The reader's own connections say so: the backfills' backends are the others.
    os.environ["PGAPPNAME"] = READER_APPLICATION
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

    from seams.assets.partitions import DEFAULT_LINEAGE
    from seams.orchestration.instance import prepare_instance

    with prepare_instance(environment).open() as instance:
        batches = instance.get_dynamic_partitions(DEFAULT_LINEAGE.partitions.name)
    dev, client = start_dev(env, root)
    flips = iter(range(10**6))

    def backends() -> set[int | None]:
        with postgres.connection() as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND pid <> pg_backend_pid() AND datname = 'seams'"
                " AND application_name IS DISTINCT FROM %s",
                (READER_APPLICATION,),
            ).fetchall()
        return {niceness(pid) for (pid,) in rows}

    def cli() -> Callable[[], str]:
        child = subprocess.Popen(
            [*seams, "backfill"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

        def state() -> str:
            if child.poll() is None:
                return "working"
            if child.returncode != 0:
                raise SystemExit(f"seams backfill failed: {child.stderr.read().decode()[-2000:]}")
            return "done"

        return state

    def ui() -> Callable[[], str]:
        params = {
            "partitionNames": batches,
            "assetSelection": [{"path": key.path} for key in DEFAULT_LINEAGE.keys],
        }
        launched = client._execute(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise SystemExit(f"the UI's backfill was refused: {launched}")
        backfill_id = launched["backfillId"]
        last = {"at": 0.0, "state": "waiting"}

        def state() -> str:
            if time.monotonic() - last["at"] < 1.0:  # one look a second, not one per search
                return last["state"]
            found = client._execute(BACKFILL_RUNS, {"id": backfill_id})["partitionBackfillOrError"]
            runs = found.get("runs") or []
            if found.get("status") not in (None, "REQUESTED", "CANCELING"):
                if not runs or any(r["status"] != "SUCCESS" for r in runs):
                    raise SystemExit(f"the UI's backfill failed: {found}")
                last["state"] = "done"
            else:
                started = any(r["status"] == "STARTED" for r in runs)
                last["state"] = "working" if started else "waiting"
            last["at"] = time.monotonic()
            return last["state"]

        return state

    def measure_round(begin: Callable[[], Callable[[], str]]) -> dict[str, object]:
        idle = [search(i) for i in range(args.idle_searches)]
        write_settings(settings, 200 if next(flips) % 2 == 0 else 256)
        begun = time.perf_counter()
        state = begin()
        during: list[float] = []
        seen: set[int | None] = set()
        i = 0
        while (now := state()) != "done":
            latency = search(i)
            i += 1
            if now == "working":
                during.append(latency)
                if len(during) % 5 == 1:
                    seen |= backends()
        if not during:
            raise SystemExit("no search ran while the backfill worked: nothing measured")
        return {
            "idle_p50": percentile(idle, 0.5),
            "idle_p95": percentile(idle, 0.95),
            "during_p50": percentile(during, 0.5),
            "during_p95": percentile(during, 0.95),
            "searches_during": len(during),
            "backfill_seconds": round(time.perf_counter() - begun, 1),
            "backend_niceness_seen": sorted(n for n in seen if n is not None),
        }

    rounds: dict[str, list[dict[str, object]]] = {"cli": [], "ui": []}
    try:
        for number in range(args.rounds):
            for kind, begin in (("cli", cli), ("ui", ui)):
                rounds[kind].append(measure_round(begin))
                print(
                    json.dumps({"round": number + 1, "kind": kind, **rounds[kind][-1]}), flush=True
                )
    finally:  # as Ctrl-C stops it; its process group if it does not stop
        dev.send_signal(signal.SIGINT)
        try:
            dev.wait(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(dev.pid, signal.SIGKILL)
    result: dict[str, object] = {
        "server_niceness": server,
        "reader_backend_niceness": reader_backend,
    }
    for kind, measured in rounds.items():
        summary = {
            name: round(statistics.median(float(r[name]) for r in measured), 1)  # type: ignore[arg-type]
            for name in ("idle_p50", "idle_p95", "during_p50", "during_p95", "backfill_seconds")
        }
        summary["p50_ratio"] = round(summary["during_p50"] / summary["idle_p50"], 2)
        summary["p95_ratio"] = round(summary["during_p95"] / summary["idle_p95"], 2)
        result[kind] = {**summary, "rounds": measured}
        print(
            f"{kind}: search ms, medians of {len(measured)} rounds: idle p50 "
            f"{summary['idle_p50']} / p95 {summary['idle_p95']}; during the backfill p50 "
            f"{summary['during_p50']} / p95 {summary['during_p95']} ({summary['p50_ratio']}x / "
            f"{summary['p95_ratio']}x); backfill {summary['backfill_seconds']} s"
        )
    print(f"niceness: server {server}, reader's backend {reader_backend}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
