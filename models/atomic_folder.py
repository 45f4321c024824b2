"""Build a model folder atomically: a staging folder under a per-target lock, renamed into place.

Exports and distillations write many files; a crash (or two first `seams run`s at once) must
never leave half a model where a reader would load it.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def exclusive_build(target: Path) -> Iterator[Path]:
    """A staging folder for building `target`, held under a lock per target folder.

    Two processes exporting into one data dir at once (two first `seams run`s) would otherwise
    race: one would delete the other's staging folder as a crash leftover. The lock (`flock` on
    a file beside the target, released by the kernel if the holder dies) serialises them; the
    caller re-checks for a finished target after entering, so the second process reuses the
    first one's work. On a clean exit the staging folder is renamed into place atomically; on
    any error it is removed and the old target (if any) stays.
    """
    import fcntl

    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            remove_leftovers(target)  # safe under the lock: nobody else is building
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
            staging.chmod(0o755)  # mkdtemp makes it private; the export is meant to be shared
            try:
                yield staging
                if any(staging.iterdir()):
                    publish_folder(staging, target)
                else:
                    shutil.rmtree(staging)  # the caller found the target done: nothing built
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def publish_folder(staging: Path, target: Path) -> None:
    """Move the finished export into place; the old one (if any) is removed only afterwards."""
    old: Path | None = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        target.rename(old)
    try:
        staging.rename(target)
    except OSError:
        if old is not None and not target.exists():
            old.rename(target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def remove_leftovers(target: Path) -> None:
    """Delete staging/old folders that a crashed export left beside the target."""
    for pattern in (f".{target.name}.tmp-*", f".{target.name}.old-*"):
        for leftover in target.parent.glob(pattern):
            shutil.rmtree(leftover, ignore_errors=True)
