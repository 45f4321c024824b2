"""Where Seams keeps its files, and the defaults it ships.

Which data directory a process uses is decided once, by `seams.environment.SeamsEnvironment`
(`SEAMS_DATA_DIR`, else `./.seams` in a project, else the per-user folder); this module makes
that folder private (`secure_data_dir`) and finds the defaults shipped inside the package
(`seams/defaults/`, the sample corpus under `seams/orchestration/`), read with
`importlib.resources` so a wheel runs outside a checkout.
"""

from __future__ import annotations

import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path


def packaged_default(name: str) -> Traversable:
    """A default file shipped in the package (`seams/defaults/<name>`)."""
    return resources.files("seams") / "defaults" / name


def sample_corpus() -> Path:
    """The bundled sample corpus (`seams run` without a path) as a folder on disk."""
    folder = resources.files("seams.orchestration") / "sample_corpus"
    if not isinstance(folder, Path):  # a zipped install: batches need real file paths
        raise FileNotFoundError(f"the sample corpus {folder} is not a folder on disk")
    return folder


#: The umask of every `seams` command: what Seams writes (Dagster's logs and run storage files,
#: models, lock files) is its owner's alone. Logs hold file names and extraction warnings; other
#: local users have no business reading them. An export is the user's own file: it follows the
#: umask the command started with.
PRIVATE_UMASK = 0o077


def secure_data_dir(folder: Path) -> Path:
    """Create the data dir (`folder`: `SeamsEnvironment.data_dir`) private to its owner and close
    what an older Seams left open in it; the data dir, for chaining.

    The data dir gets mode 0700, or 0711 as root: there the embedded PostgreSQL runs as another
    system user, which must pass through it to its own folder (`postgres`, 0700, its own; never
    touched here). Each entry directly inside that belongs to the caller becomes 0700 (folders)
    or 0600 (files): nobody else can then reach anything below, whatever the modes there
    (compute logs written 0644 before). Folders above the data dir are never changed.
    """
    folder = folder.resolve()
    if not folder.exists():
        missing = [p for p in [folder, *folder.parents] if not p.exists()]
        for path in reversed(missing):
            try:
                path.mkdir()
            except FileExistsError:
                continue
            # Created here: as root enterable (0711) on the way to the server's folder.
            path.chmod(0o711 if os.geteuid() == 0 else 0o700)
    me = os.geteuid()
    if folder.stat().st_mode & 0o002:
        return folder  # writable by everyone (/tmp and the like): a shared folder, not ours
    _restrict(folder, 0o711 if me == 0 else 0o700, me)
    for entry in folder.iterdir():
        if entry.name == "postgres" or entry.is_symlink():
            continue
        _restrict(entry, 0o700 if entry.is_dir() else 0o600, me)
    return folder


def _restrict(path: Path, mode: int, owner: int) -> None:
    """Take away what `mode` does not allow (never adds a permission); only on our own files."""
    info = path.lstat()
    if info.st_uid != owner:
        return
    current = info.st_mode & 0o7777
    if current & ~mode:
        path.chmod(current & mode)
