"""No network for a test: tests that prove Seams works offline make any attempt to reach a
non-local address fail loudly (Unix sockets and loopback, used by the test servers, still work)."""

from __future__ import annotations

import socket

import pytest

LOOPBACK = ("127.", "::1", "localhost")


def forbid_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch `socket` for the rest of the test so connections and name lookups of anything
    but loopback raise `OSError("... attempted in a test ...")`."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def allowed(address: object) -> bool:
        return not isinstance(address, tuple) or str(address[0]).startswith(LOOPBACK)

    def connect(self: socket.socket, address: object) -> None:
        if not allowed(address):
            raise OSError(f"network access attempted in a test: {address!r}")
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: object) -> int:
        if not allowed(address):
            raise OSError(f"network access attempted in a test: {address!r}")
        return real_connect_ex(self, address)

    def getaddrinfo(host: object, *args: object, **kwargs: object) -> object:
        if host is not None and not str(host).startswith(LOOPBACK):
            raise OSError(f"name lookup attempted in a test: {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
