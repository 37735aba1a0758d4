"""Nothing a test runs may reach past the loopback range: every Azure client must get its credentials
from the configured connection and talk to Azurite, never fall back to a managed identity or a cloud
endpoint. The guard watches the three kinds of client the suite runs, in every process it starts:

- **Python** (the Azure SDK, adlfs, Airflow, the Spark jobs' Python): ``egress/sitecustomize.py``, put
  first on ``PYTHONPATH``, wraps ``socket.connect``: a connection to an address outside loopback is
  recorded and refused.
- **Rust** (delta-rs's ``object_store``, through reqwest) and anything else that honours the standard
  proxy variables: ``HTTP(S)_PROXY``/``ALL_PROXY`` name the guard's own proxy on loopback, with
  ``NO_PROXY`` covering loopback; the proxy records the destination it was asked for and refuses it.
- **The JVM** (Spark, hadoop-azure): ``JAVA_TOOL_OPTIONS`` sets the same proxy for HTTP(S) and SOCKS,
  so a socket to any non-loopback host goes to the guard. Maven Central (Ivy's ``--packages``) is the
  one host let through: it is where Spark fetches Delta's jars, not a request of the code under test.

Each refusal is a JSON line in the log the environment names (``LAKEFEED_EGRESS_LOG``): the conftest
fails the test during which it appeared, and the session. Each pytest process runs its own guard (the
processes a test starts inherit its process's), so with xdist a refusal is charged to the right test."""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time
from collections import Counter
from pathlib import Path

EGRESS_LOG = "LAKEFEED_EGRESS_LOG"  # this guard's log, for the processes under it
EGRESS_FOLDER = "LAKEFEED_EGRESS_FOLDER"  # where every guard of a test session keeps its log
EGRESS_OWNER = "LAKEFEED_EGRESS_OWNER"  # the pid of the pytest process whose guard the variables name
SITECUSTOMIZE_DIR = Path(__file__).resolve().parent / "egress"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
# Where Spark's Ivy resolves --packages (Delta, hadoop-azure): let through, direct.
PACKAGE_REPOSITORIES = ("repo1.maven.org", "repos.spark-packages.org")


def record(log: str | os.PathLike[str], destination: str, via: str) -> None:
    """Appends one refusal to the log (one short write: lines from many processes do not interleave)."""
    line = json.dumps({"destination": destination, "via": via, "pid": os.getpid(), "time": time.time()}) + "\n"
    with open(log, "a", encoding="utf-8") as out:
        out.write(line)


def entries(log: str | os.PathLike[str], offset: int = 0) -> list[dict]:
    path = Path(log)
    if not path.exists():
        return []
    with path.open("rb") as lines:
        lines.seek(offset)
        return [json.loads(line) for line in lines.read().decode().splitlines() if line.strip()]


def refused_summary(refused: list[dict]) -> str:
    """Each destination once, with how it was asked for and how often."""
    counts = Counter(f"{e['destination']} via {e['via']}" for e in refused)
    return "; ".join(f"{what} ({count}x)" if count > 1 else what for what, count in sorted(counts.items()))


