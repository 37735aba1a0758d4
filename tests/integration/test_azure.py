"""The blob pipeline against a real Azurite emulator: the sensor's store through the wasb hook,
the Spark job through adlfs, and an `airflow dags test` run with the feed and the targets on Azurite
that must not leak the account key."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.azure import CONNECTION_STRING, CREDENTIAL_ENV, hadoop_url
from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.timegrid import HOUR
from lakefeed.spark import apply_storage_credentials
from lakefeed.storage import Store
from lakefeed.times import format_time
from tests.airflow_env import dags_test, dags_test_env, variable
from tests.secret_watch import LiveWatch, file_leaks, found_forms
from tests.spark_jars import spark_defaults_path

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CONTAINER = "$blobchangefeed"
FEED_URL = f"az://{CONTAINER}"
SPEC = FeedSpec(hours=3, events_per_hour=600, shards=2, records_per_chunk=250, gap_hours=(1,), seed=31)


@pytest.fixture(scope="module")
def azure_feed(azurite, tmp_path_factory):
    local = tmp_path_factory.mktemp("azfeed")
    truth = generate_feed(local, SPEC)
    azurite.upload_folder(local, CONTAINER)
    return local, truth


def wasb_connection(azurite) -> str:
    """A connection string (it carries the account key): the blob DAG's form; the CDF DAG's test uses an
    account key, the CockroachDB DAG's a SAS token."""
    return json.dumps({"conn_type": "wasb", "extra": {"connection_string": azurite.connection_string}})


def test_wasb_store_sees_the_same_feed_as_the_local_folder(azurite, azure_feed, monkeypatch):
    from lakefeed_airflow.wasb_feed import feed_store

    local, _ = azure_feed
    monkeypatch.setenv("AIRFLOW_CONN_WASB_FEED", wasb_connection(azurite))
    remote = ChangeFeed(feed_store(FEED_URL, "wasb_feed"))
    here = ChangeFeed(Store(str(local)))
    assert remote.last_consumable() == here.last_consumable()
    assert remote.all_segment_starts() == here.all_segment_starts()
    assert remote.first_segment_start() == here.first_segment_start()
    segment = remote.read_segment(here.all_segment_starts()[1])
    assert remote.chunk_files(segment) == here.chunk_files(here.read_segment(segment.start))


