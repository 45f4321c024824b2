"""A backfill's cost before and after index generations, measured in the same session.

Runs `seams backfill` (a chunking setting that re-cuts every chunk of the corpus) with two
revisions of Seams side by side: `--old` (default: the last commit before published index
generations, the parent of the first commit that added storage/publication.py) and `--new`
(default HEAD). Each revision is a `git worktree` under /tmp, imported through a package folder of
symlinks on PYTHONPATH (the venv's editable install maps `seams` to this checkout, so the child
must find the worktree's `seams` first; each child prints the file it imported, which is
checked), with its own embedded PostgreSQL data dir (SEAMS_DATA_DIR). Same synthetic corpus, same
sequence of settings (the overrides alternate, so every backfill re-cuts every chunk).

After one unmeasured `seams run` and one unmeasured warm-up backfill per revision, the measured
backfills are interleaved (old, new, new, old, old, new, ...) so the machine's load falls on
both alike; per backfill: wall time, the command's CPU time (user + system, every thread) and
its PostgreSQL server's CPU time over the same span, the load average. Reported: medians per
revision and the new/old ratios (goal: at most 1.10).

    .venv/bin/python benchmarks/experiments/backfill_cost.py \
        --json benchmarks/experiments/results/backfill_cost.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.experiments.process_cpu import postmaster_of, server_cpu_s, wait_measured  # noqa: E402
from benchmarks.header import with_header  # noqa: E402
from benchmarks.synthetic import document  # noqa: E402

RECUTS = ("{overlap_tokens: 24, chunk_size_max: 200}", "{overlap_tokens: 48, chunk_size_max: 230}")
"""The backfills' chunking overrides, alternating: each changes every chunk's text."""
_NICED = """
import os, sys
os.nice({nice})
import seams.resources.postgres as postgres
configure = postgres._configure_connection
def _configure(conn):
    configure(conn)
    try:  # the backend runs at its client's priority (same machine, same user)
        os.setpriority(os.PRIO_PROCESS, conn.info.backend_pid, os.getpriority(os.PRIO_PROCESS, 0))
    except OSError:
        pass
postgres._configure_connection = _configure
sys.argv = ["seams", *{args!r}]
from seams.orchestration.cli import main
raise SystemExit(main())
"""
"""`--nice`: the command lowers its priority and its PostgreSQL backends' (as
search_during_backfill's `nice_server` variant)."""
PACKAGES = (
    "extraction",
    "integrations",
    "storage",
    "models",
    "chunking",
    "resources",
    "assets",
    "orchestration",
)
"""The checkout's top-level folders that are `seams.<name>` when installed (pyproject's
package-dir)."""


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def default_old() -> str:
    """The parent of the first commit that added storage/publication.py."""
    first = _git("log", "--diff-filter=A", "--format=%H", "--", "storage/publication.py")
    return _git("rev-parse", first.splitlines()[-1] + "^")


