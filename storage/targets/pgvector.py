"""pgvector targets: a table per model in the team's PostgreSQL, readers query a view.

`table: rag_chunks` (or `schema.rag_chunks`; default schema `public`) is a VIEW over the model
table `rag_chunks__<dim>_<hash>`, which holds one row per record: the fields of
`base.RECORD_FIELDS` as columns (`chunk_id` the primary key) and `vector vector(<dim>)` with an
HNSW index (cosine). A model switch fills the new model's table beside, indexes it, then
replaces the view in one transaction: a reader's query runs against the old table or the new
one, never both, never neither. Grants on the view are the database owner's to give again
after a switch (PostgreSQL drops them with the view); grant on the schema's future tables or
read as the owner.

The client is psycopg, already part of the pipeline; the extra `seams-chunking[pgvector]` adds
nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import psycopg
from psycopg import sql

from seams.errors import StorageError
from seams.storage.connections import first_line, redact
from seams.storage.targets.base import (
    FIELD_NAMES,
    INTEGER,
    RECORD_FIELDS,
    VECTOR_FIELD,
    Record,
    is_model_object,
)
from seams.storage.vector_type import register_vector
from seams.targets import TargetSettings

_COPY_TYPES = [*("int4" if kind == INTEGER else "text" for _, kind, _ in RECORD_FIELDS), "vector"]
HNSW_MAX_DIMENSIONS = 2000
"""pgvector's HNSW indexes vectors of at most this many dimensions; wider ones are scanned."""


def open_store(target: str, settings: TargetSettings, location: str) -> PgvectorStore:
    try:
        conn = psycopg.connect(location, autocommit=True, connect_timeout=10)
    except psycopg.Error as exc:
        raise StorageError(
            f"targets.{target}.url_env: cannot reach PostgreSQL at {redact(location)} "
            f"({first_line(exc)}): start it or fix {settings.url_env}"
        ) from None
    schema_name, _, table = str(settings.table).rpartition(".")
    return PgvectorStore(target, conn, schema_name or "public", table)


