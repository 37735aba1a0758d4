"""Azure locations at any root, in every URL form, on a real Azurite: a CockroachDB sink at a container's
root, under a path, under a deep path, written ``az://``, ``abfss://`` or ``wasbs://``, is read the same
through the ``wasb`` connection (sensor, planner) and through adlfs (the Spark executors); a sink root
with nothing under it is refused naming it, never waited on into a green empty run. (Scheduled runs apply
a sink at a container's root in tests/stack/test_docker_stack.py.) Delta tables on Azure are read
with the connection's credential only, in every connection form."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.crdb.sink import list_sink
from lakefeed.errors import FeedConfigError, FeedError
from lakefeed.storage import Store

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SPEC = SinkSpec(steps=6, changes_per_step=10, seed=41)
# (container, path in it) of each sink: the container's root, a folder, a deep folder.
PLACES = (("crdbroot", ""), ("crdbnested", "shop"), ("crdbdeep", "eu/west/shop"))


def wasb_connection(azurite) -> str:
    return json.dumps(
        {"conn_type": "wasb", "login": azurite.account, "password": azurite.key, "host": azurite.endpoint}
    )


def forms(azurite, container: str, path: str) -> list[str]:
    suffix = f"/{path}" if path else ""
    return [
        f"az://{container}{suffix}",
        f"abfss://{container}@{azurite.account}.dfs.core.windows.net{suffix}",
        f"wasbs://{container}@{azurite.account}.blob.core.windows.net{suffix}/",
    ]


@pytest.fixture(scope="module")
def sinks(azurite, tmp_path_factory):
    """One generated sink, uploaded to each place; the local copy is the reference."""
    local = tmp_path_factory.mktemp("crdbsink")
    truth = generate_sink(local, SPEC)
    for container, path in PLACES:
        client = azurite.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
        for file in sorted(p for p in local.rglob("*") if p.is_file()):
            name = "/".join(part for part in (path, str(file.relative_to(local))) if part)
            with file.open("rb") as handle:
                client.upload_blob(name, handle, overwrite=True)
    return local, truth


def listing(files) -> list[tuple[str, int]]:
    return [(f.key, f.size) for f in files]


def test_a_sink_reads_the_same_at_any_root_in_every_form(azurite, sinks, monkeypatch):
    from lakefeed_airflow.wasb_feed import feed_store

    local, _ = sinks
    monkeypatch.setenv("AIRFLOW_CONN_WASB_LAKE", wasb_connection(azurite))
    monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", azurite.connection_string)  # adlfs, as on executors
    reference = listing(list_sink(Store(str(local))))
    assert any(key.endswith(".RESOLVED") for key, _ in reference)
    for container, path in PLACES:
        identities = set()
        for url in forms(azurite, container, path):
            through_connection = feed_store(url, "wasb_lake")
            assert listing(list_sink(through_connection)) == reference, url
            assert listing(list_sink(Store(url))) == reference, url
            first = reference[0][0]
            assert through_connection.read_bytes(first) == (local / first).read_bytes(), url
            identities.add(through_connection.identity)
        # Every form of one location is the same sink to a checkpoint.
        assert identities == {f"azure://{azurite.account}/{'/'.join(p for p in (container, path) if p)}"}


def test_a_sink_root_with_nothing_under_it_is_refused_naming_it(azurite, sinks, monkeypatch):
    from lakefeed_testing.readiness import resolved_readiness

    monkeypatch.setenv("AIRFLOW_CONN_WASB_LAKE", wasb_connection(azurite))
    azurite.container("crdbempty")
    for url in ("az://crdbempty", "az://crdbnested/shops", "az://crdbroot/eu/west"):  # empty; a path mistyped
        with pytest.raises(FeedError, match=f"the changefeed sink {url} holds nothing at all"):
            resolved_readiness(
                sink_root=url,
                wasb_conn_id="wasb_lake",
                resolved=None,
                sink_identity=None,
                checkpoint_variable="lakefeed_crdb_checkpoint",
            )
    # The URL names another storage account than the connection's.
    with pytest.raises(FeedConfigError, match="is in the storage account otheracct, but the connection wasb_lake"):
        resolved_readiness(
            sink_root="abfss://crdbroot@otheracct.dfs.core.windows.net",
            wasb_conn_id="wasb_lake",
            resolved=None,
            sink_identity=None,
            checkpoint_variable="lakefeed_crdb_checkpoint",
        )


def connection_forms(azurite) -> dict[str, dict]:
    """The ``wasb`` connection forms a team uses, as Airflow stores their fields."""
    from datetime import datetime, timedelta

    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    sas = generate_account_sas(
        azurite.account,
        azurite.key,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, list=True, write=True, add=True, create=True),
        expiry=datetime.now(UTC) + timedelta(hours=2),
    )
    return {
        "account key": {"login": azurite.account, "password": azurite.key, "host": azurite.endpoint, "extra": {}},
        "SAS token": {
            "login": azurite.account,
            "password": None,
            "host": azurite.endpoint,
            "extra": {"sas_token": sas},
        },
        "connection string": {
            "login": None,
            "password": None,
            "host": None,
            "extra": {"connection_string": azurite.connection_string},
        },
    }


@pytest.mark.parametrize("form", ["account key", "SAS token", "connection string"])
def test_the_delta_log_of_a_table_on_azure_is_read_with_the_connections_credentials_only(azurite, form, monkeypatch):
    """JVM-free reads of ``_delta_log`` (fsspec) and delta-rs's (schema, properties) take the connection's
    credential explicitly; no AZURE_STORAGE_* variable is set, and a managed identity fallback would hit
    the closed loopback endpoints the suite sets."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakefeed.azure import CREDENTIAL_ENV, credential_env, delta_storage_options
    from lakefeed.deltalog import DeltaLog

    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    credentials = credential_env(**connection_forms(azurite)[form])
    writer = delta_storage_options(credentials)
    root, nested = (f"delta{where}{form.split()[0].lower()}" for where in ("root", "nested"))  # one per form
    azurite.container(root)
    azurite.container(nested)
    for url in (f"az://{root}", f"abfss://{nested}@{azurite.account}.dfs.core.windows.net/a/b/orders"):
        for rows in ([1, 2], [3]):
            write_deltalake(
                url,
                pa.table({"id": rows}),
                mode="append",
                storage_options=writer,
                configuration={"delta.enableChangeDataFeed": "true"},
            )
        log = DeltaLog(Store(url, credentials=credentials))
        assert log.latest_version() == 1 and log.commit_versions() == [0, 1]
        assert log.table_id() and log.table_id() == log.table_id(0)
        properties, fields = log.table_state()
        assert properties["delta.enableChangeDataFeed"] == "true" and [f["name"] for f in fields] == ["id"]
        with pytest.raises(FeedConfigError, match=f"no credentials to read {url}: set wasb_conn_id"):
            DeltaLog(Store(url)).latest_version()  # no credential: refused, never the machine's identity


