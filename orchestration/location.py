"""The module the `seams` code location loads (`[tool.dagster]`, `$DAGSTER_HOME/workspace.yaml`).

Its one statement reads the settings and builds the definitions. Dagster imports it afresh in
every code-server process, and "Reload definitions" in the UI starts a new one, so an edited
seams.yaml shows up (as unsynced assets) without restarting the webserver.
"""

from seams.orchestration.definitions import build_definitions
from seams.settings import load_settings

defs = build_definitions(load_settings())