def _read_exactly(conn: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the client closed the connection")
        data += chunk
    return data


def _read_until(conn: socket.socket, end: bytes, limit: int = 8192) -> bytes:
    data = b""
    while not data.endswith(end) and len(data) < limit:
        chunk = conn.recv(1)
        if not chunk:
            break
        data += chunk
    return data


class _Refuser(socketserver.BaseRequestHandler):
    """Speaks just enough SOCKS 4/4a/5 and HTTP proxy to learn the destination, records it and refuses."""

    server: _GuardServer

    def handle(self) -> None:
        conn: socket.socket = self.request
        conn.settimeout(10)
        try:
            first = _read_exactly(conn, 1)
            if first == b"\x05":
                self._socks5(conn)
            elif first == b"\x04":
                self._socks4(conn)
            else:
                self._http(conn, first)
        except (OSError, ConnectionError, ValueError):
            return

    def _socks5(self, conn: socket.socket) -> None:
        methods = _read_exactly(conn, 1)[0]
        _read_exactly(conn, methods)
        conn.sendall(b"\x05\x00")  # no authentication
        _version, _command, _reserved, kind = _read_exactly(conn, 4)
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, _read_exactly(conn, 4))
        elif kind == 4:
            host = socket.inet_ntop(socket.AF_INET6, _read_exactly(conn, 16))
        else:
            host = _read_exactly(conn, _read_exactly(conn, 1)[0]).decode("idna")
        port = int.from_bytes(_read_exactly(conn, 2), "big")
        record(self.server.log, f"{host}:{port}", "socks5 proxy")
        conn.sendall(b"\x05\x02\x00\x01" + bytes(6))  # connection not allowed by ruleset

    def _socks4(self, conn: socket.socket) -> None:
        (_command,) = _read_exactly(conn, 1)
        port = int.from_bytes(_read_exactly(conn, 2), "big")
        address = _read_exactly(conn, 4)
        _read_until(conn, b"\x00")  # user id
        host = socket.inet_ntoa(address)
        if address[:3] == b"\x00\x00\x00":  # SOCKS 4a: the name follows
            host = _read_until(conn, b"\x00")[:-1].decode("idna")
        record(self.server.log, f"{host}:{port}", "socks4 proxy")
        conn.sendall(b"\x00\x5b" + bytes(6))  # request rejected

    def _http(self, conn: socket.socket, first: bytes) -> None:
        request_line = (first + _read_until(conn, b"\r\n")).decode("latin-1").strip()
        parts = request_line.split()
        target = parts[1] if len(parts) > 1 else request_line
        record(self.server.log, target, f"http proxy ({parts[0] if parts else '?'})")
        conn.sendall(
            b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
            b"refused by the test suite's egress guard: only loopback may be reached\n"
        )


class _GuardServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    log: Path


class EgressGuard:
    """The refusing proxy on loopback, and the environment that routes every client of a process tree
    through it (or, for Python, refuses in the process itself)."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self._server = _GuardServer(("127.0.0.1", 0), _Refuser)
        self._server.log = log
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="egress-guard", daemon=True)

    def __enter__(self) -> EgressGuard:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def environment(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The variables that put a process tree under this guard (merged into ``base``'s PYTHONPATH and
        JAVA_TOOL_OPTIONS, which keep what they had)."""
        base = dict(os.environ if base is None else base)
        proxy = f"http://127.0.0.1:{self.port}"
        no_proxy = ",".join((*LOOPBACK_HOSTS, "127.0.0.0/8", *PACKAGE_REPOSITORIES))
        java = [f"-D{scheme}.proxyHost=127.0.0.1 -D{scheme}.proxyPort={self.port}" for scheme in ("http", "https")]
        java.append(f"-DsocksProxyHost=127.0.0.1 -DsocksProxyPort={self.port}")
        direct = "|".join(("localhost", "127.*", "[::1]", *PACKAGE_REPOSITORIES))
        java.append(f"-Dhttp.nonProxyHosts={direct} -DsocksNonProxyHosts={direct}")
        previous_java = base.get("JAVA_TOOL_OPTIONS", "")
        variables = {
            EGRESS_LOG: str(self.log),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(SITECUSTOMIZE_DIR), base.get("PYTHONPATH")])),
            "JAVA_TOOL_OPTIONS": " ".join(filter(None, [previous_java, *java])),
        }
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            variables[name] = variables[name.lower()] = proxy
        variables["NO_PROXY"] = variables["no_proxy"] = no_proxy
        return variables


def outside_guard(environ: dict[str, str]) -> dict[str, str]:
    """``environ`` without what puts a process tree under a guard: for what a test runs as a deployment's
    operator would, not as code under test (building images reaches PyPI, Debian and npm; the containers
    it starts talk only on this machine's Docker network)."""
    env = dict(environ)
    for name in (EGRESS_LOG, "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        env.pop(name, None)
        env.pop(name.lower(), None)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(SITECUSTOMIZE_DIR)]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    java = [
        option
        for option in env.get("JAVA_TOOL_OPTIONS", "").split()
        if not option.startswith(
            ("-Dhttp.proxy", "-Dhttps.proxy", "-DsocksProxy", "-Dhttp.nonProxyHosts", "-DsocksNonProxyHosts")
        )
    ]
    if java:
        env["JAVA_TOOL_OPTIONS"] = " ".join(java)
    else:
        env.pop("JAVA_TOOL_OPTIONS", None)
    return env
