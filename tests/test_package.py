"""Seams as an installed package: its defaults ship inside it, its data dir follows the project
rule, and a wheel installed outside the checkout runs `seams check`, `run` and `search`."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from seams.models.model_store import ModelManifest
from seams.paths import data_dir, packaged_default, sample_corpus, user_data_dir
from seams.settings import SeamsSettings, load_settings, settings_path

REPO = Path(__file__).resolve().parents[1]
GENERIC = ("assets", "resources", "orchestration", "chunking", "benchmarks")
BUILD_IGNORED = (".git", ".venv", ".seams", "build", "*.egg-info", "__pycache__", ".*_cache",
                 ".hypothesis")  # fmt: skip


@pytest.mark.parametrize("name", ["dagster.yaml", "seams.yaml"])
def test_the_packaged_defaults_are_the_checkouts_files(name: str) -> None:
    assert packaged_default(name).read_bytes() == (REPO / name).read_bytes()


def test_the_packaged_settings_are_the_defaults() -> None:
    text = packaged_default("seams.yaml").read_text(encoding="utf-8")
    path = Path(os.environ["SEAMS_DATA_DIR"]).parent / "packaged-seams.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_settings(path) == SeamsSettings()


def test_outside_a_project_the_data_dir_is_per_user_and_the_settings_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SEAMS_DATA_DIR")
    monkeypatch.delenv("SEAMS_CONFIG", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert data_dir() == user_data_dir() == tmp_path / "xdg" / "seams"
    assert settings_path() is None and load_settings() == SeamsSettings()

    (tmp_path / "seams.yaml").write_text("embedder: {batch_size: 8}\n", encoding="utf-8")
    assert data_dir() == tmp_path / ".seams"  # a project folder keeps its data beside it
    assert load_settings().embedder.batch_size == 8

    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "elsewhere"))
    assert data_dir() == tmp_path / "elsewhere"


def test_the_sample_corpus_is_package_data() -> None:
    names = {p.name for p in sample_corpus().iterdir()}
    assert {"field_notes.md", "history_of_maps.txt", "README.md"} <= names


def _run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_a_wheel_runs_outside_the_checkout_and_installs_nothing_generic(
    tmp_path: Path, database_url: str, exported_model: ModelManifest
) -> None:
    # Build from a copy of the working tree, so the build leaves nothing in the checkout.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, symlinks=True, ignore=shutil.ignore_patterns(*BUILD_IGNORED))
    dist = tmp_path / "dist"
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(dist),
            str(source),
        ],
        cwd=tmp_path,
        env=dict(os.environ),
    )
    (wheel,) = dist.glob("seams-*.whl")

    # A fresh virtualenv outside the checkout; the dependencies come from the project's own
    # environment through a .pth file (no network), Seams itself only from the wheel.
    venv = tmp_path / "venv"
    _run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        cwd=tmp_path,
        env=dict(os.environ),
    )
    python = venv / "bin" / "python"
    site = Path(
        _run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            cwd=tmp_path,
            env=dict(os.environ),
        ).strip()
    )
    (site / "project-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        cwd=tmp_path,
        env=dict(os.environ),
    )

    work = tmp_path / "work"  # no seams.yaml here: packaged settings, SEAMS_DATA_DIR for data
    docs = work / "docs"
    docs.mkdir(parents=True)
    for name in ("field_notes.md", "history_of_maps.txt"):
        (docs / name).write_bytes((sample_corpus() / name).read_bytes())
    data = tmp_path / "data"
    (data / "models").mkdir(parents=True)
    # The session's ONNX export, reused (exporting needs torch, which a user installs once).
    (data / "models" / exported_model.directory.name).symlink_to(exported_model.directory)
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"SEAMS_DATA_DIR": str(data), "SEAMS_DATABASE_URL": database_url})
    seams = str(venv / "bin" / "seams")

    where = _run(
        [
            str(python),
            "-c",
            "import seams, importlib.util as u; print(seams.__file__);"
            f"print([m for m in {GENERIC!r} if u.find_spec(m)])",
        ],
        cwd=work,
        env=env,
    )
    location, generic = where.strip().splitlines()
    assert Path(location).is_relative_to(venv), location  # the wheel, not the checkout
    assert generic == "[]"

    assert re.search(r"Definitions: \d+ assets", _run([seams, "check"], cwd=work, env=env))
    summary = _run([seams, "run", str(docs)], cwd=work, env=env)
    assert "documents:      2 (0 failed)" in summary
    found = json.loads(
        _run(
            [seams, "search", "clay tablet map of the world from Babylon", "-k", "1", "--json"],
            cwd=work,
            env=env,
        )
    )
    (hit,) = found["hits"]
    assert hit["source_uri"].endswith("history_of_maps.txt")