class Revision:
    """One revision of Seams: its worktree, its import folder and its own data dir."""

    def __init__(self, name: str, commit: str, scratch: Path) -> None:
        self.name = name
        self.commit = _git("rev-parse", commit)
        self.tree = scratch / f"tree-{name}"
        self.imports = scratch / f"imports-{name}"
        self.work = scratch / f"work-{name}"
        self.settings = 0
        if not self.tree.exists():
            _git("worktree", "add", "--detach", str(self.tree), self.commit)
        package = self.imports / "seams"
        package.mkdir(parents=True, exist_ok=True)
        for entry in (self.tree / "seams").iterdir():
            (package / entry.name).symlink_to(entry)
        for name_ in PACKAGES:
            (package / name_).symlink_to(self.tree / name_, target_is_directory=True)
        self.work.mkdir(parents=True)
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("SEAMS_", "DAGSTER_")) and k != "PYTHONPATH"
        }
        self.env.update(
            PYTHONPATH=str(self.imports),
            SEAMS_DATA_DIR=str(self.work / "data"),
            TOKENIZERS_PARALLELISM="false",
        )

    def seams(
        self, *args: str, config: str | None = None, nice: int = 0
    ) -> subprocess.Popen[bytes]:
        env = dict(self.env)
        if config is not None:
            path = self.work / f"seams-{self.settings}.yaml"
            self.settings += 1
            path.write_text(f"chunking:\n  overrides: {config}\n", encoding="utf-8")
            env["SEAMS_CONFIG"] = str(path)
        log = (self.work / "log.txt").open("ab")
        return subprocess.Popen(
            [sys.executable, "-c", _NICED.format(nice=nice, args=list(args))]
            if nice
            else [sys.executable, "-m", "seams", *args],
            cwd=self.work,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )

    def check(self, child: subprocess.Popen[bytes], what: str) -> None:
        if child.wait() != 0:
            tail = (self.work / "log.txt").read_text(encoding="utf-8", errors="replace")[-3000:]
            raise SystemExit(f"{self.name}: {what} failed (exit {child.returncode}):\n{tail}")

    def python(self, code: str) -> str:
        return subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.work,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    def imported_from(self) -> str:
        return self.python(
            "import seams.storage.schema as s, seams.orchestration.cli as c; print(s.__file__)"
        )

    def url(self) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "seams", "db", "url"],
            cwd=self.work,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=None, help="commit before generations (default: found)")
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--documents", type=int, default=30)
    parser.add_argument("--words", type=int, default=1200, help="words per document")
    parser.add_argument("--rounds", type=int, default=3, help="measured backfills per revision")
    parser.add_argument(
        "--models", type=Path, default=None, help="a data dir's models folder to copy into each"
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=0,
        help="the new revision's measured backfills run niced, backends too (with --old HEAD: "
        "the cost of lowering a backfill's priority)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    import psycopg

    scratch = Path(tempfile.mkdtemp(prefix="seams-backfill-cost-", dir="/tmp"))
    revisions = [
        Revision("old", args.old or default_old(), scratch),
        Revision("new", args.new, scratch),
    ]
    texts = [document(seed, args.words) for seed in range(args.documents)]
    servers: dict[str, int] = {}
    imported: dict[str, str] = {}
    try:
        for rev in revisions:
            imported[rev.name] = rev.imported_from()
            if not imported[rev.name].startswith(str(rev.imports)):
                raise SystemExit(f"{rev.name} imports {imported[rev.name]}, not its worktree")
            if args.models is not None:  # an export either revision re-checks (sha256) on load
                shutil.copytree(args.models, rev.work / "data" / "models", symlinks=True)
            inbox = rev.work / "inbox"
            inbox.mkdir()
            for number, text in enumerate(texts):
                (inbox / f"doc{number:03d}.md").write_text(text, encoding="utf-8")
            print(f"{rev.name} {rev.commit[:10]}: first run", flush=True)
            rev.check(rev.seams("run", str(inbox), config="{}"), "seams run")
            with psycopg.connect(rev.url()) as conn:
                servers[rev.name] = postmaster_of(conn.info.backend_pid)
            rev.check(rev.seams("backfill", "--json", config=RECUTS[0]), "warm-up backfill")

        samples: dict[str, list[dict[str, Any]]] = {rev.name: [] for rev in revisions}
        for round_ in range(args.rounds):
            order = revisions if round_ % 2 == 0 else revisions[::-1]
            for rev in order:
                config = RECUTS[(round_ + 1) % 2]
                load = os.getloadavg()
                server_before = server_cpu_s(servers[rev.name])
                nice = args.nice if rev.name == "new" else 0
                child = rev.seams("backfill", "--json", config=config, nice=nice)
                done = wait_measured(child)
                server = server_cpu_s(servers[rev.name]) - server_before
                rev.check(child, "backfill")
                with psycopg.connect(rev.url()) as conn:
                    chunks = conn.execute("SELECT count(*) FROM seams.current_chunks").fetchone()
                sample = {
                    "round": round_,
                    "overrides": config,
                    "wall_s": round(done.wall_s, 2),
                    "command_cpu_s": round(done.user_s + done.system_s, 2),
                    "server_cpu_s": round(server, 2),
                    "cpu_s": round(done.user_s + done.system_s + server, 2),
                    "threads_max": done.threads_max,
                    "current_chunks": chunks[0] if chunks else None,
                    "loadavg_1m_before": round(load[0], 2),
                }
                samples[rev.name].append(sample)
                print(rev.name, json.dumps(sample), flush=True)
    finally:
        for rev in revisions:
            subprocess.run(
                [sys.executable, "-m", "seams", "db", "stop"],
                cwd=rev.work,
                env=rev.env,
                capture_output=True,
                check=False,
            )

    medians = {
        name: {
            part: round(statistics.median(s[part] for s in runs), 2)
            for part in ("wall_s", "command_cpu_s", "server_cpu_s", "cpu_s")
        }
        for name, runs in samples.items()
    }
    ratios = {
        part: round(medians["new"][part] / medians["old"][part], 3)
        for part in ("wall_s", "command_cpu_s", "server_cpu_s", "cpu_s")
    }
    # Per round, new/old of the two backfills run back to back: load that drifts over the study
    # cancels within a pair, so the median of these is the steadier figure for wall time.
    paired = {
        part: round(
            statistics.median(
                n[part] / o[part] for o, n in zip(samples["old"], samples["new"], strict=True)
            ),
            3,
        )
        for part in ("wall_s", "command_cpu_s", "server_cpu_s", "cpu_s")
    }
    report = {
        "old": {"commit": revisions[0].commit, "imports": imported["old"]},
        "new": {"commit": revisions[1].commit, "imports": imported["new"]},
        "documents": args.documents,
        "words_per_document": args.words,
        "rounds": args.rounds,
        "new_nice": args.nice,
        "order": "interleaved: old,new then new,old, alternating per round",
        "samples": samples,
        "median": medians,
        "ratio_new_over_old": ratios,
        "paired_ratio_median": paired,
        "goal": "new/old wall and CPU <= 1.10",
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "scratch": str(scratch),
    }
    print(json.dumps({"median": medians, "ratio": ratios, "paired": paired}, indent=2))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(with_header(report), indent=2) + "\n", encoding="utf-8")
    for rev in revisions:
        _git("worktree", "remove", "--force", str(rev.tree))
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
