"""`python -m benchmarks` (`make bench`): Seams against LangChain, LlamaIndex and chonkie.

Runs the two comparisons of `benchmarks.peers`, each in its own process (speed + correctness on
three texts; boundary quality on the topic-shift set), merges their JSON into
`benchmarks/results/peers.json` and writes the Markdown table to `benchmarks/results/README.md`
(with sections for `fast_mode.json` and `retrieval.json` when those benchmarks have run, and the
hand-written closing notes of `benchmarks/results/notes.md`). Needs the `bench` extra; installs
nothing. 14 minutes on the shared 2-core development machine (load average 5-7).

    python -m benchmarks             # full run, results in benchmarks/results/
    python -m benchmarks --quick     # ~3 min smoke run: small texts, 2 rounds, 8 documents;
                                     # results go to a temporary folder, not benchmarks/results/
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import report
from benchmarks.header import write_result

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="a short smoke run (temp folder)")
    parser.add_argument("--out", type=Path, help="results folder (default benchmarks/results)")
    parser.add_argument("--threads", type=int, default=1, help="speed: torch/onnxruntime threads")
    parser.add_argument("--words", type=int, help="words per speed text (default 5000)")
    parser.add_argument("--rounds", type=int, help="interleaved speed rounds (default 3)")
    parser.add_argument("--docs", type=int, help="topic-shift documents per split (default 40)")
    parser.add_argument("--only", choices=("speed", "boundaries"), help="run one comparison")
    args = parser.parse_args(argv)

    quick = args.quick
    words = args.words or (1000 if quick else 5000)
    rounds = args.rounds or (2 if quick else 3)
    docs = args.docs or (8 if quick else 40)
    out = args.out or (Path(tempfile.mkdtemp(prefix="seams-bench-")) if quick else report.RESULTS)
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python -m benchmarks", *(sys.argv[1:] if argv is None else argv)])
    started = time.perf_counter()
    load = list(os.getloadavg()) if hasattr(os, "getloadavg") else None

    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TRANSFORMERS_VERBOSITY": "error",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONWARNINGS": "ignore",
    }
    # Speed runs with --threads (1: a stable measure on a shared machine); boundary quality is
    # not timed, so it uses every core.
    comparisons = {
        "speed": ["--threads", str(args.threads), "--words", str(words), "--rounds", str(rounds)],
        "boundaries": ["--threads", "0", "--docs", str(docs)],
    }
    results: dict = {}
    previous = out / "peers.json"
    if args.only and previous.is_file():  # keep the other comparison's last results
        results = json.loads(previous.read_text(encoding="utf-8"))
    for name, extra in comparisons.items():
        if args.only and name != args.only:
            continue
        target = out / f"peers_{name}.json"
        cmd = [sys.executable, "-m", "benchmarks.peers", name, "--json", str(target), *extra]
        print(f"\n== {name}: {' '.join(cmd[1:])}", flush=True)
        done = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
        if done.returncode != 0:
            print(f"benchmarks: the {name} comparison failed (exit {done.returncode})")
            return done.returncode
        results[name] = json.loads(target.read_text(encoding="utf-8"))
        target.unlink()

    first = results.get("speed") or results.get("boundaries")
    results.update(
        date=first["date"],
        machine=first["machine"],
        command=command,
        seconds=round(time.perf_counter() - started, 1)
        if not args.only
        else sum(results[k]["seconds"] for k in comparisons if k in results),
        load_average=load,
    )
    write_result(out / "peers.json", results, argv)
    notes_file = report.RESULTS / "notes.md"
    # The hand-written notes describe the last full run; a quick run goes without them.
    notes = notes_file.read_text(encoding="utf-8") if notes_file.is_file() and not quick else None
    page = report.render(results, report.RESULTS if quick else out, notes)
    (out / "README.md").write_text(page, encoding="utf-8")
    print("\n" + page)
    print(
        f"benchmarks: wrote {out / 'peers.json'} and {out / 'README.md'} "
        f"in {(time.perf_counter() - started) / 60:.1f} min"
    )
    if quick and args.out is None:
        print(f"(quick run: {out} is a temporary folder; remove it with rm -r {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
