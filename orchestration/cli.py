"""The `seams` command line (contract: the command names and their meaning).

Every command resolves PostgreSQL the same way (`resources.database`): `SEAMS_DATABASE_URL` when
set, otherwise the embedded server under the data dir. Errors Seams expects (bad config, no
database, no model) print one line saying what to do, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

from chunking.errors import SeamsError

EXIT_ERROR = 2


def _print_err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- seams db ----------------------------------------------------------------------------------


def cmd_db(args: argparse.Namespace) -> int:
    from resources.database import URL_ENV, EmbeddedPostgres, redact, resolve

    external = bool(os.environ.get(URL_ENV, "").strip())
    server = EmbeddedPostgres()
    if args.action == "url":
        print(resolve().data)
    elif args.action == "start":
        urls = resolve()
        where = "external server" if external else f"embedded PostgreSQL in {server.pgdata}"
        print(f"PostgreSQL is up ({where}).\ndata database: {redact(urls.data)}")
    elif args.action == "stop":
        if external:
            print(f"{URL_ENV} is set: Seams does not manage that server; nothing to stop.")
        elif server.stop():
            print(f"stopped the embedded PostgreSQL in {server.pgdata}")
        else:
            print(f"the embedded PostgreSQL in {server.pgdata} was not running")
    elif args.action == "status":
        if external:
            urls = resolve()
            print(
                f"external server (from {URL_ENV}): reachable\ndata database: {redact(urls.data)}"
            )
        elif server.is_running():
            print(f"running: embedded PostgreSQL in {server.pgdata}\ndata database: {server.url()}")
        else:
            print(f"stopped: embedded PostgreSQL in {server.pgdata} (start: `seams db start`)")
            return 1
    return 0


# --- seams dev ---------------------------------------------------------------------------------


def _reset_signals() -> None:
    # A shell that starts us with `&` makes us ignore SIGINT; dagster dev must not inherit that.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def cmd_dev(args: argparse.Namespace) -> int:
    from orchestration.instance import dagster_home, prepare_environment
    from resources.database import EmbeddedPostgres

    server = EmbeddedPostgres()
    was_running = server.is_running()
    urls = prepare_environment()
    command = [
        sys.executable, "-m", "dagster", "dev", "-m", "orchestration",
        "-h", args.host, "-p", str(args.port),
    ]  # fmt: skip
    print(f"Dagster UI: http://{args.host}:{args.port}  (Ctrl-C stops everything)", flush=True)
    child = subprocess.Popen(
        command, cwd=dagster_home(), preexec_fn=_reset_signals, start_new_session=True
    )

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        code = child.wait()
    finally:
        _stop_group(child)
        if urls.embedded and not was_running:
            server.stop()
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM, 130) else code


def _stop_group(child: subprocess.Popen) -> None:
    """Make sure nothing dagster dev started outlives it (webserver, daemon, code servers)."""
    for sig, grace_s in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        if not _group_alive(child.pid):
            return
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and _group_alive(child.pid):
            child.poll()  # reap the leader so it does not linger as a zombie
            time.sleep(0.1)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


# --- seams check -------------------------------------------------------------------------------


def cmd_check(_args: argparse.Namespace) -> int:
    """Prove the installation works: PostgreSQL reachable, Dagster instance and definitions load."""
    from dagster import DagsterInstance

    from orchestration.instance import dagster_home, prepare_environment
    from resources.database import redact

    urls = prepare_environment()
    from orchestration import defs

    repo = defs.get_repository_def()
    with DagsterInstance.get() as instance:
        storage = type(instance.run_storage).__name__
    where = "embedded" if urls.embedded else "external"
    print(
        f"PostgreSQL ({where}): {redact(urls.data)}\n"
        f"Dagster instance: {dagster_home()} ({storage})\n"
        f"Definitions: {len(repo.assets_defs_by_key)} assets, {len(repo.get_all_jobs())} jobs, "
        f"{len(repo.sensor_defs)} sensors, {len(repo.schedule_defs)} schedules\n"
        "Next: `seams dev` and open the UI."
    )
    return 0


# --- seams run / backfill / model -------------------------------------------------------------


def _say(message: str) -> None:
    print(f"seams: {message}", flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    """Register PATH (default: the sample corpus) as batches and materialize them end to end."""
    from pathlib import Path

    from dagster import DagsterInstance

    from orchestration import runner
    from orchestration.instance import prepare_environment

    path = Path(args.path) if args.path else runner.SAMPLE_CORPUS
    prepare_environment()
    with DagsterInstance.get() as instance:
        runner.ensure_model(instance, _say)
        unfinished = runner.unfinished_batches(instance, source=runner.source_of(path))
        if unfinished:
            _say(f"finishing {len(unfinished)} batch(es) an earlier run left unfinished")
        keys = list(dict.fromkeys([*unfinished, *runner.register_path(path, _say)]))
        if not keys:
            _say(f"nothing new under {path}: every file version is already in a batch")
            return 0
        _say(f"registered {len(keys)} batch(es) from {path}; materializing...")
        summary = runner.RunSummary(batches=keys)
        started = time.perf_counter()
        runner.materialize_batches(instance, keys, _say, summary)
    summary.seconds = time.perf_counter() - started
    print(runner.format_summary(runner.summarize(summary)), flush=True)
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    """Recompute, for every batch, the assets a settings or code change made unsynced."""
    import json

    from dagster import DagsterInstance

    from orchestration import runner
    from orchestration.instance import prepare_environment

    prepare_environment()
    started = time.perf_counter()
    report = (lambda _m: None) if args.json else _say
    with DagsterInstance.get() as instance:
        summary = runner.backfill(instance, report)
    summary.seconds = time.perf_counter() - started
    if args.json:
        fields = ("batches", "run_ids", "texts_embedded", "cache_hits", "seconds")
        print(json.dumps({name: getattr(summary, name) for name in fields}))
    elif summary.batches:
        print(runner.format_summary(runner.summarize(summary)), flush=True)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Top-k chunks for a query, with their parent section and neighbouring chunks."""
    import json

    from orchestration.definitions import build_resources
    from orchestration.instance import prepare_environment
    from resources.postgres import PostgresResource
    from resources.search import format_response, search_response

    prepare_environment()
    embedder = build_resources()["embedder"]
    # Outside Dagster an EnvVar is not resolved: an empty URL resolves the same database.
    response = search_response(PostgresResource(), embedder, args.query, args.k)
    if args.json:
        print(json.dumps(response.to_dict(), ensure_ascii=False))
    else:
        print(format_response(response))
    return 0


