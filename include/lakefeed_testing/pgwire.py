"""A PostgreSQL wire-protocol (v3) server for tests: the messages, the session loop, no SQL of its own.

What a real client library (psycopg) needs to connect, run statements in the simple and in the extended
query protocol, and read rows as they stream: the startup (SSL and GSS encryption declined), cleartext
password authentication, ``ParameterStatus``, ``BackendKeyData``, ``ReadyForQuery``; ``Query``;
``Parse``/``Bind``/``Describe``/``Execute``/``Sync``/``Flush``/``Close``; rows sent one ``DataRow`` message
at a time and flushed as they are produced; ``ErrorResponse`` with a SQLSTATE, after which the extended
protocol skips to the next ``Sync``. The statements themselves are answered by a :class:`Engine`
(:mod:`lakefeed_testing.crdb_server` answers as CockroachDB does). Message formats: PostgreSQL's
"Frontend/Backend Protocol", chapter "Message Formats".
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import struct
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

log = logging.getLogger(__name__)

PROTOCOL_3 = 196608
SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
CANCEL_REQUEST = 80877102

# Type OIDs (PostgreSQL's pg_type), as CockroachDB reports them for its types.
TEXT, BYTEA, NUMERIC, INT8, BOOL = 25, 17, 1700, 20, 16


@dataclass(frozen=True)
class Column:
    name: str
    oid: int


class SqlError(Exception):
    """An error the server sends as an ``ErrorResponse``: its SQLSTATE and message."""

    def __init__(self, code: str, message: str, detail: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.code, self.message, self.detail, self.hint = code, message, detail, hint


class Dropped(Exception):
    """The engine wants the connection closed now, mid-result, as a failing node or network would."""


@dataclass
class Result:
    """A statement's answer: its columns (none for a command) and rows produced lazily (each value text or
    None), then its command tag. ``rows`` may raise :class:`SqlError` (sent after the rows so far) or
    :class:`Dropped`."""

    columns: list[Column] = field(default_factory=list)
    rows: Iterator[list[str | bytes | None]] = field(default_factory=lambda: iter(()))
    tag: str = "SELECT"

    def command_tag(self, count: int) -> str:
        return f"{self.tag} {count}" if self.tag == "SELECT" else self.tag


class Engine(Protocol):
    """What answers the statements of one server."""

    def parameters(self) -> dict[str, str]: ...

    def password_of(self, user: str) -> str | None: ...

    def describe(self, sql: str) -> list[Column]: ...

    def execute(self, sql: str, session: Session) -> Result: ...


@dataclass
class Session:
    """One connection's state the engine may read or keep (its user and database, what it ran)."""

    user: str
    database: str
    statements: list[str] = field(default_factory=list)


def _message(kind: bytes, payload: bytes = b"") -> bytes:
    return kind + struct.pack("!i", len(payload) + 4) + payload


def _cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def row_description(columns: list[Column]) -> bytes:
    payload = struct.pack("!h", len(columns))
    for column in columns:
        size = -1 if column.oid in (TEXT, BYTEA, NUMERIC) else 8
        payload += _cstring(column.name) + struct.pack("!ihihih", 0, 0, column.oid, size, -1, 0)
    return _message(b"T", payload)


def data_row(values: list[str | bytes | None], columns: list[Column]) -> bytes:
    payload = struct.pack("!h", len(values))
    for value, column in zip(values, columns, strict=True):
        if value is None:
            payload += struct.pack("!i", -1)
            continue
        if column.oid == BYTEA:  # text format of bytea: hex
            raw = value if isinstance(value, bytes) else value.encode()
            encoded = b"\\x" + raw.hex().encode()
        else:
            encoded = value if isinstance(value, bytes) else value.encode()
        payload += struct.pack("!i", len(encoded)) + encoded
    return _message(b"D", payload)


def error_response(error: SqlError) -> bytes:
    fields = b"SERROR\0VERROR\0C" + _cstring(error.code) + b"M" + _cstring(error.message)
    if error.detail:
        fields += b"D" + _cstring(error.detail)
    if error.hint:
        fields += b"H" + _cstring(error.hint)
    return _message(b"E", fields + b"\0")


