"""A sync that dies mid-way, then run again, leaves the store exactly the published state: no
record lost, none left over. In the default lane the sync fails at each kind of step in turn
(the real store's call raises before or after it ran); in the slow lane a child process running
a sync is killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psycopg
import pytest

from seams.resources.postgres import PostgresResource
from seams.storage.targets.sync import check_target, sync_target
from tests.storage.targets import corpus
from tests.storage.targets.stores import assert_mirrors, opener, store_settings
from tests.storage.targets.test_sync import DIM_A, DIM_B, MODEL_A, MODEL_B, texts
from tests.support import processes

CHILD = """
import sys
from seams.environment import SeamsEnvironment
from seams.resources.postgres import PostgresResource
from seams.storage.targets import open_target
from seams.storage.targets.sync import sync_target
from seams.targets import TargetSettings

settings = TargetSettings.model_validate_json(sys.argv[2])
store = open_target("docs", settings, SeamsEnvironment.from_os())
sync_target(PostgresResource(url=sys.argv[1]), "docs", store, ["default"], batch_records=3)
"""


class Crash(Exception):
    """The process died here."""


class Dying:
    """A real store whose `method` raises at its `call`-th use, before (`after=False`) or after
    doing its work: the instant a process may die at."""

    def __init__(self, store, method: str, call: int, after: bool) -> None:
        self.store, self.method, self.call, self.after, self.calls = store, method, call, after, 0

    def __getattr__(self, name: str):
        real = getattr(self.store, name)
        if name != self.method:
            return real

        def dying(*args, **kwargs):
            self.calls += 1
            if self.calls == self.call and not self.after:
                raise Crash(name)
            out = real(*args, **kwargs)
            if self.calls == self.call:
                raise Crash(name)
            return out

        return dying


INSTANTS = [
    (method, call, after)
    for method, call in (("upsert", 2), ("delete", 1), ("switch", 1), ("drop", 1))
    for after in (False, True)
]


def test_a_sync_that_dies_at_any_step_then_runs_again_is_exact(
    postgres: PostgresResource, pg_server_url: str, tmp_path, monkeypatch
) -> None:
    documents = {f"doc{i}": texts(f"doc{i}", 4) for i in range(3)}
    corpus.publish_batch(postgres, "b1", documents, MODEL_A, DIM_A)
    with store_settings("pgvector", pg_server_url, tmp_path, monkeypatch) as settings:
        store = opener(settings)()
        try:
            sync_target(postgres, "docs", store, ["default"])
            model, dim = MODEL_A, DIM_A
            for step, (method, call, after) in enumerate(INSTANTS):
                # A content change for upserts and deletes, a model switch for the others.
                if method in ("switch", "drop"):
                    model, dim = (MODEL_B, DIM_B) if model == MODEL_A else (MODEL_A, DIM_A)
                else:
                    documents = {d: texts(d, 4, changed=step % 4) for d in documents}
                corpus.rebuild(postgres, "b1", documents, model, dim)
                dying = Dying(store, method, call, after)
                with pytest.raises(Crash):
                    sync_target(postgres, "docs", dying, ["default"], batch_records=2)
                sync_target(postgres, "docs", store, ["default"])
                assert check_target(postgres, "docs", store, ["default"]).exact, (method, after)
                assert_mirrors(store, corpus.current_records(postgres))
        finally:
            store.close()


def ledger_rows(url: str) -> int:
    with psycopg.connect(url) as conn:
        return int(conn.execute("SELECT count(*) FROM seams.target_records").fetchone()[0])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pgvector", "lancedb"])
def test_a_sync_killed_mid_way_then_rerun_is_exact(
    kind: str,
    postgres: PostgresResource,
    database_url: str,
    pg_server_url: str,
    tmp_path,
    monkeypatch,
) -> None:
    processes.require_children("a sync")
    documents = {f"doc{i}": texts(f"doc{i}", 10) for i in range(12)}
    corpus.publish_batch(postgres, "b1", documents, MODEL_A, DIM_A)
    with store_settings(kind, pg_server_url, tmp_path, monkeypatch) as settings:
        # The first sync, then a model switch: each killed part-way, then run again.
        for model, dimension in ((MODEL_A, DIM_A), (MODEL_B, DIM_B)):
            if model == MODEL_B:
                corpus.rebuild(postgres, "b1", documents, model, dimension)
            before = ledger_rows(database_url)
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, database_url, settings.model_dump_json()],
                env=os.environ.copy(),
                start_new_session=True,
            )
            deadline = time.monotonic() + 120
            while ledger_rows(database_url) < before + 9 and child.poll() is None:
                assert time.monotonic() < deadline, "the sync never got going"
                time.sleep(0.02)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            store = opener(settings)()
            try:
                if child.returncode == -signal.SIGKILL:  # killed before it finished
                    assert not check_target(postgres, "docs", store, ["default"]).exact
                sync_target(postgres, "docs", store, ["default"])
                assert check_target(postgres, "docs", store, ["default"]).exact
                assert_mirrors(store, corpus.current_records(postgres))
            finally:
                store.close()
