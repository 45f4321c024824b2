"""The partitioning of every per-batch asset: one dynamic partition per document batch.

It lives in `assets/` (not `orchestration/`) because the assets need it and dependencies point
`orchestration -> assets`; sensors and jobs import it from here.
"""

import dagster as dg

document_batches = dg.DynamicPartitionsDefinition(name="document_batches")

PIPELINE_GROUP = "chunking"
"""The asset group of the per-batch steps; the `chunk_batches` job selects it."""

BATCH_ASSET_DEFAULTS = {
    "partitions_def": document_batches,
    "group_name": PIPELINE_GROUP,
    # Database steps retry: a dropped connection or a restarted server is worth a second try,
    # and every write is one idempotent transaction per partition.
    "retry_policy": dg.RetryPolicy(max_retries=2, delay=2, backoff=dg.Backoff.EXPONENTIAL),
    # Every step processes any number of partitions per run (each frame carries batch_key),
    # so a backfill over all batches pays Dagster's per-run overhead once.
    "backfill_policy": dg.BackfillPolicy.single_run(),
}
