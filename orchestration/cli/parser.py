"""Every `seams` command and flag in one parser (contract: the command names and their meaning).

The parser imports no command: `main` imports the module named after the command
(`seams.orchestration.cli.<command>`) only once the arguments parse, so `seams --help` and a
mistyped flag load neither Dagster nor PostgreSQL's driver.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any

from seams.storage.export_formats import DEFAULT_BATCH_ROWS, FORMATS


class CommandParser(argparse.ArgumentParser):
    """A command's parser. With `dash_positional`, an argument that starts with '-' but is none
    of the command's options is its positional argument: `seams search "-queen"` searches for
    "-queen" (argparse alone would call it an unknown option and the query missing), as
    `seams search -- "-queen"` does."""

    def __init__(self, *args: Any, dash_positional: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.dash_positional = dash_positional

    def parse_known_args(
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if self.dash_positional and args is not None and "--" not in args:
            args = list(args)
            for i, token in enumerate(args):
                if self._is_dash_word(token):  # moved after `--`: positional, whatever it says
                    args = [*args[:i], *args[i + 1 :], "--", token]
                    break
        return super().parse_known_args(args, namespace)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """argparse's check of a choice (a command, `seams db`'s action), naming the nearest
        choice of a mistyped one: `seams serach` says "did you mean 'search'?"."""
        if action.choices is not None and value not in action.choices:
            choices = [str(choice) for choice in action.choices]
            near = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
            if near:
                raise argparse.ArgumentError(
                    action,
                    f"invalid choice: {value!r}; did you mean {near[0]!r}? "
                    f"(choose from {', '.join(choices)})",
                )
        super()._check_value(action, value)

    def _is_dash_word(self, token: str) -> bool:
        """True for '-queen', '--queen', '-hello'; False for this command's options, their
        abbreviations and attached values (`--js`, `--budget=9`, `-k5`) and negative numbers."""
        if not token.startswith("-") or token in ("-", "--"):
            return False
        if self._negative_number_matcher.match(token):
            return False
        options = self._option_string_actions
        if token in options:
            return False
        if token.startswith("--"):
            name = token.split("=", 1)[0]
            return not any(option.startswith(name) for option in options)
        action = options.get(token[:2])
        if action is None:
            return True
        if action.nargs == 0:  # `-hello` is no `-h`: flags take no attached value
            return True
        value = token[2:].removeprefix("=")
        try:
            (action.type or str)(value)
        except (TypeError, ValueError):
            return True  # `-kitten` is no `-k` with a number
        return False


_NO_WAIT = (
    "when another `seams run`/`seams backfill` works on the same data, say which and exit 3 "
    "(default: wait for it)"
)


def _positive_ints(text: str) -> tuple[int, ...]:
    """`250,500,1000` -> (250, 500, 1000): positive integers, each once, in order."""
    try:
        values = tuple(dict.fromkeys(int(part) for part in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 250,500,1000") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: budgets must be positive numbers of tokens")
    return values


def _weights(text: str) -> tuple[float, ...]:
    """`0,0.5,1` -> (0.0, 0.5, 1.0): numbers within [0, 1]."""
    try:
        values = tuple(dict.fromkeys(float(part) for part in text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected numbers like 0,0.5,1") from None
    if not values or not all(0.0 <= v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: weights must lie within [0, 1]")
    return values


def build_parser() -> argparse.ArgumentParser:
    """The `seams` parser; `args.command` names the module that runs the command."""
    parser = CommandParser(
        prog="seams",
        description=(
            "Seams: semantic chunking for retrieval, as partitioned Dagster assets in PostgreSQL.\n"
            "Settings: $SEAMS_CONFIG, else ./seams.yaml, else the defaults. Data: $SEAMS_DATA_DIR, "
            "else an existing ./.seams, else ~/.local/share/seams. Set "
            "SEAMS_DATABASE_URL to use an existing PostgreSQL instead of the embedded one."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )

    _add_db(sub)
    _add_run(sub)
    _add_backfill(sub)
    _add_search(sub)
    _add_evaluate(sub)
    _add_export(sub)
    _add_sync(sub)
    _add_model(sub)
    _add_check(sub)
    _add_dev(sub)
    _add_serve(sub)
    _add_worker(sub)

    parser.add_argument(
        "-v", "--verbose", action="store_true", help="print the traceback of an error too"
    )
    return parser


def _add_db(sub: Any) -> None:
    """`seams db`: the PostgreSQL server and schema."""
    db = sub.add_parser("db", help="start, stop or inspect PostgreSQL; print its URL")
    db.add_argument(
        "action",
        choices=["url", "start", "stop", "status", "upgrade"],
        help="url: print a psycopg URL of the data database (starting the embedded server if "
        "needed); start/stop/status: manage the embedded server; upgrade: create or upgrade "
        "the seams schema (once per Seams release; runs do it too)",
    )
    db.add_argument(
        "--tenant",
        metavar="NAME",
        help="with url: the URL of the tenant NAME's read-only role, which sees only the rows of "
        "its collections (created when missing; on an external server, with a new password)",
    )


def _add_run(sub: Any) -> None:
    """`seams run`: chunk files end to end."""
    run = sub.add_parser(
        "run", help="chunk the files under PATH (default: the bundled sample corpus) end to end"
    )
    run.add_argument(
        "path",
        nargs="?",
        help="a file, a folder of documents or an s3://bucket/prefix (default: sample corpus)",
    )
    run.add_argument(
        "--retry-quarantined",
        action="store_true",
        help="read again the files under PATH whose extraction once killed a run (quarantined)",
    )
    run.add_argument("--no-wait", action="store_true", help=_NO_WAIT)


def _add_backfill(sub: Any) -> None:
    """`seams backfill`: recompute the unsynced assets."""
    backfill = sub.add_parser(
        "backfill", help="recompute the unsynced assets of every batch (after a settings change)"
    )
    backfill.add_argument("--json", action="store_true", help="print a JSON summary")
    backfill.add_argument(
        "--collection", metavar="NAME", help="only this collection's batches (default: all)"
    )
    backfill.add_argument("--no-wait", action="store_true", help=_NO_WAIT)


def _add_search(sub: Any) -> None:
    """`seams search`."""
    search = sub.add_parser(
        "search", help="search the current chunks (top-k, with context)", dash_positional=True
    )
    search.add_argument("query", help="what to look for")
    search.add_argument("-k", type=int, default=5, help="how many chunks (default 5)")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.add_argument(
        "--search",
        choices=("hybrid", "dense", "lexical"),
        help="which scores rank the hits (default: retrieval.search)",
    )
    search.add_argument(
        "--collection",
        metavar="NAME",
        action="append",
        help="search only this collection (repeatable; default: every collection)",
    )
    search.add_argument("--budget", type=int, metavar="TOKENS",
                        help="instead of k hits, fill TOKENS tokens with passages: whole "
                        "sentences around each hit's best one, best first, touching ones merged "
                        "(docs: operations, Context budgets)")  # fmt: skip


def _add_evaluate(sub: Any) -> None:
    """`seams eval`: measure search on questions."""
    evaluate = sub.add_parser(
        "eval",
        help="measure search on your own questions: the share of each answer inside the context "
        "`seams search --budget B` packs, per search and lexical_weight",
        description="Ask every question of QUESTIONS.jsonl as `seams search --budget B` would, "
        "against the current index, and print, per budget, the share of the answers' characters "
        "inside the packed context: for hybrid, dense and lexical search and for hybrid at each "
        "lexical_weight, then the weight two-fold cross-validation picks. A line of the file: "
        '{"question": "...", "source": "notes.md", "answer": "a quote of notes.md"}: source is '
        "an indexed file's name or path, answer a quote of it that Seams locates in its "
        'extracted text (or "spans": [[120, 186]], character offsets into that text).',
    )
    evaluate.add_argument("questions", metavar="QUESTIONS.jsonl", help="the questions (JSON Lines)")
    evaluate.add_argument(
        "--budgets",
        type=_positive_ints,
        default=(250, 500, 1000),
        metavar="B,B,...",
        help="context budgets in tokens (default 250,500,1000)",
    )
    evaluate.add_argument(
        "--weights",
        type=_weights,
        metavar="W,W,...",
        help="the lexical_weights to try (default 0, 0.1, ..., 1 and the current one)",
    )
    evaluate.add_argument(
        "--misses",
        type=int,
        default=5,
        metavar="N",
        help="list up to N questions whose answer was not all inside the largest budget's "
        "context, with what was packed instead (default 5; 0: none)",
    )
    evaluate.add_argument("--json", action="store_true", help="print JSON")
    evaluate.add_argument(
        "--apply",
        action="store_true",
        help="write the lexical_weight cross-validation picks into seams.yaml ($SEAMS_CONFIG, "
        "else ./seams.yaml, created when missing), when it beats the current one held out",
    )


def _add_export(sub: Any) -> None:
    """`seams export`: write the chunks to a file."""
    export = sub.add_parser(
        "export",
        help="write the chunks (and optionally their vectors) to Parquet or JSON Lines",
        description="Stream seams.chunks (every provenance column) into OUT, in bounded memory. "
        "The schema is documented in docs/library.md.",
    )
    export.add_argument("out", metavar="OUT", help="the file to write (replaced when complete)")
    export.add_argument(
        "--format", choices=FORMATS, help="parquet or jsonl (default: from OUT's suffix)"
    )
    export.add_argument("--batch", metavar="KEY", help="only this batch (partition key)")
    export.add_argument(
        "--collection", metavar="NAME", action="append", help="only this collection's chunks"
    )
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


def _add_sync(sub: Any) -> None:
    """`seams sync`: mirror the chunks into the targets."""
    sync = sub.add_parser(
        "sync",
        help="mirror the published chunks into the targets of seams.yaml (vector stores)",
        description="Compare each target (targets: in seams.yaml) with the published current "
        "chunks and repair the difference; --check only reports it. See docs/targets.md.",
    )
    sync.add_argument(
        "--target", metavar="NAME", action="append", help="only this target (repeatable)"
    )
    sync.add_argument(
        "--check",
        action="store_true",
        help="report missing, extra and stale records; write nothing",
    )
    sync.add_argument("--json", action="store_true", help="print the report as JSON")


def _add_model(sub: Any) -> None:
    """`seams model export`."""
    model = sub.add_parser("model", help="provision the embedding models")
    model_sub = model.add_subparsers(dest="model_command", required=True, metavar="ACTION")
    model_export = model_sub.add_parser(
        "export",
        help="export every model the settings use under the data dir (once): the packaged "
        "all-MiniLM-L6-v2 to ONNX, the fast preset's static model, and the model folders "
        "embedder.model and retrieval.model name",
    )
    model_export.add_argument("--force", action="store_true", help="re-export even if present")


def _add_check(sub: Any) -> None:
    """`seams check`."""
    sub.add_parser("check", help="check PostgreSQL, the Dagster instance and definitions")


def _add_dev(sub: Any) -> None:
    """`seams dev`: PostgreSQL and the Dagster UI."""
    dev = sub.add_parser("dev", help="start PostgreSQL and the Dagster UI (dagster dev)")
    dev.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    dev.add_argument("--port", type=int, default=3000, help="UI port (default 3000)")
    dev.add_argument(
        "-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
        help="print every log record, DEBUG included (default: INFO and up)",
    )  # fmt: skip


def _add_serve(sub: Any) -> None:
    """`seams serve`: search over HTTP."""
    serve = sub.add_parser(
        "serve",
        help="answer searches over HTTP (JSON API, /openapi.json) and show chunks in a browser",
        description="Search as a service: POST /search answers as `seams search --json` does, "
        "GET /documents/ID lists a document's chunks and boundaries, / is a page for people, "
        "/health and /metrics are for operators. With API keys (the file SEAMS_API_KEYS names, "
        "`TENANT KEY` per line) every request needs `Authorization: Bearer KEY` and reads as its "
        "tenant's PostgreSQL role; without keys the server answers on 127.0.0.1 only.",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")


def _add_worker(sub: Any) -> None:
    """`seams worker`: a Celery worker."""
    worker = sub.add_parser(
        "worker",
        help="run a Celery worker for distributed runs (execution.executor: celery; needs "
        "SEAMS_DATABASE_URL, SEAMS_CELERY_BROKER_URL, SEAMS_CELERY_BACKEND_URL)",
    )
    worker.add_argument("-n", "--name", help="worker name (default: seams-<pid>)")
    worker.add_argument("-c", "--concurrency", type=int, default=1, help="steps at once (1)")
    worker.add_argument("-l", "--loglevel", default="INFO", help="Celery log level (INFO)")
