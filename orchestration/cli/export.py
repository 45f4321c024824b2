"""`seams export OUT`: the chunks (and optionally their retrieval vectors) as Parquet or JSON
Lines.

The command only turns OUT and the flags into a request and prints a summary; the query is
`seams.storage.export_rows`, the writing `seams.storage.export_files`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from seams.errors import InputError, counted
from seams.orchestration.cli.terminal import printable
from seams.resources.postgres import PostgresResource
from seams.storage.batches import stored_collections
from seams.storage.export_files import export_chunks, format_for
from seams.storage.export_rows import ExportRequest
from seams.storage.search.query import known_collections


def run(args: argparse.Namespace) -> int:
    """`seams export`: export from the data database, print a summary. Needs no Dagster
    instance: the resource comes from the command's environment (`SEAMS_DATABASE_URL` or the
    embedded server), built as the composition root builds it."""
    out = Path(args.out).expanduser().absolute()
    collection = None
    if getattr(args, "collection", None) is not None:
        if len(args.collection) > 1:  # argparse keeps every one: never silently the last
            raise InputError(
                f"--collection given {len(args.collection)} times: an export holds one "
                "collection, or every one without --collection"
            )
        declared = args.settings.collection_settings()
        (collection,) = known_collections(
            args.collection, declared, option="--collection", stored=lambda: _stored(args)
        )
    request = ExportRequest(
        out=out,
        format=format_for(out, args.format),
        batch_key=args.batch,
        collection=collection,
        current=args.current,
        vectors=args.vectors,
        batch_rows=args.batch_rows,
        umask=args.user_umask,  # the user's file, not Seams' own: their umask, not the private one
    )
    summary = export_chunks(_postgres(args), request)
    where = printable(str(summary.path))  # OUT as typed: it may hold anything
    print(
        f"seams: wrote {counted(summary.rows, 'chunk row')} to {where} ({summary.format}, "
        f"{counted(summary.batches, 'write')} of up to {args.batch_rows} rows, "
        f"{summary.seconds:.2f} s)",
        flush=True,
    )
    return 0


def _postgres(args: argparse.Namespace) -> PostgresResource:
    return PostgresResource.for_environment(args.environment)


def _stored(args: argparse.Namespace) -> list[str]:
    """The collections the data holds (one the settings dropped may still be exported)."""
    with _postgres(args).connection() as conn:
        return stored_collections(conn)
