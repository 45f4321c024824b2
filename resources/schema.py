"""The one place that knows every table Seams stores, and the DDL that creates them.

Tables are declared here, not guessed from whatever DataFrame an asset returns: a column that
changes name or type is a contract change, visible in one diff. Every table lives in the PostgreSQL
schema `seams`. An asset table is named after its asset (the asset key's last component) and, when
partitioned, carries `batch_key` (the `document_batches` partition key) as its first column.

Each asset table has a `key`: the columns that identify one row within a partition. It is both the
stable ORDER BY of loads and a unique index led by `batch_key`, which is the partition index too:
a write that would store two rows for one candidate or chunk fails instead of poisoning
downstream assets.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from psycopg import sql

SCHEMA = "seams"
BATCH_KEY = "batch_key"
EMBEDDING_DIM = 384
"""Dimension of the retrieval index's vectors (all-MiniLM-L6-v2)."""

# PostgreSQL type -> (COPY type name for `Copy.set_types`, pandas dtype when NOT NULL, when NULL).
# `vector` without a dimension stores any model's embeddings (a 256-d static model exists too).
_TYPES: dict[str, tuple[str, str, str]] = {
    "text": ("text", "str", "str"),
    "integer": ("int4", "int64", "Int64"),
    "bigint": ("int8", "int64", "Int64"),
    "double precision": ("float8", "float64", "float64"),
    "boolean": ("bool", "bool", "boolean"),
    "jsonb": ("jsonb", "object", "object"),
    "bytea": ("bytea", "object", "object"),
    "timestamptz": ("timestamptz", "datetime64[us, UTC]", "datetime64[us, UTC]"),
    "vector": ("vector", "object", "object"),
}


@dataclass(frozen=True)
class Column:
    """One column: its name, PostgreSQL type and whether it may hold NULL.

    `dtype` is what `PostgresIOManager` loads it as: ints stay `int64` (`Int64` when nullable),
    floats `float64` (NULL -> NaN), booleans `bool`, text `str`, jsonb Python objects, and
    vectors 1-D float32 numpy arrays in an object column.
    """

    name: str
    pg_type: str
    nullable: bool = False
    default: str | None = None
    """A trusted SQL expression (declared here, never user input), e.g. `now()`."""

    def __post_init__(self) -> None:
        if self.base_type not in _TYPES:
            raise ValueError(f"column {self.name}: unsupported type {self.pg_type!r}")

    @property
    def base_type(self) -> str:
        """`pg_type` without a type modifier: `vector(384)` -> `vector`."""
        return self.pg_type.split("(", 1)[0].strip()

    @property
    def dimension(self) -> int | None:
        """The fixed dimension of a `vector(n)` column, None for any other column."""
        if self.base_type == "vector" and "(" in self.pg_type:
            return int(self.pg_type.split("(", 1)[1].rstrip(")"))
        return None

    @property
    def copy_type(self) -> str:
        return _TYPES[self.base_type][0]

    @property
    def dtype(self) -> str:
        return _TYPES[self.base_type][2 if self.nullable else 1]


