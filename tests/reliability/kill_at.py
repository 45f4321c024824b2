"""`seams ARGS`, SIGKILLed by itself at one place: how the fault tests kill a run exactly there.

    python tests/reliability/kill_at.py PLACE ARGS...

PLACE:
- `register`: inside registration, before its transaction commits;
- `registered`: registration committed, before Dagster creates a run;
- `run-created`: Dagster created the pipeline's run (NOT_STARTED), before it starts;
- `after:TABLE`: the write of asset table TABLE committed (its Dagster event not yet recorded);
- `copy:TABLE`: inside the COPY of TABLE's rows, one row sent.

A place never reached leaves the command to end normally (the test sees its exit status).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from typing import Any


def kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(place: str) -> None:
    """Arm the kill at `place`."""
    kind, _, table = place.partition(":")
    if kind == "register":
        from seams.orchestration import runner

        register_batch = runner.register_batch

        def killed_inside(conn: Any, *args: Any, **kwargs: Any) -> Any:
            with conn.transaction():  # the registration's own transaction nests in this one
                register_batch(conn, *args, **kwargs)
                kill()

        runner.register_batch = killed_inside
    elif kind == "registered":
        from seams.orchestration import runner

        register_path = runner.register_path

        def killed_after(*args: Any, **kwargs: Any) -> Any:
            keys = register_path(*args, **kwargs)
            kill()
            return keys

        runner.register_path = killed_after
    elif kind == "run-created":
        import dagster as dg

        create_run = dg.DagsterInstance.create_run_for_job  # what execute_in_process calls

        def killed_once_created(self: Any, *args: Any, **kwargs: Any) -> Any:
            run = create_run(self, *args, **kwargs)
            if run.job_name == "chunk_batches":
                kill()
            return run

        dg.DagsterInstance.create_run_for_job = killed_once_created  # type: ignore[method-assign]
    elif kind == "after":
        from seams.resources import io_manager
        from seams.storage import index_publication

        write_table = io_manager.write_table

        def killed_after_commit(postgres: Any, written: Any, *args: Any, **kwargs: Any) -> Any:
            result = write_table(postgres, written, *args, **kwargs)
            if written.name == table:
                kill()
            return result

        io_manager.write_table = killed_after_commit
        index_publication.write_table = killed_after_commit  # chunk_index's own write
    elif kind == "copy":
        from seams.storage import partition_tables

        copy_rows, iter_rows = partition_tables._copy_rows, partition_tables.iter_rows
        copying: list[str] = []

        def tracking_copy(conn: Any, written: Any, columns: Any, copy_format: Any) -> Any:
            copying.append(written.name)
            try:
                return copy_rows(conn, written, columns, copy_format)
            finally:
                copying.pop()

        def killed_mid_copy(columns: list[list[Any]]) -> Iterator[tuple[Any, ...]]:
            for i, row in enumerate(iter_rows(columns)):
                if i == 1 and copying and copying[-1] == table:
                    kill()
                yield row

        partition_tables._copy_rows = tracking_copy
        partition_tables.iter_rows = killed_mid_copy
    else:
        raise SystemExit(f"kill_at.py: unknown place {place!r}")


if __name__ == "__main__":
    install(sys.argv[1])
    from seams.orchestration.cli.entry import main

    sys.exit(main(sys.argv[2:]))
