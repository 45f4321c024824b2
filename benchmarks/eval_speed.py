"""How long `seams eval` takes on a questions file of N questions: the median of several runs.

`seams eval` asks every question as `seams search --budget B` would, at every budget, for
hybrid search at each `lexical_weight` of its grid, for dense and for lexical search. The set is
one of `benchmarks/eval_questions.py`'s (a folder with `docs/` and `questions.jsonl`) indexed
beforehand in its own data dir; this script writes the first N questions (repeating the file
when it holds fewer) to a scratch file beside them, runs the installed command on it with
`--json`, and reports the wall time of each run (start-up, model load and reading the sources
included), its median, the time per question and the load average around the runs. Every run
must print the same report: a faster path that changed a figure would show here.

    .venv/bin/python -m benchmarks.eval_questions /tmp/sets      # then, per set:
    (cd /tmp/sets/squad && SEAMS_DATA_DIR=/tmp/data/squad seams run docs)
    SEAMS_DATA_DIR=/tmp/data/squad .venv/bin/python benchmarks/eval_speed.py /tmp/sets/squad \\
        --questions 500 --runs 3 --json benchmarks/results/eval_speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.header import write_result  # noqa: E402


def questions_file(set_dir: Path, count: int) -> Path:
    """`set_dir/eval-speed-N.jsonl`: the set's first `count` questions, the file repeated when
    it holds fewer."""
    lines = [
        line
        for line in (set_dir / "questions.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    if not lines:
        raise SystemExit(f"{set_dir / 'questions.jsonl'}: no questions")
    chosen = [lines[i % len(lines)] for i in range(count)]
    out = set_dir / f"eval-speed-{count}.jsonl"
    out.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    return out


def timed_run(command: list[str], cwd: Path) -> tuple[float, str]:
    """Wall seconds of one run of `command` in `cwd`, and what it printed (its JSON)."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return seconds, done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("set_dir", type=Path, help="a set folder, indexed in SEAMS_DATA_DIR")
    parser.add_argument("--questions", type=int, default=500, help="questions per run (500)")
    parser.add_argument("--runs", type=int, default=3, help="runs; the median is reported (3)")
    parser.add_argument("--seams", default=shutil.which("seams") or str(ROOT / ".venv/bin/seams"))
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    if "SEAMS_DATA_DIR" not in os.environ:
        raise SystemExit("set SEAMS_DATA_DIR to the data dir the set was indexed in")
    path = questions_file(args.set_dir, args.questions)
    command = [args.seams, "eval", path.name, "--json"]
    seconds: list[float] = []
    loads: list[float] = []
    reports: set[str] = set()
    for run in range(args.runs):
        loads.append(os.getloadavg()[0])
        took, printed = timed_run(command, args.set_dir)
        seconds.append(took)
        reports.add(printed)
        print(f"run {run + 1}: {took:.1f} s ({args.questions} questions)", flush=True)
    loads.append(os.getloadavg()[0])
    median = statistics.median(seconds)
    result = {
        "set": args.set_dir.name,
        "questions": args.questions,
        "runs": [round(s, 2) for s in seconds],
        "median_seconds": round(median, 2),
        "ms_per_question": round(1000 * median / args.questions, 1),
        "load_average_1min": [round(x, 2) for x in loads],
        "same_report_every_run": len(reports) == 1,
        "report": json.loads(next(iter(reports))),
    }
    print(
        f"{args.set_dir.name}: {args.questions} questions, median {median:.1f} s over "
        f"{args.runs} runs ({result['ms_per_question']} ms a question); load average "
        f"{min(loads):.1f}-{max(loads):.1f}; same report every run: "
        f"{result['same_report_every_run']}"
    )
    write_result(args.json, result, argv)
    return 0 if result["same_report_every_run"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
