"""Run monitoring is on in the shipped `dagster.yaml`, so a run whose worker died is marked failed
and frees its queue slot (issue 19). The instance must still load: with Dagster's
DefaultRunLauncher, `max_resume_run_attempts` above 0 makes the instance refuse to start."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg

from seams.orchestration.dagster_internals import InstanceRef
from seams.orchestration.instance import INSTANCE_YAML


def test_the_shipped_instance_monitors_runs_and_loads(tmp_path: Path) -> None:
    shutil.copyfile(INSTANCE_YAML, tmp_path / "dagster.yaml")
    storage = {"sqlite": {"base_dir": str(tmp_path / "storage")}}
    ref = InstanceRef.from_dir(str(tmp_path), overrides={"storage": storage})
    with dg.DagsterInstance.from_ref(ref) as instance:
        assert instance.run_monitoring_enabled
        # A dead STARTED run is only caught by the runtime cap with this launcher (no health
        # check), so the cap must be finite, and the daemon must look often enough.
        assert not instance.run_launcher.supports_check_run_worker_health
        assert 0 < instance.run_monitoring_max_runtime_seconds <= 24 * 3600
        assert 0 < instance.run_monitoring_poll_interval_seconds <= 120
        assert instance.run_monitoring_start_timeout_seconds > 0
        assert instance.run_monitoring_max_resume_run_attempts == 0
