"""docs/targets.md's reading examples run (through `tests/test_docs.py`'s `run_python_blocks`)
against targets synced from a published corpus embedded by the packaged model, and find what
a reader asking about bees should find. The Chroma example (LangChain's integration, installed
with the store clients of the slow lane) runs in the slow lane."""

from __future__ import annotations

from pathlib import Path

import pytest

from seams import OnnxEmbedder
from seams.environment import SeamsEnvironment
from seams.models.model_store import ModelManifest
from seams.resources.postgres import PostgresResource
from seams.storage.targets import open_target
from seams.storage.targets.sync import sync_target
from seams.targets import TargetSettings
from tests.storage.targets import corpus
from tests.test_docs import DOCS, provide_models, run_python_blocks

PAGE = DOCS / "targets.md"
DOCUMENTS = {
    "bees": [
        "Honey bees collect nectar from flowers and carry it back to the hive.",
        "In the hive, bees evaporate the nectar and add enzymes until it becomes honey.",
    ],
    "engines": ["A diesel engine ignites fuel by compressing air until it is hot."],
    "bread": ["Bread rises because yeast ferments sugars and releases carbon dioxide."],
}


def publish_and_sync(
    postgres: PostgresResource,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *targets: TargetSettings,
) -> None:
    """The bees corpus published (embedded by the packaged model) and synced to `targets`."""
    provide_models(tmp_path, exported_model, monkeypatch)  # also: the working folder is tmp_path
    embedder = OnnxEmbedder()
    corpus.publish_batch(postgres, "b1", DOCUMENTS, embedder.model_id, 384, embed=embedder.embed)
    for settings in targets:
        store = open_target(settings.kind, settings, SeamsEnvironment.from_os())
        try:
            assert sync_target(postgres, settings.kind, store, ["default"]).records == 4
        finally:
            store.close()


def test_the_reading_examples_run_and_find_the_bees(
    postgres: PostgresResource,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    publish_and_sync(
        postgres,
        exported_model,
        tmp_path,
        monkeypatch,
        TargetSettings(kind="lancedb", table="rag_chunks", path=str(tmp_path / "lance")),
        TargetSettings(kind="qdrant", collection="rag_chunks", path=str(tmp_path / "qdrant")),
    )
    assert run_python_blocks(PAGE) == 2
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6, lines
    assert "docs/bees.txt" in lines[0]  # LanceDB's best hit
    assert lines[3].startswith("bees ")  # Qdrant's best hit


@pytest.mark.slow
def test_langchains_chroma_reads_a_chroma_target_and_finds_the_bees(
    postgres: PostgresResource,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    publish_and_sync(
        postgres,
        exported_model,
        tmp_path,
        monkeypatch,
        TargetSettings(kind="chroma", collection="rag_chunks", path=str(tmp_path / "chroma")),
    )
    assert run_python_blocks(PAGE, indexed=True) == 1
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3, lines
    assert "docs/bees.txt #" in lines[0] and "bees" in lines[0]  # the best hit
