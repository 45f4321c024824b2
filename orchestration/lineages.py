"""Which collections a code location holds a lineage for, and which lineage a batch is in.

The definitions carry their collections' names as metadata (`build_definitions` writes them),
so everything that holds only the definitions (the runner, the jobs, the sync check) finds the
same lineages the assets were built for. A batch's collection is the one it was registered for
(`seams.batches.collection`), read from the data: the partition key alone does not say it.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from seams.assets.partitions import DEFAULT_LINEAGE, Lineage
from seams.errors import SeamsError
from seams.resources.keys import POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.storage.batches import batch_collections
from seams.storage.schema import DEFAULT_COLLECTION

LINEAGES_METADATA = "seams/collections"
"""The definitions' metadata key naming their collections, in the order seams.yaml lists them."""


def lineages_metadata(collections: Sequence[str]) -> dict[str, dg.MetadataValue]:
    """The metadata `build_definitions` gives the definitions of `collections`."""
    return {LINEAGES_METADATA: dg.MetadataValue.json(list(collections))}


def lineages(defs: dg.Definitions) -> list[Lineage]:
    """The lineages `defs` hold, in the settings' order (the default one for definitions made
    without the metadata)."""
    value = (defs.metadata or {}).get(LINEAGES_METADATA)
    if value is None:
        return [DEFAULT_LINEAGE]
    return [Lineage(name) for name in value.data]


def lineage_named(defs: dg.Definitions, collection: str) -> Lineage:
    """The lineage of `collection`; a one-line error naming the declared ones when `defs` hold
    none for it."""
    held = lineages(defs)
    for lineage in held:
        if lineage.collection == collection:
            return lineage
    names = ", ".join(lineage.collection for lineage in held)
    raise SeamsError(
        f"collection {collection!r} is not in seams.yaml (collections: {names}): name one of "
        "these, or add it under `collections:`"
    )


def batch_lineages(defs: dg.Definitions, batch_keys: Sequence[str]) -> dict[str, Lineage]:
    """Per batch key, the lineage of its collection (a key the data does not know: the default
    collection's); batches of a collection the settings no longer declare are left out: no job
    of these definitions can build them."""
    if not batch_keys:
        return {}
    held = {lineage.collection: lineage for lineage in lineages(defs)}
    postgres: PostgresResource = defs.resources[POSTGRES_KEY]
    with postgres.connection() as conn:
        found = batch_collections(conn, batch_keys)
    named = {key: found.get(key, DEFAULT_COLLECTION) for key in batch_keys}
    return {key: held[name] for key, name in named.items() if name in held}


def all_partitions(instance: dg.DagsterInstance, defs: dg.Definitions) -> dict[str, Lineage]:
    """Every batch the instance knows as a partition of one of `defs`' lineages, with it."""
    return {
        key: lineage
        for lineage in lineages(defs)
        for key in instance.get_dynamic_partitions(lineage.partitions.name)
    }
