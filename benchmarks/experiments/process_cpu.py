"""CPU time of a child command and of the PostgreSQL server it writes to (Linux `/proc`).

A backfill spends CPU in two places: its own process (Python, onnxruntime's threads) and the
PostgreSQL backends that take its writes. `os.wait4` gives the first (every thread, and any
process it started, once reaped); the second is the postmaster's process tree: its own time,
the time of backends it already reaped (cutime/cstime) and of the backends still alive.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (which may hold spaces)."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def process_cpu_s(pid: int, *, reaped: bool = False) -> float:
    """User + system seconds of `pid` (all its threads); `reaped` adds its reaped children."""
    fields = _stat_fields(pid)
    # After ")": state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def children(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(_stat_fields(int(entry))[1]) == pid:
                found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return found


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds the PostgreSQL server of `postmaster` has spent so far: the postmaster, its
    reaped backends and its live ones (a backend that exits between the two reads is missed)."""
    total = process_cpu_s(postmaster, reaped=True)
    for child in children(postmaster):
        try:
            total += process_cpu_s(child)
        except (OSError, ValueError, IndexError):
            continue
    return total


def postmaster_of(backend_pid: int) -> int:
    """The postmaster of a backend (its parent process)."""
    return int(_stat_fields(backend_pid)[1])


@dataclass
class Finished:
    """A child command's wall time, its own CPU time (user, system) and its exit status."""

    returncode: int
    wall_s: float
    user_s: float
    system_s: float
    threads_max: int
    nice: int | None


def wait_measured(child: subprocess.Popen[bytes], poll=None, *, every: float = 0.05) -> Finished:
    """Wait for `child` (reaped with `os.wait4` for its resource usage), calling `poll()` between
    looks (a reader's query, or nothing); also records the child's most threads seen and its
    nice value."""
    started = time.perf_counter()
    threads_max = 0
    nice = None
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            child.returncode = os.waitstatus_to_exitcode(status)
            return Finished(
                child.returncode,
                time.perf_counter() - started,
                usage.ru_utime,
                usage.ru_stime,
                threads_max,
                nice,
            )
        try:
            threads_max = max(threads_max, len(os.listdir(f"/proc/{child.pid}/task")))
            nice = int(_stat_fields(child.pid)[16])
        except (OSError, ValueError, IndexError):
            pass
        if poll is not None:
            poll()
        else:
            time.sleep(every)
