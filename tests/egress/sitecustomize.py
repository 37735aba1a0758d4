"""The test suite's egress guard for every Python process it starts (this folder is first on their
``PYTHONPATH``; see ``tests/egress_guard.py``): a socket connection to an address outside loopback is
recorded in ``$LAKEFEED_EGRESS_LOG`` and refused, whatever library opened it."""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import time

_LOG = os.environ.get("LAKEFEED_EGRESS_LOG")
_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex


def _is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:  # a name: every address it resolves to must be loopback
        try:
            resolved = {info[4][0] for info in socket.getaddrinfo(host, None)}
        except OSError:
            return True  # the connection fails on its own, naming the host
        return all(_is_loopback(address) for address in resolved)
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or ip.is_unspecified or (mapped is not None and mapped.is_loopback))


def _refused(sock: socket.socket, address: object) -> str | None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return None
    host, port = str(address[0]), address[1]
    if _is_loopback(host):
        return None
    destination = f"{host}:{port}"
    if _LOG:
        line = (
            json.dumps({"destination": destination, "via": "python socket", "pid": os.getpid(), "time": time.time()})
            + "\n"
        )
        with open(_LOG, "a", encoding="utf-8") as out:
            out.write(line)
    return destination


def _guarded_connect(self: socket.socket, address: object) -> None:
    destination = _refused(self, address)
    if destination is not None:
        raise ConnectionRefusedError(
            errno.ECONNREFUSED, f"refused by the test suite's egress guard: {destination} is not loopback"
        )
    _connect(self, address)  # type: ignore[arg-type]


def _guarded_connect_ex(self: socket.socket, address: object) -> int:
    if _refused(self, address) is not None:
        return errno.ECONNREFUSED
    return _connect_ex(self, address)  # type: ignore[arg-type]


def install() -> None:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign]


if _LOG:
    install()
