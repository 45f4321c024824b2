"""Storage: the one place that knows table schemas (`schema`) and their migrations
(`migrations`), partition tables (DataFrames in and out with COPY: `partition_tables`, its codec
`frame_codec`), index
generations and their publication (`publication`), batch manifests (`batches`), the embedding
cache (`embedding_cache`), search (`search`) and export. Plain psycopg 3 over any
`connections.ConnectionSource` (the Postgres resource is one); no Dagster here."""
