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

import hashlib
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from psycopg import sql

SCHEMA = "seams"
BATCH_KEY = "batch_key"
GENERATION = "generation"
COLLECTION = "collection"
DEFAULT_COLLECTION = "default"
"""The collection of every row of a project that names none: what it stored before collections."""
EMBEDDING_DIM = 384
"""Dimension of the packaged model's vectors (all-MiniLM-L6-v2). The tables store vectors of
any dimension: each model's own is read from its vectors, never from here."""

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
    "real": ("float4", "float32", "float32"),
    "tsvector": ("tsvector", "object", "object"),
    "text[]": ("text[]", "object", "object"),
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
    description: str = ""
    """What the column holds, for people: shown in the Dagster UI's column schema."""

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
    checks: tuple[str, ...] = ()
    """Trusted CHECK constraint expressions (declared here, never user input)."""
    description: str = ""
    _by_name: dict[str, Column] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        batch = Column(
            BATCH_KEY, "text", description="the document batch (a document_batches partition)"
        )
        # Last, so a table made before builds existed (the column added by ALTER TABLE) and a
        # fresh one have the same column order, and so do the views over them (`c.*`).
        generation = Column(
            GENERATION,
            "integer",
            default="1",
            description="the build of the batch that wrote the row (seams.batch_builds); "
            "readers see the published one (seams.current_chunks)",
        )
        # After `generation`, for the same reason: an existing table gets it by ADD COLUMN.
        collection = collection_column("the collection of the row's batch (seams.batches)")
        cols = (batch, *self.columns, generation, collection) if self.partitioned else self.columns
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
        """The columns an asset's DataFrame must carry (`batch_key` is optional there, and
        `generation` and `collection` are the writer's, from the batch's build and
        registration: whatever a frame holds there is replaced)."""
        if not self.partitioned:
            return list(self.columns)
        return [c for c in self.columns if c.name not in (BATCH_KEY, GENERATION, COLLECTION)]

    @property
    def has_collection(self) -> bool:
        """Whether every row belongs to a collection (`collection_column`: 'default' where none
        is named), the tables tenants' row-level security filters
        (`seams.storage.tenants.PROTECTED`)."""
        column = self._by_name.get(COLLECTION)
        return column is not None and column.default == f"'{DEFAULT_COLLECTION}'"

    @property
    def unique_key(self) -> tuple[str, ...]:
        """The unique index of a row: partition, build and row key (two builds of a batch hold
        the same keys side by side until one is published)."""
        return (BATCH_KEY, GENERATION, *self.key) if self.partitioned else self.key

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

    def indexed(self, columns: Sequence[str]) -> tuple[str, ...]:
        """The columns an index over `columns` is built on: with `collection` after them on a
        table whose rows belong to collections. A tenant's row-level security condition
        (`collection = ANY(...)`) is then a condition of every index scan, checked inside the
        index before any row is read, so no scan counts another tenant's rows for `EXPLAIN`.
        A batch's rows share its collection, so uniqueness is the same with it or without."""
        if not self.has_collection or COLLECTION in columns:
            return tuple(columns)
        return (*columns, COLLECTION)

    def create_statements(self) -> Iterator[sql.Composable]:
        """Idempotent DDL: the table, then its key and secondary indexes (each over
        `indexed(...)` columns; an older index or primary key without `collection` is
        replaced)."""
        parts: list[sql.Composable] = [_column_sql(c) for c in self.columns]
        if self.primary_key:
            parts.append(
                sql.SQL("PRIMARY KEY ({})").format(_idents(self.indexed(self.primary_key)))
            )
        for cols in self.unique:
            parts.append(sql.SQL("UNIQUE ({})").format(_idents(self.indexed(cols))))
        for check in self.checks:
            parts.append(sql.SQL("CHECK ({})").format(sql.SQL(check)))
        yield sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
            self.identifier(), sql.SQL(", ").join(parts)
        )
        if self.partitioned:
            # A table made before builds existed has its columns but not `generation`, and a
            # key index without it: both are brought to the declaration here.
            yield sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}").format(
                self.identifier(), _column_sql(self.column(GENERATION))
            )
            yield _drop_index_without(f"{self.name}_key", GENERATION)
        if self.has_collection:
            # A table made before collections existed: every row is the default collection's
            # (ADD COLUMN with a constant default rewrites nothing).
            yield sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}").format(
                self.identifier(), _column_sql(self.column(COLLECTION))
            )
        if self.primary_key:
            yield _rekey(self)
        for cols, table, ref_cols in self.foreign_keys:
            yield _foreign_key(self, cols, table, ref_cols)
        if self.key and self.key != self.primary_key:
            if self.has_collection:
                yield _drop_index_without(f"{self.name}_key", COLLECTION)
            yield sql.SQL("CREATE UNIQUE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(f"{self.name}_key"),
                self.identifier(),
                _idents(self.indexed(self.unique_key)),
            )
        for cols in self.indexes:
            name = f"{self.name}_{'_'.join(cols)}_idx"
            if self.has_collection:
                yield _drop_index_without(name, COLLECTION)
            yield sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({})").format(
                sql.Identifier(name), self.identifier(), _idents(self.indexed(cols))
            )


def collection_column(description: str) -> Column:
    """`collection text NOT NULL DEFAULT 'default'`: a row's collection. Declared last on the
    tables that existed before collections, where `ADD COLUMN` puts it."""
    return Column(COLLECTION, "text", default=f"'{DEFAULT_COLLECTION}'", description=description)


