"""The module the `seams` code location loads (`[tool.dagster]`, `$DAGSTER_HOME/workspace.yaml`).

An entry point: its statements resolve this process's environment (`SeamsEnvironment.from_os()`:
`seams dev` hands its children `SEAMS_DATA_DIR`, `SEAMS_DATABASE_URL` and `SEAMS_CONFIG`), read the
settings it names and build the definitions. Dagster imports it afresh in every code-server,
run-worker and step process, and "Reload definitions" in the UI starts a new one, so an edited
seams.yaml shows up (as unsynced assets) without restarting the webserver.
"""

from seams.environment import SeamsEnvironment
from seams.orchestration.definitions import build_definitions
from seams.settings import load_settings

environment = SeamsEnvironment.from_os()
defs = build_definitions(load_settings(environment=environment), environment=environment)
