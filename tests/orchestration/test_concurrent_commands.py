"""Two `seams run`/`seams backfill` on the same data: the second waits for the first, saying
whom it waits for (or refuses in one line with `--no-wait`), and never does the first's work
again; a holder that dies, even by `kill -9`, frees the data at once."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from seams.models.model_store import ModelManifest
from seams.orchestration import command_lock
from seams.orchestration.command_lock import CommandBusy, holder_name
from tests.support.cli import seams_env
from tests.support.databases import held_locks, rows
from tests.support.samples import SHORT_DOC, copy_samples

HOLD = """
import sys, time
from seams.orchestration.command_lock import command_lock
with command_lock(sys.argv[1], sys.argv[2], print):
    print("held", flush=True)
    time.sleep(120)
"""


def _holder_process(url: str, command: str) -> subprocess.Popen[str]:
    """A process holding the command lock as `command` (until killed)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, url, command], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_command_names_the_holder_waits_and_gets_the_lock_when_it_is_killed(
    database_url: str,
) -> None:
    command = "seams run /data/" + "deep/" * 20 + "in"  # past application_name's 63 bytes
    holder = _holder_process(database_url, command)
    host = socket.gethostname()
    try:
        # --no-wait: one line naming the holder, its pid and host, and since when.
        with (
            pytest.raises(CommandBusy) as busy,
            command_lock.command_lock(database_url, "seams backfill", print, wait=False),
        ):
            pytest.fail("the lock was free while another process held it")
        pattern = rf"`{command}` \(pid {holder.pid} on {re.escape(host)}, since "
        assert re.match(pattern + r"\d\d:\d\d:\d\d\) is working on this data", str(busy.value))
        assert "\n" not in str(busy.value)

        # Waiting: said once (not once per poll), then the lock as soon as the holder dies.
        said: list[str] = []
        got = threading.Event()

        def wait() -> None:
            with command_lock.command_lock(
                database_url, "seams backfill", said.append, poll_s=0.05
            ):
                got.set()

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(1.0)  # some twenty polls
        assert not got.is_set()
        holder.send_signal(signal.SIGKILL)  # the server frees a dead session's locks
        waiter.join(timeout=20)
        assert got.is_set()
        assert len(said) == 1 and re.match("waiting for " + pattern, said[0]), said
    finally:
        holder.kill()
        holder.wait()
    # Nothing is left behind: the waiter's session ended with its block.
    assert held_locks(database_url) == []


def test_the_holders_application_name_fits_postgres_and_names_no_folder() -> None:
    """Every role, a tenant too, reads application names: the command's arguments (a folder, a
    collection) stay in the lock's row, which only the owner reads."""
    name = holder_name("seams run /srv/" + "deep/" * 30 + "inbox-2024", pid=4242, host="host-a")
    assert name == "seams run (pid 4242 on host-a)"
    assert holder_name("seams backfill --collection handbook", pid=1, host="h") == (
        "seams backfill (pid 1 on h)"
    )
    assert holder_name("seams r\u00e4n\x1b[2J /x", pid=1, host="h") == "seams r?n?[2J (pid 1 on h)"
    long = holder_name("seams run", pid=4242, host="h" * 80)
    assert len(long.encode()) == command_lock.APPLICATION_NAME_BYTES and long.endswith(")")


@pytest.mark.slow
def test_two_runs_together_one_waits_naming_the_other_and_the_work_is_done_once(
    database_url: str, exported_model: ModelManifest, tmp_path: Path
) -> None:
    inbox = copy_samples(tmp_path / "inbox", ("field_notes.md",))
    (inbox / "tides.md").write_text(SHORT_DOC, encoding="utf-8")
    env = seams_env(
        SEAMS_DATABASE_URL=database_url,
        SEAMS_DATA_DIR=str(exported_model.directory.parents[1]),  # the exported model's
    )

    def start(*args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "seams", *args], env=env, text=True, cwd="/",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip

    first = start("run", str(inbox))
    second = None
    try:
        deadline = time.monotonic() + 120
        while not _lock_holders(database_url) and time.monotonic() < deadline:
            assert first.poll() is None, first.communicate()
            time.sleep(0.05)
        host = socket.gethostname()
        named = command_lock.full_name(f"seams run {inbox}", pid=first.pid, host=host)
        assert _lock_holders(database_url) == [named]
        first.send_signal(signal.SIGSTOP)  # holds the lock until continued: no race below
        second = start("run", str(inbox))
        assert second.stdout is not None
        said_first = second.stdout.readline()
        refused = subprocess.run(
            [sys.executable, "-m", "seams", "backfill", "--no-wait"],
            env=env, text=True, cwd="/", capture_output=True, timeout=120,
        )  # fmt: skip
        first.send_signal(signal.SIGCONT)
        first_out, first_err = first.communicate(timeout=300)
        second_rest, second_err = second.communicate(timeout=300)
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()
    second_out = said_first + second_rest
    assert first.returncode == 0, first_out + first_err
    assert second.returncode == 0, second_out + second_err

    # The second waited, naming the first, then found nothing left to do; it printed none of
    # the first's progress.
    assert said_first.startswith(f"seams: waiting for `seams run {inbox}` (pid {first.pid} on ")
    assert re.search(r", since \d\d:\d\d:\d\d\)$", said_first.strip()), said_first
    assert second_out.count("waiting for") == 1, second_out
    assert "nothing new under" in second_out, second_out
    assert "batch 1/" not in second_out and "backfill" not in second_out, second_out
    assert "batch 1/1" in first_out and "waiting for" not in first_out, first_out

    # --no-wait: exit 3, one line naming the running command.
    assert refused.returncode == 3, refused.stdout + refused.stderr
    assert refused.stdout == "" and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith(f"seams: error: `seams run {inbox}` (pid {first.pid} on ")

    # The work was done once: one batch, one run of the pipeline, one row per chunk.
    assert rows(database_url, "SELECT count(*) FROM seams.batches") == [(1,)]
    runs = rows(database_url, "SELECT count(*) FROM runs WHERE pipeline_name = 'chunk_batches'")
    assert runs == [(1,)]
    total, distinct = rows(
        database_url,
        "SELECT count(*), count(DISTINCT (document_id, chunk_index)) FROM seams.chunks",
    )[0]
    assert total > 0 and total == distinct


def _lock_holders(url: str) -> list[str]:
    """What each live session holding the command lock says it is."""
    with psycopg.connect(url) as conn:
        found = command_lock.holder(conn)
    return [] if found is None else [found.name]
