"""Where Seams keeps its files: one home for the data-dir rule.

`SEAMS_DATA_DIR` (contract) overrides the default `./.seams/` (relative to the working directory),
so a project checkout keeps its database, models and Dagster home beside it.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_DATA_DIR = ".seams"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""The checkout Seams runs from (it holds `dagster.yaml` and `seams.yaml`)."""


def data_dir() -> Path:
    """The absolute data directory (not created here)."""
    return Path(os.environ.get("SEAMS_DATA_DIR") or DEFAULT_DATA_DIR).expanduser().resolve()


def models_dir() -> Path:
    """Exported embedding models live here, one sub-folder per model variant."""
    return data_dir() / "models"
