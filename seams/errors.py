"""The one error hierarchy of Seams.

It lives in `chunking/` because that is the bottom layer: resources, assets and the CLI import it
from here. Messages name the bad field, file or value and say what to do about it.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


class SeamsError(Exception):
    """Base of every error Seams raises on purpose."""


class ConfigError(SeamsError, ValueError):
    """A configuration value is invalid; the message names the field and the allowed range."""


class InputError(SeamsError, ValueError):
    """A document or argument cannot be processed; the message names it."""


class EmbeddingError(SeamsError, RuntimeError):
    """The embedding model is missing, corrupt or failed during inference."""


class StorageError(SeamsError, RuntimeError):
    """PostgreSQL is unreachable, misconfigured, or a write could not complete."""


class DiskFullError(StorageError):
    """A write failed, or would fail, for lack of disk space; the message names the path, its
    free bytes and what to do (built by `DiskFullError.at`)."""

    @classmethod
    def at(cls, path: object, detail: str = "", *, elsewhere: str = "") -> DiskFullError:
        """ "disk full: <path> has N bytes (X MiB) free (detail). ..." for the filesystem of
        `path`; `elsewhere` names the other way out (default: another SEAMS_DATA_DIR)."""
        free = free_bytes(Path(str(path)))
        amount = "unknown bytes" if free is None else f"{free:,} bytes"
        if free is not None and free >= 1024:
            amount += f" ({_human(free)})"
        because = f" ({detail})" if detail else ""
        elsewhere = elsewhere or "set SEAMS_DATA_DIR to a folder on a larger one"
        return cls(
            f"disk full: {path} has {amount} free{because}. Free space on that filesystem (or "
            f"{elsewhere}), then rerun the command: each write is one transaction, so nothing "
            "was half-written"
        )


def free_bytes(path: object) -> int | None:
    """Bytes an unprivileged user may still write on the filesystem of `path` (or of its nearest
    existing parent); None when that cannot be told."""
    probe = Path(str(path))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        info = os.statvfs(probe)
    except OSError:
        return None
    return info.f_bavail * info.f_frsize


def read_only(path: object) -> bool:
    """Whether the filesystem of `path` (or of its nearest existing parent) is mounted
    read-only: its free space then means nothing, and the error must say "read-only"."""
    probe = Path(str(path))
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        return bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns


def os_error_message(exc: OSError, *, what: str = "", path: object = None) -> str:
    """One line for an OS-level failure on a path (the error's own, else `path`): what failed,
    on which path, why, and what to do. A full disk reads as `DiskFullError.at`; a path under a
    file says it is a file (the OS says "not a directory", or "no such file")."""
    filename = exc.filename if exc.filename is not None else path
    path = Path(str(filename)) if filename not in (None, "") else None
    doing = f"{what}: " if what else ""
    reason = exc.strerror or type(exc).__name__
    if exc.errno in (errno.ENOSPC, errno.EDQUOT) and path is not None:
        return str(DiskFullError.at(path, f"{doing}{reason}", elsewhere="choose another place"))
    if path is None:
        return f"{doing}{reason}"
    fix = {
        errno.EACCES: "check its permissions, or choose another place",
        errno.EPERM: "check its permissions, or choose another place",
        errno.EROFS: "that filesystem is mounted read-only: choose a writable place",
        errno.ENOENT: "create the folder first, or check the path",
        errno.EISDIR: "it is a folder: give a file name",
    }.get(exc.errno or 0, "check the path and try again")
    under = next((p for p in path.parents if p.is_file()), None)
    if exc.errno in (errno.ENOTDIR, errno.ENOENT) and under is not None:
        reason, fix = f"{under} is a file, not a folder", "give a path inside a folder"
    elif exc.errno == errno.ENOENT and path.parent.is_dir():  # /proc, /sys: no new files there
        reason = f"{path.parent} does not accept new files ({reason})"
        fix = "choose another place"
    return f"{doing}cannot use {path}: {reason}; {fix}"


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """A count with its noun as a person writes it, for messages: `1 batch`, `3 batches`,
    `0 files` (`plural` where adding -s or -es is wrong)."""
    if count == 1:
        return f"{count} {noun}"
    if plural is None:
        plural = noun + ("es" if noun.endswith(("s", "sh", "ch", "x", "z")) else "s")
    return f"{count} {plural}"


def missing_extra(module: str, library: str, extra: str, packages: str) -> ImportError:
    """The error of an optional integration imported without its extra: which `module` needs
    which `library`, and the one `pip install` that brings it (`packages`, named)."""
    return ImportError(
        f'{module} needs {library}: pip install "seams-chunking[{extra}]" ({packages})'
    )
