"""Where the time goes between a backfill clicked in the Dagster UI and its end, per instance
settings.

A throwaway data dir gets two batches of the sample corpus (`seams run`), then Dagster's
webserver and daemon serve Seams' code location on a Dagster home holding the dagster.yaml under
test (the same run storage). Each backfill is launched through GraphQL exactly as the UI's
"Materialize" launches one:

- `asset graph`: from the global asset graph or an asset's page, a pure asset backfill (Dagster
  runs it under its implicit job `__ASSET_JOB`);
- `job page`: from the collection's job (Jobs -> chunk_batches), a backfill of the job's
  partition set (its runs are runs of `chunk_batches`);
- `job page, one batch`: one batch picked there, which the UI launches as one run of the job,
  no backfill (the last phase is then 0).

From the run's own events and the backfill's timestamps it splits the wall time into: click ->
run created (the backfill daemon's next look: Dagster 1.13 looks every 30 s, a fixed interval),
created -> enqueued (the daemon submitting it), enqueued -> starting (the run queue, looked at
every `dequeue_interval_seconds`), starting -> started (the run worker: a new process that loads
the code location), started -> success (the work), success -> backfill completed (the daemon's
next look again). Backfills follow each other, so each click comes right after a look of the
daemon and waits nearly its whole interval; a click at a random moment waits half as long.
Prints medians per settings variant and mode; `--json PATH` writes every number.
Usage: `python -m benchmarks.experiments.ui_backfill_latency [--repeats 3] [--json f]`.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dagster_graphql import DagsterGraphQLClient

from benchmarks.header import repeated_study
from tests.support.graphql import LAUNCH_BACKFILL
from tests.support.processes import answering_client, free_port, stop_group

SAMPLES = (("field_notes.md",), ("history_of_maps.txt", "kitchen_science.md"))
MODES = ("asset graph", "job page")
"""Where a backfill of every batch is launched from (see the module docstring)."""
ONE_BATCH = "job page, one batch"
"""Materialize with one batch picked: a run of the job, no backfill."""
PHASES = ("to_run_created", "to_enqueued", "queued", "run_worker_start", "work",
          "to_backfill_end", "total")  # fmt: skip

BACKFILL = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill {
      status timestamp endTimestamp
      runs { runId jobName status creationTime startTime endTime }
    }
  }
}
"""
EVENTS = """
query Events($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection { events { __typename ... on MessageEvent { timestamp } } }
  }
}
"""
RUN = """
query Run($id: ID!) {
  runOrError(runId: $id) { ... on Run { jobName status creationTime startTime endTime } }
}
"""
FINISHED = ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED")


def variants(shipped: str) -> dict[str, str]:
    """The dagster.yaml texts compared: Dagster's queue defaults, and the one Seams ships."""
    defaults = "\n".join(
        line for line in shipped.splitlines() if "dequeue_interval_seconds" not in line
    )
    return {"dagster defaults (dequeue every 5 s)": defaults, "seams dagster.yaml": shipped}


def _seams(env: dict[str, str], *args: str) -> None:
    root = Path(env["SEAMS_DATA_DIR"]).parent  # no seams.yaml there: the packaged settings
    done = subprocess.run([sys.executable, "-m", "seams", *args], env=env, cwd=root,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"seams {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")


def _start(home: Path, env: dict[str, str]) -> tuple[list[subprocess.Popen], DagsterGraphQLClient]:
    """Webserver and daemon on `home`; returns once the UI answers and the daemon settled."""
    port, bin_dir = free_port(), Path(sys.executable).parent
    workspace = str(home / "workspace.yaml")
    procs = []
    for name, command in {
        "webserver": [str(bin_dir / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1",
                      "-p", str(port)],
        "daemon": [str(bin_dir / "dagster-daemon"), "run", "-w", workspace],
    }.items():  # fmt: skip
        log = (home / f"{name}.log").open("w")
        procs.append(subprocess.Popen(command, cwd=home, env=env, stdout=log,
                                      stderr=subprocess.STDOUT,
                                      start_new_session=True))  # fmt: skip
    try:
        client = answering_client(
            port, procs[0], home / "webserver.log", timeout_s=300, client_timeout=120
        )
    except AssertionError as exc:
        stop_group(*procs)
        raise RuntimeError(str(exc)) from None
    time.sleep(20)  # past the start-up burst: the daemon's first looks, the code server warm
    return procs, client


def _params(mode: str, batches: list[str]) -> dict:
    from seams.assets.partitions import DEFAULT_LINEAGE

    params: dict = {
        "partitionNames": batches,
        "assetSelection": [{"path": key.path} for key in DEFAULT_LINEAGE.keys],
    }
    if mode == "job page":
        params["selector"] = {
            "partitionSetName": f"{DEFAULT_LINEAGE.job_name}_partition_set",
            "repositorySelector": {
                "repositoryLocationName": "seams",
                "repositoryName": "__repository__",
            },
        }
    return params


def one_backfill(client: DagsterGraphQLClient, mode: str, batches: list[str]) -> dict:
    """Launch one backfill as the UI does, wait for its end, and split its wall time."""
    clicked = time.time()
    launched = client._execute(LAUNCH_BACKFILL, {"params": _params(mode, batches)})
    launched = launched["launchPartitionBackfill"]
    if launched["__typename"] != "LaunchBackfillSuccess":
        raise RuntimeError(f"{mode}: {launched}")
    deadline = time.monotonic() + 900
    while True:
        found = client._execute(BACKFILL, {"id": launched["backfillId"]})
        backfill = found["partitionBackfillOrError"]
        if backfill["status"] in FINISHED and backfill["endTimestamp"]:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"{mode}: the backfill never finished: {backfill}")
        time.sleep(0.5)
    if backfill["status"] != "COMPLETED_SUCCESS" or not backfill["runs"]:
        raise RuntimeError(f"{mode}: {backfill}")
    return _split(client, backfill["runs"], clicked, backfill["endTimestamp"])


