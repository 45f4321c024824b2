"""Screenshot of the Dagster UI's asset graph, taken with headless Chromium.

Usage (after `make demo`):  .venv/bin/python scripts/screenshot_ui.py [out.png] [--path URLPATH]

Starts `seams dev` on a free loopback port, waits for the UI, renders the page with Debian's
`chromium` (install: apt-get install chromium), saves the PNG and stops everything again.
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

DEFAULT_PATH = "/locations/orchestration/asset-groups/chunking"


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default="docs/ui-asset-graph.png")
    parser.add_argument("--path", default=DEFAULT_PATH, help="UI page to render")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        raise SystemExit("chromium is not installed: apt-get install chromium")
    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    port = free_port()
    dev = subprocess.Popen([sys.executable, "-m", "orchestration.cli", "dev", "--port", str(port)])
    try:
        wait_for(f"http://127.0.0.1:{port}/server_info")
        time.sleep(3)  # let the code location finish loading
        with tempfile.TemporaryDirectory() as profile:
            subprocess.run(
                [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
                 "--hide-scrollbars", "--window-size=1600,1000",
                 "--virtual-time-budget=15000", f"--screenshot={out}",
                 f"http://127.0.0.1:{port}{args.path}"],
                check=True, timeout=120, capture_output=True,
            )  # fmt: skip
    finally:
        dev.send_signal(signal.SIGINT)
        dev.wait(timeout=60)
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
