"""What a role may not do: a statement refused for want of a privilege, and for nothing else."""

from __future__ import annotations

import psycopg
import psycopg.errors
import pytest


def assert_refused(url: str, statement: str) -> None:
    """`statement`, on a connection of its own to `url`, fails with "permission denied" (a
    statement that fails for another reason, or runs, fails the test)."""
    with (
        psycopg.connect(url) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"),
    ):
        conn.execute(statement)
