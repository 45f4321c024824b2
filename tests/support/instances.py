"""The Dagster instance and definitions of a test's environment, and keeping that environment."""

from __future__ import annotations

import os

import dagster as dg
import pytest

from seams.environment import LEGACY_DAGSTER_DATABASE_URL_ENV, SeamsEnvironment
from seams.orchestration.definitions import build_definitions
from seams.orchestration.instance import SeamsInstance, prepare_instance
from seams.resources import database
from seams.settings import load_settings

#: Variables a test may change (`open_instance` exports them) that must come back as they were.
ENV_VARIABLES = (
    "DAGSTER_HOME",
    "SEAMS_DATA_DIR",
    "SEAMS_CONFIG",
    LEGACY_DAGSTER_DATABASE_URL_ENV,
    database.URL_ENV,
    database.DAGSTER_URL_ENV,
)


def keep_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `monkeypatch` restore every variable a test or `open_instance` may change."""
    for variable in ENV_VARIABLES:
        value = os.environ.get(variable)
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)


def current_definitions() -> dg.Definitions:
    """The definitions of this process's settings and environment as they are now, as an entry
    point builds them: call it after the fixtures (or the test) set `SEAMS_DATABASE_URL`,
    `SEAMS_DATA_DIR` or `SEAMS_CONFIG`, since definitions carry the environment they were built
    in; never at import."""
    environment = SeamsEnvironment.from_os()
    return build_definitions(load_settings(environment=environment), environment=environment)


def export_instance(monkeypatch: pytest.MonkeyPatch) -> SeamsInstance:
    """`prepare_instance()`, its variables exported (until the test ends) for this test's child
    processes (subprocess probes, webserver, daemon), as `seams dev` hands them to its children."""
    seams_instance = prepare_instance()
    for name, value in seams_instance.variables().items():
        monkeypatch.setenv(name, value)
    return seams_instance


def open_instance(monkeypatch: pytest.MonkeyPatch) -> dg.DagsterInstance:
    """The prepared Dagster instance (see `export_instance`); use it as a context manager."""
    return export_instance(monkeypatch).open()
