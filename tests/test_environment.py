"""The environment is read once: `SeamsEnvironment.from_os()` follows the contract's precedence
rules, and no other product module reads `os.environ` (so it stays that way)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seams.environment import SeamsEnvironment, keep_hub_offline

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("chunking", "extraction", "models", "storage", "resources", "assets",
           "orchestration", "integrations", "seams")  # fmt: skip
#: The one resolver reads the process; `keep_hub_offline` writes the one switch huggingface_hub
#: reads at import. Nothing else in the product touches the process environment.
ALLOWED = {"seams/environment.py"}
READS = re.compile(r"os\.environ(\.|\[| if| else|\))|getenv\(|putenv\(")
"""Calls and subscripts: a docstring may name `os.environ`."""
#: The working directory decides the data dir and settings file (the resolver); the commands Seams
#: prints are written relative to it (`.venv/bin/seams`), as the user's shell will run them.
CWD_ALLOWED = {"seams/environment.py", "orchestration/shell_commands.py"}


def test_the_data_dir_variable_wins_over_a_project_and_the_user_folder(tmp_path: Path) -> None:
    (tmp_path / "seams.yaml").write_text("", encoding="utf-8")
    env = SeamsEnvironment.from_os(
        {"SEAMS_DATA_DIR": " ~/data ", "XDG_DATA_HOME": str(tmp_path / "xdg"), "HOME": "/h"},
        tmp_path,
    )
    assert env.data_dir == (Path.home() / "data").resolve()
    assert env.models_dir == env.data_dir / "models"
    assert env.dagster_home == env.data_dir / "dagster_home"


def test_a_project_keeps_its_data_beside_it_once_it_has_a_data_folder(tmp_path: Path) -> None:
    (tmp_path / ".seams").mkdir()
    env = SeamsEnvironment.from_os({"SEAMS_DATA_DIR": "  ", "XDG_DATA_HOME": "/x"}, tmp_path)
    assert env.data_dir == tmp_path / ".seams"


def test_writing_a_seams_yaml_where_a_user_works_never_moves_their_data(tmp_path: Path) -> None:
    variables = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    before = SeamsEnvironment.from_os(variables, tmp_path)
    (tmp_path / "seams.yaml").write_text("chunking: {preset: fast}\n", encoding="utf-8")
    after = SeamsEnvironment.from_os(variables, tmp_path)
    assert after.config_path == tmp_path / "seams.yaml"  # the settings count...
    assert after.data_dir == before.data_dir == tmp_path / "xdg" / "seams"  # ...the data stays


def test_the_project_folder_variable_stands_for_the_working_directory(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".seams").mkdir(parents=True)
    (project / "seams.yaml").write_text("", encoding="utf-8")
    elsewhere = tmp_path / "dagster_home"
    elsewhere.mkdir()
    env = SeamsEnvironment.from_os({"SEAMS_PROJECT_DIR": str(project)}, elsewhere)
    assert env.project_dir == project
    assert env.config_path == project / "seams.yaml" and not env.config_from_variable
    assert env.data_dir == project / ".seams"
    # A child is handed the folder, not the file: a seams.yaml written later still counts.
    assert env.child_variables() == {"SEAMS_PROJECT_DIR": str(project)}


def test_describe_settings_says_which_file_and_why(tmp_path: Path) -> None:
    none = SeamsEnvironment.from_os({}, tmp_path).describe_settings()
    assert (
        none == f"settings: the packaged defaults (no seams.yaml in {tmp_path}, SEAMS_CONFIG unset)"
    )
    (tmp_path / "seams.yaml").write_text("", encoding="utf-8")
    local = SeamsEnvironment.from_os({}, tmp_path).describe_settings()
    assert local == f"settings: {tmp_path / 'seams.yaml'} (the seams.yaml of the project folder)"
    named = SeamsEnvironment.from_os({"SEAMS_CONFIG": "/etc/seams.yaml"}, tmp_path)
    assert named.describe_settings() == "settings: /etc/seams.yaml (from SEAMS_CONFIG)"


def test_elsewhere_the_data_dir_is_per_user(tmp_path: Path) -> None:
    env = SeamsEnvironment.from_os({"XDG_DATA_HOME": str(tmp_path / "xdg")}, tmp_path)
    assert env.data_dir == tmp_path / "xdg" / "seams"
    home = SeamsEnvironment.from_os({}, tmp_path)
    assert home.data_dir == (Path.home() / ".local" / "share" / "seams").resolve()


def test_the_settings_file_is_the_variable_then_the_project_then_none(tmp_path: Path) -> None:
    assert SeamsEnvironment.from_os({}, tmp_path).config_path is None
    local = tmp_path / "seams.yaml"
    local.write_text("", encoding="utf-8")
    found = SeamsEnvironment.from_os({}, tmp_path)
    assert found.config_path == local and not found.config_from_variable
    named = SeamsEnvironment.from_os({"SEAMS_CONFIG": str(tmp_path / "other.yaml")}, tmp_path)
    assert named.config_path == tmp_path / "other.yaml" and named.config_from_variable


def test_database_urls_are_none_unless_set_and_never_in_the_repr(tmp_path: Path) -> None:
    embedded = SeamsEnvironment.from_os({"SEAMS_DATABASE_URL": " "}, tmp_path)
    assert embedded.database_url is None and not embedded.external_database
    url = "postgresql://seams:s3cret@db:5432/seams"
    external = SeamsEnvironment.from_os(
        {"SEAMS_DATABASE_URL": url, "SEAMS_DAGSTER_DATABASE_URL": url + "_d",
         "SEAMS_DAGSTER_PG_URL": url + "_old", "XDG_RUNTIME_DIR": "/run/user/1"},
        tmp_path,
    )  # fmt: skip
    assert external.database_url == url and external.external_database
    assert external.dagster_database_url == url + "_d"
    assert external.legacy_dagster_database_url == url + "_old"
    assert external.runtime_dir == Path("/run/user/1")
    assert "s3cret" not in repr(external)


def test_the_hub_stays_offline_unless_the_user_said_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    keep_hub_offline()
    assert SeamsEnvironment.from_os().variables["HF_HUB_OFFLINE"] == "0"
    keep_hub_offline(override=True)
    assert SeamsEnvironment.from_os().variables["HF_HUB_OFFLINE"] == "1"


def _product_files_matching(pattern: re.Pattern[str]) -> set[str]:
    found = set()
    for package in PRODUCT:
        for path in (REPO / package).rglob("*.py"):
            lines = path.read_text(encoding="utf-8").splitlines()
            code = "\n".join(line for line in lines if not line.lstrip().startswith("#"))
            if pattern.search(code):
                found.add(str(path.relative_to(REPO)))
    return found


def test_only_the_resolver_reads_the_process_environment() -> None:
    assert _product_files_matching(READS) == ALLOWED


def test_only_the_resolver_reads_the_working_directory() -> None:
    assert _product_files_matching(re.compile(r"Path\.cwd\(\)|os\.getcwd\(")) <= CWD_ALLOWED
