"""Dagster wiring of Seams: partitions, batches, sensors, schedules, jobs, the CLI.

`orchestration.defs` (contract) is what `dagster dev` loads (see `[tool.dagster]`).
"""

from orchestration.definitions import defs

__all__ = ["defs"]