def cmd_model(args: argparse.Namespace) -> int:
    from resources.distill import distill_static_model
    from resources.model_export import export_model

    manifest = export_model(force=args.force)
    state = "exported" if manifest.exported_now else "already exported (verified)"
    print(
        f"{state}: {manifest.model_name} in {manifest.directory}\n"
        f"model_id {manifest.model_id}; variants: {', '.join(sorted(manifest.variants))}"
    )
    static = distill_static_model(force=args.force)
    print(f"static boundary model (fast preset): model_id {static.model_id}")
    return 0


# --- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seams",
        description=(
            "Seams: semantic chunking for retrieval, as partitioned Dagster assets in PostgreSQL.\n"
            "Data lives in $SEAMS_DATA_DIR (default ./.seams); set SEAMS_DATABASE_URL to use an "
            "existing PostgreSQL instead of the embedded one."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    db = sub.add_parser("db", help="start, stop or inspect PostgreSQL; print its URL")
    db.add_argument(
        "action",
        choices=["url", "start", "stop", "status"],
        help="url: print a psycopg URL of the data database (starting the embedded server if "
        "needed); start/stop/status: manage the embedded server",
    )
    db.set_defaults(func=cmd_db)

    run = sub.add_parser(
        "run", help="chunk the files under PATH (default: the bundled sample corpus) end to end"
    )
    run.add_argument("path", nargs="?", help="a folder of documents (default: sample corpus)")
    run.set_defaults(func=cmd_run)

    backfill = sub.add_parser(
        "backfill", help="recompute the unsynced assets of every batch (after a settings change)"
    )
    backfill.add_argument("--json", action="store_true", help="print a JSON summary")
    backfill.set_defaults(func=cmd_backfill)

    search = sub.add_parser("search", help="search the current chunks (top-k, with context)")
    search.add_argument("query", help="what to look for")
    search.add_argument("-k", type=int, default=5, help="how many chunks (default 5)")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.set_defaults(func=cmd_search)

    model = sub.add_parser("model", help="provision the embedding model")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    export = model_sub.add_parser(
        "export", help="export the packaged all-MiniLM-L6-v2 to ONNX under the data dir (once)"
    )
    export.add_argument("--force", action="store_true", help="re-export even if present")
    export.set_defaults(func=cmd_model)

    check = sub.add_parser("check", help="check PostgreSQL, the Dagster instance and definitions")
    check.set_defaults(func=cmd_check)

    dev = sub.add_parser("dev", help="start PostgreSQL and the Dagster UI (dagster dev)")
    dev.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    dev.add_argument("--port", type=int, default=3000, help="UI port (default 3000)")
    dev.set_defaults(func=cmd_dev)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except SeamsError as exc:
        _print_err(f"seams: error: {exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _print_err("seams: interrupted")
        return 130


if __name__ == "__main__":
    sys.exit(main())
