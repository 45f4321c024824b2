"""Jobs started at the same instant on threads: how the tests provoke the races (deadlocks, lost
or doubled rows) that locks and constraints must rule out."""

from __future__ import annotations

import threading
from collections.abc import Callable


def run_together(*jobs: Callable[[], object], timeout: float = 120) -> list[BaseException]:
    """Run each job on its own thread, all released by one barrier; wait for them (at most
    `timeout` s each) and return what they raised, for the caller to assert on."""
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    def run(job: Callable[[], object]) -> None:
        barrier.wait()
        try:
            job()
        except BaseException as exc:  # collected and asserted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return errors
