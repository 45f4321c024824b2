"""`PostgresResource`: Seams' data database as a Dagster resource.

`seams.resources.postgres_pool.PostgresPool` (the pool and the schema, no Dagster) with Dagster's
`ConfigurableResource` mixed in: the same fields, methods and pools, configurable from the code
location and Dagster run config. Every Dagster step, sensor and schedule using it is a writer:
`setup_for_execution` migrates the schema before the first use.
"""

from __future__ import annotations

import dagster as dg

from seams.resources.postgres_pool import (
    POOL_TIMEOUT_S,
    PROBE_AFTER_S,
    PostgresPool,
    close_all_pools,
    close_pool,
    create_schema,
    register_vector,
    server_down_reason,
)

__all__ = [
    "POOL_TIMEOUT_S",
    "PROBE_AFTER_S",
    "PostgresResource",
    "close_all_pools",
    "close_pool",
    "create_schema",
    "register_vector",
    "server_down_reason",
]


class PostgresResource(dg.ConfigurableResource, PostgresPool):
    """The Seams data database for Dagster runs: see `PostgresPool` for the fields, the pool and
    the schema."""

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Dagster runs, steps, sensors and schedules write: the schema is migrated (once per
        process) before their first use, so no writer meets an outdated schema."""
        self.ensure_schema()
