"""`seams backfill [--collection NAME]`: recompute, for every batch (of one collection), what a
settings or code change made unsynced."""

from __future__ import annotations

import argparse
import json
import time

from seams.orchestration import ownership, recovered, runner
from seams.orchestration.cli.context import definitions
from seams.orchestration.cli.db import check_analyzers, sync_before_writing
from seams.orchestration.cli.failures import print_err
from seams.orchestration.cli.terminal import printable, say
from seams.orchestration.instance import prepare_instance
from seams.orchestration.lineages import lineage_named
from seams.orchestration.priority import lower_priority
from seams.resources.keys import POSTGRES_KEY


def run(args: argparse.Namespace) -> int:
    """Recompute, for every batch, the assets a settings or code change made unsynced, once no
    other `seams run`/`seams backfill` works on the same data (see `--no-wait`)."""
    defs = definitions(args)
    if args.collection is not None:  # a name the settings lack: said before any work
        lineage_named(defs, args.collection)
    runner.check_can_submit(defs, "seams backfill")
    # The embedded server is started (at normal priority: readers' backends inherit it) before
    # this process yields the CPU to readers searching meanwhile.
    seams_instance = prepare_instance(args.environment)
    lower_priority(args.settings.execution.niceness)
    check_analyzers(defs.resources[POSTGRES_KEY], args.settings)  # one line, before any work
    started = time.perf_counter()
    report = (lambda _m: None) if args.json else say
    waiting = (lambda m: print_err(f"seams: {m}")) if args.json else say  # JSON stays parseable
    with (
        seams_instance.open() as instance,
        runner.hold_data(defs, "seams backfill", waiting, wait=not args.no_wait),
    ):
        # The models the settings name exist before any batch needs them (a switch to the
        # `static` model distils it here, as `seams run` does).
        runner.ensure_model(instance, report, defs=defs, started_by="seams backfill")
        sync_before_writing(defs.resources[POSTGRES_KEY], args.settings, report)  # tenants
        # What a killed run published but Dagster never recorded is recorded, not recomputed.
        ownership.reap_orphans(instance, report)
        recovered.record_unrecorded(
            instance, defs, args.settings, report, environment=args.environment
        )
        summary = runner.backfill(instance, report, defs=defs, collection=args.collection)
    summary.seconds = time.perf_counter() - started
    if args.json:
        fields = ("batches", "run_ids", "texts_embedded", "cache_hits", "seconds")
        print(json.dumps({name: getattr(summary, name) for name in fields}))
    elif summary.batches:
        home = args.environment.dagster_home
        shown = runner.format_summary(
            runner.summarize(summary, defs=defs), home=home, team=args.environment.team_instance
        )
        print(printable(shown, keep="\n"), flush=True)  # the folders' names are the user's
    return 0
