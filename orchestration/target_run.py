"""`seams run` and `seams backfill` sync the targets once their runs published.

The target assets are unpartitioned and outside the per-batch jobs (`seams.assets.targets`):
the command that changed the published state materializes them afterwards, in one run of its
own in this process (the UI shows it), one line per target. A target that fails (its store is
down) is reported and left for the next run or `seams sync`; the command's own outcome, and
what it published, stay as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import dagster as dg

from seams.orchestration import launch
from seams.orchestration.run_events import failure_reason

Report = Callable[[str], None]


def target_keys(defs: dg.Definitions) -> list[dg.AssetKey]:
    """The target assets the definitions hold (one per target of seams.yaml)."""
    graph = defs.resolve_asset_graph()
    return sorted(
        (k for k in graph.get_all_asset_keys() if k.path[0] == "target" and len(k.path) == 2),
        key=lambda k: k.path,
    )


def refresh_targets(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    report: Report,
    *,
    started_by: str = "seams run",
    tags: Mapping[str, str] | None = None,
) -> bool | None:
    """Materialize every target asset in one in-process run, one line per target; whether
    all succeeded (None: no targets)."""
    keys = target_keys(defs)
    if not keys:
        return None
    result = launch.materialize_here(instance, defs, keys, started_by=started_by, tags=tags)
    done = set()
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata = materialization.metadata
        name = materialization.asset_key.path[-1]
        done.add(materialization.asset_key)
        written, deleted = metadata["written"].value, metadata["deleted"].value
        records = metadata["dagster/row_count"].value
        report(f"target {name}: wrote {written}, deleted {deleted}, {records} records")
    if not result.success:
        reason = failure_reason(result) or "open the run in the UI (`seams dev`)"
        failed = ", ".join(k.path[-1] for k in keys if k not in done)
        report(
            f"target {failed} not synced (run {result.run_id}): {reason}; the next `seams run` "
            "or `seams sync` catches up"
        )
    return result.success
