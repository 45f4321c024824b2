"""What a finished run says: its events' metadata summed per step, and the Seams error behind a
failure (the cause Dagster wraps), for the one-line message `seams run` prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg


@dataclass
class RunEvents:
    """A finished run's events, from an in-process result or the instance's event log."""

    run_id: str
    success: bool
    events: list[dg.DagsterEvent]

    @classmethod
    def of_result(cls, result: dg.ExecuteInProcessResult) -> RunEvents:
        return cls(result.run_id, result.success, list(result.all_events))

    @classmethod
    def of_run(cls, instance: dg.DagsterInstance, run_id: str) -> RunEvents:
        run = instance.get_run_by_id(run_id)
        events = [r.dagster_event for r in instance.all_logs(run_id) if r.dagster_event]
        return cls(run_id, bool(run and run.status == dg.DagsterRunStatus.SUCCESS), events)

    def metadata_sum(self, step: str, name: str) -> int:
        """`name` of the step's whole output (its STEP_OUTPUT event), summed over the run's
        outputs: per-partition materializations would count a multi-batch step once per batch."""
        total = 0
        for event in self.events:
            if event.is_successful_output and event.step_key == step:
                value = event.step_output_data.metadata.get(name)
                total += int(value.value) if value is not None else 0
        return total

    def failure_reason(self) -> str:
        return failure_reason(self.events)


_SEAMS_ERRORS = {"SeamsError", "ConfigError", "InputError", "EmbeddingError", "StorageError"}


def failure_reason(events: dg.ExecuteInProcessResult | Sequence[dg.DagsterEvent]) -> str:
    """The Seams error behind the first failed step (the cause Dagster wraps), else its message."""
    if isinstance(events, dg.ExecuteInProcessResult):
        events = events.all_events
    for event in events:
        if event.is_step_failure and event.step_failure_data.error:
            chain, error = [], event.step_failure_data.error
            while error is not None:
                chain.append(error)
                error = error.cause
            cause = next((e for e in chain if e.cls_name in _SEAMS_ERRORS), chain[-1])
            return f'step "{event.step_key}": {cause.message.strip()}'
        if event.is_failure:
            return (event.message or "").strip()
    return ""
