"""A batch chunked and indexed by the real pipeline in a database of its own: what the search
tests (and the `seams eval` tests) read. Two short documents with known sections, or any folder;
the pipeline runs in-process on an ephemeral instance, so a batch takes seconds."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import dagster as dg
import pytest

from seams.assets.partitions import document_batches
from seams.orchestration.definitions import build_assets
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.io_manager import PostgresIOManager
from seams.resources.postgres import PostgresResource
from seams.resources.static_embedder import StaticEmbedderResource
from seams.settings import RetrievalSettings, SeamsSettings, load_settings
from seams.storage.batches import register_batch, scan_inbox
from tests.support.databases import fresh_database

SETTINGS = load_settings()
"""The project's settings, as `seams run` here reads them."""


def pipeline_assets(
    mode: str | None = None, settings: SeamsSettings = SETTINGS
) -> list[dg.AssetsDefinition]:
    """Every asset, in pipeline order, for `settings` with retrieval `mode` (if given)."""
    if mode is not None:
        settings = settings.model_copy(update={"retrieval": RetrievalSettings(mode=mode)})
    return build_assets(settings)


GARDEN = """# Garden Notes

## Tomatoes

Tomato plants need at least six hours of direct sunlight every day and a deep, loose soil rich in
organic matter. Gardeners pinch out the side shoots that grow in the angle between the stem and a
leaf, so the plant puts its energy into fruit rather than foliage. Tall varieties are tied to a
stake or grown inside a wire cage, because a heavy truss of green fruit can snap an unsupported
stem after a summer storm. Blossom end rot, a dark sunken patch on the fruit, comes from uneven
watering that starves the fruit of calcium.

## Compost

A compost heap turns kitchen scraps and garden waste into crumbly dark humus. It works best with
a mix of green material such as grass clippings and vegetable peelings and brown material such as
dry leaves, straw and shredded cardboard. A heap that smells of ammonia or rotten eggs is too wet
and has too little air: turning it with a fork and adding brown material fixes the smell within a
few days. Finished compost is spread as a mulch or dug into the beds before planting.

## Irrigation

Drip irrigation delivers water slowly through thin tubes with small emitters placed next to each
plant, so almost nothing is lost to evaporation or runoff. A timer opens the valve early in the
morning, before the heat of the day. Rain barrels connected to the downpipes of a shed can feed
the system by gravity, which saves mains water during dry summers and keeps the hose pipe coiled.
"""

HARBOUR_V1 = """\
The old harbour lighthouse was built from granite blocks in 1841. Its keepers climbed
one hundred and twelve steps every evening to light the paraffin lamp and wind the clockwork that
turned the great glass lens. The beam could be seen twenty nautical miles out at sea, and each
lighthouse along the coast flashed its own pattern so that sailors could tell them apart.

Fog was the keepers' worst enemy. On thick nights they sounded a fog horn driven by compressed
air every thirty seconds until dawn, and they logged every ship that passed the point. The light
was automated in 1982 and the keepers' cottages became a small museum of maritime history.
"""


def pipeline_resources(url: str) -> dict[str, object]:
    """The pipeline's resources over the database at `url`, with the exported model."""
    postgres = PostgresResource(url=url)
    return {
        "seams_postgres": postgres,
        "seams_io_manager": PostgresIOManager(postgres=postgres),
        "seams_embedder": OnnxEmbedderResource(),
        "seams_static_embedder": StaticEmbedderResource(),
    }


def register_folder(postgres: PostgresResource, folder: Path, source: str = "test") -> str:
    """Register the files of `folder` as one batch; its key."""
    files, _ = scan_inbox(folder)
    postgres.ensure_schema()
    with postgres.connection() as conn:
        key = register_batch(conn, files, source=source)
    assert key
    return key


def materialize_batch(
    instance: dg.DagsterInstance,
    resources: dict[str, object],
    key: str,
    *,
    index_only: bool = False,
    mode: str | None = None,
    settings: SeamsSettings = SETTINGS,
) -> dg.ExecuteInProcessResult:
    """Materialize every per-batch asset of `key` (or only `chunk_index`, in `mode`) with
    `settings`."""
    instance.add_dynamic_partitions(document_batches.name, [key])
    pipeline = pipeline_assets(mode, settings)
    result = dg.materialize(
        pipeline,
        selection=pipeline[-1:] if index_only else pipeline[1:],
        partition_key=key,
        instance=instance,
        resources=resources,
    )
    assert result.success
    return result


def write_corpus(folder: Path) -> Path:
    """`folder`, made, holding the two test documents (GARDEN, HARBOUR_V1)."""
    folder.mkdir()
    (folder / "garden.md").write_text(GARDEN, encoding="utf-8")
    (folder / "harbour.txt").write_text(HARBOUR_V1, encoding="utf-8")
    return folder


class Indexed:
    """A database holding `folder` as one materialized batch (the two test documents, as
    `write_corpus` writes them, or any folder)."""

    def __init__(self, url: str, folder: Path, settings: SeamsSettings = SETTINGS) -> None:
        self.url = url
        self.folder = folder
        self.resources = pipeline_resources(url)
        self.postgres: PostgresResource = self.resources["seams_postgres"]  # type: ignore[assignment]
        self.embedder: OnnxEmbedderResource = self.resources["seams_embedder"]  # type: ignore[assignment]
        self.instance = dg.DagsterInstance.ephemeral()
        self.key = register_folder(self.postgres, folder)
        self.result = materialize_batch(self.instance, self.resources, self.key, settings=settings)

    def rebuild_index(self, mode: str | None = None) -> dg.ExecuteInProcessResult:
        return materialize_batch(
            self.instance, self.resources, self.key, index_only=True, mode=mode
        )


@contextlib.contextmanager
def indexed_database(
    pg_server_url: str, folder: Path, settings: SeamsSettings = SETTINGS
) -> Iterator[Indexed]:
    """A fresh database on the test server holding `folder` chunked (with `settings`) and
    indexed as one batch; the database is dropped on exit."""
    with fresh_database(pg_server_url) as url:
        indexed = Indexed(url, folder, settings)
        try:
            yield indexed
        finally:
            indexed.instance.dispose()


def indexed_corpus_fixture(name: str) -> Callable[..., Iterator[Indexed]]:
    """A module-scoped fixture: the two test documents (`write_corpus`) indexed in a database of
    their own, for the tests of one module that leave the index as they found it."""

    @pytest.fixture(scope="module")
    def indexed_corpus(
        pg_server_url: str, exported_model: object, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[Indexed]:
        corpus = write_corpus(tmp_path_factory.mktemp(name) / "docs")
        with indexed_database(pg_server_url, corpus) as indexed:
            yield indexed

    return indexed_corpus
