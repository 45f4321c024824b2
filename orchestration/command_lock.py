"""One `seams run` or `seams backfill` at a time on the same data.

Two commands started together would each compute the unfinished batches, register the same
files and materialize the same partitions (one of them printing "batch 3/2"). So each command
holds, for its whole life, the session lock `seams.command:default` on a connection of its own
(`seams.storage.writer_locks`: a row of a table tenants have no right on, so no tenant can hold
it), taken before it looks at what is unfinished; a second command waits for it (saying once
whom it waits for) or, with `--no-wait`, refuses in one line. The lock is free once the
holder's session ends, however it ends (a clean exit, Ctrl-C, `kill -9`, a lost machine once the
server notices), so a crash never leaves the data locked.

The holder is named in the lock's row (`seams run /data/in (pid 4242 on host-a)`, and since
when), which only the owner reads: a waiter on another host knows who holds it. Its
connection's `application_name` says the command without its arguments (`seams run (pid 4242 on
host-a)`): every role, a tenant too, reads `pg_stat_activity`'s application names, and a folder
or a `--collection` would name a collection there.

Runs that Dagster's daemon or UI launch do not take the lock: partition locks, one open build
per batch and publication keep their data consistent; the lock is what keeps two commands from
doing one command's work twice.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from seams.errors import SeamsError
from seams.resources.database import CONNECT_TIMEOUT_S, redact
from seams.storage import migrations, writer_locks

COLLECTION = "default"
LOCK_NAME = f"seams.command:{COLLECTION}"
"""The session lock's name (`seams.storage.writer_locks`)."""
APPLICATION_NAME_BYTES = 63
"""PostgreSQL keeps the first NAMEDATALEN - 1 bytes of an application_name."""
_NAMED = re.compile(r"^(?P<command>.*) \(pid (?P<pid>\d+) on (?P<host>.*)\)$", re.DOTALL)

Report = Callable[[str], None]


class CommandBusy(SeamsError):
    """Another command holds the data (`--no-wait`): the one line names it, and the command
    exits with its own status."""

    exit_status = 3


@dataclass(frozen=True)
class Holder:
    """The command holding the lock, as it named itself in the lock's row."""

    name: str
    """`seams run /data/in (pid 4242 on host-a)`."""
    since: datetime | None
    """When it took the lock."""

    def describe(self) -> str:
        """`seams run /data/in` (pid 4242 on host-a, since 12:03:05)."""
        found = _NAMED.match(self.name)
        if found is None:  # a name of another form: as it is
            since = f" (since {_clock(self.since)})" if self.since else ""
            return f"`{self.name or 'an unnamed session'}`{since}"
        since = f", since {_clock(self.since)}" if self.since else ""
        return f"`{found['command']}` (pid {found['pid']} on {found['host']}{since})"


def full_name(command: str, *, pid: int | None = None, host: str | None = None) -> str:
    """`command` as run by this process: `seams run /data/in (pid 4242 on host-a)`."""
    return f"{command} (pid {pid or os.getpid()} on {host or socket.gethostname()})"


def holder_name(command: str, *, pid: int | None = None, host: str | None = None) -> str:
    """The application_name of `command` run by this process: its first two words (`seams
    run`), never its arguments (folders, collections: every role reads application names), with
    the pid and host, ASCII, within PostgreSQL's 63 bytes."""
    verb = " ".join(command.split()[:2]).encode("ascii", "replace").decode()
    verb = "".join(c if c.isprintable() else "?" for c in verb)
    suffix = f" (pid {pid or os.getpid()} on {host or socket.gethostname()})"
    suffix = suffix.encode("ascii", "replace").decode()
    name = verb[:20] + suffix
    if len(name) > APPLICATION_NAME_BYTES:
        name = name[: APPLICATION_NAME_BYTES - 1] + ")"
    return name


def holder(conn: psycopg.Connection[Any]) -> Holder | None:
    """Who holds the command lock of this database now (None: nobody)."""
    lease = writer_locks.holder(conn, LOCK_NAME)
    return None if lease is None else Holder(lease.holder, lease.since)


@contextlib.contextmanager
def command_lock(
    url: str,
    command: str,
    report: Report,
    *,
    wait: bool = True,
    poll_s: float = 1.0,
) -> Iterator[psycopg.Connection[Any]]:
    """Hold the data's command lock while the block runs, on a connection of its own.

    `command` says what holds it (`seams run /data/in`). Busy: with `wait`, one line naming
    the holder (again only when another one holds it next) and a retry every `poll_s` seconds
    (Ctrl-C stops waiting); without, `CommandBusy` naming it. Yields the lock's connection,
    which the block must leave alone (its session is what holds the lock).
    """
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            application_name=holder_name(command),
            connect_timeout=CONNECT_TIMEOUT_S,
        )
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SeamsError(
            f"cannot connect to PostgreSQL at {redact(url)} ({redact(reason)}): check that the "
            "server is up, then rerun the command"
        ) from exc
    try:
        _ensure_table(conn)
        shown: str | None = None
        while (lease := writer_locks.try_hold(conn, LOCK_NAME, full_name(command))) is not None:
            found = Holder(lease.holder, lease.since)
            if not wait:
                raise CommandBusy(
                    f"{found.describe()} is working on this data: rerun when it is done, or "
                    "without --no-wait to wait for it"
                )
            if found.name != shown:  # once per holder, not once per second
                report(f"waiting for {found.describe()}")
                shown = found.name
            time.sleep(poll_s)
        yield conn
    finally:
        with contextlib.suppress(psycopg.Error):  # a lost session holds nothing either
            writer_locks.release(conn, LOCK_NAME)
        conn.close()


def _ensure_table(conn: psycopg.Connection[Any]) -> None:
    """The lock's table, on a database no Seams of this version has written yet: the command
    brings the schema up to date first (what its first step would do anyway)."""
    if not writer_locks.table_exists(conn):
        migrations.migrate(conn)


def _clock(moment: datetime) -> str:
    """HH:MM:SS in local time; with the date when it is not today."""
    local = moment.astimezone()
    if local.date() != datetime.now().astimezone().date():
        return local.strftime("%Y-%m-%d %H:%M:%S")
    return local.strftime("%H:%M:%S")
