"""Dense search for tenants: functions owned by the tables' owner that read chunk vectors for a
tenant, which may not read them itself (`tenant_tables.WITHHELD`).

A tenant that could order by `chunk_index.embedding` could walk any HNSW index over it: the
index answers the ordering, row-level security then drops the rows of other collections, and
`EXPLAIN ANALYZE` counts them (`Rows Removed by Filter`): how many vectors another collection
holds, or how many of other tenants' vectors lie nearer a probe than its own. So tenants have
no SELECT on the vectors, and search them through two SECURITY DEFINER functions, executable
by the tenants' group only:

- `seams.tenant_nearest(model, dimension, mode, collections, q, how_many)`: the nearest visible
  chunks among the caller's collections, each walked through its own HNSW index (the model's
  index over that collection's rows, `vector_indexes`; `default` has none, and is walked
  through the model's index over every collection), merged by distance;
- `seams.tenant_distances(model, mode, q, batch_keys, document_ids, chunk_ids)`: the exact
  distances of given visible chunks of the caller's collections.

Each decides the caller's collections itself, from `seams.collection_tenants`: inside the
function `current_user` is the owner, so the caller is the role the session set (`SET ROLE`, as
`seams serve`'s tenant pools do), else the session's login; a tenant can set neither to another
role. Requested collections that are not the caller's are ignored, and only indexes of its own
collections are walked, with the scan settings fixed inside the function. Each collection's
statement states its model id, collection and number as literals (dynamic SQL), as the
partial indexes are declared, so PostgreSQL uses that collection's index. What runs inside a
function is not shown by the caller's `EXPLAIN`: a plan shows one function scan and the rows it
returned. The owner reads the vectors directly (`search.dense`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

from seams.storage import schema

NEAREST = "tenant_nearest"
DISTANCES = "tenant_distances"
SEARCH_PATH = "pg_catalog, pg_temp"

_NEAREST_ARGS = (
    "model text, dimension integer, mode text, collections text[], q vector, how_many integer"
)
_DISTANCES_ARGS = (
    "model text, mode text, q vector, batch_keys text[], document_ids text[], chunk_ids text[]"
)
_ARGS = {NEAREST: _NEAREST_ARGS, DISTANCES: _DISTANCES_ARGS}
_RETURNS = "TABLE (batch_key text, document_id text, chunk_id text, distance double precision)"


def _names() -> dict[str, str]:
    """Qualified names composed into the functions' bodies (constants, quoted by psycopg)."""
    return {
        "index": schema.CHUNK_INDEX.identifier().as_string(None),
        "current": schema.CURRENT_DOCUMENTS.identifier().as_string(None),
        "keys": schema.COLLECTION_KEYS.identifier().as_string(None),
        "key_function": sql.Identifier(schema.SCHEMA, schema.COLLECTION_KEY_FUNCTION).as_string(
            None
        ),
        "tenants": schema.COLLECTION_TENANTS.identifier().as_string(None),
    }


VECTOR_SCHEMA = "@vector@"
"""Where the bodies name pgvector's schema (its `vector` type and `<=>` operator), replaced by
the schema's quoted name when the functions are created: their search path is pinned to
pg_catalog, and pgvector's schema may be one a role can create objects in."""

# The caller and its collections.
_PRELUDE = """
DECLARE
    caller text := coalesce(nullif(current_setting('role'), 'none'), session_user);
    own text[];
BEGIN
    SELECT array_agg(t.collection ORDER BY t.collection) INTO own
    FROM {tenants} AS t
    WHERE t.role_name = caller{among};
    IF own IS NULL THEN
        RETURN;
    END IF;
"""