@dataclass(frozen=True)
class Table:
    """A declared table. `partitioned` tables get a leading `batch_key text NOT NULL` column.

    `key` identifies a row (within a partition, for partitioned tables): loads are ordered by it
    and it is unique. `primary_key`, `unique` and `foreign_keys` are for the manifest tables.
    """

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]
    partitioned: bool = True
    primary_key: tuple[str, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    foreign_keys: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...] = ()
    indexes: tuple[tuple[str, ...], ...] = ()
    description: str = ""
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        cols = (Column(BATCH_KEY, "text"), *self.columns) if self.partitioned else self.columns
        object.__setattr__(self, "columns", tuple(cols))
        object.__setattr__(self, "_by_name", {c.name: c for c in cols})
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            raise ValueError(f"table {self.name}: duplicate column names")
        for group in (self.key, self.primary_key, *self.unique, *self.indexes):
            missing = [n for n in group if n not in self._by_name]
            if missing:
                raise ValueError(f"table {self.name}: unknown columns {missing}")

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def data_columns(self) -> list[Column]:
        """The columns an asset's DataFrame must carry (`batch_key` is optional there)."""
        return [c for c in self.columns if c.name != BATCH_KEY or not self.partitioned]

    @property
    def order_by(self) -> tuple[str, ...]:
        """The stable load order: the partition, then the row key."""
        return (BATCH_KEY, *self.key) if self.partitioned else self.key

    def column(self, name: str) -> Column:
        return self._by_name[name]

    def identifier(self) -> sql.Identifier:
        return sql.Identifier(SCHEMA, self.name)

    @property
    def qualified_name(self) -> str:
        """`seams.<name>`, for messages and Dagster's `dagster/table_name`."""
        return f"{SCHEMA}.{self.name}"

    def create_statements(self) -> Iterator[sql.Composable]:
        """Idempotent DDL: the table, then its key and secondary indexes."""
        parts: list[sql.Composable] = [_column_sql(c) for c in self.columns]
        if self.primary_key:
            parts.append(sql.SQL("PRIMARY KEY ({})").format(_idents(self.primary_key)))
        for cols in self.unique:
            parts.append(sql.SQL("UNIQUE ({})").format(_idents(cols)))
        for cols, ref_table, ref_cols in self.foreign_keys:
            parts.append(
                sql.SQL("FOREIGN KEY ({}) REFERENCES {} ({})").format(
                    _idents(cols), sql.Identifier(SCHEMA, ref_table), _idents(ref_cols)
                )
            )
        yield sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
            self.identifier(), sql.SQL(", ").join(parts)
        )
        if self.key and self.key != self.primary_key:
            yield sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(f"{self.name}_key"), self.identifier(), _idents(self.order_by)
            )
        for cols in self.indexes:
            yield sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(f"{self.name}_{'_'.join(cols)}_idx"),
                self.identifier(),
                _idents(cols),
            )


def _column_sql(column: Column) -> sql.Composable:
    # pg_type and default are declared constants of this module, never user input.
    text = sql.SQL("{} {}").format(sql.Identifier(column.name), sql.SQL(column.pg_type))
    if not column.nullable:
        text = sql.SQL("{} NOT NULL").format(text)
    if column.default is not None:
        text = sql.SQL("{} DEFAULT {}").format(text, sql.SQL(column.default))
    return text


def _idents(names: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(n) for n in names)


def _cols(*specs: tuple[str, str] | tuple[str, str, bool]) -> tuple[Column, ...]:
    return tuple(Column(*spec) for spec in specs)


NULL = True  # readability in the column lists below

# --- asset tables (contract: names and columns are read by the assets and by RAG clients) -----

EXTRACTED_TEXT = Table(
    "extracted_text",
    _cols(
        ("document_id", "text"),
        ("source_uri", "text"),
        ("source_sha256", "text"),
        ("mime", "text"),
        ("title", "text", NULL),
        ("text", "text"),
        ("page_spans", "jsonb", NULL),
        ("char_count", "integer"),
        ("error", "text", NULL),
        ("warnings", "jsonb", NULL),
    ),
    key=("document_id",),
    description="One row per document of the batch; a failed extraction has text '' and error.",
)

SENTENCE_CANDIDATES = Table(
    "sentence_candidates",
    _cols(
        ("document_id", "text"),
        ("candidate_index", "integer"),
        ("start_char", "integer"),
        ("end_char", "integer"),
        ("kind", "text"),
        ("section", "text"),
        ("page", "integer", NULL),
        ("token_count", "integer"),
        # Structure the assembly step needs (chunking.segment.Candidate): a change of
        # `paragraph` is a paragraph break; `split` marks a piece of a longer unit; a table piece
        # after the first repeats the header at header_start:header_end.
        ("paragraph", "integer"),
        ("split", "boolean"),
        ("header_start", "integer", NULL),
        ("header_end", "integer", NULL),
    ),
    key=("document_id", "candidate_index"),
    description="One row per sentence / heading / list item / table / code block.",
)

