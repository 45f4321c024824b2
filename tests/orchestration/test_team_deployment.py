"""Seams as a code location of a team's own Dagster deployment (docs/dagster.md, "A code
location of your deployment"): the page's workspace.yaml, beside the team's own location, served
by a webserver and daemon on the team's instance; the `seams` command recording into that
instance through `DAGSTER_HOME`; a backfill launched as the UI launches one, run by the daemon.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from seams.assets.partitions import DEFAULT_LINEAGE
from seams.environment import SeamsEnvironment
from seams.errors import ConfigError
from seams.models.model_store import ModelManifest
from seams.orchestration.instance import prepare_instance
from seams.orchestration.run_summary import RunSummary, format_summary
from tests.support.cli import run_seams, seams_env
from tests.support.databases import fresh_database, rows
from tests.support.graphql import BACKFILL_RUNS, LAUNCH_BACKFILL
from tests.support.processes import dagster_services
from tests.support.samples import copy_samples

PAGE = Path(__file__).resolve().parents[2] / "docs" / "dagster.md"
SEAMS_PYTHON = "/opt/seams/.venv/bin/python"
"""Where the page installs Seams; here, this test's own interpreter."""

TEAM_PROJECT = """
import dagster as dg


@dg.asset
def my_numbers() -> list[int]:
    return [1, 2, 3]


defs = dg.Definitions(
    assets=[my_numbers],
    resources={"io_manager": dg.FilesystemIOManager(base_dir="warehouse")},
)
"""

TEAM_INSTANCE = """\
storage:
  postgres:
    postgres_url: {url}
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
telemetry:
  enabled: false
"""

LOCATIONS = """
{
  workspaceOrError {
    ... on Workspace {
      locationEntries { name locationOrLoadError { __typename ... on PythonError { message } } }
    }
  }
}
"""


def test_dagster_home_names_the_instance_and_seams_own_stays_its_own(tmp_path: Path) -> None:
    data = tmp_path / "data"
    own = SeamsEnvironment.from_os({"SEAMS_DATA_DIR": str(data)}, tmp_path)
    assert own.dagster_home == data / "dagster_home" and not own.team_instance
    handed = {"SEAMS_DATA_DIR": str(data), "DAGSTER_HOME": str(data / "dagster_home")}
    assert not SeamsEnvironment.from_os(handed, tmp_path).team_instance  # as seams dev hands it
    team = SeamsEnvironment.from_os({"SEAMS_DATA_DIR": str(data), "DAGSTER_HOME": "team"}, tmp_path)
    assert team.team_instance and team.dagster_home == tmp_path / "team"
    with pytest.raises(ConfigError, match=r"^DAGSTER_HOME .*team holds no dagster.yaml: point"):
        prepare_instance(team)
    assert not (tmp_path / "team").exists() and not data.exists()  # nothing written
    shown = format_summary(RunSummary(), home=tmp_path / "team", team=True)
    assert "look at them:   your Dagster UI, code location seams" in shown


