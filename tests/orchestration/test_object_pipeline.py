"""A collection whose source is an `s3://` prefix, end to end against a real S3 API server
(moto's) with real PostgreSQL, the packaged ONNX model and a PostgreSQL-backed Dagster
instance: `seams run`'s registration lists the bucket, the pipeline reads each object from the
store (never from a local copy), a changed, a deleted and a new object make the next batch and
a retirement, and a rerun of the first batch reads the versions it recorded."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import psycopg
import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import runner
from seams.orchestration.definitions import build_definitions
from seams.settings import load_settings
from seams.storage.sources import location_of
from tests.support.object_store import Bucket

DEPLOYS = (
    "# Deploys\n\nEvery deploy starts with a green build. The release manager tags the commit "
    "and the pipeline promotes it to staging.\n\nRollbacks restore the previous tag.\n"
)
ONCALL = "# On call\n\nThe on-call engineer answers pages within fifteen minutes.\n"


def _run(
    instance: dg.DagsterInstance, defs: dg.Definitions, keys: list[str]
) -> list[dg.ExecuteInProcessResult]:
    job = defs.resolve_job_def(runner.JOB_NAME)
    instance.add_dynamic_partitions(job.partitions_def.name, keys)
    results = [
        job.execute_in_process(instance=instance, partition_key=key, run_config=runner.QUIET)
        for key in keys
    ]
    assert all(result.success for result in results)
    return results


def _characters(result: dg.ExecuteInProcessResult) -> int:
    """The characters `extracted_text` extracted in that run."""
    [event] = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey("extracted_text")
    ]
    return event.materialization.metadata["characters"].value


def _texts(database_url: str) -> dict[str, str]:
    """Extracted text per source URI of the current documents (what search reads)."""
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT DISTINCT e.source_uri, e.text FROM seams.extracted_text e"
            " JOIN seams.current_chunks c USING (batch_key, document_id)"
        )
        return dict(rows.fetchall())


@pytest.mark.slow
def test_a_bucket_prefix_is_chunked_from_the_store_and_kept_current(
    instance: dg.DagsterInstance,
    bucket: Bucket,
    tmp_path: Path,
    database_url: str,
    exported_model: ModelManifest,
) -> None:
    config = tmp_path / "seams.yaml"
    config.write_text(
        f"inbox:\n  path: {bucket.uri('handbook')}\n  endpoint_url: {bucket.endpoint}\n",
        encoding="utf-8",
    )
    settings = load_settings(config)
    defs = build_definitions(settings)
    source = location_of(settings.inbox.path)
    bucket.put("handbook/deploys.md", DEPLOYS)
    bucket.put("handbook/oncall.md", ONCALL)

    def register(retired: list[str] | None = None) -> list[str]:
        return runner.register_path(
            source, print, defs=defs, retired=retired, endpoint_url=settings.inbox.endpoint_url
        )

    first = register()
    assert len(first) == 1
    _run(instance, defs, first)
    assert _texts(database_url) == {
        bucket.uri("handbook/deploys.md"): DEPLOYS,
        bucket.uri("handbook/oncall.md"): ONCALL,
    }

    changed = DEPLOYS.replace("four", "five").replace("green build", "passing build")
    bucket.put("handbook/deploys.md", changed)
    bucket.delete("handbook/oncall.md")
    bucket.put("handbook/glossary.md", "# Glossary\n\nA runbook is a checklist.\n")
    retired: list[str] = []
    second = register(retired)
    assert len(second) == 1
    assert retired == [bucket.uri("handbook/oncall.md")]
    _run(instance, defs, second)
    current = {
        bucket.uri("handbook/deploys.md"): changed,
        bucket.uri("handbook/glossary.md"): "# Glossary\n\nA runbook is a checklist.\n",
    }
    assert _texts(database_url) == current

    # A rerun of the first batch reads the versions it recorded, though one was overwritten and
    # the other deleted since.
    [rerun] = _run(instance, defs, first)
    assert _characters(rerun) == len(DEPLOYS) + len(ONCALL)
    assert _texts(database_url) == current  # ...and what readers see stays the newest
