"""A writer's strong lock never waits on a tenant.

Tenants only read, and a reader's lock (ACCESS SHARE, held until its transaction ends)
conflicts with one kind of the writer's: ACCESS EXCLUSIVE, which DDL on a table or view tenants
read takes (a migration, the tenants' policies, dropping an index), and the lockers that `DROP
INDEX CONCURRENTLY` waits out. A tenant that opens a transaction, reads a row and sits idle
would make that writer wait without end, and every other reader queue behind it. So such a
writer runs `clearing_tenants`: under `lock_timeout`, with a watcher on a connection of its own
that ends every tenant backend blocking it (`pg_blocking_pids`, kept to tenant roles) as soon
as it blocks. Seams connects as the tables' owner, who may end its tenants' sessions (a
superuser, or a role with `pg_signal_backend`). A blocker that is not a tenant (an operator's
session, another writer) is waited for, up to `lock_timeout`; past it, `LockError`: one line
naming that session's role and application, and what to do.

Where a writer takes a lock a tenant's read conflicts with, each under `clearing_tenants`:

- the tenants' policies, views and trigger (`tenants.ensure_group`), only when the catalogs say
  they are not in place (`tenant_tables.missing`): a sync that changes nothing takes none;
- a schema migration (`migrations.migrate`), only when the recorded version differs;
- dropping a retired model's HNSW indexes (`vector_indexes.drop_model_indexes`, after a
  publication retires its last vectors) and an invalid leftover index before a rebuild.

Everything else a writer does to those tables takes ROW EXCLUSIVE or weaker (writes, the
publication's row flips), or SHARE (building an index: it waits for writers, not readers), or
SHARE UPDATE EXCLUSIVE (statistics settings, ANALYZE): none conflicts with a read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import psycopg
import psycopg.conninfo
import psycopg.errors
from psycopg import sql

from seams.errors import StorageError
from seams.storage.tenant_tables import GROUP, ROLE_PREFIX

log = logging.getLogger(__name__)

LOCK_TIMEOUT = "10s"
"""How long a writer's strong lock (a migration's DDL, the tenants' grants and policies, an
index drop) waits for a blocker that is not a tenant, such as a reader's long query, before it
gives up: a migration is retried, an unused index is left for a later drop, the grants fail in
one line. A tenant's blocker is ended at once."""
POLL_S = 0.05
"""How often the watcher looks at what blocks the writer."""
APPLICATION = "seams: lock watcher"

_BLOCKERS = """
SELECT a.pid, coalesce(a.usename, ''), coalesce(a.application_name, ''),
       coalesce(r.rolname LIKE %(prefix)s AND NOT r.rolsuper AND EXISTS (
           SELECT 1 FROM pg_auth_members AS m
           WHERE m.member = r.oid AND m.roleid = to_regrole(%(group)s)), false)
FROM pg_stat_activity AS a LEFT JOIN pg_roles AS r ON r.oid = a.usesysid
WHERE a.pid = ANY(pg_blocking_pids(%(pid)s))
ORDER BY a.pid
"""
"""The sessions blocking backend `pid`, and whether each is a tenant's: a login role named
with the tenants' prefix, a direct member of their group, not a superuser (a superuser is a
member of every role for `pg_has_role`)."""


class LockError(StorageError):
    """A writer's lock still held by a session that is not a tenant's past `lock_timeout`."""


@dataclass
class Watch:
    """What the watcher saw: tenants' backends it ended, others that blocked the writer."""

    ended: list[tuple[int, str]] = field(default_factory=list)
    """(pid, role) of every tenant backend ended."""
    others: dict[int, tuple[str, str]] = field(default_factory=dict)
    """pid -> (role, application) of every other session seen blocking the writer."""

    def error(self, where: str, doing: str, timeout: str) -> LockError:
        """The one line for a lock wait past `timeout` while `doing`."""
        if self.others:
            held = "; ".join(
                f"role {role or '?'}, application {app or '(none)'!r}, pid {pid}"
                for pid, (role, app) in sorted(self.others.items())
            )
            fix = "end that session (`SELECT pg_terminate_backend(pid)`) or let it finish"
        else:
            held = "another session"
            fix = "find it in pg_stat_activity and end it, or let it finish"
        return LockError(
            f"waited {timeout} at {where} while {doing} for a lock held by {held}: {fix}, "
            "then rerun"
        )


