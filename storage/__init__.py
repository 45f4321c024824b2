"""Storage: the one place that knows table schemas (`schema`), batch manifests (`batches`), the
embedding cache (`embedding_cache`) and the search SQL (`search`). Plain psycopg 3 over any
`connections.ConnectionSource` (the Postgres resource is one); no Dagster here."""
