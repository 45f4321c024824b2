"""Jobs: one partitioned job that runs every per-batch step of a document batch."""

import dagster as dg

from seams.assets.partitions import PIPELINE_GROUP
from seams.assets.retrieval import RETRIEVAL_GROUP
from seams.orchestration.sync import SYNC_CHECK_KEYS

chunk_batches_job = dg.define_asset_job(
    name="chunk_batches",
    # The in_sync checks look at every batch: the settings_sync sensor reports them, not runs.
    selection=dg.AssetSelection.groups(PIPELINE_GROUP, RETRIEVAL_GROUP)
    - dg.AssetSelection.checks(*SYNC_CHECK_KEYS),
    description="Extract, segment, embed, cut, assemble and index the chunks of a batch.",
)
