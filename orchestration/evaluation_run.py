"""`seams run` and `seams backfill` measure `retrieval_eval` again once their backfill published.

The asset is unpartitioned and outside the per-batch job (see `seams.assets.retrieval_eval`): a
backfill of N batches plans per-batch runs, and the figure is one for the whole index. So the
command that changed the index runs it once, afterwards, as one run of its own in this process
(the UI shows it, launched by the command), with its floor check when one is set. Without a
questions file in seams.yaml the definitions hold no such asset and nothing happens.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import dagster as dg

from seams.assets.retrieval_eval import EVAL_KEY, FLOOR_CHECK
from seams.orchestration import launch
from seams.orchestration.dagster_internals import StaleStatus, stale_status_resolver
from seams.orchestration.run_events import failure_reason

Report = Callable[[str], None]


@dataclass
class EvalOutcome:
    """What the measuring run did."""

    run_id: str
    success: bool
    """The asset materialized (a failed check does not fail the run)."""
    recall: dict[str, float] = field(default_factory=dict)
    """`recall@B` -> the figure, as the asset's metadata holds it."""
    check_passed: bool | None = None
    """The floor check's verdict; None: no floor set, or the asset failed."""
    check_description: str | None = None
    failure: str = ""
    """Why the asset failed (the Seams error behind it), when it did."""

    def describe(self) -> str:
        """One line for the terminal: the figures and the verdict, or where to look."""
        if not self.success:
            reason = self.failure or "open the run in the UI (`seams dev`) for the reason"
            return f"retrieval_eval failed (run {self.run_id}): {reason}"
        figures = ", ".join(f"{label} {value:.3f}" for label, value in self.recall.items())
        line = f"retrieval_eval: {figures}"
        if self.check_passed is True:
            line += f" ({FLOOR_CHECK} passed)"
        elif self.check_passed is False:
            line += f" ({FLOOR_CHECK} FAILED: {self.check_description})"
        return line


def has_retrieval_eval(defs: dg.Definitions) -> bool:
    """Whether seams.yaml names a questions file, so the definitions hold `retrieval_eval`."""
    return EVAL_KEY in defs.resolve_asset_graph().get_all_asset_keys()


def retrieval_eval_unsynced(instance: dg.DagsterInstance, defs: dg.Definitions) -> bool:
    """Whether `defs` hold `retrieval_eval` and its figures are not those of the current
    questions, settings and index (never measured, or Dagster marks it unsynced): what `seams
    backfill` measures again even when no batch needed a backfill."""
    if not has_retrieval_eval(defs):
        return False
    resolver = stale_status_resolver(instance, defs.resolve_asset_graph())
    return resolver.get_status(EVAL_KEY, None) != StaleStatus.FRESH


def refresh_retrieval_eval(
    instance: dg.DagsterInstance,
    defs: dg.Definitions,
    report: Report,
    *,
    started_by: str = "seams run",
    tags: Mapping[str, str] | None = None,
) -> EvalOutcome | None:
    """Materialize `retrieval_eval` (and its floor check) in one in-process run and report its
    figures in one line; None when the definitions have no such asset."""
    if not has_retrieval_eval(defs):
        return None
    result = launch.materialize_here(instance, defs, [EVAL_KEY], started_by=started_by, tags=tags)
    outcome = EvalOutcome(result.run_id, result.success)
    if not result.success:
        outcome.failure = failure_reason(result)
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        if materialization.asset_key == EVAL_KEY:
            outcome.recall = {
                label: float(value.value)
                for label, value in materialization.metadata.items()
                if label.startswith("recall@")
            }
    for event in result.get_asset_check_evaluations():
        if event.check_name == FLOOR_CHECK:
            outcome.check_passed = event.passed
            outcome.check_description = event.description
    report(outcome.describe())
    return outcome
