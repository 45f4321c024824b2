"""Collections where people look: a project of two collections, served by the real webserver
(and daemon) on the `seams` code location, shows each collection as an asset group of its own,
named after it, holding that collection's six per-batch assets under its name, next to the one
`embedding_model` in group `model` that both share. Asked through the webserver's GraphQL, the
API the UI itself reads, so what is checked is what the asset graph draws."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from seams.orchestration import runner
from tests.support.processes import dagster_services
from tests.support.samples import PIPELINE_ASSETS

STAGES = PIPELINE_ASSETS
"""The per-batch assets every collection's lineage has, in pipeline order."""

ASSET_GROUPS = """
{
  assetNodes { assetKey { path } groupName }
  repositoryOrError(repositorySelector: {repositoryLocationName: "seams",
                                         repositoryName: "__repository__"}) {
    ... on Repository { assetGroups { groupName } }
    ... on PythonError { message }
    ... on RepositoryNotFoundError { message }
  }
}
"""


@pytest.mark.slow
def test_two_collections_are_two_asset_groups_beside_the_shared_model(
    instance: dg.DagsterInstance, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for folder, name in (("handbook", "platform_handbook.md"), ("notes", "kitchen_science.md")):
        (tmp_path / "docs" / folder).mkdir(parents=True)
        (tmp_path / "docs" / folder / name).write_bytes((runner.SAMPLE_CORPUS / name).read_bytes())
    settings = tmp_path / "seams.yaml"
    settings.write_text(
        "collections:\n"
        "  handbook:\n"
        "    source: docs/handbook\n"
        "    chunking: {preset: technical_docs}\n"
        "  notes:\n"
        "    source: docs/notes\n"
        "    chunking: {preset: narrative, overrides: {chunk_size_max: 200}}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("SEAMS_CONFIG", str(settings))
    logs = tmp_path / "logs"
    logs.mkdir()

    with dagster_services(logs) as client:
        answer = client._execute(ASSET_GROUPS)

    repository = answer["repositoryOrError"]
    assert "assetGroups" in repository, repository.get("message")
    assert {group["groupName"] for group in repository["assetGroups"]} == {
        "handbook",
        "notes",
        "model",
    }
    groups: dict[str, set[str]] = {}
    for node in answer["assetNodes"]:
        groups.setdefault(node["groupName"], set()).add("/".join(node["assetKey"]["path"]))
    assert groups == {
        "handbook": {f"handbook/{stage}" for stage in STAGES},
        "notes": {f"notes/{stage}" for stage in STAGES},
        "model": {"embedding_model"},
    }
