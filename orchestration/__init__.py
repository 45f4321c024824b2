"""Dagster wiring of Seams: the composition root, partitions, sensors, schedules, jobs, the CLI.

`seams.orchestration.definitions.build_definitions(settings)` (contract) builds the one
`Definitions` object; `seams.orchestration.location.defs` is what the code location loads (see
`[tool.dagster]` and the workspace file `seams` writes into `$DAGSTER_HOME`). This package's
`__init__` imports nothing, so `seams --help` does not load the whole code location.
"""
