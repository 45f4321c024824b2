"""Screenshots of the Dagster UI, taken with headless Chromium.

Usage (after `make demo`):  .venv/bin/python scripts/screenshot_ui.py [out.png] [--path URLPATH]
                            [--shot OUT.png=URLPATH ...] [--size 1600x1000] [--wait SECONDS]
                            [--crop LEFT,TOP,RIGHT,BOTTOM]

Starts `seams dev` on a free loopback port (with the settings file and data dir of the
environment: `SEAMS_CONFIG`, `SEAMS_DATA_DIR`), waits for the UI (and `--wait` seconds more, for
pictures of what the daemon's sensors report, such as `in_sync` after a settings change),
renders each page with Debian's `chromium` (install: apt-get install chromium), saves the PNGs
and stops everything again. The README's pictures:

    .venv/bin/python scripts/screenshot_ui.py docs/ui-asset-graph.png --size 1700x700 \\
        --path "/assets/chunk_index?view=lineage&lineageScope=upstream&lineageDepth=7"
    .venv/bin/python scripts/screenshot_ui.py docs/ui-partition-documents.png --size 1600x1300 \\
        --path "/assets/extracted_text?view=partitions&partition=KEY"
    .venv/bin/python scripts/screenshot_ui.py docs/ui-partition-chunks.png --size 1600x1500 \\
        --path "/assets/chunks?view=partitions&partition=KEY"
    .venv/bin/python scripts/screenshot_ui.py docs/ui-backfills.png --size 1600x620 \\
        --path /overview/backfills --shot "docs/ui-backfill-runs.png=/runs/b/ID?tab=runs"

KEY is a batch key (from `seams run`'s summary). The README's batch is the sample corpus plus an
empty and a corrupt file, so the documents table shows two failures. ID is a backfill id: the
backfill pictures come from `seams run` of two folders, then `seams backfill` after
`chunking: {overrides: {cut_cost: 1.0}}`.

The collections pictures (docs/collections.md) come from the page's two-collection project
after `seams run docs`, the second after changing `chunk_size_max` of `notes`; the window is
wide enough for the graph to draw whole asset cards, cropped to the graph, and the daemon's
`settings_sync` sensor is given a minute to report `in_sync`:

    G="/asset-groups?expanded=global@global:handbook,global@global:notes,global@global:model"
    .venv/bin/python scripts/screenshot_ui.py docs/ui-collections.png --size 2600x1500 \
        --wait 60 --crop 560,100,2530,1290 --path "$G"
    .venv/bin/python scripts/screenshot_ui.py docs/ui-collection-unsynced.png --size 2600x1500 \
        --wait 60 --crop 560,100,2530,1290 --path "$G"
"""

from __future__ import annotations

import argparse
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

DEFAULT_PATH = "/locations/seams/asset-groups/chunking"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the UI at {url} did not answer within {timeout_s:.0f} s")


def crop(picture: Path, box: tuple[int, ...]) -> None:
    """Keep `box` (left, top, right, bottom) of `picture`: the graph, without the navigation."""
    from PIL import Image  # only for --crop: Pillow comes with the dev extra (fpdf2)

    with Image.open(picture) as image:
        kept = image.crop(box)
    kept.save(picture, optimize=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/ui-asset-graph.png")
    parser.add_argument("--path", default=DEFAULT_PATH, help="UI page to render")
    parser.add_argument(
        "--shot", action="append", default=[], metavar="OUT=URLPATH", help="another page"
    )
    parser.add_argument("--size", default="1600x1000", help="window size, WIDTHxHEIGHT")
    parser.add_argument(
        "--wait",
        type=float,
        default=3.0,
        help="seconds between the UI's first answer and the first picture (default 3: the code "
        "location loads; a minute lets the daemon's sensors report)",
    )
    parser.add_argument(
        "--crop",
        metavar="LEFT,TOP,RIGHT,BOTTOM",
        help="keep only this box of every picture, in pixels (needs Pillow)",
    )
    args = parser.parse_args()
    shots = [(args.out, args.path)] + [tuple(s.split("=", 1)) for s in args.shot]
    width, height = (int(v) for v in args.size.split("x"))
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    port = free_port()
    dev = subprocess.Popen([sys.executable, "-m", "seams", "dev", "--port", str(port)])
    try:
        wait_for(f"http://127.0.0.1:{port}/server_info")
        time.sleep(args.wait)  # the code location loads (and the sensors tick)
        for name, path in shots:
            out = Path(name).resolve()
            out.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory() as profile:
                subprocess.run(
                    [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                     "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync",
                     f"--user-data-dir={profile}", "--hide-scrollbars",
                     f"--window-size={width},{height}", "--virtual-time-budget=15000",
                     f"--screenshot={out}", f"http://127.0.0.1:{port}{path}"],
                    check=True, timeout=120, capture_output=True,
                )  # fmt: skip
            if args.crop:
                crop(out, tuple(int(v) for v in args.crop.split(",")))
            print(f"saved {out}")
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=60)
    return 0


if __name__ == "__main__":
    sys.exit(main())
