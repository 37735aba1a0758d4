"""A database a feed reads over SQL (the PostgreSQL wire protocol: CockroachDB speaks it), from a connection.

An Airflow ``postgres`` connection (host, port, login, password, schema as the database; ``extra`` for
TLS: ``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``) becomes a :class:`SqlEndpoint`. Its password is
never in its ``repr``, its :attr:`~SqlEndpoint.identity` or any message; each :meth:`~SqlEndpoint.connect`
opens a dedicated connection (never a pooled one: a core changefeed is cancelled by closing its
connection, and its rows must be read to the end before the connection serves anything else).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from lakefeed.errors import FeedConfigError

# libpq's TLS and timeout settings a connection's extra may carry (passed through as given).
TLS_KEYS = ("sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslcrl", "sslsni")
CONNECT_TIMEOUT_SECONDS = 30


@dataclass(frozen=True)
class SqlEndpoint:
    """Where a database is and how to sign in; the password stays out of ``repr`` and every message."""

    host: str
    port: int = 26257
    user: str = "root"
    database: str = "defaultdb"
    password: str | None = field(default=None, repr=False)
    options: dict[str, str] = field(default_factory=dict, repr=False)  # sslmode and the like (sslpassword too)
    connection_id: str | None = None  # the Airflow connection it came from, to name in messages

    @property
    def identity(self) -> str:
        """What the checkpoint records of the database: ``cockroach://host:port/database`` (no user, no secret)."""
        return f"cockroach://{self.host}:{self.port}/{self.database}"

    @property
    def where(self) -> str:
        named = f"connection {self.connection_id}: " if self.connection_id else ""
        return f"{named}{self.identity}"

    @classmethod
    def from_parts(
        cls,
        connection_id: str,
        host: str | None,
        port: int | None,
        login: str | None,
        password: str | None,
        schema: str | None,
        extra: Mapping[str, Any] | None,
    ) -> SqlEndpoint:
        if not host:
            raise FeedConfigError(f"connection {connection_id} names no host")
        options = {k: str(v) for k, v in (extra or {}).items() if k in TLS_KEYS and v not in (None, "")}
        return cls(
            host=host,
            port=int(port or 26257),
            user=login or "root",
            database=schema or "defaultdb",
            password=password or None,
            options=options,
            connection_id=connection_id,
        )

    @classmethod
    def from_uri(cls, connection_id: str, uri: str) -> SqlEndpoint:
        """An Airflow connection URI (``postgres://user:password@host:26257/db?sslmode=verify-full``)."""
        parts = urlsplit(uri)
        return cls.from_parts(
            connection_id,
            parts.hostname,
            parts.port,
            unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None,
            parts.path.lstrip("/") or None,
            dict(parse_qsl(parts.query)),
        )

    @classmethod
    def from_environment(cls, connection_id: str) -> SqlEndpoint:
        """The connection Airflow would read from ``AIRFLOW_CONN_<ID>`` (a URI), outside a task (local runs)."""
        uri = os.environ.get(f"AIRFLOW_CONN_{connection_id.upper()}")
        if not uri:
            raise FeedConfigError(f"no connection {connection_id}: set AIRFLOW_CONN_{connection_id.upper()}")
        return cls.from_uri(connection_id, uri)

    def connect(self, application: str = "lakefeed") -> Any:
        """A new, dedicated connection in autocommit mode (psycopg 3)."""
        import psycopg

        parameters: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": self.database,
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "application_name": application,
            **self.options,
        }
        return psycopg.connect(autocommit=True, **parameters)
