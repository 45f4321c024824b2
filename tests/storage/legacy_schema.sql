-- The seams schema before batch builds existed (schema.ddl() of that release), one statement
-- per block, blocks separated by a line "--;;": a database to migrate in tests.
CREATE EXTENSION IF NOT EXISTS vector
--;;
CREATE SCHEMA IF NOT EXISTS "seams"
--;;
CREATE TABLE IF NOT EXISTS "seams"."extracted_text" ("batch_key" text NOT NULL, "document_id" text NOT NULL, "source_uri" text NOT NULL, "source_sha256" text NOT NULL, "mime" text NOT NULL, "title" text, "text" text NOT NULL, "page_spans" jsonb, "char_count" integer NOT NULL, "error" text, "warnings" jsonb)
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "extracted_text_key" ON "seams"."extracted_text" ("batch_key", "document_id")
--;;
CREATE TABLE IF NOT EXISTS "seams"."sentence_candidates" ("batch_key" text NOT NULL, "document_id" text NOT NULL, "candidate_index" integer NOT NULL, "start_char" integer NOT NULL, "end_char" integer NOT NULL, "kind" text NOT NULL, "section" text NOT NULL, "page" integer, "last_page" integer, "token_count" integer NOT NULL, "paragraph" integer NOT NULL, "split" boolean NOT NULL, "header_start" integer, "header_end" integer, "gap_before" text NOT NULL, "text" text NOT NULL, "source_uri" text NOT NULL, "source_sha256" text NOT NULL)
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "sentence_candidates_key" ON "seams"."sentence_candidates" ("batch_key", "document_id", "candidate_index")
--;;
CREATE TABLE IF NOT EXISTS "seams"."candidate_embeddings" ("batch_key" text NOT NULL, "document_id" text NOT NULL, "candidate_index" integer NOT NULL, "start_char" integer NOT NULL, "end_char" integer NOT NULL, "kind" text NOT NULL, "section" text NOT NULL, "page" integer, "last_page" integer, "token_count" integer NOT NULL, "paragraph" integer NOT NULL, "split" boolean NOT NULL, "header_start" integer, "header_end" integer, "gap_before" text NOT NULL, "text" text NOT NULL, "source_uri" text NOT NULL, "source_sha256" text NOT NULL, "model_id" text NOT NULL, "embedding" vector, "window_before" vector)
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "candidate_embeddings_key" ON "seams"."candidate_embeddings" ("batch_key", "document_id", "candidate_index", "model_id")
--;;
CREATE TABLE IF NOT EXISTS "seams"."semantic_boundaries" ("batch_key" text NOT NULL, "document_id" text NOT NULL, "candidate_index" integer NOT NULL, "start_char" integer NOT NULL, "end_char" integer NOT NULL, "kind" text NOT NULL, "section" text NOT NULL, "page" integer, "last_page" integer, "token_count" integer NOT NULL, "paragraph" integer NOT NULL, "split" boolean NOT NULL, "header_start" integer, "header_end" integer, "gap_before" text NOT NULL, "text" text NOT NULL, "source_uri" text NOT NULL, "source_sha256" text NOT NULL, "model_id" text NOT NULL, "embedding" vector, "similarity" double precision, "threshold" double precision, "is_boundary" boolean NOT NULL, "reason" text NOT NULL, "method" text NOT NULL)
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "semantic_boundaries_key" ON "seams"."semantic_boundaries" ("batch_key", "document_id", "candidate_index")
--;;
CREATE INDEX IF NOT EXISTS "semantic_boundaries_batch_key_document_id_start_char_idx" ON "seams"."semantic_boundaries" ("batch_key", "document_id", "start_char")
--;;
CREATE TABLE IF NOT EXISTS "seams"."chunks" ("batch_key" text NOT NULL, "chunk_id" text NOT NULL, "document_id" text NOT NULL, "chunk_index" integer NOT NULL, "total_chunks" integer NOT NULL, "text" text NOT NULL, "start_char" integer NOT NULL, "end_char" integer NOT NULL, "overlap_start" integer NOT NULL, "overlap_end" integer NOT NULL, "token_count" integer NOT NULL, "sentence_count" integer NOT NULL, "page_start" integer, "page_end" integer, "section" text NOT NULL, "cohesion" double precision, "boundary_method" text NOT NULL, "strategy" text NOT NULL, "metadata" jsonb NOT NULL, "run_id" text NOT NULL, "config_hash" text NOT NULL, "model_id" text NOT NULL, "source_sha256" text NOT NULL, "code_version" text NOT NULL)
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "chunks_key" ON "seams"."chunks" ("batch_key", "document_id", "chunk_index")
--;;
CREATE INDEX IF NOT EXISTS "chunks_document_id_source_sha256_idx" ON "seams"."chunks" ("document_id", "source_sha256")
--;;
CREATE TABLE IF NOT EXISTS "seams"."chunk_index" ("batch_key" text NOT NULL, "chunk_id" text NOT NULL, "document_id" text NOT NULL, "mode" text NOT NULL, "model_id" text NOT NULL, "embedding" vector(384) NOT NULL, "text_search_config" text NOT NULL DEFAULT 'english')
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "chunk_index_key" ON "seams"."chunk_index" ("batch_key", "document_id", "chunk_id", "model_id", "mode")
--;;
CREATE TABLE IF NOT EXISTS "seams"."batches" ("batch_key" text NOT NULL, "created_at" timestamptz NOT NULL DEFAULT now(), "source" text NOT NULL, "document_count" integer NOT NULL, PRIMARY KEY ("batch_key"))
--;;
CREATE TABLE IF NOT EXISTS "seams"."batch_documents" ("batch_key" text NOT NULL, "document_id" text NOT NULL, "source_uri" text NOT NULL, "source_sha256" text NOT NULL, "size_bytes" bigint NOT NULL, "registered_at" timestamptz NOT NULL DEFAULT now(), PRIMARY KEY ("batch_key", "document_id"), FOREIGN KEY ("batch_key") REFERENCES "seams"."batches" ("batch_key"))
--;;
CREATE INDEX IF NOT EXISTS "batch_documents_document_id_registered_at_idx" ON "seams"."batch_documents" ("document_id", "registered_at")
--;;
CREATE TABLE IF NOT EXISTS "seams"."source_files" ("sha256" text NOT NULL, "size_bytes" bigint NOT NULL, "content" bytea NOT NULL, PRIMARY KEY ("sha256"))
--;;
CREATE TABLE IF NOT EXISTS "seams"."embedding_cache" ("model_id" text NOT NULL, "text_sha256" bytea NOT NULL, "embedding" vector NOT NULL, PRIMARY KEY ("model_id", "text_sha256"))
--;;
CREATE TABLE IF NOT EXISTS "seams"."document_tombstones" ("document_id" text NOT NULL, "source_uri" text NOT NULL, "retired_at" timestamptz NOT NULL DEFAULT now(), "last_batch_key" text NOT NULL, "reason" text NOT NULL, PRIMARY KEY ("document_id", "retired_at"))
--;;
CREATE TABLE IF NOT EXISTS "seams"."extraction_attempts" ("batch_key" text NOT NULL, "document_id" text NOT NULL, "source_sha256" text NOT NULL, "run_id" text NOT NULL, "started_at" timestamptz NOT NULL DEFAULT now(), PRIMARY KEY ("batch_key", "document_id"))
--;;
CREATE TABLE IF NOT EXISTS "seams"."lexical_chunks" ("text_search_config" text NOT NULL, "batch_key" text NOT NULL, "document_id" text NOT NULL, "chunk_id" text NOT NULL, "length" integer NOT NULL, "lexemes" tsvector NOT NULL, PRIMARY KEY ("batch_key", "chunk_id"))
--;;
CREATE INDEX IF NOT EXISTS "lexical_chunks_document_id_idx" ON "seams"."lexical_chunks" ("document_id")
--;;
CREATE TABLE IF NOT EXISTS "seams"."lexical_postings" ("text_search_config" text NOT NULL, "lexeme" text NOT NULL, "impact" real NOT NULL, "batch_key" text NOT NULL, "document_id" text NOT NULL, "chunk_id" text NOT NULL)
--;;
CREATE UNIQUE INDEX IF NOT EXISTS "lexical_postings_key" ON "seams"."lexical_postings" ("text_search_config", "lexeme", "impact", "batch_key", "chunk_id")
--;;
CREATE INDEX IF NOT EXISTS "lexical_postings_batch_key_chunk_id_idx" ON "seams"."lexical_postings" ("batch_key", "chunk_id")
--;;
CREATE TABLE IF NOT EXISTS "seams"."lexical_terms" ("text_search_config" text NOT NULL, "lexeme" text NOT NULL, "df" integer NOT NULL, PRIMARY KEY ("text_search_config", "lexeme"))
--;;
CREATE TABLE IF NOT EXISTS "seams"."lexical_totals" ("text_search_config" text NOT NULL, "chunks" bigint NOT NULL, "length_sum" bigint NOT NULL, PRIMARY KEY ("text_search_config"))
--;;
ALTER TABLE "seams"."chunk_index" ADD COLUMN IF NOT EXISTS "text_search_config" text NOT NULL DEFAULT 'english'
--;;
CREATE OR REPLACE VIEW "seams"."current_versions" AS
        SELECT latest.document_id, latest.source_sha256, latest.batch_key, latest.registered_at
        FROM (
            SELECT DISTINCT ON (d.document_id) d.document_id, d.source_sha256, d.batch_key,
                   d.registered_at
            FROM "seams"."batch_documents" AS d
            ORDER BY d.document_id, d.registered_at DESC, d.batch_key DESC
        ) AS latest
        WHERE NOT EXISTS (
            SELECT 1 FROM "seams"."document_tombstones" AS t
            WHERE t.document_id = latest.document_id AND t.retired_at >= latest.registered_at
        )
