"""`seams db url|start|stop|status|upgrade`: the PostgreSQL Seams uses, its schema, and the
tenant roles the settings name. Only `url --tenant` and `upgrade` read the settings, so the
other actions work when seams.yaml is broken."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import psycopg

from seams.collections import tenants as declared_tenants
from seams.environment import SeamsEnvironment
from seams.errors import ConfigError, InputError
from seams.resources.database import URL_ENV, EmbeddedPostgres, psycopg_url, redact, resolve
from seams.resources.postgres import PostgresResource, create_schema
from seams.settings import SeamsSettings, load_settings
from seams.storage import tenants
from seams.storage.connections import CONNECT_TIMEOUT_S
from seams.storage.search import check_text_search_config


def run(args: argparse.Namespace) -> int:
    """Print the data database's URL (or a tenant's), start, stop or report the embedded
    server, or create or upgrade the seams schema and sync the tenants; exit 1 for `status` of
    a stopped server."""
    environment: SeamsEnvironment = args.environment
    external = environment.external_database
    server = EmbeddedPostgres.for_environment(environment)
    tenant = getattr(args, "tenant", None)
    if tenant is not None and args.action != "url":
        raise InputError(
            f"--tenant goes with `seams db url` only, not `seams db {args.action}`: "
            f"run `seams db url --tenant {tenant}`"
        )
    if args.action == "url" and tenant is not None:
        settings = _settings(args)
        _check_tenant(tenant, settings, environment)
        urls = resolve(environment)
        print(tenant_url(urls.data, settings, tenant, password=not urls.embedded))
    elif args.action == "url":
        print(resolve(environment).data)
    elif args.action == "upgrade":
        url = resolve(environment).data
        print(create_schema(url).describe(redact(url)))
        try:
            settings = _settings(args)
        except ConfigError as exc:
            raise ConfigError(f"tenants not synced with the settings: {exc}") from None
        with _connect(url) as conn:
            line = sync_from_settings(conn, settings).describe()
        if line:
            print(line)
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


def sync_from_settings(
    conn: psycopg.Connection[Any], settings: SeamsSettings
) -> tenants.TenantChanges:
    """Make the database's tenant roles and collection assignments what `settings` declare
    (`collections.<name>.tenant`): missing roles created, a collection whose tenant was removed
    no longer readable by it, a tenant no collection names any more without a role. For every
    command that writes with the settings (`seams db upgrade`, `seams run`, `seams backfill`),
    on a connection as the schema's owner, after the schema is migrated; one read when the
    project has no tenants and had none."""
    return tenants.sync_project(conn, declared_tenants(settings.declared_collections()))


def check_analyzers(postgres: PostgresResource, settings: SeamsSettings) -> None:
    """Every `retrieval.text_search_config` the settings name (each collection's) is an analyzer
    PostgreSQL has: a `ConfigError` of one line naming the field otherwise, before a run,
    backfill or check does any work (the index step would fail after everything before it)."""
    declared = bool(settings.declared_collections())
    with postgres.connection() as conn:
        for name, own in settings.collection_settings().items():
            try:
                check_text_search_config(conn, own.retrieval.text_search_config)
            except ConfigError as exc:
                raise ConfigError(f"collections.{name}.{exc}" if declared else str(exc)) from None


def sync_before_writing(
    postgres: PostgresResource, settings: SeamsSettings, report: Callable[[str], None]
) -> None:
    """What `seams run` and `seams backfill` do first: the tenants as the settings declare
    them (`sync_from_settings`), one line when a role was created or removed."""
    postgres.ensure_schema()
    with postgres.connection() as conn:
        changes = sync_from_settings(conn, settings)
    if changes.changed:
        report(changes.describe())


def tenant_url(url: str, settings: SeamsSettings, tenant: str, *, password: bool) -> str:
    """The URL of `tenant`'s read-only role in the data database at `url`, after the tenants
    are synced with `settings` (so it works at once). `password`: an external server, where the
    role gets a new password (the old one stops working), in the returned URL only; the
    embedded server's local socket trusts the role name alone."""
    create_schema(url)
    with _connect(url) as conn:
        sync_from_settings(conn, settings)
        secret = tenants.rotate_tenant(conn, tenant) if password else None
    return tenants.tenant_url(url, tenant, secret)


def _check_tenant(tenant: str, settings: SeamsSettings, environment: SeamsEnvironment) -> None:
    """A one-line error unless a collection of the settings names `tenant`."""
    known = sorted({t for t in declared_tenants(settings.declared_collections()).values() if t})
    if tenant in known:
        return
    where = environment.describe_settings().removeprefix("settings: ")
    raise InputError(
        f"--tenant {tenant!r}: no collection names that tenant in {where}; "
        + (
            f"known tenants: {', '.join(known)}"
            if known
            else "it names none: give a collection `tenant: NAME` under `collections:`"
        )
    )


def _settings(args: argparse.Namespace) -> SeamsSettings:
    """The settings `main` loaded, else (for `seams db`, which loads none up front) loaded now."""
    settings = getattr(args, "settings", None)
    return settings if settings is not None else load_settings(environment=args.environment)


def _connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(psycopg_url(url), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
