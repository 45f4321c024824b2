"""Targets through the whole pipeline (real Dagster runs, PostgreSQL, the packaged model and a
tiny retrieval model built from a seed): a corpus run, a changed, a deleted and a new file, a
settings change and backfill, a model switch and back. After each step, the store's records
equal the published current chunks (`seams export --current --vectors`: ids, text, model,
vectors within cosine 0.9999), and `seams sync --check --json` reports 0 missing, 0 extra,
0 stale. The runs sync the target themselves (`seams run`/`seams backfill` materialize it after
they published)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import dagster as dg
import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import cli, runner
from seams.paths import sample_corpus
from seams.resources.postgres import PostgresResource
from tests.storage.targets import corpus
from tests.storage.targets.stores import assert_mirrors, opener, store_settings
from tests.support.instances import current_definitions
from tests.support.tiny_models import tiny_bert_folder

pytestmark = [pytest.mark.export, pytest.mark.slow]

SETTINGS = (
    "chunking:\n  overrides: {{{overrides}}}\nretrieval: {{{model}}}\ntargets:\n  docs: {target}\n"
)
TARGETS = {
    "pgvector": "{kind: pgvector, table: rag_chunks, url_env: TARGET_PG_URL}",
    "lancedb": "{kind: lancedb, table: rag_chunks, path: lance}",
    "qdrant": "{kind: qdrant, collection: rag_chunks, path: qdrant}",
    "chroma": "{{kind: chroma, collection: {collection}, url_env: TARGET_CHROMA_URL}}",
    "milvus": "{kind: milvus, collection: rag_chunks, path: milvus.db}",
}


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_bert_folder(tmp_path_factory, "tiny-model", "tiny", window=128)


@pytest.mark.parametrize("kind", list(TARGETS))
def test_a_target_mirrors_every_step_of_the_pipeline(
    kind: str,
    instance: dg.DagsterInstance,
    database_url: str,
    pg_server_url: str,
    exported_model: ModelManifest,
    model_folder: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    seams_yaml: Callable[[str], Path],
) -> None:
    def configure(overrides: str = "", model: str = "") -> dg.Definitions:
        named = TARGETS[kind].format(collection=target.collection) if kind == "chroma" else None
        seams_yaml(SETTINGS.format(overrides=overrides, model=model, target=named or TARGETS[kind]))
        return current_definitions()

    folder = tmp_path / "docs"
    folder.mkdir()
    files = sorted(p.name for p in sample_corpus().iterdir() if p.suffix == ".md")[:3]
    for name in files[:2]:
        shutil.copy(sample_corpus() / name, folder / name)

    with store_settings(kind, pg_server_url, tmp_path, monkeypatch) as target:
        # seams.yaml names the same store: `path: lance` counts from tmp_path, as here.
        defs = configure()
        postgres: PostgresResource = defs.resources["seams_postgres"]

        def run(defs: dg.Definitions) -> None:
            keys = runner.register_path(folder, print, defs=defs)
            summary = runner.RunSummary(batches=keys)
            runner.materialize_batches(instance, keys, print, summary, defs=defs)

        def mirrors() -> None:
            assert "target docs: wrote" in capsys.readouterr().out
            assert cli.main(["sync", "--check", "--json"]) == 0
            (report,) = json.loads(capsys.readouterr().out)["targets"].values()
            assert (report["missing"], report["extra"], report["stale"]) == (0, 0, 0), report
            store = opener(target)()
            try:
                assert_mirrors(store, corpus.current_records(postgres))
            finally:
                store.close()

        run(defs)
        mirrors()
        changed = folder / files[0]
        changed.write_text(changed.read_text() + "\n\nA new closing paragraph.\n", "utf-8")
        (folder / files[1]).unlink()
        shutil.copy(sample_corpus() / files[2], folder / files[2])
        run(defs)
        mirrors()
        runner.backfill(
            instance, print, defs=configure("chunk_size_max: 150, chunk_size_target: 100")
        )
        mirrors()
        tiny = f"model: {model_folder}"
        runner.backfill(
            instance, print, defs=configure("chunk_size_max: 150, chunk_size_target: 100", tiny)
        )
        mirrors()
        runner.backfill(
            instance, print, defs=configure("chunk_size_max: 150, chunk_size_target: 100")
        )
        mirrors()