--;;
CREATE OR REPLACE VIEW "seams"."current_chunks" AS
        SELECT c.* FROM "seams"."chunks" AS c
        JOIN "seams"."current_versions" AS latest
          ON latest.document_id = c.document_id
         AND latest.source_sha256 = c.source_sha256
         AND latest.batch_key = c.batch_key
--;;
CREATE INDEX IF NOT EXISTS "chunk_index_embedding_hnsw" ON "seams"."chunk_index" USING hnsw ("embedding" vector_cosine_ops)
--;;
CREATE OR REPLACE VIEW "seams"."chunk_parents" AS
        SELECT batch_key, document_id, source_sha256, section,
               CASE WHEN section = '' THEN 'document' ELSE 'section' END AS parent_kind,
               min(start_char) AS start_char, max(end_char) AS end_char,
               min(chunk_index) AS first_chunk_index, max(chunk_index) AS last_chunk_index,
               count(*) AS chunk_count
        FROM "seams"."chunks"
        GROUP BY batch_key, document_id, source_sha256, section
--;;

CREATE OR REPLACE FUNCTION "seams".lexical_sync(docs text[], batches text[])
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    IF docs IS NULL OR cardinality(docs) = 0 THEN
        RETURN;
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended('seams.lexical', 0));
    -- 1. Entries that are no longer current, or belong to a batch being rewritten, go; the
    --    statistics lose what they counted.
    WITH target AS (
        SELECT v.document_id, v.batch_key FROM "seams"."current_versions" AS v WHERE v.document_id = ANY(docs)
    ), gone AS (
        DELETE FROM "seams"."lexical_chunks" AS c
        WHERE c.document_id = ANY(docs)
          AND (c.batch_key = ANY(batches) OR NOT EXISTS (
                SELECT 1 FROM target AS t
                WHERE t.document_id = c.document_id AND t.batch_key = c.batch_key))
        RETURNING c.text_search_config, c.batch_key, c.chunk_id, c.length, c.lexemes
    ), gone_postings AS (
        DELETE FROM "seams"."lexical_postings" AS p USING gone AS g
        WHERE p.batch_key = g.batch_key AND p.chunk_id = g.chunk_id
    ), gone_terms AS (
        UPDATE "seams"."lexical_terms" AS t SET df = t.df - d.n
        FROM (SELECT g.text_search_config, u.lexeme, count(*) AS n
              FROM gone AS g CROSS JOIN LATERAL unnest(g.lexemes) AS u
              GROUP BY 1, 2 ORDER BY 1, 2) AS d
        WHERE t.text_search_config = d.text_search_config AND t.lexeme = d.lexeme
    )
    UPDATE "seams"."lexical_totals" AS o
    SET chunks = o.chunks - d.n, length_sum = o.length_sum - d.len
    FROM (SELECT text_search_config, count(*) AS n, sum(length) AS len
          FROM gone GROUP BY 1) AS d
    WHERE o.text_search_config = d.text_search_config;

    -- 2. The current version's indexed chunks that have no entry yet are analysed and counted.
    WITH target AS (
        SELECT v.document_id, v.batch_key FROM "seams"."current_versions" AS v WHERE v.document_id = ANY(docs)
    ), fresh AS (
        SELECT DISTINCT ON (i.batch_key, i.chunk_id)
               i.text_search_config, i.batch_key, i.document_id, i.chunk_id
        FROM "seams"."chunk_index" AS i
        JOIN target AS t ON t.document_id = i.document_id AND t.batch_key = i.batch_key
        WHERE NOT EXISTS (SELECT 1 FROM "seams"."lexical_chunks" AS c
                          WHERE c.batch_key = i.batch_key AND c.chunk_id = i.chunk_id)
        ORDER BY i.batch_key, i.chunk_id, i.text_search_config
    ), added AS (
        INSERT INTO "seams"."lexical_chunks" (text_search_config, batch_key, document_id, chunk_id, length,
                              lexemes)
        SELECT f.text_search_config, f.batch_key, f.document_id, f.chunk_id,
               (SELECT coalesce(sum(cardinality(u.positions)), 0)::integer
                FROM unnest(a.lexemes) AS u),
               a.lexemes
        FROM fresh AS f
        JOIN "seams"."chunks" AS s ON s.batch_key = f.batch_key AND s.document_id = f.document_id
                          AND s.chunk_id = f.chunk_id
        CROSS JOIN LATERAL (
            SELECT to_tsvector(f.text_search_config::regconfig, s.text) AS lexemes
        ) AS a
        RETURNING text_search_config, batch_key, document_id, chunk_id, length, lexemes
    ), added_postings AS (
        INSERT INTO "seams"."lexical_postings" (text_search_config, lexeme, impact, batch_key, document_id,
                                chunk_id)
        SELECT a.text_search_config, u.lexeme,
               cardinality(u.positions) * (1.2 + 1)
                 / (cardinality(u.positions)
                    + 1.2 * (1 - 0.75 + 0.75 * a.length / 64::float8)),
               a.batch_key, a.document_id, a.chunk_id
        FROM added AS a CROSS JOIN LATERAL unnest(a.lexemes) AS u
    ), added_terms AS (
        INSERT INTO "seams"."lexical_terms" AS t (text_search_config, lexeme, df)
        SELECT a.text_search_config, u.lexeme, count(*)
        FROM added AS a CROSS JOIN LATERAL unnest(a.lexemes) AS u
        GROUP BY 1, 2 ORDER BY 1, 2
        ON CONFLICT (text_search_config, lexeme) DO UPDATE SET df = t.df + excluded.df
    )
    INSERT INTO "seams"."lexical_totals" AS o (text_search_config, chunks, length_sum)
    SELECT text_search_config, count(*), sum(length) FROM added GROUP BY 1
    ON CONFLICT (text_search_config) DO UPDATE
    SET chunks = o.chunks + excluded.chunks, length_sum = o.length_sum + excluded.length_sum;
