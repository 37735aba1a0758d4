"""Spark jobs reading and writing Delta tables on Azure storage, through the DAGs, on a real Azurite: the
CDF pipeline with its source under a path and its target at a container's root, each written in another
URL form, and credentials that come from the pipeline's ``wasb`` connection only. No process has an
``AZURE_STORAGE_*`` variable in its environment except what the submit task hands its spark-submit:
the sensor, the planner and the commit step read the ``_delta_log``s JVM-free with the connection's
credential, the Spark job opens both tables through hadoop-azure's ABFS with the same credential as
``fs.azure.*`` settings. The ground truth is the local copy of the source; the target is read back from
Azurite with Spark."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, latest_version

from lakefeed.azure import CONNECTION_STRING, CREDENTIAL_ENV
from lakefeed.storage import credentials_scope
from tests.airflow_env import (
    assert_each_entry_announced_once,
    assert_run_lineage,
    dags_test,
    dags_test_env,
    job_summaries,
    variable,
    with_config,
)

pytestmark = pytest.mark.integration
CDF_DAG = "delta_cdf_to_delta"
CDF_COMMIT = "commit_checkpoints"


def wasb_connection(azurite) -> str:
    """An account key on Azurite's endpoint: the form a team keeps in an Airflow connection."""
    return json.dumps(
        {"conn_type": "wasb", "login": azurite.account, "password": azurite.key, "host": azurite.endpoint}
    )


def upload_table(azurite, local: Path, container: str, prefix: str) -> None:
    """Make ``container/prefix`` hold exactly the files of the local table ``local``."""
    client = azurite.container(container)
    for blob in client.list_blobs(name_starts_with=f"{prefix}/" if prefix else None):
        client.delete_blob(blob.name)
    for file in sorted(p for p in local.rglob("*") if p.is_file() and not p.name.endswith(".crc")):
        name = "/".join(part for part in (prefix, str(file.relative_to(local))) if part)
        with file.open("rb") as handle:
            client.upload_blob(name, handle, overwrite=True)


def live_target_rows(spark, azurite, url: str) -> list[tuple]:
    """The target's live rows (tombstones dropped), read from Azurite with Spark through hadoop-azure."""
    from lakefeed.azure import hadoop_url
    from lakefeed.cdf.transforms import DELETED_COLUMN
    from lakefeed.spark import apply_storage_credentials

    credentials = {CONNECTION_STRING: azurite.connection_string}
    apply_storage_credentials(spark, credentials)
    frame = spark.read.format("delta").load(hadoop_url(url, credentials))
    return source_rows(frame.where(~frame[DELETED_COLUMN]))


def source_rows(frame) -> list[tuple]:
    return sorted(tuple(r) for r in frame.select("id", "name", "amount", "touched").collect())


@pytest.fixture(scope="module")
def azure_env(azurite, tmp_path_factory):
    env = dags_test_env(
        tmp_path_factory.mktemp("azure_dags") / "airflow", lineage=True, AIRFLOW_CONN_WASB_LAKE=wasb_connection(azurite)
    )
    for name in CREDENTIAL_ENV:  # the connection is the only credential anywhere
        env.pop(name, None)
    return env


