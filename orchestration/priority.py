"""Batch work yields the CPU to readers.

A RAG application may search while `seams run`, `seams backfill` or a `seams worker` rewrites
the index on the same machine. On a machine with few cores the two compete for CPU, and a
reader's latency is what people notice: a search waits for its query embedding and its
PostgreSQL backend to be scheduled. So the batch commands lower their own scheduling priority
(`execution.niceness`, like `nice -n 10`) and, on the embedded server, that of the PostgreSQL
backends they open (`seams.resources.postgres`). A backfill then costs the same CPU and takes
the same time when nothing else runs; while readers search, it takes the CPU they leave.

Runs the daemon or the webserver launch (a UI materialization, a backfill, a sensor's run) are
batch work too: their run worker lowers itself when its executor is created (`lowered`), before
any step or resource starts; the webserver, daemon and code server stay at normal priority.
"""

from __future__ import annotations

import logging
import os

import dagster as dg

from seams.resources.postgres_pool import renew_connections

log = logging.getLogger(__name__)


def lower_priority(niceness: int) -> None:
    """Lower every thread of this process to `niceness` (0 leaves it as it is; never raises
    a priority). Linux keeps a niceness per thread and new threads inherit their creator's,
    so the threads that exist already are lowered one by one."""
    if niceness <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        threads = [int(task) for task in os.listdir("/proc/self/task")]
    except OSError:  # no /proc: the calling thread, which every later thread inherits from
        threads = [0]
    for thread in threads:
        try:
            if os.getpriority(os.PRIO_PROCESS, thread) < niceness:
                os.setpriority(os.PRIO_PROCESS, thread, niceness)
        except OSError as exc:  # a thread that ended meanwhile, or a system that refuses
            log.debug("could not lower thread %s to niceness %s: %s", thread, niceness, exc)


def lowered(executor: dg.ExecutorDefinition, niceness: int) -> dg.ExecutorDefinition:
    """`executor` (same name, config and requirements) whose creation first lowers the process
    to `niceness`: what a launched run's worker does before its steps, and so its backends
    (`seams.resources.postgres`) and the step processes it starts inherit. `execute_in_process`
    (`seams run`, `seams backfill`, which lower themselves) replaces a job's executor, so this
    runs in launched runs only."""
    create = executor.executor_creation_fn
    if niceness <= 0 or create is None:
        return executor

    def creation(init_context: dg.InitExecutorContext) -> dg.Executor:
        lower_priority(niceness)
        renew_connections()  # any opened while the definitions loaded
        return create(init_context)

    return dg.ExecutorDefinition(
        name=executor.name,
        config_schema=executor.config_schema,
        requirements=executor.get_requirements,
        executor_creation_fn=creation,
        description=executor.description,
    )