CANDIDATE_EMBEDDINGS = Table(
    "candidate_embeddings",
    _cols(
        ("document_id", "text"),
        ("candidate_index", "integer"),
        ("model_id", "text"),
        ("embedding", "vector", NULL),  # NULL: the model failed, boundaries use the fallback
    ),
    key=("document_id", "candidate_index", "model_id"),
    description="One L2-normalised float32 embedding per candidate (and model), or NULL.",
)

SEMANTIC_BOUNDARIES = Table(
    "semantic_boundaries",
    _cols(
        ("document_id", "text"),
        ("candidate_index", "integer"),
        ("similarity", "double precision", NULL),
        ("threshold", "double precision", NULL),
        ("is_boundary", "boolean"),
        ("reason", "text"),
        ("method", "text"),
    ),
    key=("document_id", "candidate_index"),
    description="One row per gap before a candidate: similarity, threshold and the decision.",
)

CHUNKS = Table(
    "chunks",
    _cols(
        ("chunk_id", "text"),
        ("document_id", "text"),
        ("chunk_index", "integer"),
        ("total_chunks", "integer"),
        ("text", "text"),
        ("start_char", "integer"),
        ("end_char", "integer"),
        ("overlap_start", "integer"),
        ("overlap_end", "integer"),
        ("token_count", "integer"),
        ("sentence_count", "integer"),
        ("page_start", "integer", NULL),
        ("page_end", "integer", NULL),
        ("section", "text"),
        ("cohesion", "double precision", NULL),
        ("boundary_method", "text"),
        ("strategy", "text"),
        ("metadata", "jsonb"),
        # Lineage (contract): which run, config, model and file version produced the chunk.
        ("run_id", "text"),
        ("config_hash", "text"),
        ("model_id", "text"),
        ("source_sha256", "text"),
        ("code_version", "text"),
    ),
    key=("document_id", "chunk_index"),
    indexes=(("document_id", "source_sha256"),),
    description="The chunks a RAG system reads; query `seams.current_chunks` for fresh ones.",
)

CHUNK_INDEX = Table(
    "chunk_index",
    _cols(
        ("chunk_id", "text"),
        ("document_id", "text"),
        ("mode", "text"),
        ("model_id", "text"),
        ("embedding", f"vector({EMBEDDING_DIM})"),
    ),
    key=("document_id", "chunk_id", "model_id", "mode"),
    description="Retrieval embeddings of chunks; HNSW (cosine) index: `chunk_index_hnsw()`.",
)

ASSET_TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        EXTRACTED_TEXT,
        SENTENCE_CANDIDATES,
        CANDIDATE_EMBEDDINGS,
        SEMANTIC_BOUNDARIES,
        CHUNKS,
        CHUNK_INDEX,
    )
}
"""Tables written by `PostgresIOManager`, keyed by asset name."""

# --- manifest and cache tables (written by orchestration / the embedding cache, not assets) ---

BATCHES = Table(
    "batches",
    (
        Column("batch_key", "text"),
        Column("created_at", "timestamptz", default="now()"),
        Column("source", "text"),
        Column("document_count", "integer"),
    ),
    key=("batch_key",),
    partitioned=False,
    primary_key=("batch_key",),
    description="One row per sealed batch (a `document_batches` partition); never changes.",
)

BATCH_DOCUMENTS = Table(
    "batch_documents",
    (
        Column("batch_key", "text"),
        Column("document_id", "text"),
        Column("source_uri", "text"),
        Column("source_sha256", "text"),
        Column("size_bytes", "bigint"),
        Column("registered_at", "timestamptz", default="now()"),
    ),
    key=("batch_key", "document_id"),
    partitioned=False,
    primary_key=("batch_key", "document_id"),
    # Registration (resources/batches.py) admits a file version only when it is not already
    # the document's newest: sensors stay idempotent, and a reverted file lands again.
    indexes=(("document_id", "registered_at"),),
    foreign_keys=((("batch_key",), "batches", ("batch_key",)),),
    description="The frozen manifest: which file versions make up each batch.",
)

SOURCE_FILES = Table(
    "source_files",
    (
        Column("sha256", "text"),
        Column("size_bytes", "bigint"),
        Column("content", "bytea"),
    ),
    key=("sha256",),
    partitioned=False,
    primary_key=("sha256",),
    description="The bytes of every registered file version, so reruns read the same inputs.",
)