def workspace_recipe() -> str:
    """The page's workspace.yaml, with Seams' virtualenv interpreter this test's own."""
    page = PAGE.read_text(encoding="utf-8")
    (recipe,) = re.findall(r"^```yaml\n(.*?)^```$", page, re.DOTALL | re.MULTILINE)
    assert SEAMS_PYTHON in recipe
    return recipe.replace(SEAMS_PYTHON, sys.executable)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_seams_as_a_code_location_of_the_team_deployment(
    pg_server_url: str,
    database_url: str,
    exported_model: ModelManifest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with fresh_database(pg_server_url) as team_database:
        home = tmp_path / "dagster_home"
        home.mkdir()
        (home / "dagster.yaml").write_text(TEAM_INSTANCE.format(url=team_database))
        project = tmp_path / "team"
        project.mkdir()
        (project / "team_project.py").write_text(TEAM_PROJECT)
        workspace = project / "workspace.yaml"
        workspace.write_text(workspace_recipe())
        seams_project = tmp_path / "seams"
        seams_project.mkdir()
        variables = {
            "DAGSTER_HOME": str(home),
            "SEAMS_PROJECT_DIR": str(seams_project),
            "SEAMS_DATABASE_URL": database_url,
        }

        # The seams command records its batches and runs into the team's instance.
        inbox = copy_samples(tmp_path / "inbox", ["field_notes.md", "history_of_maps.txt"])
        env = seams_env(SEAMS_DATA_DIR=str(exported_model.directory.parents[1]), **variables)
        done = run_seams("run", str(inbox), env=env, cwd=seams_project)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # The team's dagster.yaml as it was; no workspace of Seams' (Dagster's own compute logs
        # under storage/ are the team's instance at work).
        assert (home / "dagster.yaml").read_text() == TEAM_INSTANCE.format(url=team_database)
        assert not (home / "workspace.yaml").exists()
        with dg.DagsterInstance.from_config(str(home)) as instance:
            batches = instance.get_dynamic_partitions(DEFAULT_LINEAGE.partitions.name)
            assert len(batches) == 1
            cli_runs = instance.get_runs(dg.RunsFilter(job_name=DEFAULT_LINEAGE.job_name))
            assert cli_runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in cli_runs)

        # The team's webserver and daemon serve both locations; a UI backfill of Seams' assets
        # is run by the daemon, through Seams' code location, into the same instance.
        for name, value in {**variables, "SEAMS_DATA_DIR": env["SEAMS_DATA_DIR"]}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.chdir(project)
        with dagster_services(tmp_path, workspace=workspace) as client:
            entries = client._execute(LOCATIONS)["workspaceOrError"]["locationEntries"]
            loaded = {e["name"]: e["locationOrLoadError"]["__typename"] for e in entries}
            assert loaded == {"team": "RepositoryLocation", "seams": "RepositoryLocation"}, entries
            params = {
                "partitionNames": batches,
                "assetSelection": [{"path": key.path} for key in DEFAULT_LINEAGE.keys],
            }
            launched = client._execute(LAUNCH_BACKFILL, {"params": params})[
                "launchPartitionBackfill"
            ]
            assert launched["__typename"] == "LaunchBackfillSuccess", launched
            backfill_id = launched["backfillId"]
            deadline = time.monotonic() + 400
            while True:
                found = client._execute(BACKFILL_RUNS, {"id": backfill_id})[
                    "partitionBackfillOrError"
                ]
                if found.get("status") not in (None, "REQUESTED", "CANCELING"):
                    break
                assert time.monotonic() < deadline, f"the backfill never finished: {found}"
                time.sleep(2)
            assert found["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), found
            assert found["runs"] and all(r["status"] == "SUCCESS" for r in found["runs"]), found

        with dg.DagsterInstance.from_config(str(home)) as instance:
            report_where_the_time_went(instance, backfill_id)
            for run in found["runs"]:
                recorded = instance.get_run_by_id(run["runId"])
                assert recorded is not None
                assert recorded.remote_job_origin is not None
                assert recorded.remote_job_origin.location_name == "seams"
        assert rows(database_url, "SELECT count(DISTINCT batch_key) FROM seams.chunks") == [(1,)]


def report_where_the_time_went(instance: dg.DagsterInstance, backfill_id: str) -> None:
    """Print, for the backfill the UI launched, the seconds from its request to each run's
    creation (the daemon's backfill tick), to its start (queue and run worker) and to its end
    (the work): what instance settings can shorten, and what they cannot."""
    backfill = instance.get_backfill(backfill_id)
    assert backfill is not None
    runs = instance.get_run_records(dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
    for record in runs:
        created, started = record.create_timestamp.timestamp(), record.start_time or 0.0
        print(
            f"backfill {backfill_id}: run {record.dagster_run.run_id[:8]} created "
            f"{created - backfill.backfill_timestamp:.1f} s after the request, started "
            f"{started - created:.1f} s later, ended {(record.end_time or 0.0) - started:.1f} s "
            "after its start"
        )