def _drop_index_without(index: str, column: str) -> sql.Composable:
    """Drop index `seams.<index>` if it exists and does not cover `column` (an older shape)."""
    return sql.SQL(
        """DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM pg_index AS i
                   JOIN pg_class AS c ON c.oid = i.indexrelid
                   JOIN pg_namespace AS n ON n.oid = c.relnamespace
                   WHERE n.nspname = {schema} AND c.relname = {index}
                     AND NOT EXISTS (SELECT 1 FROM pg_attribute AS a
                                     WHERE a.attrelid = i.indrelid AND a.attname = {column}
                                       AND a.attnum = ANY(i.indkey))) THEN
            EXECUTE format('DROP INDEX %I.%I', {schema}, {index});
        END IF;
        END $$"""
    ).format(schema=sql.Literal(SCHEMA), index=sql.Literal(index), column=sql.Literal(column))


def _rekey(table: Table) -> sql.Composable:
    """Replace `table`'s primary key when its columns are not the declared ones (an older
    shape: before `collection` joined it, `schema.Table.indexed`); foreign keys that
    referenced it go with it (CASCADE) and are added again by `_foreign_key`."""
    constraint = f"{table.name}_pkey"
    columns = table.indexed(table.primary_key)
    return sql.SQL(
        """DO $$ BEGIN
        IF EXISTS (SELECT 1 FROM pg_constraint AS k
                   WHERE k.conrelid = {table}::regclass AND k.conname = {constraint}
                     AND ARRAY(SELECT a.attname::text
                               FROM unnest(k.conkey) WITH ORDINALITY AS u(attnum, i)
                               JOIN pg_attribute AS a
                                 ON a.attrelid = k.conrelid AND a.attnum = u.attnum
                               ORDER BY u.i) <> {names}::text[]) THEN
            ALTER TABLE {ident} DROP CONSTRAINT {constraint_ident} CASCADE;
            ALTER TABLE {ident} ADD PRIMARY KEY ({columns});
        END IF;
        END $$"""
    ).format(
        table=sql.Literal(table.qualified_name),
        constraint=sql.Literal(constraint),
        names=sql.Literal(list(columns)),
        ident=table.identifier(),
        constraint_ident=sql.Identifier(constraint),
        columns=_idents(columns),
    )


