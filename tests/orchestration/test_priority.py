"""Batch commands yield the CPU to readers: `lower_priority` lowers every thread of the process,
never raises one, and a pool to the embedded server lowers each backend it opens to the
process's niceness. Each case runs in a child Python: a niceness cannot be taken back."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from seams.settings import SeamsSettings


def _child(script: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


THREADS = """
    import json, os, threading
    from seams.orchestration.priority import lower_priority

    def niceness():
        tasks = os.listdir("/proc/self/task")
        return sorted({os.getpriority(os.PRIO_PROCESS, int(t)) for t in tasks})

    stop = threading.Event()
    early = threading.Thread(target=stop.wait)  # exists before the call: lowered one by one
    early.start()
    seen = {"before": niceness()}
    lower_priority(0)
    seen["zero"] = niceness()
    lower_priority(7)
    seen["lowered"] = niceness()
    later = []
    late = threading.Thread(target=lambda: later.append(os.getpriority(os.PRIO_PROCESS, 0)))
    late.start(); late.join()
    seen["later_thread"] = later
    lower_priority(3)  # never raises a priority back
    seen["after_3"] = niceness()
    stop.set(); early.join()
    print(json.dumps(seen))
"""


def test_every_thread_is_lowered_and_none_raised_again() -> None:
    seen = _child(THREADS)
    assert seen["before"] == seen["zero"] == [0]
    assert seen["lowered"] == [7] and seen["later_thread"] == [7] and seen["after_3"] == [7]


BACKEND = """
    import json, os, sys
    from seams.orchestration.priority import lower_priority
    from seams.resources.postgres import _open_pool

    lower_priority(6)
    seen = {}
    for local in (True, False):
        pool = _open_pool(sys.argv[1], 1, local_server=local)
        with pool.connection() as conn:
            seen[str(local)] = os.getpriority(os.PRIO_PROCESS, conn.info.backend_pid)
        pool.close()
    print(json.dumps(seen))
"""


@pytest.mark.services
def test_a_pool_to_the_embedded_server_lowers_its_backends(database_url: str) -> None:
    """The test server is a local embedded PostgreSQL: the backend a lowered process opens on
    it runs at the same niceness; a pool that does not know its server is local leaves it."""
    seen = _child(BACKEND, database_url)
    assert seen == {"True": 6, "False": 0}


def test_the_default_niceness_and_its_bounds() -> None:
    assert SeamsSettings().execution.niceness == 10
    assert SeamsSettings.model_validate({"execution": {"niceness": 0}}).execution.niceness == 0
    for bad in (-1, 20):
        with pytest.raises(ValueError, match="niceness"):
            SeamsSettings.model_validate({"execution": {"niceness": bad}})
