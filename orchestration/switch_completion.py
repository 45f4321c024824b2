"""A model switch never waits for a batch that nothing can build.

A switch of `retrieval.model` (or `embedder.model`) publishes once every batch with current
chunks has a complete build of the new model (`seams.storage.publication`). A batch of a
collection the settings no longer declare (the implicit `default` once `collections:` is added,
or a collection removed from the block) keeps its published chunks searchable, but no job of
the code location builds it, so the switch would be held for it forever.

`seams backfill` builds such a batch's index itself: its published chunks, exactly as they are,
embedded with the index model of the current settings and analysed with the BM25 analyzer its
stored index names. Building rather than leaving it out, because its documents are searchable
today (`seams check` says so) and the user asked for another model, not for fewer documents:
left out, they would lose their vectors at the switch and be found by BM25 alone. The batch's
chunks were cut by its own settings, which the data still holds; only what it lacks, the new
model's vectors, is made. Each chunk's text is embedded (mode `text`): the one mode that needs
nothing but the chunks (pooled vectors are the old boundary model's, and late chunking needs
the collection's window settings, which are gone with its block).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg

from seams.assets.frames import frame
from seams.orchestration.lineages import batch_lineages, lineages
from seams.resources.embedder import OnnxEmbedderResource
from seams.resources.keys import EMBEDDER_KEY, POSTGRES_KEY, RETRIEVAL_EMBEDDER_KEY
from seams.resources.postgres import PostgresResource
from seams.storage import publication, schema
from seams.storage.embedding_cache import EmbeddingCache
from seams.storage.index_publication import write_and_publish
from seams.storage.partition_tables import WriteResult, read_table
from seams.storage.vector_indexes import ensure_model_index

Report = Callable[[str], None]


def index_embedder(defs: dg.Definitions) -> OnnxEmbedderResource:
    """The resource the definitions' `chunk_index` embeds with (`seams_retrieval_embedder` when
    `retrieval.model` names another model, else `seams_embedder`)."""
    asset = defs.resolve_assets_def(lineages(defs)[0].key("chunk_index"))
    keys = asset.required_resource_keys
    return defs.resources[
        RETRIEVAL_EMBEDDER_KEY if RETRIEVAL_EMBEDDER_KEY in keys else EMBEDDER_KEY
    ]


def undeclared_waiting(defs: dg.Definitions, switch: publication.ModelSwitch | None) -> list[str]:
    """The batches `switch` waits for that no lineage of `defs` can build."""
    if switch is None or not switch.waiting:
        return []
    built = batch_lineages(defs, list(switch.waiting))
    return [b for b in switch.waiting if b not in built]


def complete_switch(defs: dg.Definitions, report: Report) -> WriteResult | None:
    """Index, with the settings' model, the batches a held switch waits for that belong to
    collections the settings no longer declare, in one write that publishes the switch when it
    completes it (module doc); None when there is none, or the switch is to another model than
    the settings' (then nothing is built, saying why)."""
    postgres: PostgresResource = defs.resources[POSTGRES_KEY]
    with postgres.connection() as conn:
        switch = publication.model_switch(conn)
    left_out = undeclared_waiting(defs, switch)
    if switch is None or not left_out:
        return None
    embedder = index_embedder(defs)
    model_id = embedder.model_id
    if model_id != switch.target:
        report(
            f"the held model switch is to {switch.target[:12]}, the settings index with "
            f"{model_id[:12]}: not building {', '.join(left_out)} for it (`seams backfill` "
            "rebuilds the declared collections with the settings' model first)"
        )
        return None
    for batch in left_out:
        report(
            f"batch {batch} (collection {switch.collections.get(batch)}, not in the settings): "
            f"indexing its published chunks with {model_id[:12]} for the model switch"
        )
    chunks = read_table(postgres, schema.CHUNKS, left_out)
    analyzers = _stored_analyzers(postgres, left_out)
    texts = list(chunks["text"])
    vectors, _ = EmbeddingCache(postgres).get_or_embed(model_id, texts, embedder.embed)
    with postgres.connection() as conn:  # before the vectors are written (its own transaction)
        for collection in sorted(set(switch.collections.get(b, "") for b in left_out)):
            ensure_model_index(conn, model_id, vectors.shape[1], collection=collection or None)
    rows = [
        {
            "batch_key": r.batch_key,
            "chunk_id": r.chunk_id,
            "document_id": r.document_id,
            "mode": "text",
            "model_id": model_id,
            "embedding": v,
            "text_search_config": analyzers[r.batch_key],
        }
        for r, v in zip(chunks.itertuples(index=False), vectors, strict=True)
    ]
    result = write_and_publish(postgres, frame("chunk_index", rows), left_out)
    if result.published:
        report(f"model switch to {model_id[:12]} published: search answers with it now")
    for batch, reason in sorted(result.held.items()):
        report(f"batch {batch} not published: {reason}")
    return result


def _stored_analyzers(postgres: PostgresResource, batches: Sequence[str]) -> dict[str, str]:
    """Per batch, the BM25 analyzer its published index was built with."""
    with postgres.connection() as conn:
        rows = conn.execute(
            "SELECT DISTINCT ON (i.batch_key) i.batch_key, i.text_search_config"
            " FROM seams.chunk_index AS i JOIN seams.batch_builds AS b"
            "   ON b.batch_key = i.batch_key AND b.state = 'published'"
            "  AND i.generation <= b.generation"
            " WHERE i.batch_key = ANY(%s) ORDER BY i.batch_key, i.generation DESC",
            (list(batches),),
        ).fetchall()
    return {str(b): str(c) for b, c in rows}
