"""The blob pipeline against a real Azurite emulator: the sensor's store through the wasb hook,
the Spark job through adlfs, and an `airflow dags test` run that must not leak the account key."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.blob.timegrid import HOUR, format_time
from lakefeed.storage import Store
from tests.airflow_env import dags_test, dags_test_env, variable

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
    return json.dumps({"conn_type": "wasb", "login": azurite.account, "password": azurite.key,
                       "host": azurite.endpoint})


def test_wasb_store_sees_the_same_feed_as_the_local_folder(azurite, azure_feed, monkeypatch):
    sys.path.insert(0, str(ROOT / "plugins"))
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
    local, truth = azure_feed
    windows = truth.ready_windows()
    env = {**os.environ, "AZURE_STORAGE_CONNECTION_STRING": azurite.connection_string}
    result = subprocess.run(
        ["spark-submit", str(ROOT / "spark_jobs" / "blob_changefeed_job.py"), "--feed-root", FEED_URL,
         "--window-start", format_time(windows[0]), "--window-end", format_time(windows[-1] + HOUR),
         "--events-table", str(tmp_path / "events"), "--state-table", str(tmp_path / "state"),
         "--summary-json", str(tmp_path / "summary.json")],
        env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:]
    events = {r["id"] for r in spark.read.format("delta").load(str(tmp_path / "events")).select("id").collect()}
    assert events == {e.id for e in truth.claimed(windows)}
    assert azurite.key not in result.stdout + result.stderr


def test_dag_run_against_azurite_never_leaks_the_account_key(spark, azurite, azure_feed, tmp_path):
    local, truth = azure_feed
    home = tmp_path / "airflow"
    config = {"feed_root": FEED_URL, "wasb_conn_id": "wasb_feed",
              "events_table": str(tmp_path / "lake" / "events"), "state_table": str(tmp_path / "lake" / "state"),
              "run_dir": str(tmp_path / "runs"), "sensor_timeout_seconds": 3, "sensor_poke_seconds": 1}
    env = dags_test_env(home, AIRFLOW_CONN_WASB_FEED=wasb_connection(azurite),
                        AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG=json.dumps(config))
    env.pop("AZURE_STORAGE_CONNECTION_STRING", None)
    result = dags_test(env, "blob_changefeed_to_delta")

    windows = truth.ready_windows()
    events = {r["id"] for r in spark.read.format("delta").load(config["events_table"]).select("id").collect()}
    assert events == {e.id for e in truth.claimed(windows)}

    # The planted key must appear nowhere the run wrote: its output, task logs, run summaries, and the
    # metadata database (XCom, Variables, rendered template fields, task instances, logs table).
    key = azurite.key
    assert key not in result.stdout + result.stderr
    written = [p for folder in (home / "logs", tmp_path / "runs") for p in folder.rglob("*") if p.is_file()]
    assert written, "the run left no logs to check"
    leaks = [str(p) for p in written if key.encode() in p.read_bytes()]
    assert leaks == []
    with sqlite3.connect(home / "airflow.db") as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                assert key not in repr(row), f"account key found in table {table}"
        xcoms = db.execute("SELECT COUNT(*) FROM xcom").fetchone()[0]
        assert xcoms > 0  # the check above did look at real XComs
    assert variable(env, "lakefeed_blob_checkpoint")["watermark"] == format_time(SPEC.last_consumable)
