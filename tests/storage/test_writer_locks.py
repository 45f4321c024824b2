"""Seams' writers lock rows no tenant may touch: on a server where tenants keep the advisory
lock functions (a managed PostgreSQL, where Seams is no superuser and cannot revoke them), a
tenant holding every advisory key of Seams' lock names stalls no writer."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import psycopg.errors
import pytest
from psycopg import sql

from seams.orchestration import command_lock
from seams.orchestration.instance import STORAGE_LOCK
from seams.storage import (
    batches,
    migrations,
    partition_tables,
    publication,
    tenant_roles,
    tenants,
    vector_indexes,
    writer_locks,
)
from tests.storage.test_tenants import Tenancy
from tests.storage.test_tenants import tenancy as tenancy  # the fixture, shared
from tests.support.privileges import assert_refused

WAIT = "5s"
"""How long a writer may wait for a lock here: a lock a tenant holds fails it, not hangs it."""


def _lock_names(collections: tuple[str, ...]) -> list[str]:
    """Every name a writer locks by, as a tenant would guess them (none is a secret)."""
    return [
        command_lock.LOCK_NAME,
        writer_locks.DDL,
        tenants.LOCK,
        vector_indexes.INDEX_LOCK,
        batches.REGISTER_LOCK,
        STORAGE_LOCK,
        "seams.target:default",
        "\x1f".join(("seams", "chunks", "batch-alpha")),
        *(publication.publish_lock_name(c) for c in collections),
    ]


@contextlib.contextmanager
def _advisory_locks_granted(owner_url: str) -> Iterator[None]:
    """The advisory lock functions executable by every role, as on a server where Seams could
    not revoke them; revoked again afterwards."""
    with psycopg.connect(owner_url, autocommit=True) as owner:
        functions = [
            str(signature)
            for (signature,) in owner.execute(
                "SELECT p.oid::regprocedure::text FROM pg_proc AS p"
                " WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = ANY(%s)",
                (list(tenant_roles.ADVISORY_LOCKS),),
            )
        ]
        listed = sql.SQL(", ").join(sql.SQL(f) for f in functions)
        owner.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {} TO PUBLIC").format(listed))
        try:
            yield
        finally:
            tenant_roles.restrict_functions(owner, tenants.GROUP)


def test_a_tenant_holding_every_advisory_key_stalls_no_writer(tenancy: Tenancy) -> None:
    collections = ("alpha", "alpha2", "beta", "gamma", "default")
    names = _lock_names(collections)
    with (
        _advisory_locks_granted(tenancy.owner_url),
        psycopg.connect(tenancy.urls[tenancy.b], autocommit=True) as tenant,
    ):
        # The tenant holds each name's keys, session- and transaction-scoped: what the writers
        # used to take.
        for name in names:
            for hashed in ("hashtextextended(%s, 0)", "hashtext(%s)"):
                taken = tenant.execute(f"SELECT pg_try_advisory_lock({hashed})", (name,))
                assert taken.fetchone() == (True,), name
        tenant.execute("BEGIN")
        for name in names:
            tenant.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))

        owner = psycopg.connect(
            tenancy.owner_url, autocommit=True, options=f"-c lock_timeout={WAIT}"
        )
        with owner:
            # The command lock (`--no-wait`: it would refuse, naming the tenant, if busy).
            said: list[str] = []
            with command_lock.command_lock(
                tenancy.owner_url, "seams run /data", said.append, wait=False
            ):
                found = command_lock.holder(owner)
                assert found is not None and found.name.startswith("seams run /data (pid ")
            assert said == [] and command_lock.holder(owner) is None
            # Registration, partition writes, publication and the BM25 counters, the index
            # lock, in one writer's transaction.
            with owner.transaction():
                batches.retire_absent(owner, "file:///nowhere/", [])
                partition_tables.partition_lock(owner, "chunks", "batch-alpha")
                publication.lock_collections(owner, collections)
                owner.execute("SELECT seams.lexical_sync(ARRAY['doc-alpha'], ARRAY[]::text[])")
                writer_locks.lock(owner, vector_indexes.INDEX_LOCK)
            # Tenant changes, and a schema migration (the recorded DDL made stale).
            tenants.sync_project(
                owner, {"alpha": tenancy.a, "alpha2": tenancy.a, "beta": tenancy.b}
            )
            owner.execute("UPDATE seams.schema_version SET ddl_sha256 = 'stale'")
            assert migrations.migrate(owner).applied
        tenant.execute("ROLLBACK")


@pytest.mark.parametrize(
    "statement",
    [
        "SELECT name FROM seams.writer_locks FOR KEY SHARE",
        "SELECT name FROM seams.writer_locks FOR NO KEY UPDATE",
        "LOCK TABLE seams.writer_locks IN ACCESS SHARE MODE",
        "LOCK TABLE seams.writer_locks IN ROW SHARE MODE",
        "INSERT INTO seams.writer_locks (name) VALUES ('seams.command:default')",
    ],
)
def test_a_tenant_can_neither_read_nor_lock_the_writers_locks(
    tenancy: Tenancy, statement: str
) -> None:
    assert_refused(tenancy.urls[tenancy.a], statement)


def test_a_session_lock_is_free_once_its_session_ends_and_names_its_holder(
    tenancy: Tenancy,
) -> None:
    def connect() -> psycopg.Connection[Any]:
        return psycopg.connect(tenancy.owner_url, autocommit=True)

    with connect() as first, connect() as second:
        assert writer_locks.try_hold(first, "seams.target:t", "seams sync t") is None
        assert writer_locks.try_hold(first, "seams.target:t", "seams sync t") is None  # reentrant
        busy = writer_locks.try_hold(second, "seams.target:t", "other")
        assert busy is not None and busy.holder == "seams sync t" and busy.since is not None
        writer_locks.release(second, "seams.target:t")  # not its own: nothing changes
        assert writer_locks.holder(second, "seams.target:t") == busy
        first.close()  # the session ends without releasing: the lock is free all the same
        deadline = time.monotonic() + 30  # once the server has ended the backend
        while writer_locks.holder(second, "seams.target:t") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert writer_locks.try_hold(second, "seams.target:t", "other") is None
        writer_locks.release(second, "seams.target:t")
        assert writer_locks.holder(second, "seams.target:t") is None