END
$fn$

--;;

CREATE OR REPLACE FUNCTION "seams"."lexical_rows_added"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_NARGS > 0 AND TG_ARGV[0] = 'rewrite' THEN
        PERFORM "seams"."lexical_sync"((SELECT array_agg(DISTINCT document_id) FROM "new_rows"),
                       (SELECT array_agg(DISTINCT batch_key) FROM "new_rows"));
    ELSE
        PERFORM "seams"."lexical_sync"((SELECT array_agg(DISTINCT document_id) FROM (SELECT document_id FROM "new_rows") AS r),
                       '{}'::text[]);
    END IF;
    RETURN NULL;
END
$fn$

--;;

CREATE OR REPLACE FUNCTION "seams"."lexical_rows_removed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_NARGS > 0 AND TG_ARGV[0] = 'rewrite' THEN
        PERFORM "seams"."lexical_sync"((SELECT array_agg(DISTINCT document_id) FROM "old_rows"),
                       (SELECT array_agg(DISTINCT batch_key) FROM "old_rows"));
    ELSE
        PERFORM "seams"."lexical_sync"((SELECT array_agg(DISTINCT document_id) FROM (SELECT document_id FROM "old_rows") AS r),
                       '{}'::text[]);
    END IF;
    RETURN NULL;
