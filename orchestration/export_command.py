"""`seams export`: the chunks (and optionally their retrieval vectors) as Parquet or JSON Lines.

The command only parses OUT and the flags and prints a summary; the query is
`seams.storage.export_rows`, the writing `seams.storage.export_files`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from seams.storage.export_files import export_chunks, format_for
from seams.storage.export_rows import DEFAULT_BATCH_ROWS, FORMATS, ExportRequest


def add_export_command(sub: Any) -> None:
    """Register `seams export` on the CLI's subparsers."""
    export = sub.add_parser(
        "export",
        help="write the chunks (and optionally their vectors) to Parquet or JSON Lines",
        description="Stream seams.chunks (every lineage column) into OUT, in bounded memory. "
        "The schema is documented in docs/library.md.",
    )
    export.add_argument("out", metavar="OUT", help="the file to write (replaced when complete)")
    export.add_argument(
        "--format", choices=FORMATS, help="parquet or jsonl (default: from OUT's suffix)"
    )
    export.add_argument("--batch", metavar="KEY", help="only this batch (partition key)")
    export.add_argument(
        "--current", action="store_true", help="only current document versions (current_chunks)"
    )
    export.add_argument(
        "--vectors", action="store_true", help="add each chunk's retrieval embedding"
    )
    export.add_argument(
        "--batch-rows",
        type=int,
        default=DEFAULT_BATCH_ROWS,
        metavar="N",
        help=f"rows fetched and written at a time (default {DEFAULT_BATCH_ROWS})",
    )
    export.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    """`seams export`: export from the data database, print a summary. Needs no Dagster
    instance: the resource comes from the command's environment (`SEAMS_DATABASE_URL` or the
    embedded server), built as the composition root builds it."""
    from seams.resources.postgres import PostgresResource

    out = Path(args.out).expanduser().absolute()
    request = ExportRequest(
        out=out,
        format=format_for(out, args.format),
        batch_key=args.batch,
        current=args.current,
        vectors=args.vectors,
        batch_rows=args.batch_rows,
    )
    summary = export_chunks(PostgresResource.for_environment(args.environment), request)
    print(
        f"seams: wrote {summary.rows} chunk rows to {summary.path} ({summary.format}, "
        f"{summary.batches} batches, {summary.seconds:.2f} s)",
        flush=True,
    )
    return 0
