"""The module the `seams` code location loads (`[tool.dagster]`, `$DAGSTER_HOME/workspace.yaml`).

An entry point: its statements resolve this process's environment (`SeamsEnvironment.from_os()`),
read the settings it names and build the definitions. Dagster imports it afresh in every
code-server, run-worker and step process, and "Reload definitions" in the UI starts a new code
server, so the settings file is resolved again at each load: `seams dev` hands its children the
rule (`SEAMS_CONFIG` when the user set it, else `SEAMS_PROJECT_DIR`), never a frozen file, so a
seams.yaml written or edited after start-up shows up (as unsynced assets) without a restart.

Every asset, check, job, sensor and schedule says which settings file built it (definition
metadata `seams/settings`, on its page in the UI), and so do the definitions themselves.
"""

from __future__ import annotations

import warnings

import dagster as dg

from seams.environment import SeamsEnvironment
from seams.errors import SeamsError
from seams.orchestration.definitions import build_definitions, default_executor
from seams.settings import load_settings

SETTINGS_METADATA = "seams/settings"
"""The definition-metadata key naming the settings file in use (`describe_settings`)."""


def location_definitions(environment: SeamsEnvironment) -> dg.Definitions:
    """The code location's definitions in `environment`: its settings file read now, and named
    on every asset, so the UI shows which file the code versions come from. Seams' own location
    also runs what the UI launches outside its jobs (a materialization, a backfill) on the
    executor of `execution.executor`: `build_definitions` leaves that to whoever merges it."""
    settings = load_settings(environment=environment)
    defs = build_definitions(settings, environment=environment)
    described = environment.describe_settings().removeprefix("settings: ")
    with warnings.catch_warnings():
        # Dagster rebuilds each sensor passing its (unset) `owners`, a beta parameter: the
        # warning is about its own copy, not about anything Seams uses.
        warnings.filterwarnings("ignore", message="Parameter `owners`", category=dg.BetaWarning)
        named = defs.with_definition_metadata_update(
            lambda metadata: {**metadata, SETTINGS_METADATA: described}
        )
    own = dg.Definitions(
        metadata={SETTINGS_METADATA: described}, executor=default_executor(settings.execution)
    )
    return dg.Definitions.merge(named, own)


class SettingsLoadError(dg.DagsterError):
    """Settings the code location cannot load (a broken seams.yaml), said in Seams' one line.

    Dagster wraps any other exception raised while loading a location in its own "Error occurred
    during the loading of Dagster definitions", and the UI shows Seams' line second, as its cause;
    an error of Dagster's own kind is shown as it is, first."""


try:
    defs = location_definitions(SeamsEnvironment.from_os())
except SeamsError as exc:
    raise SettingsLoadError(str(exc)) from None