# One collection's nearest rows, as `search.dense.nearest_statement` reads them: format()
# arguments 1 the dimension, 2 the model id, 3 the collection, 4 its number's condition; $1
# the query vector, $2 the mode, $3 how many.
_ONE_COLLECTION = (
    "(SELECT i.batch_key, i.document_id, i.chunk_id,"
    " ((i.embedding)::{vector}.vector(%1$s) OPERATOR({vector}.<=>) ($1)::{vector}.vector(%1$s))"
    "::float8 AS distance"
    " FROM {index} AS i"
    " WHERE i.model_id = %2$L AND i.mode = $2"
    " AND i.generation <= (SELECT d.generation FROM {current} AS d"
    " WHERE d.document_id = i.document_id AND d.batch_key = i.batch_key)"
    " AND i.collection = %3$L%4$s"
    " ORDER BY (i.embedding)::{vector}.vector(%1$s) OPERATOR({vector}.<=>)"
    " ($1)::{vector}.vector(%1$s)"
    " LIMIT $3)"
)

_NEAREST_BODY = (
    _PRELUDE
    + """    IF dimension IS NULL OR dimension NOT BETWEEN 1 AND 16000 THEN
        RAISE EXCEPTION 'a vector dimension must be an integer from 1 to 16000, got %', dimension;
    END IF;
    PERFORM set_config('hnsw.ef_search', least(1000, greatest(40, how_many))::text, true),
            set_config('hnsw.iterative_scan', 'relaxed_order', true),
            set_config('hnsw.max_scan_tuples', '20000', true),
            set_config('hnsw.scan_mem_multiplier', '1', true);
    RETURN QUERY EXECUTE format('SELECT u.* FROM (%s) AS u ORDER BY u.distance LIMIT $3',
        (SELECT string_agg(format({one}, dimension, model, c.name,
                                  CASE WHEN k.key IS NULL THEN ''
                                       ELSE format(' AND {key_function}(i.collection) = %s',
                                                   k.key) END),
                           ' UNION ALL ' ORDER BY c.name)
         FROM unnest(own) AS c(name) LEFT JOIN {keys} AS k ON k.collection = c.name))
        USING q, mode, how_many;
END
"""
)

# Static: its plan is cached per session (pgvector's schema is written in at creation).
_DISTANCES_BODY = (
    _PRELUDE
    + """    RETURN QUERY
    SELECT n.batch_key, n.document_id, n.chunk_id,
           (i.embedding OPERATOR({vector}.<=>) tenant_distances.q)::float8
    FROM unnest(batch_keys, document_ids, chunk_ids) AS n(batch_key, document_id, chunk_id)
    JOIN {current} AS d ON d.document_id = n.document_id AND d.batch_key = n.batch_key
    JOIN {index} AS i ON i.batch_key = n.batch_key AND i.document_id = n.document_id
                     AND i.chunk_id = n.chunk_id AND i.model_id = tenant_distances.model
                     AND i.mode = tenant_distances.mode AND i.generation <= d.generation
                     AND i.collection = ANY(own);
END
"""
)


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def bodies(vector_schema: str = VECTOR_SCHEMA) -> dict[str, str]:
    """Each function's name -> its body, exactly as `pg_proc.prosrc` holds it where pgvector's
    schema is `vector_schema` (quoted as `quote_ident` does): what `tenant_isolation` accepts of
    a SECURITY DEFINER function tenants may execute."""
    names = {**_names(), "vector": vector_schema}
    one = _literal(_ONE_COLLECTION.format(**names))
    among = " AND (collections IS NULL OR t.collection = ANY(collections))"
    return {
        NEAREST: _NEAREST_BODY.format(one=one, among=among, **names),
        DISTANCES: _DISTANCES_BODY.format(among="", **names),
    }


def vector_schema(conn: psycopg.Connection[Any]) -> str | None:
    """pgvector's schema in this database, quoted as the bodies name it (None: no pgvector)."""
    row = conn.execute(_VECTOR_SCHEMA).fetchone()
    return None if row is None else str(row[0])