class _Connection:
    def __init__(self, sock: socket.socket, engine: Engine, server: WireServer):
        self.sock, self.engine, self.server = sock, engine, server
        self.buffer = b""
        self.prepared: dict[str, str] = {}
        self.portals: dict[str, str] = {}
        self.failed = False  # extended protocol: skip to Sync after an error
        self.session: Session | None = None

    # -- reading --
    def _read(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("client closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def _read_message(self) -> tuple[bytes, bytes]:
        kind = self._read(1)
        (length,) = struct.unpack("!i", self._read(4))
        return kind, self._read(length - 4)

    def _send(self, data: bytes) -> None:
        self.sock.sendall(data)

    # -- the session --
    def run(self) -> None:
        try:
            if not self._startup():
                return
            while True:
                kind, payload = self._read_message()
                if kind == b"X":
                    return
                self._handle(kind, payload)
        except (ConnectionError, OSError, Dropped):
            return
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()

    def _startup(self) -> bool:
        while True:
            (length,) = struct.unpack("!i", self._read(4))
            body = self._read(length - 4)
            (code,) = struct.unpack("!i", body[:4])
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                self._send(b"N")  # not offered: the client goes on in plain text (sslmode=disable/prefer)
                continue
            if code == CANCEL_REQUEST:
                return False
            if code != PROTOCOL_3:
                self._send(error_response(SqlError("08P01", f"unsupported protocol version {code}")))
                return False
            parts = body[4:].split(b"\0")
            params = {parts[i].decode(): parts[i + 1].decode() for i in range(0, len(parts) - 2, 2) if parts[i]}
            break
        user = params.get("user", "")
        expected = self.engine.password_of(user)
        if expected is not None:
            self._send(_message(b"R", struct.pack("!i", 3)))  # AuthenticationCleartextPassword
            kind, payload = self._read_message()
            if kind != b"p" or payload.rstrip(b"\0").decode() != expected:
                self._send(error_response(SqlError("28P01", f"password authentication failed for user {user}")))
                return False
        self._send(_message(b"R", struct.pack("!i", 0)))
        for name, value in self.engine.parameters().items():
            self._send(_message(b"S", _cstring(name) + _cstring(value)))
        self._send(_message(b"K", struct.pack("!ii", 4242, 1)))
        self._send(_message(b"Z", b"I"))
        self.session = Session(user, params.get("database", user))
        self.server.sessions.append(self.session)
        return True

    def _handle(self, kind: bytes, payload: bytes) -> None:
        if kind == b"Q":
            sql = payload.rstrip(b"\0").decode()
            try:
                if sql.strip():
                    self._run(sql, describe=True)
                else:
                    self._send(_message(b"I"))
            except SqlError as error:
                self._send(error_response(error))
            self._send(_message(b"Z", b"I"))
            return
        if kind == b"S":
            self.failed = False
            self._send(_message(b"Z", b"I"))
            return
        if kind == b"H":
            return
        if self.failed:
            return
        try:
            self._extended(kind, payload)
        except SqlError as error:
            self.failed = True
            self._send(error_response(error))

    def _extended(self, kind: bytes, payload: bytes) -> None:
        if kind == b"P":
            name, rest = payload.split(b"\0", 1)
            query = rest.split(b"\0", 1)[0].decode()
            self.prepared[name.decode()] = query
            self._send(_message(b"1"))
        elif kind == b"B":
            # Parameters are not bound: the statements served here carry their values inline.
            portal_name, rest = payload.split(b"\0", 1)
            statement_name = rest.split(b"\0", 1)[0].decode()
            self.portals[portal_name.decode()] = self.prepared.get(statement_name, "")
            self._send(_message(b"2"))
        elif kind == b"D":
            target, described = payload[:1], payload[1:].rstrip(b"\0").decode()
            sql = self.portals.get(described, "") if target == b"P" else self.prepared.get(described, "")
            if target == b"S":
                self._send(_message(b"t", struct.pack("!h", 0)))
            columns = self.engine.describe(sql)
            self._send(row_description(columns) if columns else _message(b"n"))
        elif kind == b"E":
            executed = payload.split(b"\0", 1)[0].decode()
            self._run(self.portals.get(executed, ""), describe=False)
        elif kind == b"C":
            self._send(_message(b"3"))
        else:
            raise SqlError("08P01", f"unsupported message {kind!r}")

    def _run(self, sql: str, describe: bool) -> None:
        assert self.session is not None
        self.session.statements.append(sql)
        result = self.engine.execute(sql, self.session)
        if describe and result.columns:
            self._send(row_description(result.columns))
        count = 0
        for row in result.rows:  # each row its own message, sent as it is produced (no result buffering)
            self._send(data_row(row, result.columns))
            count += 1
        self._send(_message(b"C", _cstring(result.command_tag(count))))


class WireServer(socketserver.ThreadingTCPServer):
    """Serves ``engine`` on ``host`` (port 0: any free one), one thread per connection."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, engine: Engine, port: int = 0, host: str = "127.0.0.1"):
        self.engine = engine
        self.sessions: list[Session] = []
        self.connections: list[socket.socket] = []
        super().__init__((host, port), _Handler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> WireServer:
        threading.Thread(target=self.serve_forever, daemon=True, name="pgwire").start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        for sock in list(self.connections):
            with contextlib.suppress(OSError):
                sock.close()


class _Handler(socketserver.BaseRequestHandler):
    server: WireServer

    def handle(self) -> None:
        self.server.connections.append(self.request)
        _Connection(self.request, self.server.engine, self.server).run()
