"""The SQL-pulled CockroachDB DAG with its staged ranges and its tables on Azurite under nested paths, a
SAS token as the ``wasb`` connection's only credential and a password on the SQL connection: an initial
scan whose first pull is dropped mid-stream, staged through the storage account (written, listed and
cleared by the pull task with the connection's credential) and applied from there by the Spark job; the
tables read back from Azurite match the history as of the checkpoint, and neither secret is in any
output."""

from __future__ import annotations

import json

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink
from lakefeed_testing.crdb_server import Cluster, Faults, serve

from lakefeed.azure import CONNECTION_STRING, CREDENTIAL_ENV, hadoop_url
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdbsql.pull import prev_of
from lakefeed.spark import apply_storage_credentials
from tests.airflow_env import dags_test, dags_test_env, last_run_id, task_tries, variable, with_config
from tests.integration.test_azure_dags import writer_connection_forms
from tests.integration.test_crdb_sql_dag import assert_state

pytestmark = pytest.mark.integration
DAG = "cockroach_sql_changefeed_to_delta"
CHECKPOINT = "lakefeed_crdb_sql_checkpoint"
STAGING_CONTAINER, STAGING_PATH = "crdbsqlstage", "pulled/shop"
LAKE_CONTAINER, LAKE_PATH = "crdbsqllake", "tables/shop"
PASSWORD = "sql-secret-never-shown"


def test_the_sql_pulled_pipeline_stages_and_applies_through_azure(spark, azurite, tmp_path):
    truth = generate_sink(tmp_path / "sink", SinkSpec(steps=18, changes_per_step=20, seed=43, restart_at_flush=None))
    stamps = sorted({c.stamp for c in truth.history})
    clock = [Hlc(stamps[-1].wall + 1, 0)]
    cluster = Cluster(truth.history, lambda: clock[0], password=PASSWORD, resolved_every=20)
    server = serve(cluster)
    for container in (STAGING_CONTAINER, LAKE_CONTAINER):
        client = azurite.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
    target_root = f"abfss://{LAKE_CONTAINER}@{azurite.account}.dfs.core.windows.net/{LAKE_PATH}"
    config = {
        "staging_root": f"az://{STAGING_CONTAINER}/{STAGING_PATH}",
        "target_root": target_root,
        "wasb_conn_id": "wasb_sas",
        "safety_lag_seconds": 0,
        "min_checkpoint_frequency": "1s",
    }
    sas = writer_connection_forms(azurite)["SAS token"]
    env = with_config(
        dags_test_env(
            tmp_path / "airflow",
            lineage=True,
            AIRFLOW_CONN_WASB_SAS=json.dumps({"conn_type": "wasb", **sas}),
            AIRFLOW_CONN_LAKEFEED_COCKROACH=json.dumps(
                {
                    "conn_type": "postgres",
                    "host": "127.0.0.1",
                    "port": server.port,
                    "login": "root",
                    "password": PASSWORD,
                    "schema": "defaultdb",
                    "extra": {"sslmode": "disable"},
                }
            ),
            LAKEFEED_RETRY_DELAY_SECONDS="3",
        ),
        "lakefeed_crdb_sql_config",
        config,
    )
    for name in CREDENTIAL_ENV:  # the connection is the only credential anywhere
        env.pop(name, None)
    credentials = {CONNECTION_STRING: azurite.connection_string}
    apply_storage_credentials(spark, credentials)
    lake = hadoop_url(target_root, credentials)
    try:
        cluster.faults = Faults(drop_after_rows=25)  # its retry clears the killed try's blobs first
        outputs = [dags_test(env, DAG)]
        assert task_tries(env, DAG, last_run_id(env, DAG))["pull_ranges[0]"] == ("success", 2)
        assert variable(env, CHECKPOINT)["resolved"] == str(prev_of(clock[0]))
        assert_state(spark, lake, truth, clock[0])
        staged = [b.name for b in azurite.container(STAGING_CONTAINER).list_blobs()]
        assert all(name.startswith(f"{STAGING_PATH}/") for name in staged) and len(staged) >= 3
        assert sum(name.endswith(".RESOLVED") for name in staged) == 2  # the scan's own floor and its end
    finally:
        server.stop()
    said = "".join(o.stdout + o.stderr for o in outputs) + (tmp_path / "airflow" / "openlineage.jsonl").read_text()
    assert PASSWORD not in said and sas["extra"]["sas_token"] not in said