def _conninfo(conn: psycopg.Connection[Any]) -> str:
    """`conn`'s connection parameters, its password included (`info.dsn` leaves it out)."""
    password = conn.pgconn.password
    extra = {"application_name": APPLICATION}
    if password:
        extra["password"] = password.decode()
    return psycopg.conninfo.make_conninfo(conn.info.dsn, **extra)


def _watch(
    watcher: psycopg.Connection[Any],
    pid: int,
    watch: Watch,
    stop: threading.Event,
) -> None:
    params = {"pid": pid, "group": GROUP, "prefix": ROLE_PREFIX.replace("_", r"\_") + "%"}
    try:
        while not stop.wait(POLL_S):
            for blocker, role, app, tenant in watcher.execute(_BLOCKERS, params).fetchall():
                if not tenant:
                    watch.others[blocker] = (role, app)
                    continue
                try:
                    ended = watcher.execute(
                        "SELECT pg_terminate_backend(%s)", (blocker,)
                    ).fetchone()
                except psycopg.errors.InsufficientPrivilege:  # waited for like any other
                    watch.others[blocker] = (role, app)
                    continue
                if ended and ended[0] and (blocker, role) not in watch.ended:
                    watch.ended.append((blocker, role))
                    log.warning(
                        "ended tenant %s's session (pid %s, application %r): it held a lock "
                        "the writer needs",
                        role,
                        blocker,
                        app,
                    )
    except psycopg.Error as exc:  # the watcher is gone: the lock timeout still bounds the wait
        log.info("stopped watching for tenants blocking the writer: %s", exc)
    finally:
        watcher.close()


@contextlib.contextmanager
def clearing_tenants(conn: psycopg.Connection[Any], where: str, doing: str) -> Iterator[Watch]:
    """While the block runs on `conn`: each lock wait bounded by `LOCK_TIMEOUT` (set for the
    session, restored after), and every tenant backend that blocks
    `conn` ended as soon as it does. A lock wait past the timeout in the block (PostgreSQL's
    `LockNotAvailable`, or the `StorageError` of `connections.retrying` that gave up on one)
    means a session that is not a tenant's held the lock: it leaves as `LockError`, one line
    naming that session, `where` and what the writer was `doing`."""
    timeout = LOCK_TIMEOUT
    previous = conn.execute("SELECT current_setting('lock_timeout')").fetchone()
    set_timeout = sql.SQL("SELECT set_config('lock_timeout', {}, false)")
    conn.execute(set_timeout.format(sql.Literal(timeout)))
    watch = Watch()
    stop = threading.Event()
    thread = None
    try:
        watcher = psycopg.connect(_conninfo(conn), autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:  # no watcher: the lock timeout still bounds the wait
        log.info("cannot watch for tenants blocking the writer: %s", exc)
    else:
        thread = threading.Thread(
            target=_watch,
            args=(watcher, conn.info.backend_pid, watch, stop),
            name="seams-lock-watcher",
            daemon=True,
        )
        thread.start()
    try:
        yield watch
    except (psycopg.errors.LockNotAvailable, StorageError) as exc:
        if not isinstance(exc, psycopg.errors.LockNotAvailable) and not isinstance(
            exc.__cause__, psycopg.errors.LockNotAvailable
        ):
            raise
        raise watch.error(where, doing, timeout) from None
    finally:
        stop.set()
        if thread is not None:
            thread.join()
        if (
            previous is not None
            and not conn.closed
            and conn.info.transaction_status
            in (
                psycopg.pq.TransactionStatus.IDLE,
                psycopg.pq.TransactionStatus.INTRANS,
            )
        ):
            conn.execute(set_timeout.format(sql.Literal(previous[0])))
