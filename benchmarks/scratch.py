"""A throwaway data dir and inbox for the benchmarks that run the whole pipeline.

Each run gets a fresh data dir (its own embedded PostgreSQL and Dagster instance), with the
checkout's model export linked in when there is one: the export is verified by sha256 on load,
and exporting again would cost every run a minute of torch.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def scratch_data_dir(prefix: str, models: Path | None = None) -> Path:
    """A new work folder (one the embedded server's user can enter) whose `data` is this
    process's data dir: `SEAMS_DATA_DIR` points there, `SEAMS_DATABASE_URL` is dropped (the
    run starts its own server), and `models` (default `.seams/models`) is linked in if it exists."""
    from seams.resources.embedded_server import server_tempdir

    work = server_tempdir(prefix)
    os.environ["SEAMS_DATA_DIR"] = str(work / "data")
    os.environ.pop("SEAMS_DATABASE_URL", None)
    existing = (models or Path(".seams/models")).resolve()
    if existing.is_dir():
        (work / "data").mkdir(parents=True)
        (work / "data" / "models").symlink_to(existing)
    return work


def write_inbox(folder: Path, texts: Sequence[str]) -> list[Path]:
    """`folder`, made, holding one Markdown file per text (`doc000.md`, `doc001.md`, ...)."""
    folder.mkdir()
    paths = []
    for number, text in enumerate(texts):
        path = folder / f"doc{number:03d}.md"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
