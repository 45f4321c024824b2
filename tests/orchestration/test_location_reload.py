"""The code location re-reads the settings rule at every load: a seams.yaml written in the project
folder after `seams dev` started shows up at the next "Reload definitions" (a new code-server
process, started by Dagster in the Dagster home with the variables `seams dev` handed it), and
every definition names the settings file in use.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from seams.environment import SeamsEnvironment
from seams.orchestration.instance import SeamsInstance
from seams.orchestration.location import SETTINGS_METADATA
from seams.resources.database import DatabaseUrls

#: What a code server of the `seams` location loads, reported as JSON.
LOAD_LOCATION = """
import json
from seams.orchestration.location import SETTINGS_METADATA, defs
text = lambda entry: str(getattr(entry, "value", entry))  # raw, or a MetadataValue
graph = defs.resolve_asset_graph()
print(json.dumps({
    "versions": {k.to_user_string(): graph.get(k).code_version for k in graph.get_all_asset_keys()},
    "asset_settings": sorted({text(graph.get(k).metadata[SETTINGS_METADATA])
                              for k in graph.get_all_asset_keys()}),
    "settings": text(defs.metadata[SETTINGS_METADATA]),
}))
"""


def _reload(child_env: dict[str, str], home: Path) -> dict:
    """One "Reload definitions": a fresh process imports the location, as Dagster's code
    server does, in the Dagster home (not the user's folder)."""
    done = subprocess.run(
        [sys.executable, "-c", LOAD_LOCATION],
        cwd=home, env=child_env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.services
def test_a_seams_yaml_written_after_start_up_changes_the_code_versions_on_reload(
    tmp_path: Path,
) -> None:
    project, home = tmp_path / "project", tmp_path / "dagster_home"
    project.mkdir()
    home.mkdir()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("SEAMS_", "DAGSTER_"))}
    inherited["SEAMS_DATA_DIR"] = str(tmp_path / "data")
    # `seams dev` started in a project folder that holds no seams.yaml yet.
    environment = SeamsEnvironment.from_os(inherited, project)
    assert environment.config_path is None
    urls = DatabaseUrls("postgresql:///seams", "postgresql+psycopg2:///dagster", embedded=False)
    child_env = SeamsInstance(home, urls, environment).environment()

    before = _reload(child_env, home)
    assert "packaged defaults" in before["settings"] and str(project) in before["settings"]
    assert before["asset_settings"] == [before["settings"]]

    settings = project / "seams.yaml"
    settings.write_text("chunking:\n  preset: narrative\n", encoding="utf-8")
    after = _reload(child_env, home)
    assert after["settings"] == f"{settings} (the seams.yaml of the project folder)"
    assert after["asset_settings"] == [after["settings"]]
    changed = {
        key for key, version in after["versions"].items() if before["versions"][key] != version
    }
    assert "chunks" in changed and "semantic_boundaries" in changed
    assert "extracted_text" not in changed  # the chunking preset is not read there

    settings.unlink()  # removed again: back to the defaults, not an error about a missing file
    assert _reload(child_env, home) == before


def test_a_settings_file_named_by_the_user_stays_named(tmp_path: Path) -> None:
    named = tmp_path / "elsewhere.yaml"
    named.write_text("chunking:\n  preset: fast\n", encoding="utf-8")
    environment = SeamsEnvironment.from_os({"SEAMS_CONFIG": "elsewhere.yaml"}, tmp_path)
    variables = environment.child_variables()
    assert variables == {"SEAMS_CONFIG": str(named)}  # absolute: children run elsewhere
    assert environment.describe_settings() == f"settings: {named} (from SEAMS_CONFIG)"
    assert SETTINGS_METADATA == "seams/settings"


def test_a_broken_seams_yaml_is_the_first_line_dagster_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The UI shows a location's load error by its message: Seams' one line, not Dagster's
    "Error occurred during the loading of Dagster definitions" with Seams' line as its cause
    (Dagster passes its own kind of error through as it is)."""
    import importlib.util

    import dagster as dg

    from seams.errors import ConfigError
    from seams.orchestration import location
    from seams.settings import load_settings

    broken = tmp_path / "seams.yaml"
    broken.write_text("chunking:\n  overrides: {cut_cost: -5}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as said:
        load_settings(broken)
    monkeypatch.setenv("SEAMS_CONFIG", str(broken))
    # The module as a code server imports it, under a name of its own (the real one stays).
    spec = importlib.util.spec_from_file_location("seams_location_probe", location.__file__)
    assert spec is not None and spec.loader is not None
    with pytest.raises(dg.DagsterError) as shown:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    assert type(shown.value).__name__ == "SettingsLoadError"
    assert str(shown.value) == str(said.value) and "cut_cost=-5" in str(shown.value)
    assert shown.value.__cause__ is None and shown.value.__suppress_context__
