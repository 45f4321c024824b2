"""Search over HTTP (`seams serve`) beside `search_response` in process, and `seams search` end
to end beside the search it runs.

One throwaway embedded PostgreSQL (a temp dir, stopped and deleted afterwards) is loaded with
`benchmarks.scale`'s synthetic corpus through the pipeline's write path, up to each of `--sizes`
current chunks, with the model's HNSW index. The synthetic vectors are stored under the real
model's id, so the server and the in-process search embed every query with the real model
(MiniLM, the exported one under the data dir) and run the same search against the same rows:
a latency figure, not a retrieval-quality one. Queries are `scale.queries`' three-word queries.

At each size, one query at a time unless said:

- `search_response` in process (what `seams search` and the server call): p50 / p95;
- `POST /search` to a `seams serve` child process with 1 client, then with `--clients`
  concurrent clients (each its own HTTP connection): p50 / p95 per request and requests/s;
- `seams search QUERY --json` as a child process (warm bytecode, warm page cache): wall time and
  the CPU it used (user + system), against the embedding and search time it reports itself.

    .venv/bin/python -m benchmarks.serve_latency --sizes 10000,100000 \\
        --json benchmarks/results/serve_latency.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

from benchmarks import scale
from benchmarks.database import benchmark_server
from benchmarks.header import ROOT, write_result
from seams.environment import SeamsEnvironment
from seams.models.embedders import OnnxEmbedder
from seams.models.model_store import default_model_dir, load_manifest
from seams.resources.database import DATA_DATABASE, database_url_for
from seams.resources.postgres_pool import PostgresPool
from seams.storage.search import search_response
from tests.support.served import serving

K = 5


def percentiles(values: Sequence[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered), 1), "p95_ms": round(p95, 1)}


def reader_env(url: str, data_dir: Path) -> dict[str, str]:
    """This process's environment with only the database and the data dir of Seams' settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SEAMS_")}
    return env | {"SEAMS_DATABASE_URL": url, "SEAMS_DATA_DIR": str(data_dir)}


def http_latencies(base: str, texts: list[str], clients: int) -> tuple[list[float], float]:
    """Per-request milliseconds of every text, sent by `clients` threads at once (each its own
    connection, the texts dealt round-robin), and the seconds the whole set took."""
    shares = [texts[i::clients] for i in range(clients)]
    times: list[float] = []
    lock = threading.Lock()
    failures: list[str] = []

    def client(share: list[str]) -> None:
        with httpx.Client(base_url=base, timeout=120) as http:
            for text in share:
                started = time.perf_counter()
                answer = http.post("/search", json={"query": text, "k": K})
                elapsed = (time.perf_counter() - started) * 1000
                if answer.status_code != 200 or len(answer.json()["hits"]) != K:
                    failures.append(answer.text[:200])
                with lock:
                    times.append(elapsed)

    threads = [threading.Thread(target=client, args=(share,)) for share in shares]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"{len(failures)} failed or short answers, e.g. {failures[0]}")
    return times, time.perf_counter() - started


def cli_runs(url: str, data_dir: Path, texts: list[str]) -> dict[str, Any]:
    """`seams search TEXT --json` per text: wall and CPU seconds of the child, and the
    embedding and search milliseconds it reports."""
    env = reader_env(url, data_dir)
    walls, cpus, inner = [], [], []
    for text in texts:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "seams", "search", text, "--json"],
            env=env, capture_output=True, text=True, cwd="/", check=True,
        )  # fmt: skip
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        answer = json.loads(done.stdout)
        inner.append(answer["embed_ms"] + answer["search_ms"])
    return {
        "runs": len(texts),
        "wall_s_median": round(statistics.median(walls), 3),
        "cpu_s_median": round(statistics.median(cpus), 3),
        "cpu_s_min": round(min(cpus), 3),
        "embed_plus_search_ms_median": round(statistics.median(inner), 1),
        "load_average": os.getloadavg()[0],
    }