def one_run(client: DagsterGraphQLClient, batch: str) -> dict:
    """Launch one batch as the job page's Materialize does with one batch picked (a run of the
    job, no backfill), wait for its end, and split its wall time."""
    from seams.assets.partitions import DEFAULT_LINEAGE

    clicked = time.time()
    run_id = client.submit_job_execution(
        DEFAULT_LINEAGE.job_name,
        repository_location_name="seams",
        repository_name="__repository__",
        tags={"dagster/partition": batch},
    )
    deadline = time.monotonic() + 900
    while (status := client.get_run_status(run_id).value) not in ("SUCCESS", "FAILURE", "CANCELED"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} never finished ({status})")
        time.sleep(0.5)
    if status != "SUCCESS":
        raise RuntimeError(f"run {run_id}: {status}")
    run = client._execute(RUN, {"id": run_id})["runOrError"]
    return _split(client, [{**run, "runId": run_id}], clicked, run["endTime"])


def _split(client: DagsterGraphQLClient, runs: list[dict], clicked: float, ended: float) -> dict:
    """The phases of a launch whose `runs` (GraphQL Run fields) ran, clicked at `clicked` and
    done (the backfill recorded complete, or the run ended) at `ended`."""
    runs = sorted(runs, key=lambda run: run["creationTime"])
    first, last = runs[0], runs[-1]
    events = client._execute(EVENTS, {"runId": first["runId"]})["logsForRun"]["events"]
    at = {event["__typename"]: float(event["timestamp"]) / 1000 for event in events
          if event["__typename"].startswith("Run") and event.get("timestamp")}  # fmt: skip
    created = first["creationTime"]
    enqueued = at.get("RunEnqueuedEvent", created)
    launched = at.get("RunStartingEvent", enqueued)  # dequeued and handed to the launcher
    return {
        "job": first["jobName"],
        "runs": len(runs),
        "run_events": {name: t - created for name, t in sorted(at.items())},
        "to_run_created": created - clicked,
        "to_enqueued": enqueued - created,
        "queued": launched - enqueued,
        "run_worker_start": first["startTime"] - launched,
        "work": last["endTime"] - first["startTime"],
        "to_backfill_end": ended - last["endTime"],
        "total": ended - clicked,
    }


def measure(repeats: int) -> dict[str, dict[str, list[dict]]]:
    from seams.environment import SeamsEnvironment
    from seams.orchestration.instance import INSTANCE_YAML, WORKSPACE_YAML, prepare_instance
    from seams.paths import sample_corpus
    from seams.resources.embedded_server import server_tempdir

    root = server_tempdir("seams-ui-latency-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
    env["SEAMS_DATA_DIR"] = str(root / "data")
    try:
        for number, names in enumerate(SAMPLES):
            folder = root / f"batch_{number}"
            folder.mkdir()
            for name in names:
                shutil.copy(sample_corpus() / name, folder / name)
            _seams(env, "run", str(folder))  # the first one also exports the model
        instance = prepare_instance(SeamsEnvironment.from_os(env, root))
        child_env = instance.environment()
        with instance.open() as opened:
            batches = list(opened.get_dynamic_partitions("document_batches"))
        results: dict[str, dict[str, list[dict]]] = {}
        for name, text in variants(INSTANCE_YAML.read_text(encoding="utf-8")).items():
            home = root / f"home-{len(results)}"
            home.mkdir()
            (home / "dagster.yaml").write_text(text, encoding="utf-8")
            (home / "workspace.yaml").write_text(WORKSPACE_YAML, encoding="utf-8")
            procs, client = _start(home, {**child_env, "DAGSTER_HOME": str(home)})
            try:
                results[name] = {mode: [] for mode in (*MODES, ONE_BATCH)}
                for _ in range(repeats):
                    for mode in MODES:
                        results[name][mode].append(one_backfill(client, mode, batches))
                    results[name][ONE_BATCH].append(one_run(client, batches[-1]))
            finally:
                stop_group(*procs, grace_s=30)
        _seams(env, "db", "stop")
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)


def table(results: dict[str, dict[str, list[dict]]]) -> str:
    lines = [
        "| dagster.yaml | launched from | job | runs | " + " | ".join(PHASES) + " |",
        "|---|---|---|---:|" + "---:|" * len(PHASES),
    ]
    for variant, by_mode in results.items():
        for mode, samples in by_mode.items():
            medians = [statistics.median(s[phase] for s in samples) for phase in PHASES]
            lines.append(
                f"| {variant} | {mode} | {samples[0]['job']} | {samples[0]['runs']} | "
                + " | ".join(f"{m:.1f}" for m in medians)
                + " |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return repeated_study(
        argv, description, measure, table, repeats="backfills per variant and mode"
    )


if __name__ == "__main__":
    sys.exit(main())
