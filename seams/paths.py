"""Where Seams keeps its files, and the defaults it ships: one home for both rules.

The data directory (database, models, Dagster home, inbox) is `SEAMS_DATA_DIR` (contract) when
set; otherwise `./.seams` when the working directory is a Seams project (it holds a `seams.yaml`,
or a `.seams` from earlier runs), so a checkout keeps its data beside it; otherwise a per-user
folder (`$XDG_DATA_HOME/seams`, default `~/.local/share/seams`), so an installed `seams` run from
anywhere never scatters `.seams` folders.

Defaults ship inside the package (`seams/defaults/`, the sample corpus under
`seams/orchestration/`) and are read with `importlib.resources`, so a wheel runs outside a
checkout.
"""

from __future__ import annotations

import os
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

DATA_DIR_ENV = "SEAMS_DATA_DIR"
PROJECT_DATA_DIR = ".seams"
PROJECT_SETTINGS = "seams.yaml"


def project_dir() -> Path | None:
    """The working directory when it is a Seams project (holds seams.yaml or .seams), else None."""
    cwd = Path.cwd()
    if (cwd / PROJECT_SETTINGS).is_file() or (cwd / PROJECT_DATA_DIR).is_dir():
        return cwd
    return None


def user_data_dir() -> Path:
    """The per-user data directory: `$XDG_DATA_HOME/seams`, default `~/.local/share/seams`."""
    base = os.environ.get("XDG_DATA_HOME", "").strip()
    return (Path(base) if base else Path.home() / ".local" / "share") / "seams"


def data_dir() -> Path:
    """The absolute data directory (not created here); evaluated per call."""
    configured = os.environ.get(DATA_DIR_ENV, "").strip()
    if configured:
        return Path(configured).expanduser().resolve()
    project = project_dir()
    return (project / PROJECT_DATA_DIR if project else user_data_dir()).resolve()


def models_dir() -> Path:
    """Exported embedding models live here, one sub-folder per model variant."""
    return data_dir() / "models"


def packaged_default(name: str) -> Traversable:
    """A default file shipped in the package (`seams/defaults/<name>`)."""
    return resources.files("seams") / "defaults" / name


def sample_corpus() -> Path:
    """The bundled sample corpus (`seams run` without a path) as a folder on disk."""
    folder = resources.files("seams.orchestration") / "sample_corpus"
    if not isinstance(folder, Path):  # a zipped install: batches need real file paths
        raise FileNotFoundError(f"the sample corpus {folder} is not a folder on disk")
    return folder