EMBEDDING_CACHE = Table(
    "embedding_cache",
    (
        Column("model_id", "text"),
        Column("text_sha256", "bytea"),
        Column("embedding", "vector"),
    ),
    key=("model_id", "text_sha256"),
    partitioned=False,
    primary_key=("model_id", "text_sha256"),
    description="Embeddings by (model, sha256 of the exact text): reruns skip the model.",
)

TABLES: tuple[Table, ...] = (
    *ASSET_TABLES.values(),
    BATCHES,
    BATCH_DOCUMENTS,
    SOURCE_FILES,
    EMBEDDING_CACHE,
)

CURRENT_CHUNKS_VIEW = "current_chunks"


def current_chunks_view() -> sql.Composable:
    """`seams.current_chunks`: per document, only the chunks of its newest registered version.

    "Newest" is by `batch_documents.registered_at`, ties broken by `batch_key`. A document whose
    newest version is registered but not chunked yet shows no chunks rather than stale ones.
    """
    return sql.SQL(
        """CREATE OR REPLACE VIEW {view} AS
        SELECT c.* FROM {chunks} AS c
        JOIN (
            SELECT DISTINCT ON (d.document_id) d.document_id, d.source_sha256, d.batch_key
            FROM {documents} AS d
            ORDER BY d.document_id, d.registered_at DESC, d.batch_key DESC
        ) AS latest
          ON latest.document_id = c.document_id
         AND latest.source_sha256 = c.source_sha256
         AND latest.batch_key = c.batch_key"""
    ).format(
        view=sql.Identifier(SCHEMA, CURRENT_CHUNKS_VIEW),
        chunks=CHUNKS.identifier(),
        documents=BATCH_DOCUMENTS.identifier(),
    )


CHUNK_INDEX_HNSW = "chunk_index_embedding_hnsw"
CHUNK_PARENTS_VIEW = "chunk_parents"


def chunk_index_hnsw() -> sql.Composable:
    """The HNSW index (cosine distance, pgvector's defaults m=16, ef_construction=64) that makes
    `ORDER BY embedding <=> q LIMIT n` over `seams.chunk_index` logarithmic, not a full scan."""
    return sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} USING hnsw ({} vector_cosine_ops)").format(
        sql.Identifier(CHUNK_INDEX_HNSW),
        CHUNK_INDEX.identifier(),
        sql.Identifier("embedding"),
    )


def chunk_parents_view() -> sql.Composable:
    """`seams.chunk_parents`: the parent record of every chunk (parent-child retrieval).

    A parent is a section of one document version (the chunks sharing a heading path), or the
    whole document where it has no headings (section ''). Derived from `chunks`, so it can never
    disagree with them: span, chunk range and count per (batch_key, document_id, section).
    """
    return sql.SQL(
        """CREATE OR REPLACE VIEW {view} AS
        SELECT batch_key, document_id, source_sha256, section,
               CASE WHEN section = '' THEN 'document' ELSE 'section' END AS parent_kind,
               min(start_char) AS start_char, max(end_char) AS end_char,
               min(chunk_index) AS first_chunk_index, max(chunk_index) AS last_chunk_index,
               count(*) AS chunk_count
        FROM {chunks}
        GROUP BY batch_key, document_id, source_sha256, section"""
    ).format(view=sql.Identifier(SCHEMA, CHUNK_PARENTS_VIEW), chunks=CHUNKS.identifier())


def ddl(*, schema_exists: bool = False, vector_exists: bool = False) -> list[sql.Composable]:
    """Every statement that creates the `seams` schema, idempotently, in dependency order."""
    statements: list[sql.Composable] = []
    if not vector_exists:
        statements.append(sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"))
    if not schema_exists:
        statements.append(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
    for table in TABLES:
        statements.extend(table.create_statements())
    statements.append(current_chunks_view())
    statements.append(chunk_index_hnsw())
    statements.append(chunk_parents_view())
    return statements


def asset_table(asset_name: str) -> Table | None:
    """The declared table of an asset, or None when the asset stores nothing in PostgreSQL."""
    return ASSET_TABLES.get(asset_name)
