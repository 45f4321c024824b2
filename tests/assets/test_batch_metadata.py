"""A step that materializes several batches at once (a single-run backfill) gives each batch's
materialization that batch's own numbers (`display.describe_batches`), and each check result
that batch's own counts: for a toy asset, and for every asset of the pipeline in one real run
over two batches of different sizes (PostgreSQL, the ONNX model, a Dagster backfill)."""

from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd
import psycopg
import pytest

from seams.assets.display import describe_batches, rounded
from seams.orchestration import runner
from seams.orchestration.dagster_internals import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from tests.support.samples import PIPELINE_ASSETS, register_sample_batches

batches = dg.DynamicPartitionsDefinition(name="test_batches")


@dg.asset(partitions_def=batches, backfill_policy=dg.BackfillPolicy.single_run())
def sized(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
    rows = {"b1": [10, 20], "b2": [5, 5, 5, 7.3]}
    df = pd.DataFrame(
        [{"batch_key": key, "size": size} for key in context.partition_keys for size in rows[key]]
    )
    describe_batches(context, df, lambda part: {"sizes": len(part),
                                                "mean": rounded(part["size"].mean())})  # fmt: skip
    return dg.MaterializeResult()


def test_each_batch_of_a_ranged_run_gets_its_own_numbers(tmp_path: Path) -> None:
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.add_dynamic_partitions(batches.name, ["b1", "b2"])
        result = dg.materialize(
            [sized],
            instance=instance,
            tags={ASSET_PARTITION_RANGE_START_TAG: "b1", ASSET_PARTITION_RANGE_END_TAG: "b2"},
        )
    assert result.success
    found = {
        m.partition: {k: v.value for k, v in m.metadata.items()}
        for m in result.asset_materializations_for_node("sized")
    }
    assert found == {
        "b1": {"sizes": 2, "mean": 15.0, "dagster/row_count": 2},
        "b2": {"sizes": 4, "mean": 5.6, "dagster/row_count": 4},
    }


# --- the whole pipeline over two batches in one run ----------------------------------------------

ASSETS = PIPELINE_ASSETS
CHECKED = {
    "candidate_embeddings": ("one_row_per_candidate", "finite_unit_vectors"),
    "chunks": ("exact_slices", "nothing_lost", "sizes_within_bounds", "unique_chunk_ids"),
}


def _pages(instance: dg.DagsterInstance, run_id: str) -> dict[tuple[str, str], dict[str, Any]]:
    """Per (asset, batch): the metadata values of its materialization in `run_id`."""
    found = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event and event.is_step_materialization:
            made = event.step_materialization_data.materialization
            found[(made.asset_key.to_user_string(), made.partition)] = {
                k: v.value for k, v in made.metadata.items()
            }
    return found


def _evaluations(
    instance: dg.DagsterInstance, run_id: str
) -> dict[tuple[str, str, str | None], dict[str, Any]]:
    """Per (asset, check, batch): whether the check passed and the numbers it reported."""
    found = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event and event.event_type_value == "ASSET_CHECK_EVALUATION":
            evaluation = event.event_specific_data
            key = (evaluation.asset_key.to_user_string(), evaluation.check_name)
            found[(*key, evaluation.partition)] = {
                "passed": evaluation.passed,
                **{k: v.value for k, v in evaluation.metadata.items()},
            }
    return found


def _step_output(instance: dg.DagsterInstance, run_id: str, step: str) -> dict[str, Any]:
    """The metadata of the step's asset output event: the run's, not any batch's."""
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if (
            event
            and event.is_successful_output
            and event.step_key == step
            and event.step_output_data.output_name == "result"
        ):
            return {k: v.value for k, v in event.step_output_data.metadata.items()}
    raise AssertionError(f"no output of {step} in run {run_id}")


STORED = """
SELECT batch_key, count(*), count(DISTINCT document_id), {extra} FROM seams.{table} GROUP BY 1
"""
EXTRA = {  # one count per asset that its page must show for its batch
    "extracted_text": "sum(char_count)",
    "candidate_embeddings": "count(embedding)",
    "semantic_boundaries": "count(*) FILTER (WHERE is_boundary)",
}


def _stored(database_url: str) -> dict[str, dict[str, tuple[int, int, int]]]:
    """Per asset, per batch: rows stored, their documents and `EXTRA`'s count (else 0)."""
    found: dict[str, dict[str, tuple[int, int, int]]] = {}
    with psycopg.connect(database_url) as conn:
        for asset in ASSETS:
            query = STORED.format(extra=EXTRA.get(asset, "0"), table=asset)
            found[asset] = {key: (rows, documents, int(extra))
                            for key, rows, documents, extra in conn.execute(query)}  # fmt: skip
    return found


def _assert_pages_describe_their_batch(
    pages: dict[tuple[str, str], dict[str, Any]],
    stored: dict[str, dict[str, tuple[int, int, int]]],
    keys: list[str],
) -> None:
    """Every asset's page of every batch shows that batch's stored rows and its own numbers."""
    for key in keys:
        of = {asset: pages[(asset, key)] for asset in ASSETS}
        for asset, page in of.items():
            rows = stored[asset][key][0]
            assert page["dagster/row_count"] == page["dagster/partition_row_count"] == rows, asset
            assert page["rows_written"] == rows and page["bytes_written"] > 0, asset
            assert page["write_seconds"] == round(page["write_seconds"], 3), asset
            assert page["run_partitions_written"] == 2, asset  # the run's, and named so
        rows, _, characters = stored["extracted_text"][key]
        extracted = of["extracted_text"]
        assert (extracted["document_count"], extracted["characters"]) == (rows, characters)
        assert len(extracted["documents"].records) == rows
        rows, documents, _ = stored["sentence_candidates"][key]
        candidates = of["sentence_candidates"]
        assert (candidates["candidates"], candidates["documents_segmented"]) == (rows, documents)
        assert sum(candidates["kinds"].values()) == rows
        rows, documents, starts = stored["semantic_boundaries"][key]
        boundaries = of["semantic_boundaries"]
        assert (boundaries["gaps"], boundaries["chunk_starts"]) == (rows - documents, starts)
        rows, documents, _ = stored["chunks"][key]
        assert (of["chunks"]["chunks"], of["chunks"]["documents_chunked"]) == (rows, documents)
        assert of["chunk_index"]["chunks_indexed"] == stored["chunk_index"][key][0]
        assert of["chunk_index"]["chunks_skipped"] == 0
        phases = ("vectors_seconds", "vector_index_seconds")  # where a slow index run's time went
        assert all(
            0 <= of["chunk_index"][phase] <= of["chunk_index"]["run_seconds"] for phase in phases
        )
        for asset in ("candidate_embeddings", "chunk_index"):
            cache = of[asset]
            assert cache["cache_hits"] + cache["texts_embedded"] <= cache["texts"], asset
            assert cache["texts"] > 0, asset
            assert cache["cache_hit_rate"] == round(cache["cache_hits"] / cache["texts"], 3)


def _assert_checks_per_batch(
    evaluations: dict[tuple[str, str, str | None], dict[str, Any]],
    stored: dict[str, dict[str, tuple[int, int, int]]],
    keys: list[str],
) -> None:
    """Each check was evaluated once per batch, on that batch's rows only, and passed. (`in_sync`
    judges the whole asset, not a batch's rows: it is not one of these.)"""
    assert {(a, c, p) for a, c, p in evaluations if c in CHECKED.get(a, ())} == {
        (asset, check, key) for asset, names in CHECKED.items() for check in names for key in keys
    }  # no evaluation pools the run's batches (partition None)
    for key in keys:
        candidates = stored["sentence_candidates"][key][0]
        embedded, _, vectors = stored["candidate_embeddings"][key]
        rows = evaluations[("candidate_embeddings", "one_row_per_candidate", key)]
        assert rows["passed"] and (rows["candidates"], rows["rows"]) == (candidates, embedded)
        unit = evaluations[("candidate_embeddings", "finite_unit_vectors", key)]
        assert unit["passed"] and unit["vectors"] == vectors
        chunks, documents, _ = stored["chunks"][key]
        for check in CHECKED["chunks"]:
            result = evaluations[("chunks", check, key)]
            counted = (result["chunks"], result["documents"])
            assert result["passed"] and counted == (chunks, documents), (check, key)


def _cache_sums(pages: dict[tuple[str, str], dict[str, Any]], keys: list[str]) -> dict[str, int]:
    return {
        name: sum(pages[("candidate_embeddings", key)][name] for key in keys)
        for name in ("texts", "cache_hits", "texts_embedded")
    }


@pytest.mark.slow
def test_every_asset_and_check_of_a_two_batch_run_describes_each_batch_alone(
    instance: dg.DagsterInstance, defs: dg.Definitions, tmp_path: Path, database_url: str
) -> None:
    keys = register_sample_batches(
        tmp_path, defs=defs
    )  # 1 file and 2 files: no number agrees by chance
    first = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, first, defs=defs)
    (run_id,) = first.run_ids  # one run, both batches
    stored = _stored(database_url)
    assert all(set(stored[asset]) == set(keys) for asset in ASSETS)
    assert stored["chunks"][keys[0]][0] < stored["chunks"][keys[1]][0]
    pages = _pages(instance, run_id)
    _assert_pages_describe_their_batch(pages, stored, keys)
    _assert_checks_per_batch(_evaluations(instance, run_id), stored, keys)
    assert all(pages[(asset, key)]["rows_deleted"] == 0 for asset in ASSETS for key in keys)
    # The run summary sums the step's output (the run's totals): the batches' numbers add up.
    sums = _cache_sums(pages, keys)
    assert (first.cache_hits, first.texts_embedded) == (sums["cache_hits"], sums["texts_embedded"])
    assert sums["texts_embedded"] > 0
    run_totals = _step_output(instance, run_id, "candidate_embeddings")
    assert {name: run_totals[name] for name in sums} == sums
    assert all(pages[("candidate_embeddings", k)]["texts"] < sums["texts"] for k in keys)

    # The same batches again: each page replaces its own batch's rows, all from the cache.
    again = runner.RunSummary(batches=keys)
    runner.materialize_batches(instance, keys, print, again, defs=defs)
    (rerun_id,) = again.run_ids
    assert _stored(database_url) == stored
    pages = _pages(instance, rerun_id)
    _assert_pages_describe_their_batch(pages, stored, keys)
    _assert_checks_per_batch(_evaluations(instance, rerun_id), stored, keys)
    for asset in ASSETS:
        for key in keys:
            # Upstream writes replace rows readers still see until the chunk_index write
            # publishes the build (and retires them): counted as replaced, not deleted.
            page, rows = pages[(asset, key)], stored[asset][key][0]
            published_here = asset == "chunk_index"
            assert page["rows_deleted"] == (rows if published_here else 0), (asset, key)
            assert page["rows_replaced"] == (0 if published_here else rows), (asset, key)
    for key in keys:
        for asset in ("candidate_embeddings", "chunk_index"):
            numbers = pages[(asset, key)]
            assert numbers["texts_embedded"] == 0 and numbers["cache_hit_rate"] == 1.0
            assert numbers["cache_hits"] == numbers["texts"], (asset, key)
    sums = _cache_sums(pages, keys)
    assert (again.cache_hits, again.texts_embedded) == (sums["texts"], 0)