def test_spark_job_reads_chunk_files_from_azurite(spark, azurite, azure_feed, tmp_path):
    _local, truth = azure_feed
    windows = truth.ready_windows()
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string}
    result = subprocess.run(
        [
            "spark-submit",
            str(ROOT / "spark_jobs" / "blob_changefeed_job.py"),
            "--feed-root",
            FEED_URL,
            "--window-start",
            format_time(windows[0]),
            "--window-end",
            format_time(windows[-1] + HOUR),
            "--events-table",
            str(tmp_path / "events"),
            "--state-table",
            str(tmp_path / "state"),
            "--summary-json",
            str(tmp_path / "summary.json"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:]
    events = {r["id"] for r in spark.read.format("delta").load(str(tmp_path / "events")).select("id").collect()}
    assert events == {e.id for e in truth.claimed(windows)}
    assert azurite.key not in result.stdout + result.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_dag_run_against_azurite_never_leaks_the_account_key(spark, azurite, azure_feed, tmp_path):
    """The feed and both targets are on Azurite (the events table under a path, the state table at a
    container's root). The planted account key reaches the job two ways: the wasb connection's connection
    string (through the spark-submit environment, for adlfs and as hadoop-azure's settings) and a cluster's
    spark-defaults.conf (``fs.azure.account.key.<account>.dfs.core.windows.net``, as clusters configure
    ADLS). No form of it (raw, URL-encoded, base64) may show in the process list or the Spark REST API's
    environment while the job runs, nor afterwards in the run's output, task logs, run summaries, the Spark event log or any row
    of the metadata database (XCom, Variables, rendered template fields, task instances, logs table)."""
    _local, truth = azure_feed
    home = tmp_path / "airflow"
    ui_port, events_dir = _free_port(), tmp_path / "spark-events"
    events_dir.mkdir()
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    defaults = spark_defaults_path()
    conf_dir.joinpath("spark-defaults.conf").write_text(
        (defaults.read_text() if defaults.exists() else "")
        + f"\nspark.hadoop.fs.azure.account.key.{azurite.account}.dfs.core.windows.net {azurite.key}\n"
    )
    config = {
        "feed_root": FEED_URL,
        "wasb_conn_id": "wasb_feed",
        "events_table": "az://lake/blob/events",
        "state_table": f"abfss://blobstate@{azurite.account}.dfs.core.windows.net",
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
        "spark_conf": {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": events_dir.as_uri(),
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.port.maxRetries": "0",
        },
    }
    env = dags_test_env(
        home,
        AIRFLOW_CONN_WASB_FEED=wasb_connection(azurite),
        AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG=json.dumps(config),
        SPARK_CONF_DIR=str(conf_dir),
    )
    for name in CREDENTIAL_ENV:  # the connection is the only credential
        env.pop(name, None)
    for container in ("lake", "blobstate"):
        client = azurite.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
    with LiveWatch(ui_port=ui_port) as watch:
        result = dags_test(env, "blob_changefeed_to_delta")

    windows = truth.ready_windows()
    credentials = {CONNECTION_STRING: azurite.connection_string}
    apply_storage_credentials(spark, credentials)
    events = {
        r["id"]
        for r in spark.read.format("delta").load(hadoop_url(config["events_table"], credentials)).select("id").collect()
    }
    assert events == {e.id for e in truth.claimed(windows)}
    state = spark.read.format("delta").load(hadoop_url(config["state_table"], credentials))
    assert state.count() > 0

    key = azurite.key
    assert found_forms(result.stdout + result.stderr, key) == []
    assert watch.process_lists, "the process list was never sampled during the run"
    assert watch.environments, "the Spark REST API was never read during the run"
    environment = json.loads(watch.environments[-1])
    redacted = {k: v for k, v in environment["hadoopProperties"] + environment["sparkProperties"] if "account.key" in k}
    assert redacted and set(redacted.values()) == {"*********(redacted)"}, redacted
    assert watch.leaks(key) == []
    assert list(events_dir.iterdir()), "the job wrote no event log"
    written = [home / "logs", events_dir]
    assert any(p.is_file() for folder in written for p in folder.rglob("*")), "the run left no logs to check"
    assert file_leaks(written, key) == []
    with sqlite3.connect(home / "airflow.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                assert found_forms(repr(row), key) == [], f"account key found in table {table}"
        xcoms = db.execute("SELECT COUNT(*) FROM xcom").fetchone()[0]
        assert xcoms > 0  # the check above did look at real XComs
    assert variable(env, "lakefeed_blob_checkpoint")["watermark"] == format_time(SPEC.last_consumable)


@pytest.fixture
def chunk_file(azure_feed):
    """The largest chunk file of the feed (relative to the container) and its records decoded locally."""
    from lakefeed.blob.decode import ChunkRef, decode_chunk

    local, _ = azure_feed
    path = max((p for p in local.rglob("*.avro")), key=lambda p: p.stat().st_size)
    relative = path.relative_to(local).as_posix()
    ref = ChunkRef(str(local), relative, "00", SPEC.start)
    rows = [r for b in decode_chunk(Store(str(local)), ref) for r in b.to_pylist()]
    return relative, path.stat().st_size, rows


def _through(proxy, azurite) -> str:
    return azurite.connection_string.replace(f"127.0.0.1:{azurite.port}", proxy.endpoint_host)


def test_a_connection_reset_mid_chunk_is_retried_and_reads_the_same_records(azurite, chunk_file, monkeypatch):
    from lakefeed.blob.decode import ChunkRef, decode_chunk
    from tests.flaky_proxy import FlakyProxy

    relative, size, expected = chunk_file
    proxy = FlakyProxy(azurite.port, body_bytes=size // 3, cuts=2)
    try:
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", _through(proxy, azurite))
        ref = ChunkRef(FEED_URL, relative, "00", SPEC.start)
        rows = [r for b in decode_chunk(Store(FEED_URL), ref) for r in b.to_pylist()]
    finally:
        proxy.close()
    assert proxy.cuts_made == 2
    assert rows == expected


def test_a_connection_that_keeps_failing_is_unavailable_not_corrupt(azurite, chunk_file, monkeypatch):
    """Before: a transfer that failed was reported as "corrupt or truncated Avro" (exit 2, bad input, not
    retried). Now: retried with backoff, then StorageUnavailableError naming the file, which is not a
    refusal: the job exits 1 and Airflow retries the task. (The Azure SDK resumes a download cut mid-body by
    itself; a connection that never gets a response through exhausts its retries and ours.)"""
    import lakefeed.storage
    from lakefeed.blob.decode import ChunkRef, decode_chunk
    from lakefeed.errors import FeedCorruptError, StorageUnavailableError
    from tests.flaky_proxy import FlakyProxy

    relative, _size, _ = chunk_file
    proxy = FlakyProxy(azurite.port, body_bytes=0, cuts=None)  # every download cut before its body
    try:
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", _through(proxy, azurite))
        monkeypatch.setattr(lakefeed.storage, "RETRY_ATTEMPTS", 2)
        ref = ChunkRef(FEED_URL, relative, "00", SPEC.start)
        with pytest.raises(StorageUnavailableError, match=rf"{relative}: reading failed 2 times in transit") as failed:
            list(decode_chunk(Store(FEED_URL), ref))
        assert not isinstance(failed.value, FeedCorruptError)
    finally:
        proxy.close()
