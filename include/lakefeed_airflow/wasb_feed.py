"""The blob feed in Azure through Airflow's ``wasb`` connection and the Azure provider's hook."""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from lakefeed.azure import azure_location, credential_env, is_azure_url
from lakefeed.sql import SqlEndpoint
from lakefeed.storage import Entry, StoreBase


class WasbContainerStore(StoreBase):
    """The :class:`~lakefeed.storage.Store` reads the sensor and planner need, over a ContainerClient
    from ``WasbHook``. Lists one folder level at a time (``delimiter='/'``): never the whole container."""

    def __init__(self, root: str, container_client: Any, prefix: str = ""):
        self.root = root.rstrip("/")
        self._container = container_client
        self._prefix = prefix.strip("/")

    def _name(self, relative: str) -> str:
        return posixpath.join(self._prefix, relative) if self._prefix else relative

    @property
    def identity(self) -> str:
        path = "/".join(p for p in (self._container.container_name, self._prefix) if p)
        return f"azure://{self._container.account_name}/{path}"

    def read_bytes(self, relative: str) -> bytes:
        from azure.core.exceptions import ResourceNotFoundError

        try:
            return self._container.download_blob(self._name(relative)).readall()
        except ResourceNotFoundError:
            raise FileNotFoundError(self.url(relative)) from None

    def exists(self, relative: str) -> bool:
        return self._container.get_blob_client(self._name(relative)).exists()

    def list(self, relative: str) -> list[Entry]:
        folder = self._name(relative).strip("/")
        prefix = folder + "/" if folder else ""  # the container's root: no prefix (not "/")
        entries = []
        for item in self._container.walk_blobs(name_starts_with=prefix, delimiter="/"):
            name = item.name[len(prefix) :].rstrip("/")
            is_dir = item.name.endswith("/")
            entries.append(Entry(name=name, size=0 if is_dir else int(item.size or 0), is_dir=is_dir))
        return sorted(entries, key=lambda e: e.name)


def feed_store(feed_root: str, wasb_conn_id: str | None) -> StoreBase:
    """The feed's store: through the ``wasb`` connection when one is configured, else fsspec."""
    if not wasb_conn_id:
        from lakefeed.storage import Store

        return Store(feed_root)
    from airflow.providers.microsoft.azure.hooks.wasb import WasbHook

    location = azure_location(feed_root)
    client = WasbHook(wasb_conn_id=wasb_conn_id).get_conn().get_container_client(location.container)
    if location.account and client.account_name and location.account != client.account_name:
        from lakefeed.errors import FeedConfigError

        raise FeedConfigError(
            f"{feed_root} is in the storage account {location.account}, but the connection "
            f"{wasb_conn_id} is for the account {client.account_name}: configure the "
            f"connection of that account"
        )
    return WasbContainerStore(feed_root, client, location.prefix)


def connection_credentials(wasb_conn_id: str) -> dict[str, str]:
    """The credential of a ``wasb`` connection, named as :func:`lakefeed.azure.credential_env` names it: the
    Spark job's environment, and what a :class:`~lakefeed.storage.Store` gives adlfs and delta-rs."""
    from airflow.providers.microsoft.azure.hooks.wasb import WasbHook

    conn = WasbHook.get_connection(wasb_conn_id)
    return credential_env(login=conn.login, password=conn.password, host=conn.host, extra=conn.extra_dejson or {})


def connection_scope(wasb_conn_id: str | None) -> AbstractContextManager[None]:
    """Within it, stores of Azure URLs opened without a credential of their own (target ledgers, tables
    under a root) read with this connection's (:func:`lakefeed.storage.credentials_scope`)."""
    from lakefeed.storage import credentials_scope

    return credentials_scope(connection_credentials(wasb_conn_id) if wasb_conn_id else None)


def location_store(location: str, wasb_conn_id: str | None) -> StoreBase:
    """A store of a table or folder by URL: an Azure one reads with the connection's credential."""
    from lakefeed.storage import Store

    if wasb_conn_id and is_azure_url(location):
        return Store(location, credentials=connection_credentials(wasb_conn_id))
    return Store(location)


@contextmanager
def process_environment(variables: dict[str, str]) -> Iterator[None]:
    """Set variables in this task process's environment (spark-submit inherits it), then restore.

    Not through SparkSubmitOperator's ``env_vars``: that field is templated
    (rendered values are stored and shown in the UI) and, for yarn and k8s,
    turned into ``--conf`` arguments that ``ps`` shows.
    """
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class AirflowStorage:
    """The :class:`lakefeed.pipeline.Storage` of the DAGs' tasks: Azure through Airflow's ``wasb`` connections
    (:func:`feed_store`, :func:`location_store`, :func:`connection_scope`)."""

    def feed(self, url: str, connection: str | None) -> StoreBase:
        return feed_store(url, connection)

    def table(self, url: str, connection: str | None) -> StoreBase:
        return location_store(url, connection)

    def scope(self, connection: str | None) -> AbstractContextManager[None]:
        return connection_scope(connection)

    def sql(self, connection: str) -> SqlEndpoint:
        """A database from Airflow's connection ``connection`` (a ``postgres`` one: CockroachDB's wire protocol)."""
        from airflow.sdk import Connection

        found = Connection.get(connection)
        return SqlEndpoint.from_parts(
            connection, found.host, found.port, found.login, found.password, found.schema, found.extra_dejson
        )


AIRFLOW_STORAGE = AirflowStorage()
