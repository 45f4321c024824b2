"""`seams check`: prove the installation works, and say whether search sees every batch."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

import dagster as dg
import psycopg

from seams.collections import tenants as declared_tenants
from seams.errors import counted
from seams.models.known_models import recalled_models
from seams.orchestration import command_lock, recovered
from seams.orchestration.cli.context import definitions
from seams.orchestration.cli.db import check_analyzers
from seams.orchestration.cli.terminal import printable
from seams.orchestration.instance import prepare_instance
from seams.orchestration.lineages import all_partitions
from seams.orchestration.pending_work import unsynced_assets
from seams.orchestration.runner import seams_command
from seams.resources.database import redact
from seams.resources.embedder import PipelineModels
from seams.resources.keys import EMBEDDER_KEY, POSTGRES_KEY
from seams.resources.postgres import PostgresResource
from seams.storage import publication, tenant_isolation, tenant_roles, tenants
from seams.storage.schema import DEFAULT_COLLECTION
from seams.targets import ATOMIC_SWITCH_KINDS

EXIT_UNPUBLISHED = 1
"""A batch is not published and no command is building it: search misses it until it is."""
EXIT_ISOLATION = 1
"""Tenants exist and something would let one read past its collections."""
CLI_SOURCE = "cli:"
SHOWN_UNSYNCED = 5
"""How many unsynced batches `seams check` names (the UI's in_sync check lists them all)."""


def run(args: argparse.Namespace) -> int:
    """Prove the installation works: PostgreSQL reachable, Dagster instance and definitions load,
    which settings file is in use; then report every batch whose index is not published, with
    the command that publishes it (exit 1 when one is left and nothing is building it)."""
    seams_instance = prepare_instance(args.environment)
    defs = definitions(args)
    check_analyzers(defs.resources[POSTGRES_KEY], args.settings)  # one line naming the field
    repo = defs.get_repository_def()
    with seams_instance.open() as instance:
        storage = type(instance.run_storage).__name__
        records = records_report(instance, defs, args)
        sync = sync_report(instance, defs)
    urls = seams_instance.urls
    where = "embedded" if urls.embedded else "external"
    settings = args.environment.describe_settings().removeprefix("settings: ")
    index, status = index_report(defs.resources[POSTGRES_KEY])
    collections = args.settings.declared_collections()
    collection_lines = collections_report(defs.resources[POSTGRES_KEY], list(collections))
    declared = declared_tenants(collections)
    tenancy, isolation = tenancy_report(defs.resources[POSTGRES_KEY], declared)
    if tenancy:
        index += "\n" + tenancy
    status = status or isolation
    print(
        f"PostgreSQL ({where}): {redact(urls.data)}\n"
        f"Settings: {settings}\n"
        f"Dagster instance: {seams_instance.home} ({storage})\n"
        f"Definitions: {counted(len(repo.assets_defs_by_key), 'asset')}, "
        f"{counted(len(repo.get_all_jobs()), 'job')}, {counted(len(repo.sensor_defs), 'sensor')}, "
        f"{counted(len(repo.schedule_defs), 'schedule')}\n"
        + "".join(f"{line}\n" for line in collection_lines)
        + "".join(f"{line}\n" for line in models_report(args, defs))
        + "".join(f"{line}\n" for line in targets_report(defs.resources[POSTGRES_KEY], args))
        + printable(index, keep="\n")  # batch sources are the user's folder names
        + "".join(f"\n{printable(line)}" for line in sync)
        + "".join(f"\n{line}" for line in records)
        + "\nNext: `seams dev` and open the UI."
    )
    return status


def collections_report(postgres: PostgresResource, named: list[str]) -> list[str]:
    """The `Collections:` lines: each collection the settings name with its batches, and the
    collections the data holds batches of that the settings no longer name (their published
    chunks stay searchable; no job builds their batches). Nothing for a project that never
    had collections."""
    try:
        with postgres.connection() as conn:
            counts = dict(
                conn.execute("SELECT collection, count(*) FROM seams.batches GROUP BY collection")
            )
            current = dict(
                conn.execute("SELECT collection, count(*) FROM seams.current_chunks GROUP BY 1")
            )
    except psycopg.errors.UndefinedTable:
        counts, current = {}, {}
    gone = sorted(set(counts) - set(named) - ({DEFAULT_COLLECTION} if not named else set()))
    if not named and not gone:
        return []
    lines = []
    if named:
        lines.append(
            "Collections: "
            + ", ".join(f"{c} ({counted(counts.get(c, 0), 'batch')})" for c in named)
        )
    lines += [
        f"Collections: {c} is not in the settings but holds {counted(counts[c], 'batch')} and "
        f"{counted(current.get(c, 0), 'searchable chunk')}; no job builds its batches (name it "
        "under `collections:` again to build them)"
        for c in gone
    ]
    return lines


def targets_report(postgres: PostgresResource, args: argparse.Namespace) -> list[str]:
    """One `Target` line per target of the settings: its store, the publication it last
    synced against the newest one, and whether a model switch is atomic for its readers. Read
    from Seams' own records: no store is contacted (`seams sync --check` compares them)."""
    if not args.settings.targets:
        return []
    try:
        with postgres.connection() as conn:
            synced = {
                str(row[0]): row[1:]
                for row in conn.execute(
                    "SELECT target, published_seq, records, synced_at FROM seams.target_states"
                )
            }
            newest = conn.execute("SELECT max(seq) FROM seams.publications").fetchone()
    except psycopg.errors.UndefinedTable:
        synced, newest = {}, None
    latest = newest[0] if newest else None
    lines = []
    for name, target in sorted(args.settings.targets.items()):
        where = f"{target.kind}, {target.store_name}"
        state = synced.get(name)
        if state is None:
            status = f"never synced: run `seams sync --target {name}`"
        else:
            seq, records, at = state
            status = f"{counted(records, 'record')} as of publication {seq} ({at:%Y-%m-%d %H:%M})"
            if latest is not None and seq != latest:
                status += f"; publication {latest} is newer: `seams sync --target {name}`"
        if target.kind not in ATOMIC_SWITCH_KINDS:
            status += (
                f"; a model switch is not atomic in {target.kind}: readers may find "
                f"{target.store_name} missing for a moment while it switches"
            )
        lines.append(printable(f"Target {name} ({where}): {status}"))
    return lines


def index_report(postgres: PostgresResource) -> tuple[str, int]:
    """The `Index:` lines and the exit status: what readers see, each batch they do not see as
    built and why, and whether a command is building it now."""
    try:
        with postgres.connection() as conn:
            left = publication.unpublished(conn)
            switch = publication.model_switch(conn) if left else None
            published = conn.execute(
                "SELECT count(*), (SELECT max(seq) FROM seams.publications)"
                " FROM seams.batch_builds WHERE state = 'published'"
            ).fetchone()
            holder = command_lock.holder(conn)
    except psycopg.errors.UndefinedTable:
        return (
            f"Index: the seams schema is older than this Seams: run `{seams_command()} db "
            "upgrade` (or any `seams run`)",
            EXIT_UNPUBLISHED,
        )
    count, seq = published if published is not None else (0, None)
    lines = [
        f"Index: {counted(count, 'batch')} published"
        + (f" (publication {seq})" if seq is not None else "")
        + (f", {len(left)} not published" if left else ", every registered batch searchable")
    ]
    held = set(switch.ready) if switch is not None else set()
    if switch is not None:
        lines.append(f"Index: {_switch_line(switch)}")
    building = holder is not None
    lines += [
        f"Index: {_unpublished_line(u, building=building)}" for u in left if u.batch_key not in held
    ]
    if left and building:
        lines.append(f"Index: being built now by {holder.describe()}: search sees them once done")
        return "\n".join(lines), 0
    return "\n".join(lines), EXIT_UNPUBLISHED if left else 0


def tenancy_report(
    postgres: PostgresResource, declared: Mapping[str, str | None] | None = None
) -> tuple[str, int]:
    """The `Tenants:` lines and their exit status: nothing for a database without tenant
    roles whose settings name none; else how many tenants read which collections, and what
    differs from `declared` (collection -> tenant, from the settings; None: not compared): a
    tenant without a role yet, a collection its tenant does not read yet, a collection read by
    a tenant the settings do not give it (exit 1); `seams db upgrade` syncs them. Then every
    way a tenant could read past its collections (`tenant_isolation`), each with its fix
    (exit 1); then what tenants may still spend or call and removed tenants' roles left on
    the server (`tenant_roles.problems`: said, the status unchanged, as a server where Seams is
    not a superuser cannot change some of it)."""
    wanted = {c: t for c, t in (declared or {}).items() if t is not None}
    try:
        with postgres.connection() as conn:
            set_up = tenants.set_up_here(conn)
            problems = tenant_isolation.isolation_problems(conn) if set_up else []
            limits = (
                tenant_roles.problems(conn, tenants.ROLE_PREFIX, tenants.GROUP) if set_up else []
            )
            assigned = tenants.assignments(conn) if set_up else {}
            missing = [
                t
                for t in sorted(set(wanted.values()))
                if conn.execute(
                    "SELECT to_regrole(%s) IS NULL", (tenants.tenant_role(t),)
                ).fetchone()[0]  # type: ignore[index]
            ]
    except psycopg.errors.UndefinedTable:
        return "", 0  # an older schema: `index_report` already says to upgrade it
    if not set_up and not wanted:
        return "", 0
    upgrade = f"`{seams_command()} db upgrade`"
    readers = sorted(set(assigned.values()))
    lines = [
        f"Tenants: {counted(len(readers), 'tenant')} reading {counted(len(assigned), 'collection')}"
        + ("; each reads only its collections' rows" if readers and not problems else "")
    ]
    if missing:
        lines.append(
            f"Tenants: {', '.join(missing)} named in the settings, without a role yet: "
            f"{upgrade} creates {'them' if len(missing) > 1 else 'it'}"
        )
    extra = (
        sorted(c for c, t in assigned.items() if wanted.get(c) != t) if declared is not None else []
    )
    if extra:
        lines.append(
            "Tenants: "
            + ", ".join(f"{assigned[c]} reads {c}" for c in extra)
            + f", which the settings do not say: {upgrade} takes it away"
        )
    late = sorted(c for c, t in wanted.items() if assigned.get(c) != t and t not in missing)
    if late:
        lines.append(
            "Tenants: "
            + ", ".join(f"{wanted[c]} does not read {c} yet" for c in late)
            + f": {upgrade} gives it"
        )
    lines += [f"Tenants: {problem}" for problem in problems]
    lines += [f"Tenants: {line}" for line in limits]
    return "\n".join(lines), EXIT_ISOLATION if problems or extra else 0


def records_report(
    instance: dg.DagsterInstance, defs: dg.Definitions, args: argparse.Namespace
) -> list[str]:
    """The `Dagster:` lines: each published write whose run stopped before Dagster recorded it
    (the UI shows the batch missing or unsynced until it is recorded), and what records it."""
    seams = seams_command()
    lines = []
    for entry in recovered.unrecorded(instance, defs, args.settings):
        if entry.again:  # follows its chunks' record, named on their own line
            continue
        if entry.recordable:
            fix = f"`{seams} run` or `{seams} backfill` records it"
        else:
            fix = (
                f"made with other settings ({entry.other_settings}): `{seams} backfill` rebuilds it"
            )
        lines.append(printable(f"Dagster: {entry.state()}: {fix}"))  # batch keys name folders
    return lines


def _switch_line(switch: publication.ModelSwitch) -> str:
    """`switching models from ab12 to cd34: 2 of 3 batch(es) ready, waiting for batch K
    (collection default); search answers with ab12 until every batch is: run `seams
    backfill``."""
    waiting = f", waiting for {switch.waiting_for()}" if switch.waiting else ""
    return (
        f"switching models from {switch.serving[:12]} to {switch.target[:12]}: "
        f"{len(switch.ready)} of {counted(switch.total, 'batch')} ready{waiting}; search answers "
        f"with {switch.serving[:12]} until every batch is: run `{seams_command()} backfill`"
    )


def _unpublished_line(state: publication.Unpublished, *, building: bool = False) -> str:
    """`batch K (cli:/data/in) not published: build 3 stopped after chunks (run R, 12:03):
    run `seams run /data/in``; while a command holds the command lock (`building`), the build it
    works on is in progress, not stopped."""
    source = f" ({state.source})" if state.source else ""
    reason = state.reason
    if building and state.state == "building" and state.generation is not None:
        done = f"{state.parts[-1]} written so far" if state.parts else "nothing written yet"
        reason = f"build {state.generation} in progress ({done})"
    seen = []
    if state.run_id:
        seen.append(f"run {state.run_id}")
    if state.started_at is not None:
        seen.append(state.started_at.astimezone().strftime("%Y-%m-%d %H:%M"))
    when = f" ({', '.join(seen)})" if seen else ""
    previous = (
        f"; search shows its build {state.published_generation}"
        if state.published_generation is not None
        else "; search shows none of it"
    )
    fix = "search sees it once done" if building else f"run `{_fix(state.source)}`"
    return f"batch {state.batch_key}{source} not published: {reason}{when}{previous}: {fix}"


def models_report(args: argparse.Namespace, defs: dg.Definitions) -> list[str]:
    """The `Model` lines: the three models at work, as the settings name them (nothing is
    exported or run to say so). Boundaries: `embedder.model`; retrieval (the index being
    built, and queries): `retrieval.model`; serving: the model of the published index, which
    search answers with (it differs from retrieval's while a model switch is being built)."""
    models = PipelineModels.of(args.settings, args.environment)
    retrieval = models.retrieval.describe()
    if args.settings.retrieval.model is None:
        retrieval += " (the embedder's)" if not models.boundary_is_static else " (for static)"
    lines = [
        f"Model (boundaries, embedder.model): {models.boundary.describe()}",
        f"Model (retrieval, retrieval.model): {retrieval}",
    ]
    postgres, embedder = defs.resources[POSTGRES_KEY], defs.resources[EMBEDDER_KEY]
    try:
        with postgres.connection() as conn:
            serving = publication.serving_model(conn)
    except psycopg.errors.UndefinedTable:
        serving = None  # an older schema: the Index line says to upgrade it
    if serving is None:
        lines.append("Model (serving, the published index): none yet (nothing published)")
        return lines
    known = {m.model_id: m.model_dir for m in recalled_models(embedder.resolved_models_dir())}
    folder = known.get(serving)
    where = f" ({printable(folder)})" if folder else ""
    lines.append(f"Model (serving, the published index): {serving[:12]}{where}")
    return lines


def sync_report(instance: dg.DagsterInstance, defs: dg.Definitions) -> list[str]:
    """The `Sync:` line: the batches the current settings (or code) leave to recompute, with
    their assets, as `seams backfill` finds them; nothing before the first batch."""
    partitions = list(all_partitions(instance, defs))
    if not partitions:
        return []
    stale = {p: k for p, k in unsynced_assets(instance, partitions, defs=defs).items() if k}
    if not stale:
        return [f"Sync: {counted(len(partitions), 'batch')} in sync with the current settings"]
    shown = "; ".join(
        f"{batch}: {', '.join(key.path[-1] for key in keys)}"
        for batch, keys in list(stale.items())[:SHOWN_UNSYNCED]
    )
    more = f"; and {len(stale) - SHOWN_UNSYNCED} more" if len(stale) > SHOWN_UNSYNCED else ""
    return [
        f"Sync: {len(stale)} of {counted(len(partitions), 'batch')} unsynced with the current "
        f"settings ({shown}{more}): `{seams_command()} backfill` recomputes them"
    ]


def _fix(source: str) -> str:
    """The command that finishes the batch: `seams run FOLDER` for a batch `seams run FOLDER`
    registered (any `seams run` finishes every unpublished batch), else `seams backfill`."""
    if source.startswith(CLI_SOURCE):
        folder = Path(source.removeprefix(CLI_SOURCE))
        return f"{seams_command()} run {folder}"
    return f"{seams_command()} backfill"
