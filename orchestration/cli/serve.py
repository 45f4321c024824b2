"""`seams serve [--host 127.0.0.1] [--port 8000]`: search over HTTP until stopped.

One process, the model loaded once, a connection pool; uvicorn serves the application of
`seams.serving.app` on a socket bound here (so a port in use is one line, not a traceback).
SIGTERM or Ctrl-C stop accepting connections and let the requests in flight finish.

Without API keys (`SEAMS_API_KEYS` unset) every request reads every collection, so the server
binds a loopback address only and says so; with keys it may bind any address, and every request
needs a key.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import socket
import sys

from seams.environment import API_KEYS_ENV, SeamsEnvironment
from seams.errors import InputError, counted
from seams.orchestration.shell_commands import seams_command
from seams.resources.readers import Readers

log = logging.getLogger("seams.serve")

GRACEFUL_SHUTDOWN_S = 30
"""How long SIGTERM waits for requests in flight before closing their connections."""
THREADS = 16
"""Requests worked on at once (the embedder and psycopg are synchronous), and pool size."""


def run(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or Ctrl-C; exit 0 after a graceful stop."""
    import anyio.to_thread
    import uvicorn

    from seams.serving.app import ServerState, create_app
    from seams.serving.keys import ApiKeys

    environment: SeamsEnvironment = args.environment
    keys = ApiKeys.read(environment.api_keys_file) if environment.api_keys_file else None
    if keys is None and not _loopback(args.host):
        raise InputError(
            f"--host {args.host}: without API keys every request reads every collection, so "
            f"`seams serve` answers on 127.0.0.1 only; set {API_KEYS_ENV} to a file of "
            "`TENANT KEY` lines to serve other machines"
        )
    sock = _bind(args.host, args.port)
    readers = Readers.for_environment(args.settings, environment, max_connections=THREADS)
    state = ServerState(
        args.settings, readers, keys, run_hint=seams_command(), max_connections=THREADS
    )
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    where = f"http://{_url_host(args.host)}:{sock.getsockname()[1]}"
    if keys is None:
        print(
            f"seams serve: no API keys ({API_KEYS_ENV} unset): listening on {where} only "
            "(loopback); every request reads every collection",
            flush=True,
        )
    else:
        print(
            f"seams serve: {counted(len(keys.entries), 'API key')} for "
            f"{'tenant' if len(keys.tenants) == 1 else 'tenants'} "
            f"{', '.join(keys.tenants)}: every request needs `Authorization: Bearer KEY`; "
            f"listening on {where}",
            flush=True,
        )
    config = uvicorn.Config(
        create_app(state),
        log_level="info",
        access_log=False,  # a request line holds the query: user data stays out of the log
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        lifespan="on",
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = THREADS
        await server.serve(sockets=[sock])

    anyio.run(serve)  # after SIGTERM, uvicorn raises it again once the requests are answered
    if not server.started:  # the lifespan failed (no model, no database): its line was logged
        return 2
    print("seams serve: stopped", file=sys.stderr, flush=True)
    return 0


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host:port`, or a one-line `InputError` saying why not."""
    if not 0 <= port <= 65535:
        raise InputError(f"--port {port}: a port is 0-65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        raise InputError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}): choose another --port "
            "or --host"
        ) from None
    sock.set_inheritable(True)
    return sock
