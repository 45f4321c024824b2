"""The `seams` command line (contract: the command names and their meaning).

An entry point: `main` resolves the process's environment once (`SeamsEnvironment.from_os()`:
data dir, database URL, settings file) and every command takes it from `args.environment`, as it
takes the settings from `args.settings`. Every command resolves PostgreSQL the same way
(`resources.database`): `SEAMS_DATABASE_URL` when set, otherwise the embedded server under the
data dir. Errors Seams expects (bad config, no database, no model) print one line saying what to
do, never a traceback.

One module per command (`db`, `dev`, `check`, `run`, `backfill`, `search`, `export`, `model`,
`worker`, `sync`), each with a `run(args)`; `parser` declares them all, `entry` runs one,
`failures` ends a failed one in one line.
"""

from seams.orchestration.cli.entry import main
from seams.orchestration.cli.failures import EXIT_ERROR
from seams.orchestration.cli.parser import build_parser

__all__ = ["EXIT_ERROR", "build_parser", "main"]
