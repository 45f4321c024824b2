"""`extracted_text` over an object source, on its own (no model): a batch's objects are read from
their bucket (the moto S3 API server the tests start), never from a local copy, and a rerun after
an object changed in a bucket without versions fails its step with one line naming the object."""

from __future__ import annotations

import dagster as dg

from seams.assets.extraction import build_extraction_asset
from seams.assets.partitions import document_batches
from seams.extraction.limits import ExtractionLimits
from seams.resources.io_manager import PostgresIOManager
from seams.resources.postgres import PostgresResource
from seams.storage import batches
from seams.storage.object_store import ObjectPrefix, ObjectStore
from seams.storage.sources import ObjectSource
from tests.support.object_store import Bucket


def _register(postgres: PostgresResource, bucket: Bucket) -> str:
    source = ObjectSource(
        ObjectPrefix.parse(bucket.uri("docs/")), ObjectStore(bucket.endpoint), max_bytes=1 << 20
    )
    scan = source.scan()
    with postgres.connection() as conn:
        key = batches.register_batch(conn, source.freeze(scan.found), source="test")
    assert key
    return key


def test_extraction_reads_each_object_from_the_store_and_refuses_a_changed_one(
    postgres: PostgresResource, plain_bucket: Bucket
) -> None:
    plain_bucket.put("docs/a.md", "# A\n\nAlpha text.")
    plain_bucket.put("docs/b.txt", "Beta text.")
    key = _register(postgres, plain_bucket)
    extracted_text = build_extraction_asset(ExtractionLimits(), endpoint_url=plain_bucket.endpoint)
    resources = {
        "seams_postgres": postgres,
        "seams_io_manager": PostgresIOManager(postgres=postgres),
    }
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(document_batches.name, [key])
        result = dg.materialize(
            [extracted_text], partition_key=key, instance=instance, resources=resources
        )
        assert result.success
        [frame] = [result.output_for_node("extracted_text")]
        assert dict(zip(frame["source_uri"], frame["text"], strict=True)) == {
            plain_bucket.uri("docs/a.md"): "# A\n\nAlpha text.",
            plain_bucket.uri("docs/b.txt"): "Beta text.",
        }

        plain_bucket.put("docs/b.txt", "Beta text, changed.")
        again = dg.materialize(
            [extracted_text],
            partition_key=key,
            instance=instance,
            resources=resources,
            raise_on_error=False,
        )
    assert not again.success
    [failure] = [e for e in again.all_events if e.is_step_failure]  # once: no retries
    said = failure.step_failure_data.user_failure_data.description
    assert said.startswith(f"{plain_bucket.uri('docs/b.txt')}: changed since batch {key}")
    assert "\n" not in said
