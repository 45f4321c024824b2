"""`seams run [PATH]`: register PATH's files as batches and materialize them end to end."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import dagster as dg

from seams.collections import Collection
from seams.errors import InputError, counted
from seams.orchestration import recovered, runner
from seams.orchestration.cli.context import definitions
from seams.orchestration.cli.db import check_analyzers, sync_before_writing
from seams.orchestration.cli.terminal import printable, say
from seams.orchestration.instance import prepare_instance
from seams.orchestration.priority import lower_priority
from seams.resources.keys import POSTGRES_KEY
from seams.settings import SeamsSettings
from seams.storage.quarantine import QUARANTINE_RETRY_TAG
from seams.storage.sources import Location, location_of, location_text


def run(args: argparse.Namespace) -> int:
    """Register PATH (default: every collection's source; without `collections:`, the sample
    corpus) as batches and materialize them end to end, once no other `seams run`/`seams
    backfill` works on the same data (see `--no-wait`)."""
    collections = args.settings.declared_collections()
    paths = _source_paths(args.path, collections)
    defs = definitions(args)
    runner.check_can_submit(defs, "seams run")
    # The embedded server is started (at normal priority: readers' backends inherit it) before
    # this process yields the CPU to readers searching meanwhile.
    seams_instance = prepare_instance(args.environment)
    lower_priority(args.settings.execution.niceness)
    check_analyzers(defs.resources[POSTGRES_KEY], args.settings)  # one line, before any work
    command = f"seams run {location_text(paths[0])}" if args.path else "seams run"
    with (
        seams_instance.open() as instance,
        runner.hold_data(defs, command, say, wait=not args.no_wait),  # before anything is read
    ):
        runner.ensure_model(instance, say, defs=defs)
        sources = [runner.source_of(path) for path in paths]
        unfinished = _unfinished_batches(instance, defs, args)
        retry = (
            [key for source in sources for key in runner.quarantined_batches(source, defs=defs)]
            if args.retry_quarantined
            else []
        )
        if retry:
            say(f"reading the quarantined files of {counted(len(retry), 'batch')} again")
        retired: list[str] = []
        registered = [
            key
            for path in paths
            for key in runner.register_path(
                path,
                say,
                defs=defs,
                retired=retired,
                collections=collections or None,
                **_reading(args.settings, path),
            )
        ]
        # Tenants as the settings say, once the files are routed (an ambiguous file stops the
        # run before any role changes).
        sync_before_writing(defs.resources[POSTGRES_KEY], args.settings, say)
        keys = list(dict.fromkeys([*unfinished, *registered, *retry]))
        where = " and ".join(str(path) for path in paths)
        if not keys:
            say(f"nothing new under {where}: every file version is already in a batch")
            return 0
        resumed = [k for k in unfinished if k not in retry]
        say(
            f"registered {counted(len(registered), 'new batch')} from {where}"
            + (f", resuming {len(resumed)} unfinished" if resumed else "")
            + "; materializing..."
        )
        summary = runner.RunSummary(batches=keys, retired=retired, resumed=resumed)
        started = time.perf_counter()
        runner.materialize_batches(
            instance, keys, say, summary, defs=defs,
            resume=resumed, announce=False,  # said above, in one line
            tags={QUARANTINE_RETRY_TAG: "true"} if retry else None,
        )  # fmt: skip
        if resumed:
            recovered.record_unrecorded(
                instance, defs, args.settings, say, environment=args.environment
            )
    summary.seconds = time.perf_counter() - started
    _report(summary, defs, args)
    return 0


def _source_paths(path: str | None, collections: dict[str, Collection]) -> list[Location]:
    """What this run reads, checked before any expensive work: PATH, else every collection's
    source folder, else the sample corpus."""
    if path:
        paths: list[Location] = [location_of(path)]
    elif collections:
        for c in collections.values():
            if isinstance(c.source, Path) and not c.source.is_dir():
                raise InputError(
                    f"collections.{c.name}.source: {c.source} is not a folder: create it or "
                    "point `source` at the folder of the collection's documents"
                )
        paths = list(dict.fromkeys(c.source for c in collections.values()))
    else:
        paths = [runner.SAMPLE_CORPUS]
    for location in paths:
        if isinstance(location, Path) and not location.expanduser().exists():
            raise InputError(
                f"{location} does not exist: pass a file or a folder of documents "
                f"(`{runner.seams_command()} run` alone chunks "
                + ("every collection's source)" if collections else "the bundled sample corpus)")
            )
    return paths


def _unfinished_batches(
    instance: dg.DagsterInstance, defs: dg.Definitions, args: argparse.Namespace
) -> list[str]:
    """The batches readers do not yet see as built, whatever their source: a run ends with every
    current chunk searchable, so it finishes them too."""
    found = runner.unfinished(defs)
    if runner.settle_in_flight(instance, say, [u.batch for u in found]):  # killed: failed
        found = runner.unfinished(defs)  # live (a run of the UI's): awaited, look again
    # Builds held for a model switch are complete: only the switch's other batches (a
    # backfill) publish them, so they are said once, not resumed.
    held = runner.held_for_switch(defs)
    found = [u for u in found if u.batch not in held]
    # Writes a run stopped before Dagster recorded them (published): recorded now, and
    # again after this run for the batches it finishes.
    recovered.record_unrecorded(instance, defs, args.settings, say, environment=args.environment)
    if found:
        say(runner.describe_unfinished(found))
    return [u.batch for u in found]


def _report(summary: runner.RunSummary, defs: dg.Definitions, args: argparse.Namespace) -> None:
    """The closing table, then the model switch new batches also wait for, if any."""
    shown = runner.format_summary(
        runner.summarize(summary, defs=defs),
        home=args.environment.dagster_home,
        team=args.environment.team_instance,
    )
    print(printable(shown, keep="\n"), flush=True)  # the folders' names are the user's
    switch = runner.model_switch(defs)
    if switch is not None:  # new batches of the new model wait for it too
        say(f"index: {switch.describe()}")


def _reading(settings: SeamsSettings, location: Location) -> dict[str, Any]:
    """How a source is read: the S3 endpoint and the size limit of the collection whose
    source it is (else the top level's)."""
    own = next(
        (
            settings.collection_settings()[c.name]
            for c in settings.declared_collections().values()
            if c.source == location
        ),
        settings,
    )
    return {
        "endpoint_url": own.inbox.endpoint_url,
        "max_bytes": own.extraction_limits().file_bytes_max,
    }
