"""`main`: parse, resolve the environment and settings once, run one command, end every failure
Seams expects in one line (`seams.orchestration.cli.failures`)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from seams.environment import SeamsEnvironment
from seams.orchestration.cli.failures import (
    EXIT_ERROR,
    exit_status,
    missing_pipeline,
    print_err,
    quiet_storage_noise,
)
from seams.orchestration.cli.parser import build_parser
from seams.paths import PRIVATE_UMASK


def main(argv: Sequence[str] | None = None) -> int:
    """The `seams` command; exit status 0, or 2 with one line on stderr."""
    try:
        return _main(argv)
    except ModuleNotFoundError as exc:
        message = missing_pipeline(exc)
        if message is None:
            raise
        print_err(message)
        return EXIT_ERROR


def _main(argv: Sequence[str] | None) -> int:
    args = build_parser().parse_args(argv)
    # What Seams and Dagster write (logs, models, locks) is the owner's alone; restored on the
    # way out for callers that run `main` in their own process (tests).
    umask = args.user_umask = os.umask(PRIVATE_UMASK)  # kept for what the user asked to write
    environment: SeamsEnvironment | None = None
    try:
        # The entry point: the process's environment is read here, once, and passed down.
        environment = args.environment = SeamsEnvironment.from_os()
        if args.command != "db":  # `seams db` needs no settings (and must work when they break)
            from seams.settings import load_settings

            args.settings = load_settings(environment=environment)
        with quiet_storage_noise(not args.verbose, environment):
            # Imported only now: the command's module loads what it needs (Dagster, psycopg).
            command = importlib.import_module(f"{__package__}.{args.command}")
            return command.run(args)
    except (Exception, KeyboardInterrupt) as exc:
        status = exit_status(exc, verbose=args.verbose, environment=environment)
        if status is None:
            raise
        return status
    finally:
        os.umask(umask)