def measure(url: str, data_dir: Path, texts: list[str], args: argparse.Namespace) -> dict:
    pool = PostgresPool(url=url, max_connections=2)
    embedder = OnnxEmbedder(model_dir=str(default_model_dir(SeamsEnvironment.from_os())),
                            models_dir=str(data_dir / "models"))  # fmt: skip
    for text in texts[:5]:  # warm-up: the session, the pool, the caches
        search_response(pool, embedder, text, K)
    inline = []
    for text in texts:
        started = time.perf_counter()
        response = search_response(pool, embedder, text, K)
        inline.append((time.perf_counter() - started) * 1000)
        assert len(response.hits) == K, response.notes
    figures: dict[str, Any] = {"search_response": percentiles(inline)}
    figures["load_average"] = os.getloadavg()[0]
    with (
        tempfile_dir() as work,
        serving(reader_env(url, data_dir), work / "serve.log") as (_, base),
    ):
        http_latencies(base, texts[:5], 1)  # warm-up
        for clients in (1, args.clients):
            times, seconds = http_latencies(base, texts, clients)
            figures[f"http_{clients}_clients"] = {
                **percentiles(times),
                "requests_per_s": round(len(texts) / seconds, 1),
                "load_average": os.getloadavg()[0],
            }
    figures["seams_search_cli"] = cli_runs(url, data_dir, texts[: args.cli_runs])
    return figures


@contextlib.contextmanager
def tempfile_dir() -> Iterator[Path]:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        yield Path(folder)


def compile_bytecode() -> None:
    """The `seams` package compiled, as `make install` leaves it: the command-line figures are
    warm-bytecode ones even where Python does not write its cache (PYTHONDONTWRITEBYTECODE)."""
    with (ROOT / "pyproject.toml").open("rb") as fh:
        folders = tomllib.load(fh)["tool"]["setuptools"]["package-dir"].values()
    folders = ["seams", *folders]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip


def run(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    compile_bytecode()
    environment = SeamsEnvironment.from_os()
    manifest = load_manifest(default_model_dir(environment))
    scale.MODEL_ID = manifest.model_id  # the rows carry the real model's id (see the doc)
    corpus = scale.Corpus()
    with benchmark_server("seams-serve-bench-", args.keep) as server:
        url = database_url_for(server.start(), DATA_DATABASE)
        postgres = PostgresPool(url=url, max_connections=2)
        postgres.ensure_schema()
        loaded = scale.loaded_batches(url)
        for size in args.sizes:
            target = size // scale.CHUNKS_PER_BATCH
            if target < loaded:
                raise SystemExit(
                    f"--keep {args.keep} holds {loaded:,} batches, more than {size:,} chunks"
                )
            if target > loaded:
                scale.drop_hnsw(url)  # a bulk load without it; built again below
                print(f"[{time.strftime('%H:%M:%S')}] loading to {size:,} chunks", flush=True)
                scale.load_to(postgres, corpus, loaded, target)  # type: ignore[arg-type]
                loaded = target
            scale.build_hnsw(url)
            texts = [q.text for q in scale.queries(corpus, loaded, args.queries)]
            print(f"[{time.strftime('%H:%M:%S')}] measuring at {size:,} chunks", flush=True)
            yield {"size": size, **measure(url, environment.data_dir, texts, args)}


def table(results: list[dict[str, Any]], clients: int) -> str:
    lines = [
        f"| chunks | search_response p50/p95 | HTTP 1 client p50/p95 | HTTP {clients} clients "
        "p50/p95 (req/s) | seams search wall / CPU | its embed+search |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        inline, one, many = r["search_response"], r["http_1_clients"], r[f"http_{clients}_clients"]
        cli = r["seams_search_cli"]
        lines.append(
            f"| {r['size']:,} | {inline['p50_ms']} / {inline['p95_ms']} ms | {one['p50_ms']} / "
            f"{one['p95_ms']} ms | {many['p50_ms']} / {many['p95_ms']} ms "
            f"({many['requests_per_s']}) | {cli['wall_s_median']} s / {cli['cpu_s_median']} s | "
            f"{cli['embed_plus_search_ms_median']} ms |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=scale.parse_sizes, default=scale.parse_sizes("10000"))
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--cli-runs", type=int, default=5)
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep the database in this folder (a short path: the server's socket lives there);"
        " a later run there loads only what it lacks",
    )
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    results = list(run(args))
    print(table(results, args.clients))
    write_result(args.json, {"results": results}, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
