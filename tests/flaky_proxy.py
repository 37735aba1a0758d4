"""A TCP proxy in front of a real server (Azurite) that breaks downloads the way networks do: it forwards
the response headers of a ranged blob download (``206``, ``Content-Range``) and ``body_bytes`` of its body,
then resets the connection, ``cuts`` times in all (None: every download). Requests and responses are
plain HTTP/1.1 without pipelining, as the Azure SDK sends them; request bodies are not expected (reads)."""

from __future__ import annotations

import collections
import socket
import struct
import threading


class FlakyProxy:
    def __init__(self, upstream_port: int, body_bytes: int, cuts: int | None):
        self.upstream_port, self.body_bytes = upstream_port, body_bytes
        self.cuts_left = cuts
        self.cuts_made = 0
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._connections: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def endpoint_host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        """Stop accepting and drop every open connection (clients must not keep using old ones)."""
        self._closed = True
        self._server.close()
        for end in self._connections:
            _reset(end)

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._connections += [client, upstream]
            methods: collections.deque[str] = collections.deque()
            threading.Thread(target=self._requests, args=(client, upstream, methods), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, methods), daemon=True).start()

    def _take_cut(self) -> bool:
        with self._lock:
            if self.cuts_left is not None and self.cuts_left <= 0:
                return False
            if self.cuts_left is not None:
                self.cuts_left -= 1
            self.cuts_made += 1
            return True

    def _requests(self, client: socket.socket, upstream: socket.socket, methods) -> None:
        buffer = b""
        try:
            while data := client.recv(65536):
                buffer += data
                while b"\r\n\r\n" in buffer:  # one request head (no bodies on reads)
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    methods.append(head.split(b" ", 1)[0].decode())
                upstream.sendall(data)
        except OSError:
            pass
        _reset(upstream)

    def _responses(self, upstream: socket.socket, client: socket.socket, methods) -> None:
        pending = b""
        try:
            while data := upstream.recv(65536):
                pending += data
                out = b""
                while b"\r\n\r\n" in pending:
                    head, rest = pending.split(b"\r\n\r\n", 1)
                    headers = head.lower()
                    method = methods.popleft() if methods else "GET"
                    length = 0 if method == "HEAD" else _content_length(headers)
                    if b"content-range" in headers and method == "GET" and self._take_cut():
                        client.sendall(out + head + b"\r\n\r\n" + rest[: self.body_bytes])
                        _reset(client)
                        _reset(upstream)
                        return
                    if len(rest) < length:
                        break  # wait for the whole body of this response
                    out += head + b"\r\n\r\n" + rest[:length]
                    pending = rest[length:]
                client.sendall(out)
        except OSError:
            pass
        _reset(client)


def _content_length(headers: bytes) -> int:
    for line in headers.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 0


def _reset(end: socket.socket) -> None:
    """Drop a connection at once, as a broken network does: RST where the kernel can, and a shutdown first
    so a thread blocked reading the same socket wakes up (close alone would wait for it)."""
    try:
        end.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        end.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        end.close()
    except OSError:
        pass
