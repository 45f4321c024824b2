"""The partitioning of every per-batch asset: one dynamic partition per document batch, and one
lineage of per-batch assets per collection.

It lives in `assets/` (not `orchestration/`) because the assets need it and dependencies point
`orchestration -> assets`; sensors and jobs import it from here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import dagster as dg

from seams.storage.schema import BATCH_ASSETS, DEFAULT_COLLECTION

document_batches = dg.DynamicPartitionsDefinition(name="document_batches")
"""The batches of the `default` collection (a project without `collections:`)."""

PIPELINE_GROUP = "chunking"
"""The asset group of the default collection's per-batch steps up to the chunks."""
RETRIEVAL_GROUP = "retrieval"
"""The asset group of the default collection's search index."""

CHUNK_BATCHES_JOB = "chunk_batches"
"""The default collection's job: every per-batch step of its batches."""


BATCH_ASSET_DEFAULTS = {
    # Database steps retry: a dropped connection or a restarted server is worth a second try,
    # and every write is one idempotent transaction per partition.
    "retry_policy": dg.RetryPolicy(max_retries=2, delay=2, backoff=dg.Backoff.EXPONENTIAL),
    # Every step processes any number of partitions per run (each frame carries batch_key),
    # so a backfill over all batches pays Dagster's per-run overhead once.
    "backfill_policy": dg.BackfillPolicy.single_run(),
}


@dataclass(frozen=True)
class Lineage:
    """One collection's per-batch assets in Dagster: their keys, partitions, groups and job.

    The `default` collection keeps the keys, partitions, groups and job a project without
    `collections:` always had (`chunks`, `document_batches`, `chunking`/`retrieval`,
    `chunk_batches`), so its history carries over. Any other collection `c` gets its assets
    under the prefix `c` (`c/chunks`), its own dynamic partitions `c__document_batches`, one
    asset group `c` (the UI shows each collection as a group) and the job `c__chunk_batches`.
    Collection names never hold `__`, so these names cannot collide.
    """

    collection: str = DEFAULT_COLLECTION

    @property
    def is_default(self) -> bool:
        return self.collection == DEFAULT_COLLECTION

    @property
    def key_prefix(self) -> list[str]:
        return [] if self.is_default else [self.collection]

    @property
    def partitions(self) -> dg.DynamicPartitionsDefinition:
        return document_batches if self.is_default else _partitions(self.collection)

    @property
    def job_name(self) -> str:
        return CHUNK_BATCHES_JOB if self.is_default else f"{self.collection}__{CHUNK_BATCHES_JOB}"

    @property
    def groups(self) -> tuple[str, ...]:
        """The asset groups its per-batch assets are in."""
        return (PIPELINE_GROUP, RETRIEVAL_GROUP) if self.is_default else (self.collection,)

    def group(self, stage_group: str) -> str:
        """The group of an asset the default lineage puts in `stage_group`."""
        return stage_group if self.is_default else self.collection

    def key(self, asset: str) -> dg.AssetKey:
        """The key of its asset `asset` (`chunks` -> `handbook/chunks`)."""
        return dg.AssetKey([*self.key_prefix, asset])

    @property
    def keys(self) -> tuple[dg.AssetKey, ...]:
        """Its per-batch assets' keys, in pipeline order."""
        return tuple(self.key(name) for name in BATCH_ASSETS)

    def asset_defaults(self, stage_group: str = PIPELINE_GROUP) -> dict[str, Any]:
        """The `@dg.asset` arguments every per-batch asset of this lineage shares."""
        return {
            **BATCH_ASSET_DEFAULTS,
            "key_prefix": self.key_prefix,  # and so the op's name: `handbook__chunks`
            "partitions_def": self.partitions,
            "group_name": self.group(stage_group),
        }

    def placed(self, asset: dg.AssetsDefinition) -> dg.AssetsDefinition:
        """`asset` (made with `asset_defaults`, so under this lineage's prefix) with the inputs
        its parameters name (`chunks`) moved under the prefix too; shared assets (the model)
        stay put."""
        if self.is_default:
            return asset
        named = {dg.AssetKey(name): self.key(name) for name in BATCH_ASSETS}
        replacements = {key: named[key] for key in asset.dependency_keys if key in named}
        return asset.with_attributes(asset_key_replacements=replacements)


DEFAULT_LINEAGE = Lineage()


def lineage_of(key: dg.AssetKey) -> Lineage | None:
    """The lineage a per-batch asset's key belongs to (None for any other asset)."""
    if key.path[-1] not in BATCH_ASSETS or len(key.path) > 2:
        return None
    return Lineage(key.path[0]) if len(key.path) == 2 else DEFAULT_LINEAGE


@functools.cache
def _partitions(collection: str) -> dg.DynamicPartitionsDefinition:
    return dg.DynamicPartitionsDefinition(name=f"{collection}__document_batches")
