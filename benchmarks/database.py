"""A PostgreSQL of a benchmark's own: the embedded server in a folder it keeps or throws away."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from seams.resources.database import EmbeddedPostgres
from seams.resources.embedded_server import server_tempdir
from seams.resources.postgres import close_all_pools


@contextlib.contextmanager
def benchmark_server(prefix: str, keep: Path | None = None) -> Iterator[EmbeddedPostgres]:
    """An embedded server (not started) whose data lives in `keep`, made if missing and left
    for a later run to resume, or else in a fresh temporary folder named after `prefix` that is
    removed afterwards. On the way out every pool is closed and the server stopped."""
    if keep:
        root = keep.resolve()
        root.mkdir(parents=True, exist_ok=True)
        root.chmod(0o711)  # the server's user passes through, as with `server_tempdir`
    else:
        root = server_tempdir(prefix)
    server = EmbeddedPostgres(root / "pgdata")
    try:
        yield server
    finally:
        close_all_pools()
        server.stop()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