def test_the_cdf_sensor_reads_a_source_on_azure_through_the_pipelines_connection(azurite, monkeypatch):
    """The CDF configuration takes ``wasb_conn_id`` like the other two; its sensor (and the planner and the
    monitor, through the same store) read the source's ``_delta_log`` with that connection's credential.
    Without one, the source is refused naming it and the setting to fix."""
    import pyarrow as pa
    from deltalake import write_deltalake
    from lakefeed_testing.readiness import sources_behind

    from lakefeed.azure import CREDENTIAL_ENV, credential_env, delta_storage_options

    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    form = connection_forms(azurite)["SAS token"]
    monkeypatch.setenv("AIRFLOW_CONN_WASB_SOURCES", json.dumps({"conn_type": "wasb", **form}))
    azurite.container("cdfsources")
    url = "az://cdfsources/shop/orders"
    for rows in ([1, 2], [3], [4]):
        write_deltalake(
            url,
            pa.table({"id": rows}),
            mode="append",
            storage_options=delta_storage_options(credential_env(**form)),
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    source = {
        "name": "orders",
        "source_table": url,
        "checkpoint_variable": "lakefeed_cdf_checkpoint__orders",
        "applied_version": 0,
        "source_table_id": None,
    }
    assert sources_behind([{**source, "wasb_conn_id": "wasb_sources"}]) == {"orders": {"latest": 2, "applied": 0}}
    with pytest.raises(FeedConfigError, match=f"no credentials to read {url}: set wasb_conn_id"):
        sources_behind([source])


def test_a_blob_feed_without_segments_json_is_refused_naming_it(azurite, monkeypatch):
    from lakefeed_testing.readiness import feed_readiness

    monkeypatch.setenv("AIRFLOW_CONN_WASB_LAKE", wasb_connection(azurite))
    azurite.container("nofeed")
    for url in ("az://nofeed", "az://nofeed/mirror"):
        with pytest.raises(FeedError, match=f"{url}/meta/Segments.json does not exist"):
            feed_readiness(
                feed_root=url,
                wasb_conn_id="wasb_lake",
                watermark=None,
                last_consumable_seen=None,
                start_from=None,
                feed_identity=None,
                checkpoint_variable="lakefeed_blob_checkpoint",
            )


def test_a_folder_is_listed_anew_after_a_writer_added_to_it(azurite):
    """One process reads a target's ``_delta_log`` before a job commits to it (the plan step) and after (the
    commit step, the sensor's next check): fsspec shares one adlfs instance per credential, whose listings
    cache would hide the new commit."""
    from lakefeed.azure import CONNECTION_STRING

    client = azurite.container("relisted")
    for blob in client.list_blobs():
        client.delete_blob(blob.name)
    client.upload_blob("t/_delta_log/00000000000000000000.json", b"{}", overwrite=True)
    credentials = {CONNECTION_STRING: azurite.connection_string}
    assert [e.name for e in Store("az://relisted/t", credentials=credentials).list("_delta_log")] == [
        "00000000000000000000.json"
    ]
    client.upload_blob("t/_delta_log/00000000000000000001.json", b"{}", overwrite=True)
    assert [e.name for e in Store("az://relisted/t", credentials=credentials).list("_delta_log")] == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
