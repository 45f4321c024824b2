"""Every batch a backfill builds is in its "Partition selection": Dagster's UI lists the
partitions of a backfill's most upstream targeted asset, so Seams gives batches that start at
different steps (a new batch, batches resumed or unsynced from `chunks` on) a backfill each."""

from __future__ import annotations

import dagster as dg

from seams.assets.partitions import DEFAULT_LINEAGE
from seams.orchestration import launch
from seams.orchestration.definitions import build_definitions
from seams.settings import SeamsSettings

BATCHES = ["b1", "b2", "b3", "b4"]


def shown(backfill, graph) -> list[str]:  # type: ignore[no-untyped-def]
    """The batches the UI's "Partition selection" of `backfill` lists (what its GraphQL
    `rootTargetedPartitions` resolves)."""
    data = backfill.get_asset_backfill_data(graph)
    return sorted(data.get_target_root_partitions_subset(graph).get_partition_keys())


def test_each_backfill_lists_every_batch_it_builds() -> None:
    defs = build_definitions(SeamsSettings())
    graph = launch.workspace_asset_graph(defs)
    keys = list(DEFAULT_LINEAGE.keys)
    from_chunks = keys[keys.index(DEFAULT_LINEAGE.key("chunks")) :]
    targets = {"b1": keys, **{batch: from_chunks for batch in BATCHES[1:]}}
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(DEFAULT_LINEAGE.partitions.name, BATCHES)
        # One backfill of all four would show the new batch alone.
        mixed = launch.create_backfill(instance, defs, targets, started_by="test")
        assert shown(mixed, graph) == ["b1"]

        parts = launch.by_first_step(targets)
        assert parts == [{"b1": keys}, {batch: from_chunks for batch in BATCHES[1:]}]
        for part in parts:
            backfill = launch.create_backfill(instance, defs, part, started_by="test")
            assert shown(backfill, graph) == sorted(part)

    # Batches that start at the same step stay one backfill, in any order of their keys.
    same = {"b2": from_chunks, "b3": from_chunks[::-1]}
    assert launch.by_first_step(same) == [same]
