"""`chunk_index`'s write: its rows and the publication of the builds they complete, in one
transaction (`partition_tables.write_table` with `publication.complete_and_publish` as its
`publish` step); once that committed, the HNSW indexes of the models a completed model switch
retired are dropped (`publication.drop_retired_indexes`). The one call that publishes a write:
the `chunk_index` asset and a model switch's completion write through it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import psycopg

from seams.storage import schema
from seams.storage.builds import Build
from seams.storage.connections import ConnectionSource, connection_lost
from seams.storage.partition_tables import CopyFormat, WriteResult, write_table
from seams.storage.publication import Publication, complete_and_publish, drop_retired_indexes


def write_and_publish(
    postgres: ConnectionSource,
    frame: pd.DataFrame,
    partition_keys: Sequence[str],
    *,
    copy_format: CopyFormat = "binary",
    run_id: str | None = None,
) -> WriteResult:
    """Write `frame` as the `chunk_index` rows of `partition_keys` (`write_table`) and publish
    the builds it completes in the same transaction; `result.published` and `result.held` say
    which were published and why the others were not. After the commit, the indexes of the
    models a completed switch retired are dropped, so no search waits on them."""

    def publish(conn: psycopg.Connection[Any], builds: dict[str, Build]) -> Publication:
        return complete_and_publish(conn, builds, run_id=run_id)

    result = write_table(
        postgres, schema.CHUNK_INDEX, frame, partition_keys, asset=schema.CHUNK_INDEX.name,
        copy_format=copy_format, run_id=run_id, publish=publish,
    )  # fmt: skip
    done = result.publication
    if isinstance(done, Publication) and done.retired_models:
        try:
            with postgres.connection() as conn:
                drop_retired_indexes(conn, done)
        except psycopg.OperationalError as exc:
            doing = "dropping the vector indexes of the models a switch retired"
            raise connection_lost(postgres.redacted_url, doing, exc) from exc
    return result
