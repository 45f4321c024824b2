"""`seams serve`: search over HTTP, one more reader of published generations.

- `keys`: the API keys file (`SEAMS_API_KEYS`, `TENANT KEY` per line), checked in constant time;
- `tenant_pools`: one connection pool per tenant, whose connections run as the tenant's role,
  so PostgreSQL's row-level security decides what a keyed request reads;
- `metrics`: the Prometheus counters and the latency histogram;
- `pages`: the HTML pages (a search box; a document with its chunk boundaries), server-rendered;
- `app`: the ASGI application (FastAPI on Starlette) tying them together, served by uvicorn.
"""
