"""One `seams run` or `seams backfill` at a time on the same data.

Two commands started together would each compute the unfinished batches, register the same
files and materialize the same partitions (one of them printing "batch 3/2"). So each command
holds, for its whole life, a session-level PostgreSQL advisory lock on a connection of its own,
taken before it looks at what is unfinished; a second command waits for it (saying once whom it
waits for) or, with `--no-wait`, refuses in one line. PostgreSQL frees the lock when the holder's
session ends, however it ends (a clean exit, Ctrl-C, `kill -9`, a lost machine once the server
notices), so a crash never leaves the data locked.

The holder is named by its connection's `application_name` (`seams run /data/in (pid 4242 on
host-a)`), which any other session reads from `pg_stat_activity` beside `pg_locks`: a waiter on
another host knows who holds the lock and since when. PostgreSQL keeps 63 bytes of that name,
so the holder's last statement (`pg_stat_activity.query`, run once it holds the lock) carries
the whole name too, encoded to stay a plain SQL comment whatever the folder is called.

Runs that Dagster's daemon or UI launch do not take the lock: partition locks, one open build
per batch and publication keep their data consistent; the lock is what keeps two commands from
doing one command's work twice.
"""

from __future__ import annotations

import base64
import binascii
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
from psycopg import sql

from seams.errors import SeamsError
from seams.resources.database import CONNECT_TIMEOUT_S, redact

COLLECTION = "default"
LOCK_NAME = f"seams.command:{COLLECTION}"
"""The advisory lock's name, hashed server-side to its 64-bit key (`hashtextextended`)."""
APPLICATION_NAME_BYTES = 63
"""PostgreSQL keeps the first NAMEDATALEN - 1 bytes of an application_name."""
_NAMED = re.compile(r"^(?P<command>.*) \(pid (?P<pid>\d+) on (?P<host>.*)\)$", re.DOTALL)
_MARK = "seams.command"
_MARKED = re.compile(rf"/\* {re.escape(_MARK)} (?P<name>[A-Za-z0-9_=-]+) \*/")

Report = Callable[[str], None]

# The holder: the session holding the lock's key in this database (an advisory lock on a
# bigint key shows as classid = high 32 bits, objid = low 32 bits, objsubid = 1).
_HOLDER = """
SELECT a.application_name, a.query, a.query_start, a.backend_start
FROM pg_locks AS l
JOIN pg_stat_activity AS a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(%s, 0)
LIMIT 1
"""


class CommandBusy(SeamsError):
    """Another command holds the data (`--no-wait`): the one line names it, and the command
    exits with its own status."""

    exit_status = 3


@dataclass(frozen=True)
class Holder:
    """The command holding the lock, as its session names it."""

    name: str
    """`seams run /data/in (pid 4242 on host-a)`: what its last statement says, else its
    application_name (at most 63 bytes of it)."""
    since: datetime | None
    """When it took the lock (the start of its session's last statement, the lock's)."""

    def describe(self) -> str:
        """`seams run /data/in` (pid 4242 on host-a, since 12:03:05)."""
        found = _NAMED.match(self.name)
        if found is None:  # a session Seams did not name: what PostgreSQL shows of it
            since = f" (since {_clock(self.since)})" if self.since else ""
            return f"`{self.name or 'an unnamed session'}`{since}"
        since = f", since {_clock(self.since)}" if self.since else ""
        return f"`{found['command']}` (pid {found['pid']} on {found['host']}{since})"


def full_name(command: str, *, pid: int | None = None, host: str | None = None) -> str:
    """`command` as run by this process: `seams run /data/in (pid 4242 on host-a)`."""
    return f"{command} (pid {pid or os.getpid()} on {host or socket.gethostname()})"


def holder_name(command: str, *, pid: int | None = None, host: str | None = None) -> str:
    """The application_name naming `command` run by this process: ASCII, within PostgreSQL's 63
    bytes (a long folder keeps its end, the part that tells folders apart)."""
    suffix = f" (pid {pid or os.getpid()} on {host or socket.gethostname()})"
    suffix = suffix.encode("ascii", "replace").decode()[:40]
    if not suffix.endswith(")"):
        suffix = suffix[:-1] + ")"
    text = command.encode("ascii", "replace").decode()
    text = "".join(c if c.isprintable() else "?" for c in text)
    room = APPLICATION_NAME_BYTES - len(suffix)
    if len(text) > room:
        verb = " ".join(text.split(" ")[:2])  # `seams run`
        tail = text[len(verb) :]
        keep = max(room - len(verb) - 4, 0)
        text = f"{verb} ...{tail[len(tail) - keep :]}" if keep else text[:room]
    return text + suffix


def holder(conn: psycopg.Connection[Any]) -> Holder | None:
    """Who holds the command lock of this database now (None: nobody)."""
    row = conn.execute(_HOLDER, (LOCK_NAME,)).fetchone()
    if row is None:
        return None
    name, query, query_start, backend_start = row
    marked = _MARKED.search(query or "")
    if marked is not None:
        with contextlib.suppress(binascii.Error, UnicodeDecodeError):
            name = base64.urlsafe_b64decode(marked["name"]).decode()
    return Holder(name or "", query_start or backend_start)


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
    which the block must leave alone (a statement on it would change what `since` says).
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
        shown: str | None = None
        while not _try_lock(conn):
            found = holder(conn)
            if found is None:  # released between the try and the look: try again at once
                continue
            if not wait:
                raise CommandBusy(
                    f"{found.describe()} is working on this data: rerun when it is done, or "
                    "without --no-wait to wait for it"
                )
            if found.name != shown:  # once per holder, not once per second
                report(f"waiting for {found.describe()}")
                shown = found.name
            time.sleep(poll_s)
        _name_holder(conn, full_name(command))
        yield conn
    finally:
        conn.close()  # ends the session: the server frees the lock


def _try_lock(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (LOCK_NAME,))
    return bool(row.fetchone()[0])


def _name_holder(conn: psycopg.Connection[Any], name: str) -> None:
    """Leave `name` in this session's last statement, where other sessions read it (the
    statement's start is when the lock was taken). Base64 never holds `*`, so the comment is
    a comment whatever `name` says."""
    encoded = base64.urlsafe_b64encode(name.encode()).decode()
    conn.execute(sql.SQL("SELECT 1 /* {} {} */").format(sql.SQL(_MARK), sql.SQL(encoded)))


def _clock(moment: datetime) -> str:
    """HH:MM:SS in local time; with the date when it is not today."""
    local = moment.astimezone()
    if local.date() != datetime.now().astimezone().date():
        return local.strftime("%Y-%m-%d %H:%M:%S")
    return local.strftime("%H:%M:%S")
