"""`seams db url|start|stop|status|upgrade`: the PostgreSQL Seams uses, and its schema (needs no
settings, so it works when seams.yaml is broken)."""

from __future__ import annotations

import argparse

from seams.environment import SeamsEnvironment
from seams.resources.database import URL_ENV, EmbeddedPostgres, redact, resolve
from seams.resources.postgres import create_schema


def run(args: argparse.Namespace) -> int:
    """Print the data database's URL, start, stop or report the embedded server, or create or
    upgrade the seams schema; exit 1 for `status` of a stopped server."""
    environment: SeamsEnvironment = args.environment
    external = environment.external_database
    server = EmbeddedPostgres.for_environment(environment)
    if args.action == "url":
        print(resolve(environment).data)
    elif args.action == "upgrade":
        url = resolve(environment).data
        print(create_schema(url).describe(redact(url)))
    elif args.action == "start":
        urls = resolve(environment)
        where = "external server" if external else f"embedded PostgreSQL in {server.pgdata}"
        print(f"PostgreSQL is up ({where}).\ndata database: {redact(urls.data)}")
    elif args.action == "stop":
        if external:
            print(f"{URL_ENV} is set: Seams does not manage that server; nothing to stop.")
        elif server.stop():
            print(f"stopped the embedded PostgreSQL in {server.pgdata}")
        else:
            print(f"the embedded PostgreSQL in {server.pgdata} was not running")
    elif args.action == "status":
        if external:
            urls = resolve(environment)
            print(
                f"external server (from {URL_ENV}): reachable\ndata database: {redact(urls.data)}"
            )
        elif server.is_running():
            print(f"running: embedded PostgreSQL in {server.pgdata}\ndata database: {server.url()}")
        else:
            print(f"stopped: embedded PostgreSQL in {server.pgdata} (start: `seams db start`)")
            return 1
    return 0
