"""What the open UI costs a small `seams run` / `seams backfill` (issue 28: at most 2x headless).

Each command is timed as a user runs it (a fresh `python -m seams ...` process, wall clock), in a
throwaway data dir with its own embedded PostgreSQL, headless and with `seams dev` (webserver +
daemon) running on the same instance:

- `seams backfill` after a settings change (`cut_cost` toggled) over the same two small batches
  of the sample corpus: semantic_boundaries, chunks and chunk_index recomputed for both;
- `seams run` of a new one-file folder (a new batch end to end).

Order: headless backfills, then (UI up) backfills and runs, then headless runs, so every backfill
covers the same two batches. Prints medians and the ratio with/without the UI; `--json PATH`
writes them. Usage: `python -m benchmarks.experiments.ui_overhead [--repeats 3] [--json out.json]`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.header import repeated_study
from tests.support.processes import stop_group

SAMPLES = (("field_notes.md",), ("history_of_maps.txt", "kitchen_science.md"))
ONE_FILE = "field_notes.md"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bench:
    """A data dir, its settings file and the environment every `seams` command gets."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.settings = root / "seams.yaml"
        self.env = {**os.environ, "SEAMS_DATA_DIR": str(root / "data"),
                    "SEAMS_CONFIG": str(self.settings)}  # fmt: skip
        for name in ("SEAMS_DATABASE_URL", "DAGSTER_HOME", "SEAMS_DAGSTER_DATABASE_URL"):
            self.env.pop(name, None)
        self.cut_cost = 2.0
        self.runs = 0

    def seams(self, *args: str) -> float:
        """Seconds one `seams` command takes (it must succeed)."""
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "seams", *args],
            env=self.env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"seams {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
        return seconds

    def backfill(self) -> float:
        self.cut_cost = 3.0 if self.cut_cost != 3.0 else 4.0
        self.settings.write_text(
            f"chunking:\n  overrides: {{cut_cost: {self.cut_cost}}}\n", encoding="utf-8"
        )
        return self.seams("backfill")

    def run_new_folder(self) -> float:
        from seams.paths import sample_corpus

        self.runs += 1
        folder = self.root / f"new_{self.runs}"
        folder.mkdir()
        text = (sample_corpus() / ONE_FILE).read_text(encoding="utf-8")
        (folder / ONE_FILE).write_text(f"{text}\n\nRun {self.runs}.\n", encoding="utf-8")
        return self.seams("run", str(folder))


def _start_ui(bench: Bench, logs: Path) -> subprocess.Popen:
    """`seams dev` on a free port; returns once its daemon beats (the UI is then up too)."""
    log = (logs / "seams-dev.log").open("w")
    dev = subprocess.Popen(
        [sys.executable, "-m", "seams", "dev", "--port", str(_free_port())],
        env=bench.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    probe = (
        "from seams.orchestration.instance import prepare_instance\n"
        "from seams.orchestration.launch import daemon_is_running\n"
        "with prepare_instance().open() as i: raise SystemExit(0 if daemon_is_running(i) else 1)"
    )
    deadline = time.monotonic() + 300
    while subprocess.run([sys.executable, "-c", probe], env=bench.env).returncode != 0:
        if dev.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(
                "seams dev did not come up:\n" + (logs / "seams-dev.log").read_text()
            )
        time.sleep(2)
    time.sleep(10)  # past the start-up burst: the first sensor ticks, the code server warm
    return dev


def _stop_ui(dev: subprocess.Popen) -> None:
    dev.send_signal(signal.SIGINT)  # Ctrl-C, as a user stops it
    try:
        dev.wait(timeout=120)
    except subprocess.TimeoutExpired:
        stop_group(dev)


def measure(repeats: int) -> dict[str, dict[str, list[float]]]:
    from seams.paths import sample_corpus
    from seams.resources.embedded_server import server_tempdir

    root = server_tempdir("seams-ui-bench-")
    try:
        bench = Bench(root)
        bench.settings.write_text("chunking:\n  preset: default\n", encoding="utf-8")
        for number, names in enumerate(SAMPLES):  # two batches of different sizes
            folder = root / f"batch_{number}"
            folder.mkdir()
            for name in names:
                shutil.copy(sample_corpus() / name, folder / name)
            bench.seams("run", str(folder))  # the first one also exports the model
        times: dict[str, dict[str, list[float]]] = {
            "seams backfill (2 batches)": {"headless": [], "with UI": []},
            "seams run (1 new file)": {"headless": [], "with UI": []},
        }
        backfill, run = times
        times[backfill]["headless"] = [bench.backfill() for _ in range(repeats)]
        dev = _start_ui(bench, root)
        try:
            times[backfill]["with UI"] = [bench.backfill() for _ in range(repeats)]
            times[run]["with UI"] = [bench.run_new_folder() for _ in range(repeats)]
        finally:
            _stop_ui(dev)
        times[run]["headless"] = [bench.run_new_folder() for _ in range(repeats)]
        subprocess.run([sys.executable, "-m", "seams", "db", "stop"], env=bench.env,
                       capture_output=True, timeout=120)  # fmt: skip
        return times
    finally:
        shutil.rmtree(root, ignore_errors=True)


def table(times: dict[str, dict[str, list[float]]]) -> str:
    lines = [
        "| command | headless median (s) | with UI median (s) | ratio | runs (s, with UI) |",
        "|---|---:|---:|---:|---|",
    ]
    for command, by_mode in times.items():
        headless = statistics.median(by_mode["headless"])
        with_ui = statistics.median(by_mode["with UI"])
        each = ", ".join(f"{t:.1f}" for t in by_mode["with UI"])
        lines.append(
            f"| {command} | {headless:.1f} | {with_ui:.1f} | {with_ui / headless:.2f}x | {each} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    description = __doc__.splitlines()[0]
    return repeated_study(
        argv, description, measure, table, repeats="runs per command and mode (3)"
    )


if __name__ == "__main__":
    sys.exit(main())