_VECTOR_SCHEMA = (
    "SELECT quote_ident(n.nspname) FROM pg_catalog.pg_extension AS e"
    " JOIN pg_catalog.pg_namespace AS n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)


def ddl() -> list[sql.Composable]:
    """Both functions (replaced with the schema; pgvector's schema written in where the bodies
    name it), executable by nobody but their owner until the tenants' group is granted them
    (`grants`)."""
    statements: list[sql.Composable] = []
    for name, body in bodies().items():
        function = sql.Identifier(schema.SCHEMA, name)
        create = sql.SQL(
            "CREATE OR REPLACE FUNCTION {function}({args}) RETURNS {returns}"
            " LANGUAGE plpgsql SECURITY DEFINER SET search_path = {path}"
            " AS {body}"
        ).format(
            function=function,
            args=sql.SQL(_ARGS[name]),
            returns=sql.SQL(_RETURNS),
            path=sql.SQL(SEARCH_PATH),
            body=sql.Literal(body),
        )
        statements += [
            sql.SQL(
                "DO $create$ DECLARE vector_schema text := ({schema}); BEGIN"
                " IF strpos(vector_schema, '''') > 0 THEN RAISE EXCEPTION"
                " 'pgvector''s schema % has a quote in its name: move the extension',"
                " vector_schema; END IF;"
                " EXECUTE replace({create}, {placeholder}, vector_schema); END $create$"
            ).format(
                create=sql.Literal(create.as_string(None)),
                placeholder=sql.Literal(VECTOR_SCHEMA),
                schema=sql.SQL(_VECTOR_SCHEMA),
            ),
            sql.SQL("REVOKE ALL ON FUNCTION {} FROM PUBLIC").format(
                sql.SQL("{}({})").format(function, sql.SQL(_types(name)))
            ),
        ]
    return statements


def _types(name: str) -> str:
    """`text, integer, ...`: the argument types of function `name`."""
    return ", ".join(arg.split()[-1] for arg in _ARGS[name].split(", "))


def signatures() -> list[str]:
    """`seams.tenant_nearest(text, integer, ...)`: each function's signature, for grants and
    `to_regprocedure`."""
    return [f"{schema.SCHEMA}.{name}({_types(name)})" for name in _ARGS]


def grants(group: str) -> list[sql.Composable]:
    """EXECUTE on both functions for the tenants' `group`."""
    return [
        sql.SQL("GRANT EXECUTE ON FUNCTION {} TO {}").format(
            sql.SQL(signature), sql.Identifier(group)
        )
        for signature in signatures()
    ]


# --- the calls search makes as a tenant ------------------------------------------------------


def nearest_vectors(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    model_id: str,
    mode: str,
    fetch: int,
    collections: Sequence[str] | None,
) -> list[tuple[str, str, str, float]]:
    """`search.dense.nearest_vectors` for a tenant: the `fetch` nearest visible chunks of the
    tenant's collections among `collections` (None: all of them), nearest first."""
    statement = sql.SQL("SELECT * FROM {}(%s, %s, %s, %s::text[], %s, %s)").format(
        sql.Identifier(schema.SCHEMA, NEAREST)
    )
    params = (
        model_id,
        int(np.shape(vector)[-1]),
        mode,
        None if collections is None else list(collections),
        vector,
        fetch,
    )
    return conn.execute(statement, params, prepare=True).fetchall()


def chunk_distances(
    conn: psycopg.Connection[Any],
    vector: np.ndarray,
    model_id: str,
    mode: str,
    keys: Sequence[tuple[str, str, str]],
) -> list[tuple[str, str, str, float]]:
    """The distances of those `keys` (batch_key, document_id, chunk_id) that are visible chunks
    of the tenant's collections with a vector of the model and mode."""
    statement = sql.SQL("SELECT * FROM {}(%s, %s, %s, %s::text[], %s::text[], %s::text[])").format(
        sql.Identifier(schema.SCHEMA, DISTANCES)
    )
    batches, docs, ids = (list(col) for col in zip(*keys, strict=True))
    return conn.execute(
        statement, (model_id, mode, vector, batches, docs, ids), prepare=True
    ).fetchall()
