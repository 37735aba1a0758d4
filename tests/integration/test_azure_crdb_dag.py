"""The CockroachDB DAG with its sink and its tables on Azurite, each under a nested path, and a SAS token
as the ``wasb`` connection's only credential (the DAG tests of the other pipelines use an account key
and a connection string; the multi-worker test has this sink and its tables at containers' roots). No
process has an ``AZURE_STORAGE_*`` variable except what the submit task hands its spark-submit. A sink
that is only partly written is applied as far as its last RESOLVED file, the rest by the next run; a
backfill of a past range commits nothing; every commit is announced once; the jobs' summaries travel
through the storage account (``job_summary_root``); the tables are read back from Azurite with Spark and
checked against the generator's ground truth."""

from __future__ import annotations

import json

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.azure import CONNECTION_STRING, CREDENTIAL_ENV, hadoop_url
from lakefeed.crdb.hlc import Hlc
from lakefeed.spark import apply_storage_credentials
from lakefeed.storage import credentials_scope
from tests.airflow_env import (
    assert_each_entry_announced_once,
    assert_marks_caught_up,
    assert_run_lineage,
    dags_test,
    dags_test_env,
    last_run_id,
    progress,
    variable,
    with_config,
    xcom,
)
from tests.integration.test_azure_dags import writer_connection_forms
from tests.integration.test_crdb_job import assert_matches_truth

pytestmark = pytest.mark.integration
DAG = "cockroach_changefeed_to_delta"
SINK_CONTAINER, SINK_PATH = "crdbnested", "prod/cluster-1/shop"
LAKE_CONTAINER, LAKE_PATH = "crdblake", "tables/shop"


def test_crdb_pipeline_on_azure_under_nested_paths_with_a_sas_token(spark, azurite, tmp_path):
    local = tmp_path / "sink"
    truth = generate_sink(local, SinkSpec(steps=24, changes_per_step=20, seed=31))
    for container in (SINK_CONTAINER, LAKE_CONTAINER):
        client = azurite.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
    # The sink as the changefeed has written it so far: the files up to its third RESOLVED file; the rest
    # (among them the late file the sink names before a RESOLVED file it writes after) arrive later.
    assert len(truth.resolved) > 4 and truth.late_files
    cut = Hlc.parse(truth.resolved[2]).file_timestamp() + ".RESOLVED"
    late = {local / key for key in truth.late_files}
    files = sorted(p for p in local.rglob("*") if p.is_file())
    later = [p for p in files if p.name > cut or p in late]
    sink = azurite.container(SINK_CONTAINER)

    def upload(paths) -> None:
        for path in paths:
            with path.open("rb") as handle:
                sink.upload_blob(f"{SINK_PATH}/{path.relative_to(local).as_posix()}", handle, overwrite=True)

    upload(p for p in files if p not in later)

    sink_root = f"az://{SINK_CONTAINER}/{SINK_PATH}"
    target_root = f"abfss://{LAKE_CONTAINER}@{azurite.account}.dfs.core.windows.net/{LAKE_PATH}"
    # As for a driver on the cluster, each job's summary goes through the storage account: written by the
    # driver with the credential its environment got from the connection, read and removed by its task with
    # the connection's.
    summaries = f"az://{LAKE_CONTAINER}/_lakefeed/summaries"
    config = {
        "sink_root": sink_root,
        "target_root": target_root,
        "wasb_conn_id": "wasb_sas",
        "job_summary_root": summaries,
        "resolved_per_batch": 50,
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
    }
    sas = writer_connection_forms(azurite)["SAS token"]
    env = with_config(
        dags_test_env(
            tmp_path / "airflow", lineage=True, AIRFLOW_CONN_WASB_SAS=json.dumps({"conn_type": "wasb", **sas})
        ),
        "lakefeed_crdb_config",
        config,
    )
    for name in CREDENTIAL_ENV:  # the connection is the only credential anywhere
        env.pop(name, None)

    first = dags_test(env, DAG)
    assert f"{summaries}/{DAG}/" in first.stdout + first.stderr  # the submitted job's --summary-json
    checkpoint = variable(env, "lakefeed_crdb_checkpoint")
    assert checkpoint["resolved"] == truth.resolved[2]
    assert checkpoint["sink"] == f"azure://{azurite.account}/{SINK_CONTAINER}/{SINK_PATH}"
    assert set(checkpoint["targets"]) == {f"{target_root}/{topic}" for topic in ("customers", "orders")}
    # OpenLineage: the sink's "az://" URL takes the SAS connection's account; no secret is in any event.
    dfs = f"{azurite.account}.dfs.core.windows.net"
    [complete] = assert_run_lineage(env, DAG, [(f"abfss://{SINK_CONTAINER}@{dfs}", SINK_PATH)]).values()
    assert {(d["namespace"], d["name"]) for d in complete["outputs"]} == {
        (f"abfss://{LAKE_CONTAINER}@{dfs}", f"{LAKE_PATH}/{topic}") for topic in ("customers", "orders")
    }
    sent = (tmp_path / "airflow" / "openlineage.jsonl").read_text()
    assert sas["extra"]["sas_token"] not in sent and azurite.key not in sent

    upload(later)
    dags_test(env, DAG)
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    assert report["resolvedBefore"] == truth.resolved[2] and report["resolved"] == truth.resolved[-1]
    assert report["lateFiles"] == truth.late_files
    credentials = {CONNECTION_STRING: azurite.connection_string}
    apply_storage_credentials(spark, credentials)
    assert_matches_truth(spark, hadoop_url(target_root, credentials), truth)

    before = variable(env, "lakefeed_crdb_checkpoint")
    dags_test(env, DAG, {"after_resolved": truth.resolved[0], "through_resolved": truth.resolved[3]})
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    assert report["kind"] == "backfill" and (report["inserted"], report["updated"], report["deleted"]) == (0, 0, 0)
    assert progress(variable(env, "lakefeed_crdb_checkpoint")) == progress(before)
    assert_marks_caught_up(variable(env, "lakefeed_crdb_checkpoint"))
    assert_matches_truth(spark, hadoop_url(target_root, credentials), truth)
    with credentials_scope(credentials):
        for topic in ("customers", "orders"):
            assert_each_entry_announced_once(env, f"{target_root}/{topic}", "lakefeed_crdb_checkpoint")
    # Every summary went through the storage account and was removed once its task had read it.
    assert [b.name for b in azurite.container(LAKE_CONTAINER).list_blobs(name_starts_with="_lakefeed/")] == []
