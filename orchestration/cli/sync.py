"""`seams sync [--target NAME] [--check] [--json]`: the targets of seams.yaml against the
published state.

Without `--check`, each target is repaired: every stored record is read and compared, and what
differs is sent or deleted (`seams.storage.targets.sync`, with `verify`). With `--check`,
nothing is written: the counts of records, missing, extra and stale records, and a few examples.
`--json` prints `{"targets": {"NAME": {"records": n, "missing": n, "extra": n, "stale": n}}}`
(a sync's counts are what it found before repairing, with `written` and `deleted` beside them;
a target that failed has `error`, one line). Exit status: 0 when every target is (now) exact,
1 when `--check` found a difference, 2 when a target could not be reached.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from seams.errors import InputError, SeamsError
from seams.orchestration.cli.failures import EXIT_ERROR
from seams.resources.postgres import PostgresResource
from seams.storage.targets import open_target
from seams.storage.targets.sync import Difference, check_target, sync_target
from seams.targets import project_tenants, received_collections

EXIT_DIFFERENT = 1


def run(args: argparse.Namespace) -> int:
    targets = args.settings.targets
    if not targets:
        raise InputError(
            "seams sync: seams.yaml names no targets: add a `targets:` block (see docs/targets.md)"
        )
    names = list(dict.fromkeys(args.target or targets))
    unknown = [n for n in names if n not in targets]
    if unknown:
        raise InputError(
            f"--target {unknown[0]}: not a target of seams.yaml ({', '.join(sorted(targets))})"
        )
    postgres = PostgresResource.for_environment(args.environment)
    if not args.check:
        postgres.ensure_schema()  # the ledger's tables, on a database made by an older Seams
    tenants = project_tenants(args.settings.collections)
    report: dict[str, dict[str, Any]] = {}
    status = 0
    for name in names:
        collections = received_collections(targets[name], tenants)
        try:
            store = open_target(name, targets[name], args.environment)
            try:
                report[name] = (
                    _checked(check_target(postgres, name, store, collections))
                    if args.check
                    else _synced(postgres, name, store, collections)
                )
            finally:
                store.close()
        except SeamsError as exc:
            report[name] = {"error": str(exc)}
            status = EXIT_ERROR
            continue
        if args.check and any(report[name][k] for k in ("missing", "extra", "stale")):
            status = max(status, EXIT_DIFFERENT)
    if args.json:
        print(json.dumps({"targets": report}, indent=2, sort_keys=True), flush=True)
    else:
        for name, entry in report.items():
            print(f"{name}: {_line(entry)}", flush=True)
    return status


def _checked(found: Difference) -> dict[str, Any]:
    entry: dict[str, Any] = found.counts()
    entry.update(
        live=found.live,
        model_id=found.model_id,
        published_seq=found.published_seq,
        examples=found.examples,
    )
    return entry


def _synced(postgres: PostgresResource, name: str, store: Any, collections: Any) -> dict[str, Any]:
    result = sync_target(postgres, name, store, collections, verify=True)
    entry = _checked(result.found) if result.found is not None else Difference().counts()
    entry.update(
        written=result.written,
        deleted=result.deleted,
        records=result.records,
        live=result.live,
        switched=result.switched,
        model_id=result.model_id,
        published_seq=result.published_seq,
        seconds=round(result.seconds, 3),
    )
    return entry


def _line(entry: dict[str, Any]) -> str:
    if "error" in entry:
        return f"failed: {entry['error']}"
    counts = (
        f"{entry['records']:,} records, {entry['missing']} missing, {entry['extra']} extra, "
        f"{entry['stale']} stale"
    )
    where = f"{entry.get('live') or 'nothing stored'}, publication {entry.get('published_seq')}"
    if "written" not in entry:
        shown = "; ".join(f"{k}: {', '.join(v)}" for k, v in (entry.get("examples") or {}).items())
        return f"{counts} ({where})" + (f"; e.g. {shown}" if shown else "")
    switched = ", switched models" if entry["switched"] else ""
    return (
        f"wrote {entry['written']:,}, deleted {entry['deleted']:,}{switched} in "
        f"{entry['seconds']:.2f} s; now {entry['records']:,} records ({where}); found before: "
        f"{entry['missing']} missing, {entry['extra']} extra, {entry['stale']} stale"
    )