def _foreign_key(
    table: Table, columns: Sequence[str], ref_table: str, ref_columns: Sequence[str]
) -> sql.Composable:
    """The foreign key of `table`, named after its columns, added when missing (a fresh table,
    or one whose referenced key `_rekey` replaced)."""
    name = f"{table.name}_{'_'.join(columns)}_fkey"
    return sql.SQL(
        """DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_constraint
                       WHERE conrelid = {table}::regclass AND conname = {name}) THEN
            ALTER TABLE {ident} ADD CONSTRAINT {name_ident}
                FOREIGN KEY ({columns}) REFERENCES {ref} ({ref_columns});
        END IF;
        END $$"""
    ).format(
        table=sql.Literal(table.qualified_name),
        name=sql.Literal(name),
        ident=table.identifier(),
        name_ident=sql.Identifier(name),
        columns=_idents(columns),
        ref=sql.Identifier(SCHEMA, ref_table),
        ref_columns=_idents(ref_columns),
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


def _cols(*specs: tuple[str, str, str] | tuple[str, str, bool, str]) -> tuple[Column, ...]:
    """Columns from `(name, type, description)` or `(name, type, NULL, description)`."""
    columns = []
    for name, pg_type, *rest in specs:
        nullable = bool(rest[0]) if rest and isinstance(rest[0], bool) else False
        description = rest[-1] if rest and isinstance(rest[-1], str) else ""
        columns.append(Column(name, pg_type, nullable, description=description))
    return tuple(columns)


NULL = True  # readability in the column lists below

# --- asset tables (contract: names and columns are read by the assets and by RAG clients) -----

EXTRACTED_TEXT = Table(
    "extracted_text",
    _cols(
        (
            "document_id",
            "text",
            "stable id of the source (sha256 of its URI): every version keeps it",
        ),
        (
            "source_uri",
            "text",
            "where the file was found (file:// URI); its basename names it in the UI",
        ),
        (
            "source_sha256",
            "text",
            "sha256 of the file version's bytes (stored in seams.source_files)",
        ),
        ("mime", "text", "detected type the extractor used"),
        ("title", "text", NULL, "first heading or document title, when there is one"),
        ("text", "text", "the extracted text all offsets refer to ('' when extraction failed)"),
        ("page_spans", "jsonb", NULL, "[start_char, end_char] per page for paged formats (PDF)"),
        ("char_count", "integer", "characters of text"),
        (
            "error",
            "text",
            NULL,
            "why extraction failed (NULL on success): fix the file or remove it",
        ),
        ("warnings", "jsonb", NULL, "non-fatal problems met while extracting"),
    ),
    key=("document_id",),
    description="One row per document of the batch; a failed extraction has text '' and error.",
)

# The per-candidate tables form a chain (candidates -> embeddings -> boundaries): each step reads
# only its direct upstream, so every row carries the candidate forward, with the text pieces that
# rebuild the document (`gap_before` + `text`, in order), the file's name and version.
_CANDIDATE = _cols(
    ("document_id", "text", "the document (see extracted_text)"),
    ("candidate_index", "integer", "position of the candidate in its document, 0..n-1"),
    ("start_char", "integer", "first character of the candidate in the document text"),
    ("end_char", "integer", "one past its last character (text[start_char:end_char])"),
    ("kind", "text", "sentence, heading, list_item, table or code"),
    ("section", "text", "heading path above the candidate ('A > B'), '' before any heading"),
    ("page", "integer", NULL, "page of start_char (paged formats), else NULL"),
    ("last_page", "integer", NULL, "page of the candidate's last character (paged formats)"),
    ("token_count", "integer", "tokens of the embedding model's tokenizer"),
    # Structure the assembly step needs (chunking.segment.Candidate): a change of
    # `paragraph` is a paragraph break; `split` marks a piece of a longer unit; a table piece
    # after the first repeats the header at header_start:header_end.
    ("paragraph", "integer", "paragraph number: a change marks a paragraph break"),
    ("split", "boolean", "true for a piece of a longer unit (table rows, an oversized sentence)"),
    ("header_start", "integer", NULL, "start of the table header a later table piece repeats"),
    ("header_end", "integer", NULL, "end of that header"),
    ("gap_before", "text", "text between the previous candidate (or the start) and this one"),
    ("text", "text", "the candidate: document text[start_char:end_char]"),
    ("source_uri", "text", "the file (its basename names it in the UI)"),
    ("source_sha256", "text", "the file version the candidate comes from (provenance)"),
)

SENTENCE_CANDIDATES = Table(
    "sentence_candidates",
    _CANDIDATE,
    key=("document_id", "candidate_index"),
    description="One row per sentence / heading / list item / table / code block.",
)

_MODEL_ID = _cols(
    ("model_id", "text", "sha256 of the model that embedded it ('none': lexical fallback)"),
)

CANDIDATE_EMBEDDINGS = Table(
    "candidate_embeddings",
    (
        *_CANDIDATE,
        *_MODEL_ID,
        *_cols(
            # NULL: the model failed, boundaries use the lexical fallback.
            ("embedding", "vector", NULL, "the candidate's unit vector (text windows: forward)"),
            ("window_before", "vector", NULL, "text windows only: the window ending here"),
        ),
    ),
    key=("document_id", "candidate_index", "model_id"),
    description="Every candidate with its L2-normalised float32 embedding (NULL: fallback).",
)

SEMANTIC_BOUNDARIES = Table(
    "semantic_boundaries",
    (
        *_CANDIDATE,
        *_MODEL_ID,
        *_cols(
            ("embedding", "vector", NULL, "the candidate's vector (chunk cohesion, pooling)"),
            ("similarity", "double precision", NULL, "similarity across the gap before it"),
            ("threshold", "double precision", NULL, "the threshold rule's value for the document"),
            ("is_boundary", "boolean", "whether a chunk starts at this candidate"),
            (
                "reason",
                "text",
                "why a chunk starts here: document_start, structural, semantic, size or "
                "fallback ('' if none)",
            ),
            ("method", "text", "similarity source: semantic (embeddings) or jaccard (lexical)"),
        ),
    ),
    key=("document_id", "candidate_index"),
    # `seams search` finds the candidates inside a chunk's span by start_char.
    indexes=(("batch_key", "generation", "document_id", "start_char"),),
    description="Every candidate with the verdict on the gap before it: similarity, threshold, "
    "and whether (and why) a chunk starts there.",
)

CHUNKS = Table(
    "chunks",
    _cols(
        ("chunk_id", "text", "sha256 of document_id and normalised text: stable across reruns"),
        ("document_id", "text", "the document (see extracted_text)"),
        ("chunk_index", "integer", "position of the chunk in its document, 0..total_chunks-1"),
        ("total_chunks", "integer", "chunks of this document version"),
        ("text", "text", "the chunk: exactly text[start_char:end_char] of the document"),
        ("start_char", "integer", "start in the document text, overlap included"),
        ("end_char", "integer", "end in the document text"),
        ("overlap_start", "integer", "start of the overlap taken from the previous chunk"),
        ("overlap_end", "integer", "end of that overlap (= start of the chunk's own text)"),
        ("token_count", "integer", "tokens of the embedding model's tokenizer"),
        ("sentence_count", "integer", "candidates in the chunk"),
        ("page_start", "integer", NULL, "first page (paged formats)"),
        ("page_end", "integer", NULL, "last page (paged formats)"),
        ("section", "text", "heading path of the chunk's first candidate"),
        (
            "cohesion",
            "double precision",
            NULL,
            "mean pairwise similarity of its candidates (NULL without embeddings)",
        ),
        ("boundary_method", "text", "similarity source of its boundaries: semantic or jaccard"),
        ("strategy", "text", "chunking strategy (context_aware)"),
        ("metadata", "jsonb", "size, start reason (boundary_reason), oversized/undersized flags"),
        # Provenance (contract): which run, config, model and file version produced the chunk.
        ("run_id", "text", "the Dagster run that wrote it"),
        ("config_hash", "text", "fingerprint of the chunking config"),
        ("model_id", "text", "sha256 of the embedding model ('none' in the lexical fallback)"),
        ("source_sha256", "text", "the file version it was cut from"),
        ("code_version", "text", "code version of the chunks asset that made it"),
    ),
    key=("document_id", "chunk_index"),
    indexes=(("document_id", "source_sha256"),),
    description="The chunks a RAG system reads; query `seams.current_chunks` for fresh ones.",
)

CHUNK_INDEX = Table(
    "chunk_index",
    (
        *_cols(
            ("chunk_id", "text", "the chunk (see chunks)"),
            ("document_id", "text", "the document"),
            ("mode", "text", "how the vector was made: text, pooled or late"),
            ("model_id", "text", "sha256 of the embedding model"),
            (
                "embedding",
                "vector",
                "the model's unit vector (any dimension), searched with its HNSW index (cosine)",
            ),
        ),
        # The default lets `ddl()` add the column to a chunk_index made before it existed.
        Column(
            "text_search_config",
            "text",
            default="'english'",
            description="PostgreSQL text search configuration of the chunk's BM25 entry",
        ),
    ),
    key=("document_id", "chunk_id", "model_id", "mode"),
    description="Retrieval embeddings of chunks, one HNSW (cosine) index per model: "
    "`chunk_index_hnsw(model_id, dimension)`. "
    "Writing rows here also indexes the chunks for BM25 (`seams.storage.search.lexical_index`).",
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
"""Tables written by `PostgresIOManager`, keyed by asset name, in pipeline order."""
BATCH_ASSETS: tuple[str, ...] = tuple(ASSET_TABLES)
"""The per-batch assets in pipeline order: each is computed from those before it."""

# --- manifest and cache tables (written by orchestration / the embedding cache, not assets) ---

BATCHES = Table(
    "batches",
    (
        Column("batch_key", "text"),
        Column("created_at", "timestamptz", default="now()"),
        Column("source", "text"),
        Column("document_count", "integer"),
        collection_column("the collection the batch's files were registered for"),
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
        collection_column("its batch's collection"),
        # Declared last: a table made before object sources gets them by ADD COLUMN (ddl()).
        Column("etag", "text", NULL, description="an object's ETag (NULL: a file of a folder)"),
        Column(
            "version_id",
            "text",
            NULL,
            description="an object's version id (NULL: a file, or a bucket without versions)",
        ),
    ),
    key=("batch_key", "document_id"),
    partitioned=False,
    primary_key=("batch_key", "document_id"),
    # Registration (seams/storage/batches.py) admits a file version only when it is not already
    # the document's newest: sensors stay idempotent, and a reverted file lands again.
    indexes=(("document_id", "registered_at"),),
    foreign_keys=((("batch_key", "collection"), "batches", ("batch_key", "collection")),),
    description="The frozen manifest: which file versions make up each batch.",
)

OBJECT_COLUMNS = ("etag", "version_id")
"""The columns of `batch_documents` that pin an object version (added to older tables)."""

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

DOCUMENT_TOMBSTONES = Table(
    "document_tombstones",
    (
        Column("document_id", "text", description="the retired document"),
        Column("source_uri", "text", description="the file that disappeared"),
        Column("retired_at", "timestamptz", default="now()", description="when it was retired"),
        Column("last_batch_key", "text", description="the batch of its last registered version"),
        Column("reason", "text", description="why: the scan of its folder no longer found it"),
    ),
    key=("document_id", "retired_at"),
    partitioned=False,
    primary_key=("document_id", "retired_at"),
    # A document retired after its newest registration is gone: `current_chunks` (and so search)
    # drops it, history (chunks, batch_documents) stays. Registering it again revives it.
    description="One row per retirement of a document whose file disappeared from its folder.",
)

EXTRACTION_ATTEMPTS = Table(
    "extraction_attempts",
    (
        Column("batch_key", "text", description="the batch being extracted"),
        Column("document_id", "text", description="the document being extracted"),
        Column("source_sha256", "text", description="its file version"),
        Column("run_id", "text", description="the Dagster run that began extracting it"),
        Column("started_at", "timestamptz", default="now()", description="when it began"),
    ),
    key=("batch_key", "document_id"),
    partitioned=False,
    primary_key=("batch_key", "document_id"),
    # Written before a document is extracted and deleted when its extraction returns (result or
    # error): a row left behind by a finished run means its process died reading that file.
    description="Extractions under way; a leftover row quarantines its file (seams run skips it).",
)

# --- builds and publication (seams.storage.builds, seams.storage.publication) ---------------------
# A batch is built beside what readers see: every write of a per-batch asset table goes to the
# batch's open build (rows with its `generation`), and the `chunk_index` write that completes a
# build publishes it in its own transaction. Readers see only published generations.

BuildState = Literal["building", "complete", "published", "superseded"]
"""A build's state: `building` (open, being written), `complete` (open, ready and held for a
model switch), `published` (what readers see) or `superseded` (an earlier published build)."""
BUILD_STATES: tuple[BuildState, ...] = get_args(BuildState)
OPEN_STATES: tuple[BuildState, ...] = ("building", "complete")
"""The states of a batch's open build (at most one per batch)."""


def sql_states(states: Sequence[BuildState]) -> str:
    """`('building', 'complete')`: states as an SQL list, for `state IN ...`."""
    return "(" + ", ".join(f"'{state}'" for state in states) + ")"


OPEN_STATES_SQL = sql_states(OPEN_STATES)

BATCH_BUILDS = Table(
    "batch_builds",
    (
        Column("batch_key", "text", description="the batch being built"),
        Column("generation", "integer", description="the build's number, 1, 2, ... per batch"),
        Column(
            "state",
            "text",
            description="building (open), complete (ready, held), published (what readers "
            "see) or superseded (an earlier published build)",
        ),
        Column(
            "parts",
            "text[]",
            default="'{}'",
            description="the asset tables this build wrote, in pipeline order (the others are "
            "the published build's)",
        ),
        Column("target_id", "text", nullable=True, description="the index target it was built for"),
        Column("run_id", "text", nullable=True, description="the run that opened the build"),
        Column("started_at", "timestamptz", default="now()", description="when it was opened"),
        Column("completed_at", "timestamptz", nullable=True, description="when it was complete"),
        Column("published_at", "timestamptz", nullable=True, description="when it was published"),
        collection_column("the batch's collection"),
    ),
    key=("batch_key", "generation"),
    partitioned=False,
    primary_key=("batch_key", "generation"),
    # No foreign key to `batches`: a partition is written as the asset's key names it (tools,
    # tests and imports write partitions nobody registered), and each write opens a build.
    checks=(f"state IN {sql_states(BUILD_STATES)}",),
    description="Every build of every batch; at most one open and one published per batch.",
)

CURRENT_DOCUMENTS = Table(
    "current_documents",
    (
        Column("document_id", "text", description="the document"),
        Column("collection", "text", default="'default'", description="its collection"),
        Column("batch_key", "text", description="the batch of its current (published) version"),
        Column("generation", "integer", description="that batch's published build"),
        Column("source_sha256", "text", description="the current version's file"),
        Column("registered_at", "timestamptz", description="when that version was registered"),
        Column("published_seq", "bigint", description="the publication that made it current"),
    ),
    key=("document_id",),
    partitioned=False,
    primary_key=("document_id",),
    indexes=(("batch_key",),),
    # Written only by publication and retirement (seams.storage.publication), never by
    # registration: a new version replaces the old one when its batch is published.
    description="Per document, the version readers see: the newest registered version among "
    "published batches, unless the document was retired since.",
)

PUBLICATIONS = Table(
    "publications",
    (
        Column("seq", "bigint", description="the publication (seams.publication_seq)"),
        Column("collection", "text", default="'default'", description="the collection"),
        Column("batch_key", "text", description="a batch it published (or retired from)"),
        Column("generation", "integer", description="the batch's build it made visible"),
        Column("target_id", "text", nullable=True, description="the index target published"),
        Column("kind", "text", description="batch (a build published) or retire (files gone)"),
        Column("run_id", "text", nullable=True, description="the run that published it"),
        Column("published_at", "timestamptz", default="now()", description="when"),
    ),
    key=("seq", "batch_key"),
    partitioned=False,
    primary_key=("seq", "batch_key"),
    checks=("kind IN ('batch', 'switch', 'retire')",),
    description="Append-only log of publications: max(seq) names what readers see.",
)

PUBLICATION_SEQ = "publication_seq"

# --- the BM25 index over current chunks, statistics per collection (search.lexical_index) ---

LEXICAL_CHUNKS = Table(
    "lexical_chunks",
    (
        *_cols(
            ("text_search_config", "text", "text search configuration that analysed the chunk"),
            ("batch_key", "text", "the chunk's batch (its document's current version)"),
            ("document_id", "text", "the document"),
            ("chunk_id", "text", "the chunk (see chunks)"),
            ("length", "integer", "lexeme occurrences in the chunk (BM25's document length)"),
            ("lexemes", "tsvector", "to_tsvector(text_search_config, text): lexemes and positions"),
        ),
        collection_column("the chunk's collection"),
    ),
    key=("batch_key", "chunk_id"),
    partitioned=False,
    primary_key=("batch_key", "chunk_id"),
    indexes=(("document_id",),),
    description="One row per current indexed chunk: its lexemes and length, for BM25.",
)

LEXICAL_POSTINGS = Table(
    "lexical_postings",
    (
        *_cols(
            ("text_search_config", "text", "the configuration"),
            ("lexeme", "text", "a lexeme of the chunk"),
            ("impact", "real", "the chunk's BM25 term weight at the reference length"),
            ("batch_key", "text", "the chunk's batch"),
            ("document_id", "text", "the document"),
            ("chunk_id", "text", "the chunk"),
        ),
        collection_column("the chunk's collection"),
    ),
    # Read backwards: a collection's postings of a lexeme, highest impact first (each
    # collection is scored with its own statistics, so it reads its own postings).
    key=("collection", "text_search_config", "lexeme", "impact", "batch_key", "chunk_id"),
    partitioned=False,
    indexes=(("batch_key", "chunk_id"),),
    description="The inverted index of lexical_chunks: one row per (current chunk, lexeme).",
)

LEXICAL_TERMS = Table(
    "lexical_terms",
    (
        *_cols(
            ("text_search_config", "text", "the configuration"),
            ("lexeme", "text", "a lexeme"),
            ("df", "integer", "the collection's current chunks containing it (BM25's df)"),
        ),
        collection_column("the collection whose chunks are counted"),
    ),
    key=("collection", "text_search_config", "lexeme"),
    partitioned=False,
    primary_key=("collection", "text_search_config", "lexeme"),
    description="Document frequency of every lexeme over each collection's current chunks.",
)

LEXICAL_TOTALS = Table(
    "lexical_totals",
    (
        *_cols(
            ("text_search_config", "text", "the configuration"),
            ("chunks", "bigint", "the collection's current chunks indexed under it"),
            ("length_sum", "bigint", "their total length (avgdl = length_sum / chunks)"),
        ),
        collection_column("the collection whose chunks are counted"),
    ),
    key=("collection", "text_search_config"),
    partitioned=False,
    primary_key=("collection", "text_search_config"),
    description="Chunk count and total length of each collection's current chunks, per "
    "configuration.",
)

LEXICAL_TABLES = (LEXICAL_CHUNKS, LEXICAL_POSTINGS, LEXICAL_TERMS, LEXICAL_TOTALS)

SCHEMA_VERSION = Table(
    "schema_version",
    (
        Column("one", "boolean", default="true", description="always true: one row"),
        Column("version", "integer", description="the schema number (migrations.SCHEMA_NUMBER)"),
        Column("ddl_sha256", "text", description="sha256 of the DDL the database was brought to"),
        Column("seams_version", "text", description="the Seams release that brought it there"),
        Column("migrated_at", "timestamptz", default="now()", description="when"),
    ),
    key=("one",),
    partitioned=False,
    primary_key=("one",),
    # Written only by `seams.storage.migrations.migrate`; readers read it once per process.
    description="The schema version this database holds: one row.",
)

COLLECTION_TENANTS = Table(
    "collection_tenants",
    (
        Column("collection", "text", description="a collection"),
        Column("tenant", "text", description="the tenant that may read it"),
        Column("role_name", "text", description="that tenant's role (tenants.tenant_role)"),
    ),
    key=("role_name", "collection"),
    partitioned=False,
    # Led by the role: a tenant's own rows are an index range, so no scan of it (`WHERE
    # collection = ...`) passes another tenant's rows to a filter. One tenant per collection
    # is `sync_tenants`' to keep (it writes the whole mapping from settings).
    primary_key=("role_name", "collection"),
    # Written by `seams.storage.tenants.sync_tenants`; the row-level security policies read it.
    description="Which tenant reads which collection: the row-level security policies read it.",
)

# --- targets: what each vector store outside Seams holds (seams.storage.targets) -------------

TARGET_STATES = Table(
    "target_states",
    (
        Column("target", "text", description="the target (its name under `targets:`)"),
        Column("kind", "text", description="its store: pgvector, qdrant, lancedb, ..."),
        Column("live", "text", description="the table or collection its readers are switched to"),
        Column("model_id", "text", description="the model of the live records' vectors"),
        Column("dimension", "integer", description="their dimension"),
        Column("published_seq", "bigint", nullable=True, description="the publication synced"),
        Column("records", "bigint", description="records the live table or collection holds"),
        Column("synced_at", "timestamptz", default="now()", description="when it was synced"),
    ),
    key=("target",),
    partitioned=False,
    primary_key=("target",),
    # Written by `seams.storage.targets.sync` after the store confirmed its writes.
    description="Per target, the published generation its store holds and where readers read it.",
)

TARGET_RECORDS = Table(
    "target_records",
    (
        Column("target", "text", description="the target"),
        Column("store_object", "text", description="the table or collection holding the record"),
        Column("chunk_id", "text", description="the record's chunk"),
        Column("fingerprint", "text", description="sha256 of the record as it was sent"),
    ),
    key=("target", "store_object", "chunk_id"),
    partitioned=False,
    primary_key=("target", "store_object", "chunk_id"),
    # A row is written only after the store confirmed the record, and deleted only after the
    # store deleted it: a sync killed at any instant is repaired by the next one.
    description="Every record each target's store was sent, with what it held when it was sent.",
)

COLLECTION_KEYS = Table(
    "collection_keys",
    (
        collection_column("a collection that has vector indexes of its own"),
        Column("key", "integer", description="its number, in its indexes' names and predicates"),
    ),
    key=("collection",),
    partitioned=False,
    primary_key=("collection",),
    # Written by `seams.storage.vector_indexes` only, and never changed once written: each
    # collection index's predicate reads it (`collection_key_function`).
    description="The number of each collection with indexes of its own (catalogs name none).",
)

WRITER_LOCKS = Table(
    "writer_locks",
    (
        Column("name", "text", description="the lock: `seams.command:default`, a partition's..."),
        Column("pid", "integer", nullable=True, description="a session lock's holding backend"),
        Column(
            "backend_start",
            "timestamptz",
            nullable=True,
            description="when that backend started (a reused pid is not the holder)",
        ),
        Column("holder", "text", nullable=True, description="what holds it: `seams run /data`"),
        Column("since", "timestamptz", nullable=True, description="when it took it"),
    ),
    key=("name",),
    partitioned=False,
    primary_key=("name",),
    # Rows locked by Seams' writers (`seams.storage.writer_locks`); no tenant has a right on it.
    description="The locks between Seams' writers, one row each: tenants cannot take them.",
)

TABLES: tuple[Table, ...] = (
    *ASSET_TABLES.values(),
    BATCHES,
    BATCH_DOCUMENTS,
    SOURCE_FILES,
    EMBEDDING_CACHE,
    DOCUMENT_TOMBSTONES,
    EXTRACTION_ATTEMPTS,
    BATCH_BUILDS,
    CURRENT_DOCUMENTS,
    PUBLICATIONS,
    *LEXICAL_TABLES,
    COLLECTION_TENANTS,
    TARGET_STATES,
    TARGET_RECORDS,
    COLLECTION_KEYS,
    WRITER_LOCKS,
    SCHEMA_VERSION,
)

CURRENT_CHUNKS_VIEW = "current_chunks"
CURRENT_VERSIONS_VIEW = "current_versions"
PUBLISHED_CHUNKS_VIEW = "published_chunks"


def current_versions_view() -> sql.Composable:
    """`seams.current_versions`: per document, the version readers see (batch_key,
    source_sha256, registered_at): `seams.current_documents`, which publication keeps.

    A newer version registered but not yet published is not here: the document's previous
    version stays current (and searchable) until the new one's batch is published; a retired
    document leaves at once.
    """
    return sql.SQL(
        """CREATE OR REPLACE VIEW {view} WITH (security_invoker = true) AS
        SELECT d.document_id, d.source_sha256, d.batch_key, d.registered_at, d.collection
        FROM {current} AS d"""
    ).format(
        view=sql.Identifier(SCHEMA, CURRENT_VERSIONS_VIEW),
        current=CURRENT_DOCUMENTS.identifier(),
    )


URI_FILE_NAME_FUNCTION = "uri_file_name"


def uri_file_name_function() -> sql.Composable:
    """`seams.uri_file_name(uri)`: a source URI's last path segment, percent-decoded: the name
    Seams gives a file everywhere else (`seams.assets.display.file_name`)."""
    return sql.SQL(
        """CREATE OR REPLACE FUNCTION {function}(uri text) RETURNS text
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
          SELECT coalesce(convert_from(string_agg(
                   CASE WHEN part[1] IS NOT NULL THEN decode(substr(part[1], 2), 'hex')
                        ELSE convert_to(part[2], 'UTF8') END, '' ORDER BY n), 'UTF8'), '')
          FROM regexp_matches(
                 regexp_replace(regexp_replace(uri, '[?#].*$', ''), '^.*/', ''),
                 '(%[0-9A-Fa-f]{{2}})|([^%]+|%)', 'g') WITH ORDINALITY AS m(part, n)
        $$"""
    ).format(function=sql.Identifier(SCHEMA, URI_FILE_NAME_FUNCTION))


def current_chunks_view() -> sql.Composable:
    """`seams.current_chunks`: the chunks readers see: per document, those of its current
    version (`seams.current_documents`) at its batch's published build, none for a document
    retired since, none of a build not yet published.

    A batch holds at most one generation of `chunks` at or below its published one (publication
    removes older ones), so `generation <= published` selects exactly that one; the rows of a
    build in progress sit above it.

    Every column of `chunks`, then (contract: new columns go at the end, which is all `CREATE OR
    REPLACE VIEW` can add to an existing database) the file each chunk was cut from: its
    `source_uri` as registered (`seams.batch_documents`) and its `file_name`. A batch written
    without registration (an import) has NULL there. `c.*` keeps each database's own column
    order of `chunks`; a column added to `chunks` from now on would land before the file
    columns, so it needs a migration step that drops and recreates this view (and its readers').
    """
    return sql.SQL(
        """CREATE OR REPLACE VIEW {view} WITH (security_invoker = true) AS
        SELECT c.*, f.source_uri, {file_name}(f.source_uri) AS file_name
        FROM {chunks} AS c
        JOIN {current} AS d
          ON d.document_id = c.document_id
         AND d.batch_key = c.batch_key
         AND c.generation <= d.generation
        LEFT JOIN {files} AS f
          ON f.batch_key = c.batch_key
         AND f.document_id = c.document_id"""
    ).format(
        view=sql.Identifier(SCHEMA, CURRENT_CHUNKS_VIEW),
        file_name=sql.Identifier(SCHEMA, URI_FILE_NAME_FUNCTION),
        chunks=CHUNKS.identifier(),
        current=CURRENT_DOCUMENTS.identifier(),
        files=BATCH_DOCUMENTS.identifier(),
    )


def published_chunks_view() -> sql.Composable:
    """`seams.published_chunks`: every published version's chunks (older versions included),
    never a row of a build in progress: what an export of all versions reads."""
    return sql.SQL(
        """CREATE OR REPLACE VIEW {view} WITH (security_invoker = true) AS
        SELECT c.* FROM {chunks} AS c
        JOIN {builds} AS b
          ON b.batch_key = c.batch_key
         AND b.state = 'published'
         AND c.generation <= b.generation"""
    ).format(
        view=sql.Identifier(SCHEMA, PUBLISHED_CHUNKS_VIEW),
        chunks=CHUNKS.identifier(),
        builds=BATCH_BUILDS.identifier(),
    )


CHUNK_PARENTS_VIEW = "chunk_parents"
CHUNK_INDEX_HNSW_PREFIX = "chunk_index_hnsw_"
"""Every model's HNSW index over `seams.chunk_index` is named `<prefix><dimension>_<hash>`
(`_c<collection key>` after it: the model's index over one collection's rows)."""
COLLECTION_KEY_FUNCTION = "collection_key"
LEGACY_CHUNK_INDEX_HNSW = "chunk_index_embedding_hnsw"
"""The one HNSW index of a `chunk_index` whose vectors had one fixed dimension (`vector(384)`)."""
MAX_HNSW_DIMENSIONS = 2000
"""The most dimensions pgvector's HNSW indexes a `vector` with: a model with more is searched
exactly (a sequential scan of its rows), never approximately."""


def chunk_index_hnsw_name(model_id: str, dimension: int, collection_key: int | None = None) -> str:
    """The name of `model_id`'s HNSW index (with `collection_key`: of its index over that
    collection's rows alone, `COLLECTION_KEYS`): deterministic, any model id fits PostgreSQL's
    63 bytes (a hash of it), the dimension is visible to people, and no collection's name is
    (every role may read index names)."""
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:16]
    name = f"{CHUNK_INDEX_HNSW_PREFIX}{check_dimension(dimension)}_{digest}"
    if collection_key is None:
        return name
    return f"{name}_c{operator.index(collection_key)}"


def collection_key_sql(collection: sql.Composable) -> sql.Composable:
    """`seams.collection_key(<collection>)`: a collection's number (`collection_key_function`)."""
    return sql.SQL("{}({})").format(sql.Identifier(SCHEMA, COLLECTION_KEY_FUNCTION), collection)


def collection_key_function() -> sql.Composable:
    """`seams.collection_key(name)`: the number of a collection in `COLLECTION_KEYS` (NULL when it
    has none, or for a tenant, is not its own: the table's row-level security). A collection
    index's predicate calls it on the indexed rows (`chunk_index_hnsw`), which PostgreSQL
    allows of an IMMUTABLE function only; that holds, as a collection's number never changes
    once written. A search of the collection states the same condition with the number as a
    literal (`seams.storage.search.dense`), which proves the index applies."""
    return sql.SQL(
        """CREATE OR REPLACE FUNCTION {function}(name text) RETURNS integer
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
        AS $$ SELECT k.key FROM {table} AS k WHERE k.collection = name $$"""
    ).format(
        function=sql.Identifier(SCHEMA, COLLECTION_KEY_FUNCTION),
        table=COLLECTION_KEYS.identifier(),
    )


def check_dimension(dimension: int) -> int:
    """`dimension` as a vector dimension pgvector stores (1 to 16000; numpy integers too),
    else a `ValueError` naming it: it is composed into DDL and casts as a literal."""
    try:
        value = operator.index(dimension)
    except TypeError:
        value = None
    if value is None or isinstance(dimension, bool) or not 1 <= value <= 16000:
        raise ValueError(
            f"a vector dimension must be an integer from 1 to 16000, got {dimension!r}"
        )
    return value


def model_vector(column: sql.Composable, dimension: int) -> sql.Composable:
    """`column::vector(dimension)`: the expression a model's HNSW index is built on, and so the
    one a query must order by for PostgreSQL to use that index."""
    return sql.SQL("({})::vector({})").format(column, sql.Literal(check_dimension(dimension)))


def chunk_index_hnsw(
    model_id: str, dimension: int, collection_key: int | None = None
) -> sql.Composable:
    """The HNSW index (cosine distance, pgvector's defaults m=16, ef_construction=64) of one
    model's vectors in `seams.chunk_index`: a partial index (`WHERE model_id = ...`) on the
    vectors cast to the model's dimension, pgvector's way of indexing a `vector` column that
    holds several dimensions. A search of that model (`dense.nearest_statement`) filters by
    the same literal model id and orders by the same cast, so the planner proves the index
    applies, for a generic plan too. Values are literals composed by psycopg, never formatted.

    With `collection_key`, the index of that collection's rows of the model alone (`AND
    seams.collection_key(collection) = <key>`, `collection_key_function`): a search of that one
    collection, whose condition folds into the same, walks only its rows instead of the whole
    model's graph filtered afterwards. The predicate holds the collection's number, not its
    name: index definitions are readable by every role, tenants included.
    """
    among = (
        sql.SQL(" AND {} = {}").format(
            collection_key_sql(sql.Identifier("collection")),
            sql.Literal(operator.index(collection_key)),
        )
        if collection_key is not None
        else sql.SQL("")
    )
    return sql.SQL(
        "CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw (({vector}) vector_cosine_ops)"
        " WHERE {model} = {model_id}{among}"
    ).format(
        name=sql.Identifier(chunk_index_hnsw_name(model_id, dimension, collection_key)),
        table=CHUNK_INDEX.identifier(),
        vector=model_vector(sql.Identifier("embedding"), dimension),
        model=sql.Identifier("model_id"),
        model_id=sql.Literal(model_id),
        among=among,
    )


def chunk_parents_view() -> sql.Composable:
    """`seams.chunk_parents`: the parent record of every published chunk (parent-child
    retrieval).

    A parent is a section of one document version (the chunks sharing a heading path), or the
    whole document where it has no headings (section ''). Derived from `published_chunks`, so it
    can never disagree with them: span, chunk range and count per (batch_key, document_id,
    section), and the build (`generation`) the chunks come from.
    """
    return sql.SQL(
        """CREATE OR REPLACE VIEW {view} WITH (security_invoker = true) AS
        SELECT batch_key, document_id, source_sha256, section,
               CASE WHEN section = '' THEN 'document' ELSE 'section' END AS parent_kind,
               min(start_char) AS start_char, max(end_char) AS end_char,
               min(chunk_index) AS first_chunk_index, max(chunk_index) AS last_chunk_index,
               count(*) AS chunk_count, generation, collection
        FROM {chunks}
        GROUP BY batch_key, generation, document_id, source_sha256, section, collection"""
    ).format(
        view=sql.Identifier(SCHEMA, CHUNK_PARENTS_VIEW),
        chunks=sql.Identifier(SCHEMA, PUBLISHED_CHUNKS_VIEW),
    )


def builds_ddl() -> list[sql.Composable]:
    """What tables cannot declare: the publication sequence, one open and one published build
    per batch (partial unique indexes), and the index names of an older schema dropped."""
    builds = BATCH_BUILDS.identifier()
    return [
        sql.SQL("CREATE SEQUENCE IF NOT EXISTS {}").format(sql.Identifier(SCHEMA, PUBLICATION_SEQ)),
        _drop_index_without("batch_builds_open", COLLECTION),
        sql.SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS batch_builds_open ON {} (batch_key, collection)"
            f" WHERE state IN {OPEN_STATES_SQL}"
        ).format(builds),
        _drop_index_without("batch_builds_published", COLLECTION),
        sql.SQL(
            "CREATE UNIQUE INDEX IF NOT EXISTS batch_builds_published ON {}"
            " (batch_key, collection) WHERE state = 'published'"
        ).format(builds),
        # Replaced by the same index with `generation` (semantic_boundaries' declaration).
        sql.SQL("DROP INDEX IF EXISTS {}").format(
            sql.Identifier(SCHEMA, "semantic_boundaries_batch_key_document_id_start_char_idx")
        ),
    ]


