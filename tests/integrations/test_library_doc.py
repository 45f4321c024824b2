"""docs/library.md stays true: its ```python blocks run, in order, as one script, and its export
schema table is exactly `seams.export.export_columns(vectors=True)`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import write_tiny_static_model

from seams.export import export_columns
from seams.models.model_store import ModelManifest, default_model_dir, default_static_dir

PAGE = Path(__file__).resolve().parents[2] / "docs" / "library.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+?) \| (yes|no) \| (.+) \|$", re.MULTILINE)


def python_blocks(page: str) -> list[str]:
    return BLOCK.findall(page)


@pytest.fixture
def models_in_a_fresh_data_dir(
    tmp_path: Path, exported_model: ModelManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A data dir as `seams model export` leaves it: the real ONNX export and a static model
    (a tiny stand-in in the distiller's format: real distillation takes minutes here)."""
    monkeypatch.setenv("SEAMS_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    default_model_dir().parent.mkdir(parents=True)
    default_model_dir().symlink_to(exported_model.directory, target_is_directory=True)
    write_tiny_static_model(default_static_dir(), exported_model.directory / "tokenizer.json")


def test_every_python_block_of_the_library_page_runs(
    models_in_a_fresh_data_dir: None, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 6  # each embedder, presets, both adapters
    namespace: dict[str, object] = {"__name__": "library_doc"}
    for number, block in enumerate(blocks, start=1):
        exec(compile(block, f"{PAGE}: python block {number}", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "chunks from the static model" in printed
    assert "heuristic-v1" in printed
    assert "chunk_size_target=220 must lie in" in printed


def test_the_export_schema_table_is_the_exported_schema() -> None:
    rows = ROW.findall(PAGE.read_text(encoding="utf-8"))
    documented = [(name, pg_type, null == "yes", what) for name, pg_type, null, what in rows]
    expected = [(c.name, c.pg_type, c.nullable, c.description) for c in export_columns(True)]
    assert documented == expected
