"""Builds: the writes runs make for a batch, beside what readers see, and the SQL that reads them.

A *build* of a batch is the set of writes runs make for it (`seams.batch_builds`), numbered
`generation` 1, 2, ... per batch. Every per-batch asset table carries `generation`; a write goes
to the batch's open build (`open_builds`) and its rows sit beside the published ones, so nothing
a reader sees changes while a run or backfill works. When a table is rewritten, the build's rows
of every later table are dropped (`record_part`): no part of a build is computed from an older
upstream. A step reads its batch's open build where it wrote the table, else the published rows
(`read_filter`, `read_joins`). Publishing a build is `seams.storage.publication`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql

from seams.storage import schema
from seams.storage.schema import BATCH_ASSETS, OPEN_STATES_SQL, BuildState


@dataclass(frozen=True)
class Build:
    """A batch's open build: what it wrote so far, and the batch's published generation."""

    batch_key: str
    generation: int
    state: BuildState
    """`building`, or `complete`: ready and held for a model switch."""
    parts: tuple[str, ...]
    """The asset tables this build wrote, in pipeline order."""
    run_id: str | None
    started_at: datetime
    published_generation: int | None
    """The generation readers see (None: the batch was never published)."""
    collection: str = schema.DEFAULT_COLLECTION
    """The batch's collection (`seams.batches`): every row the build writes carries it."""

    @property
    def last_part(self) -> str | None:
        return self.parts[-1] if self.parts else None

    @property
    def remaining(self) -> tuple[str, ...]:
        """The assets after the last part, in pipeline order (every asset when none)."""
        if not self.parts:
            return BATCH_ASSETS
        return BATCH_ASSETS[BATCH_ASSETS.index(self.parts[-1]) + 1 :]


# --- writers ----------------------------------------------------------------------------------


def open_builds(
    conn: psycopg.Connection[Any], batches: Sequence[str], run_id: str | None = None
) -> dict[str, Build]:
    """Each batch's open build, opened (`building`, generation max+1) where there is none, its
    row locked until the caller's transaction ends: writes of one batch's build serialise, so
    invalidation never races a write of a later table. Call inside the write's transaction."""
    builds: dict[str, Build] = {}
    for batch in sorted(set(batches)):  # sorted: no lock-order deadlock between writers
        while (build := locked_open_build(conn, batch)) is None:
            # A racing writer's insert of the same open build makes this one wait, then do
            # nothing: the loop then locks the row it committed.
            conn.execute(
                "INSERT INTO seams.batch_builds (batch_key, generation, state, run_id, collection)"
                " SELECT %(b)s, coalesce(max(generation), 0) + 1, 'building', %(run)s,"
                "  coalesce((SELECT collection FROM seams.batches WHERE batch_key = %(b)s),"
                "           %(default)s)"
                " FROM seams.batch_builds WHERE batch_key = %(b)s"
                " ON CONFLICT DO NOTHING",
                {"b": batch, "run": run_id, "default": schema.DEFAULT_COLLECTION},
            )
        builds[batch] = build
    return builds


def locked_open_build(conn: psycopg.Connection[Any], batch: str) -> Build | None:
    row = conn.execute(
        BUILD_SELECT + f" WHERE o.batch_key = %s AND o.state IN {OPEN_STATES_SQL} FOR UPDATE OF o",
        (batch,),
    ).fetchone()
    return None if row is None else build_from_row(row)


BUILD_SELECT = (
    "SELECT o.batch_key, o.generation, o.state, o.parts, o.run_id, o.started_at,"
    " (SELECT p.generation FROM seams.batch_builds AS p"
    "  WHERE p.batch_key = o.batch_key AND p.state = 'published'), o.collection"
    " FROM seams.batch_builds AS o"
)
"""The columns `build_from_row` reads, of builds `o`: each query adds its WHERE (and locking)."""


def build_from_row(row: Sequence[Any]) -> Build:
    batch, generation, state, parts, run_id, started_at, published, collection = row
    return Build(
        batch,
        generation,
        state,
        in_pipeline_order(parts),
        run_id,
        started_at,
        published,
        collection,
    )


def in_pipeline_order(parts: Iterable[str]) -> tuple[str, ...]:
    known = set(parts)
    return tuple(t for t in BATCH_ASSETS if t in known)


def record_part(
    conn: psycopg.Connection[Any], table: schema.Table, builds: Mapping[str, Build]
) -> None:
    """`table` is now a part of each build; the build's parts after it (and their rows) go: they
    were computed from the previous `table`. Call after the rows were written."""
    if table.name not in BATCH_ASSETS:
        raise ValueError(f"{table.qualified_name} is not a per-batch asset table")
    later = BATCH_ASSETS[BATCH_ASSETS.index(table.name) + 1 :]
    for name in later:
        stale = {b: build.generation for b, build in builds.items() if name in build.parts}
        if stale:
            conn.execute(
                sql.SQL(
                    "DELETE FROM {} AS t USING unnest(%s::text[], %s::int[]) AS v(b, g)"
                    " WHERE t.batch_key = v.b AND t.generation = v.g"
                ).format(schema.ASSET_TABLES[name].identifier()),
                (list(stale), list(stale.values())),
            )
    keys = sorted(builds)
    conn.execute(
        "UPDATE seams.batch_builds AS o SET state = 'building',"  # a held build reopens
        " parts = ARRAY(SELECT p FROM unnest(o.parts) AS p WHERE p <> ALL(%(drop)s))"
        "             || %(table)s::text"
        " FROM unnest(%(b)s::text[], %(g)s::int[]) AS v(b, g)"
        " WHERE o.batch_key = v.b AND o.generation = v.g",
        {
            "drop": [table.name, *later],
            "table": table.name,
            "b": keys,
            "g": [builds[k].generation for k in keys],
        },
    )


def read_filter() -> sql.Composable:
    """SQL (`t` = `table`) selecting what a step reads of each batch: the open build's rows
    when it wrote `table`, else the published ones (else any: a batch never built)."""
    return sql.SQL(
        "CASE WHEN o.generation IS NOT NULL THEN t.generation = o.generation"
        " WHEN p.generation IS NOT NULL THEN t.generation <= p.generation ELSE true END"
    )


def read_joins(table: schema.Table) -> sql.Composable:
    """The joins `read_filter` needs (aliases `o`: open build, `p`: published build)."""
    return sql.SQL(
        "LEFT JOIN {builds} AS o ON o.batch_key = t.batch_key"
        f" AND o.state IN {OPEN_STATES_SQL} AND {{name}} = ANY(o.parts)"
        " LEFT JOIN {builds} AS p ON p.batch_key = t.batch_key AND p.state = 'published'"
    ).format(builds=schema.BATCH_BUILDS.identifier(), name=sql.Literal(table.name))
