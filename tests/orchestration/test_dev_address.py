"""`seams dev` prints the UI's address once the webserver answers, not when it starts it."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading

import pytest

from seams.orchestration.cli import dev


class _SlowToStart(http.server.BaseHTTPRequestHandler):
    """Answers `/server_info` only from its third request on, as a webserver still loading."""

    asked = 0

    def do_GET(self) -> None:
        type(self).asked += 1
        self.send_response(200 if type(self).asked >= 3 else 503)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_the_address_is_printed_once_the_webserver_answers(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dev, "UP_POLL_S", 0.01)
    server = http.server.HTTPServer(("127.0.0.1", 0), _SlowToStart)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        url = f"http://0.0.0.0:{server.server_port}"
        dev._announce_when_up(url, child)
    finally:
        child.kill()
        child.wait()
        server.shutdown()
    assert _SlowToStart.asked == 3
    assert capsys.readouterr().out == f"Dagster UI: {url}  (Ctrl-C stops everything)\n"


def test_nothing_is_printed_when_the_ui_stops_before_answering(
    capsys: pytest.CaptureFixture[str],
) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dev._announce_when_up("http://127.0.0.1:9", child)
    assert capsys.readouterr().out == ""
