"""Tenants in tests: names no other test uses, and statements refused to them for want of a
privilege (and for nothing else)."""

from __future__ import annotations

import uuid

import psycopg
import psycopg.errors
import pytest


def tenant_names() -> tuple[str, str]:
    """Two tenant names no other test uses (roles belong to the whole server, not a database)."""
    suffix = uuid.uuid4().hex[:8]
    return f"a{suffix}", f"b{suffix}"


def assert_refused(url: str, statement: str) -> None:
    """`statement`, on a connection of its own to `url`, fails with "permission denied" (a
    statement that fails for another reason, or runs, fails the test)."""
    with (
        psycopg.connect(url) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"),
    ):
        conn.execute(statement)
