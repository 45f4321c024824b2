"""`seams sync` and `targets:` in seams.yaml: settings refused in one line naming the target and
the field; the command repairs, `--check` reports (JSON shape of the docs), a target that
cannot be reached is one line and does not stop the others."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from seams.errors import ConfigError
from seams.orchestration.cli import main
from seams.orchestration.cli.check import targets_report
from seams.resources.postgres import PostgresResource
from seams.settings import load_settings
from seams.targets import ATOMIC_SWITCH_KINDS, KINDS, TargetSettings
from tests.storage.targets import corpus
from tests.storage.targets.stores import assert_mirrors, opener
from tests.support.databases import fresh_database


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("a: {kind: weaviate, table: t, path: x}", "targets.a.kind='weaviate'"),
        ("a: {kind: pgvector, url_env: U}", "targets.a.table=None: a pgvector target needs"),
        ("a: {kind: qdrant, table: t, path: x}", "targets.a.table='t': a qdrant target names"),
        ("a: {kind: lancedb, table: t, path: x, url_env: U}", "targets.a.url_env='U': a lancedb"),
        ("a: {kind: pgvector, table: t, path: x}", "targets.a.path='x': a pgvector target is"),
        ("a: {kind: lancedb, table: t__x, path: x}", "targets.a.table='t__x'"),
        ("a: {kind: lancedb, table: t, path: x, collections: [nope]}", "targets.a.collections"),
    ],
)
def test_a_bad_target_is_one_line_naming_the_target_and_field(
    tmp_path: Path, block: str, expected: str
) -> None:
    path = tmp_path / "seams.yaml"
    path.write_text(f"targets:\n  {block}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_target_holds_one_tenants_collections(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    path = tmp_path / "seams.yaml"
    path.write_text(
        "collections:\n  a: {source: a, tenant: acme}\n  b: {source: b}\n"
        "targets:\n  both: {kind: lancedb, table: t, path: x}\n"
        "  acme_only: {kind: lancedb, table: u, path: x, collections: [a]}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"targets\.both\.collections: a \(acme\), b \(no"):
        load_settings(path)
    path.write_text(path.read_text().replace("  both: {kind: lancedb, table: t, path: x}\n", ""))
    assert load_settings(path).targets["acme_only"].collections == ["a"]


def test_sync_repairs_check_reports_and_an_unreachable_target_is_one_line(
    postgres: PostgresResource,
    database_url: str,
    pg_server_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    corpus.publish_batch(postgres, "b1", {"alpha": ["one", "two", "three"]}, "m", 8)
    settings = tmp_path / "seams.yaml"
    settings.write_text(
        "targets:\n"
        "  pg: {kind: pgvector, table: rag, url_env: TARGET_PG_URL}\n"
        "  lance: {kind: lancedb, table: rag, path: lance}\n"
        "  down: {kind: pgvector, table: rag, url_env: TARGET_DOWN_URL}\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("SEAMS_CONFIG", str(settings))
    monkeypatch.setenv("SEAMS_DATABASE_URL", database_url)
    monkeypatch.delenv("TARGET_DOWN_URL", raising=False)

    def seams(*args: str) -> tuple[int, dict]:
        status = main(["sync", *args, "--json"])
        return status, json.loads(capsys.readouterr().out)["targets"]

    with fresh_database(pg_server_url) as target_url:
        monkeypatch.setenv("TARGET_PG_URL", target_url)
        status, report = seams()
        assert status == 2  # `down` failed; the others were synced all the same
        assert report["down"] == {
            "error": "targets.down.url_env: TARGET_DOWN_URL is not set: export it with the "
            "pgvector store's URL"
        }
        for name in ("pg", "lance"):
            assert (report[name]["written"], report[name]["records"]) == (3, 3)
        status, report = seams("--check", "--target", "pg", "--target", "lance")
        assert status == 0
        zero = {"records": 3, "missing": 0, "extra": 0, "stale": 0}
        assert {n: {k: e[k] for k in zero} for n, e in report.items()} == {
            "pg": zero,
            "lance": zero,
        }

        load = load_settings(settings)
        store = opener(load.targets["pg"])()
        try:
            store.delete(store.live(), [next(iter(store.ids(store.live())))])
            status, report = seams("--check", "--target", "pg")
            assert status == 1 and report["pg"]["missing"] == 1
            status, report = seams("--target", "pg")
            assert status == 0 and report["pg"]["missing"] == 1 and report["pg"]["written"] == 1
            assert_mirrors(store, corpus.current_records(postgres))
        finally:
            store.close()

    # seams check's lines come from Seams' own records: what each target last synced, and
    # whether its store switches models atomically (Chroma does not).
    named = dict(load_settings(settings).targets)
    named["chat"] = TargetSettings(kind="chroma", collection="rag", url_env="TARGET_CHROMA_URL")
    lines = targets_report(postgres, argparse.Namespace(settings=SimpleNamespace(targets=named)))
    by_name = {line.split(" ", 2)[1]: line for line in lines}
    assert by_name["pg"].startswith("Target pg (pgvector, rag): 3 records as of publication ")
    assert "newer" not in by_name["pg"] and "not atomic" not in by_name["pg"]
    assert by_name["down"].endswith("never synced: run `seams sync --target down`")
    assert "a model switch is not atomic in chroma" in by_name["chat"]


@pytest.mark.slow  # imports every store's client: Chroma's and Milvus' come with `make test-all`
def test_the_kinds_that_switch_atomically_are_those_whose_store_says_so() -> None:
    import importlib

    from seams.storage.targets import KIND_MODULES

    for kind in KINDS:
        module = importlib.import_module(KIND_MODULES[kind])
        store = next(v for v in vars(module).values() if getattr(v, "kind", None) == kind)
        assert store.atomic_switch == (kind in ATOMIC_SWITCH_KINDS), kind