def declared_ddl(
    *, schema_exists: bool = False, vector_exists: bool = False
) -> list[sql.Composable]:
    """The statements that create the tables, views and functions declared here, idempotently,
    in dependency order: the start of the whole schema's DDL (`seams.storage.migrations.ddl`),
    which adds what other storage modules own on top of them."""
    statements: list[sql.Composable] = []
    if not vector_exists:
        statements.append(sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"))
    if not schema_exists:
        statements.append(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
    for table in TABLES:
        statements.extend(table.create_statements())
    statements.append(
        sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}").format(
            CHUNK_INDEX.identifier(), _column_sql(CHUNK_INDEX.column("text_search_config"))
        )
    )
    for name in OBJECT_COLUMNS:
        statements.append(
            sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {}").format(
                BATCH_DOCUMENTS.identifier(), _column_sql(BATCH_DOCUMENTS.column(name))
            )
        )
    statements.extend(builds_ddl())
    statements.append(current_versions_view())
    statements.append(uri_file_name_function())
    statements.append(collection_key_function())
    statements.append(current_chunks_view())
    statements.append(published_chunks_view())
    statements.append(chunk_parents_view())
    return statements


def asset_table(asset_name: str) -> Table | None:
    """The declared table of an asset, or None when the asset stores nothing in PostgreSQL."""
    return ASSET_TABLES.get(asset_name)