def test_cdf_pipeline_with_source_and_target_on_azure_storage(spark, azurite, azure_env, tmp_path):
    local = tmp_path / "source"
    create_source(spark, str(local), rows=25)
    simulator = SourceSimulator(spark, str(local), seed=11, key_space=60)
    for kind in ("update", "delete", "merge"):
        simulator.commit(kind)
    upload_table(azurite, local, "cdfsource", "shop/orders")
    source = "az://cdfsource/shop/orders"
    target = f"abfss://cdftarget@{azurite.account}.dfs.core.windows.net"  # a container's root
    azurite.container("cdftarget")
    # The pipeline's own connection (none at the top level): the sensor, the planner, the jobs and the commit
    # step all take it.
    config = {
        "pipelines": [
            {
                "name": "orders",
                "source_table": source,
                "target_table": target,
                "keys": ["id"],
                "versions_per_job": 3,
                "wasb_conn_id": "wasb_lake",
            }
        ],
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
    }
    env = with_config(azure_env, "lakefeed_cdf_config", config)
    checkpoint_name = "lakefeed_cdf_checkpoint__orders"

    dags_test(env, CDF_DAG)  # first run: versions 0.. in jobs of 3 versions
    first_latest = latest_version(spark, str(local))
    assert variable(env, checkpoint_name)["appliedVersion"] == first_latest
    assert [s["startingVersion"] for s in job_summaries(env, CDF_DAG)] == list(range(0, first_latest + 1, 3))
    assert live_target_rows(spark, azurite, target) == source_rows(simulator.snapshot())
    # OpenLineage: "az://" names no account; the datasets take the connection's, as the jobs read them.
    dfs = f"{azurite.account}.dfs.core.windows.net"
    for complete in assert_run_lineage(
        env, CDF_DAG, [(f"abfss://cdfsource@{dfs}", "shop/orders")], CDF_COMMIT
    ).values():
        assert [(d["namespace"], d["name"]) for d in complete["outputs"]] == [(f"abfss://cdftarget@{dfs}", "/")]

    for kind in ("reinsert", "update", "delete"):
        simulator.commit(kind)
    upload_table(azurite, local, "cdfsource", "shop/orders")
    dags_test(env, CDF_DAG)  # exactly the new versions
    [summary] = job_summaries(env, CDF_DAG)
    assert (summary["startingVersion"], summary["endingVersion"]) == (first_latest + 1, first_latest + 3)
    assert summary["source"] == source and summary["target"] == target  # as configured, not as Spark opened them
    assert live_target_rows(spark, azurite, target) == source_rows(simulator.snapshot())
    assert variable(env, checkpoint_name)["appliedVersion"] == first_latest + 3
    with credentials_scope({CONNECTION_STRING: azurite.connection_string}):
        assert_each_entry_announced_once(env, target, checkpoint_name)  # by the run that committed them

    dags_test(env, CDF_DAG, {"pipeline": "orders", "full_refresh": True})
    assert live_target_rows(spark, azurite, target) == source_rows(simulator.snapshot())
    with credentials_scope({CONNECTION_STRING: azurite.connection_string}):
        events = assert_each_entry_announced_once(env, target, checkpoint_name)
    assert events[-1]["fullRefresh"] is True
    [complete] = assert_run_lineage(env, CDF_DAG, [(f"abfss://cdfsource@{dfs}", "shop/orders")], CDF_COMMIT).values()
    assert complete["outputs"][0]["facets"]["lifecycleStateChange"]["lifecycleStateChange"] == "OVERWRITE"
    assert azurite.key not in (Path(env["AIRFLOW_HOME"]) / "openlineage.jsonl").read_text()


def writer_connection_forms(azurite) -> dict[str, dict]:
    """The connection forms of test_azure_roots, with a SAS token a Delta writer can use: Delta commits to
    Azure by writing a temporary file and renaming it, which the blob service does as copy and delete."""
    from datetime import datetime, timedelta

    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    from tests.integration.test_azure_roots import connection_forms

    forms = connection_forms(azurite)
    sas = generate_account_sas(
        azurite.account,
        azurite.key,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, list=True, write=True, add=True, create=True, delete=True),
        expiry=datetime.now(UTC) + timedelta(hours=2),
    )
    forms["SAS token"]["extra"] = {"sas_token": sas}
    return forms


@pytest.mark.parametrize("form", ["account key", "SAS token", "connection string"])
def test_spark_writes_and_reads_delta_on_azure_with_each_connection_form(spark, azurite, form):
    """What a job does with a table (create, append, MERGE, read, history) through hadoop-azure, at a
    container's root and under a path, with the credential of each ``wasb`` connection form as its
    ``fs.azure.*`` settings; the ``_delta_log`` it wrote reads the same JVM-free."""
    from delta.tables import DeltaTable

    from lakefeed.azure import credential_env, hadoop_url
    from lakefeed.deltalog import DeltaLog
    from lakefeed.spark import apply_storage_credentials
    from lakefeed.storage import Store

    credentials = credential_env(**writer_connection_forms(azurite)[form])
    apply_storage_credentials(spark, credentials)
    initial = form.split()[0].lower()
    root, nested = (f"spark{where}{initial}" for where in ("root", "nested"))  # a filesystem of its own per form
    for container in (root, nested):
        client = azurite.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
    for url in (f"az://{root}", f"wasbs://{nested}@{azurite.account}.blob.core.windows.net/a/b/orders"):
        opened = hadoop_url(url, credentials)
        spark.range(0, 10).write.format("delta").save(opened)
        spark.range(10, 15).write.format("delta").mode("append").save(opened)
        (
            DeltaTable.forPath(spark, opened)
            .alias("t")
            .merge(spark.range(12, 20).alias("s"), "t.id = s.id")
            .whenNotMatchedInsertAll()
            .execute()
        )
        assert sorted(r.id for r in spark.read.format("delta").load(opened).collect()) == list(range(20)), url
        assert DeltaTable.forPath(spark, opened).history(1).collect()[0]["version"] == 2
        assert DeltaLog(Store(url, credentials=credentials)).commit_versions() == [0, 1, 2], url
