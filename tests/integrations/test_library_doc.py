"""docs/library.md stays true: its ```python blocks run, in order, as one script (through
`tests/test_docs.py`'s `run_python_blocks`, like every page's), print what the page says they
print, and its export schema table is exactly
`seams.storage.export_rows.export_columns(vectors=True)`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seams.models.model_store import ModelManifest
from seams.storage.export_rows import export_columns
from tests.test_docs import DEDICATED, DOCS, provide_models, run_python_blocks

PAGE = DOCS / "library.md"
ROW = re.compile(r"^\| `(\w+)` \| ([^|]+?) \| (yes|no) \| (.+) \|$", re.MULTILINE)


@pytest.fixture
def models_in_a_fresh_data_dir(
    tmp_path: Path, exported_model: ModelManifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    provide_models(tmp_path, exported_model, monkeypatch)


def test_every_python_block_of_the_library_page_runs(
    models_in_a_fresh_data_dir: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert DEDICATED[PAGE] == "tests/integrations/test_library_doc.py"
    assert run_python_blocks(PAGE) >= 6  # each embedder, presets, both adapters
    printed = capsys.readouterr().out
    assert "chunks from the static model" in printed
    assert "heuristic-v1" in printed
    assert "chunk_size_target=220 must lie in" in printed


def test_the_export_schema_table_is_the_exported_schema() -> None:
    rows = ROW.findall(PAGE.read_text(encoding="utf-8"))
    documented = [(name, pg_type, null == "yes", what) for name, pg_type, null, what in rows]
    expected = [(c.name, c.pg_type, c.nullable, c.description) for c in export_columns(True)]
    assert documented == expected