class PgvectorStore:
    """A target in a PostgreSQL database with pgvector (`TargetStore`)."""

    kind = "pgvector"
    atomic_switch = True

    def __init__(
        self, target: str, conn: psycopg.Connection[Any], schema_name: str, table: str
    ) -> None:
        self.target, self.conn, self.schema, self.name = target, conn, schema_name, table
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(
                sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema_name))
            )
            register_vector(conn)  # vectors go out in pgvector's binary form
        except psycopg.Error as exc:
            raise StorageError(
                f"targets.{target}.table: cannot prepare {schema_name}.{table} "
                f"({first_line(exc)}): the role needs pgvector and CREATE on the schema"
            ) from None

    def _ident(self, obj: str) -> sql.Identifier:
        return sql.Identifier(self.schema, obj)

    def live(self) -> str | None:
        row = self.conn.execute(
            "SELECT c.relkind FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s",
            (self.schema, self.name),
        ).fetchone()
        if row is None:
            return None
        if row[0] != "v":
            raise StorageError(
                f"targets.{self.target}.table: {self.schema}.{self.name} exists and is not the "
                "view Seams makes: choose another table name, or drop it"
            )
        used = self.conn.execute(
            "SELECT table_name FROM information_schema.view_table_usage"
            " WHERE view_schema = %s AND view_name = %s",
            (self.schema, self.name),
        ).fetchone()
        return None if used is None else str(used[0])

    def objects(self) -> list[str]:
        rows = self.conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", (self.schema,)
        )
        return [str(r[0]) for r in rows if is_model_object(self.name, str(r[0]))]

    def ensure(self, obj: str, dimension: int) -> None:
        columns = [
            sql.SQL("{} {}{}").format(
                sql.Identifier(name),
                sql.SQL("integer" if kind == INTEGER else "text"),
                sql.SQL("" if nullable else " NOT NULL"),
            )
            for name, kind, nullable in RECORD_FIELDS
        ]
        columns.append(
            sql.SQL("{} vector({}) NOT NULL").format(
                sql.Identifier(VECTOR_FIELD), sql.Literal(int(dimension))
            )
        )
        columns.append(sql.SQL("PRIMARY KEY (chunk_id)"))
        self.conn.execute(
            sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                self._ident(obj), sql.SQL(", ").join(columns)
            )
        )

    def count(self, obj: str) -> int:
        query = sql.SQL("SELECT count(*) FROM {}").format(self._ident(obj))
        row = self.conn.execute(query).fetchone()
        return int(row[0]) if row else 0

    def ids(self, obj: str) -> set[str]:
        query = sql.SQL("SELECT chunk_id FROM {}").format(self._ident(obj))
        return {str(r[0]) for r in self.conn.execute(query)}

    def read(self, obj: str) -> Iterator[Record]:
        columns = sql.SQL(", ").join(map(sql.Identifier, FIELD_NAMES))
        query = sql.SQL("SELECT {}, {} FROM {}").format(
            columns, sql.Identifier(VECTOR_FIELD), self._ident(obj)
        )
        cursor = self.conn.cursor(name="seams_target_read", binary=True)
        with self.conn.transaction(), cursor:
            cursor.itersize = 2000
            cursor.execute(query)
            for row in cursor:  # the vector loads as a float32 array (`register_vector`)
                yield Record(dict(zip(FIELD_NAMES, row[:-1], strict=True)), row[-1])

    def upsert(self, obj: str, records: Sequence[Record]) -> None:
        """Binary COPY into a temporary table, then one INSERT ... ON CONFLICT: one round trip
        per batch, the batch applied in one transaction, no vector written out as text."""
        if not records:
            return
        names = [*FIELD_NAMES, VECTOR_FIELD]
        columns = sql.SQL(", ").join(map(sql.Identifier, names))
        load = sql.Identifier("seams_target_load")
        with self.conn.transaction(), self.conn.cursor() as cursor:
            cursor.execute(
                sql.SQL(
                    "CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA"
                ).format(load, columns, self._ident(obj))
            )
            statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(load, columns)
            with cursor.copy(statement) as copy:
                copy.set_types(_COPY_TYPES)
                for r in records:
                    copy.write_row([*(r.fields.get(n) for n in FIELD_NAMES), r.vector])
            cursor.execute(
                sql.SQL(
                    "INSERT INTO {} ({}) SELECT {} FROM {} ON CONFLICT (chunk_id) DO UPDATE SET {}"
                ).format(
                    self._ident(obj),
                    columns,
                    columns,
                    load,
                    sql.SQL(", ").join(
                        sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(n)) for n in names[1:]
                    ),
                )
            )

    def delete(self, obj: str, chunk_ids: Sequence[str]) -> None:
        self.conn.execute(
            sql.SQL("DELETE FROM {} WHERE chunk_id = ANY(%s)").format(self._ident(obj)),
            (list(chunk_ids),),
        )

    def switch(self, obj: str) -> str:
        dimension = self.conn.execute(
            "SELECT atttypmod FROM pg_attribute WHERE attrelid = %s::regclass AND attname = %s",
            (f'"{self.schema}"."{obj}"', VECTOR_FIELD),
        ).fetchone()
        if dimension is not None and 0 < int(dimension[0]) <= HNSW_MAX_DIMENSIONS:
            self.conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw ({} vector_cosine_ops)"
                ).format(
                    sql.Identifier(f"{obj}_hnsw"), self._ident(obj), sql.Identifier(VECTOR_FIELD)
                )
            )
        with self.conn.transaction():  # one transaction: readers see the old view or the new
            self.conn.execute(sql.SQL("DROP VIEW IF EXISTS {}").format(self._ident(self.name)))
            self.conn.execute(
                sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(
                    self._ident(self.name), self._ident(obj)
                )
            )
        return obj

    def drop(self, obj: str) -> None:
        self.conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(self._ident(obj)))

    def close(self) -> None:
        self.conn.close()
