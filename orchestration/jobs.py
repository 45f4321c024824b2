"""Jobs: one partitioned job that runs every per-batch step of a document batch."""

import dagster as dg

from assets.partitions import PIPELINE_GROUP
from assets.retrieval import RETRIEVAL_GROUP

chunk_batches_job = dg.define_asset_job(
    name="chunk_batches",
    selection=dg.AssetSelection.groups(PIPELINE_GROUP, RETRIEVAL_GROUP),
    description="Extract, segment, embed, cut, assemble and index the chunks of a batch.",
)
