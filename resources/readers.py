"""What a reader of published chunks needs, built without Dagster: the data database's pool and
the query embedder.

`seams search` and `seams serve` read; they never materialize an asset, so they need neither
the definitions nor Dagster itself (whose import alone costs seconds). They get the same
database (`PostgresPool.for_environment`) and the same embedder the definitions' `embedder`
resource is (`OnnxEmbedderResource.for_environment`: the packaged model's folder under the data
dir, seams.yaml's `embedder` knobs); `embedder.for_model` then picks the model that built the
published index, as in every search.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from seams.environment import SeamsEnvironment
from seams.errors import InputError, SeamsError
from seams.models.embedders import OnnxEmbedder
from seams.models.model_store import default_model_dir, load_manifest
from seams.resources.postgres_pool import PostgresPool
from seams.settings import SeamsSettings
from seams.storage.batches import stored_collections
from seams.storage.connections import ConnectionSource
from seams.storage.search import SearchKind, SearchResponse, search_response
from seams.storage.search.query import check_query, known_collections


@dataclass(frozen=True)
class Readers:
    """The pool and the query embedder of one environment and its settings."""

    postgres: ConnectionSource
    embedder: OnnxEmbedder

    @classmethod
    def for_environment(
        cls, settings: SeamsSettings, environment: SeamsEnvironment, *, max_connections: int = 4
    ) -> Readers:
        embedder = settings.embedder
        return cls(
            postgres=PostgresPool(
                database_url=environment.database_url or "",
                data_dir=str(environment.data_dir),
                runtime_dir=str(environment.runtime_dir or ""),
                max_connections=max_connections,
            ),
            embedder=OnnxEmbedder(
                model_dir=str(default_model_dir(environment)),
                variant=embedder.variant,
                batch_size=embedder.batch_size,
                intra_op_threads=embedder.threads,
                models_dir=str(environment.models_dir),
            ),
        )

    def with_postgres(self, postgres: ConnectionSource) -> Readers:
        """The same embedder reading through another connection source (a tenant's)."""
        return Readers(postgres, self.embedder)

    def stored_collections(self) -> list[str]:
        """The collections the data holds that this connection may read."""
        with self.postgres.connection() as conn:
            return stored_collections(conn)

    def check_model(self, run_hint: str) -> None:
        """An `InputError` saying what to run when no model was exported yet (a fresh install
        has nothing to search); `run_hint` is the `seams` command as the user types it."""
        try:
            load_manifest(self.embedder.resolved_model_dir())
        except SeamsError as exc:
            raise InputError(
                f"nothing to search yet: chunk some documents first with `{run_hint} run "
                "PATH` (a file or a folder; without PATH, the bundled sample corpus)"
            ) from exc

    def search(
        self,
        settings: SeamsSettings,
        query: object,
        k: int = 5,
        *,
        budget: int | None = None,
        collections: Sequence[str] | None = None,
        search: SearchKind | None = None,
        lexical_weight: float | None = None,
        option: str = "--collection",
        declared: Iterable[str] | None = None,
        run_hint: str | None = None,
    ) -> SearchResponse:
        """The answer `seams search` gives (its `--json` is `to_dict()` of it), for every reader
        that answers as the command line does (`seams serve`).

        `collections` are checked against those the settings declare (`declared` instead,
        when given: a tenant's own) and those the data holds, naming `option` in the error.
        One collection searched: its own retrieval settings; several (or one the settings no
        longer declare): the project's. `search` and `lexical_weight` default to those
        settings'. `run_hint`: check the model first (`check_model`), after the collections."""
        query = check_query(query)  # before the model and the database
        per_collection = settings.collection_settings()
        names = None
        if collections is not None:
            names = known_collections(
                collections,
                per_collection if declared is None else declared,
                option=option,
                stored=self.stored_collections,
            )
        if run_hint is not None:
            self.check_model(run_hint)
        chosen = per_collection.get(names[0]) if names and len(names) == 1 else None
        retrieval = (chosen or settings).retrieval
        return search_response(
            self.postgres,
            self.embedder,
            query,
            k,
            search=search or retrieval.search,
            lexical_weight=retrieval.lexical_weight if lexical_weight is None else lexical_weight,
            sentence_weight=retrieval.sentence_weight,
            budget=budget,
            collections=names,
        )