END
$fn$

--;;

CREATE OR REPLACE FUNCTION "seams"."lexical_rows_changed"() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_NARGS > 0 AND TG_ARGV[0] = 'rewrite' THEN
        PERFORM "seams"."lexical_sync"((SELECT array_agg(DISTINCT document_id) FROM "old_rows"),
                       (SELECT array_agg(DISTINCT batch_key) FROM "old_rows"));
    ELSE
        PERFORM "seams"."lexical_sync"((SELECT array_agg(DISTINCT document_id) FROM (SELECT document_id FROM "old_rows" UNION ALL SELECT document_id FROM "new_rows") AS r),
                       '{}'::text[]);
    END IF;
    RETURN NULL;
END
$fn$

--;;
CREATE OR REPLACE TRIGGER "chunk_index_lexical_insert" AFTER INSERT ON "seams"."chunk_index" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_added"('rewrite')
--;;
CREATE OR REPLACE TRIGGER "chunk_index_lexical_delete" AFTER DELETE ON "seams"."chunk_index" REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_removed"('rewrite')
--;;
CREATE OR REPLACE TRIGGER "batch_documents_lexical_insert" AFTER INSERT ON "seams"."batch_documents" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_added"('current')
--;;
CREATE OR REPLACE TRIGGER "batch_documents_lexical_delete" AFTER DELETE ON "seams"."batch_documents" REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_removed"('current')
--;;
CREATE OR REPLACE TRIGGER "batch_documents_lexical_update" AFTER UPDATE ON "seams"."batch_documents" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_changed"('current')
--;;
CREATE OR REPLACE TRIGGER "document_tombstones_lexical_insert" AFTER INSERT ON "seams"."document_tombstones" REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_added"('current')
--;;
CREATE OR REPLACE TRIGGER "document_tombstones_lexical_delete" AFTER DELETE ON "seams"."document_tombstones" REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_removed"('current')
--;;
CREATE OR REPLACE TRIGGER "document_tombstones_lexical_update" AFTER UPDATE ON "seams"."document_tombstones" REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION "seams"."lexical_rows_changed"('current')
