"""`airflow dags test blob_changefeed_to_delta` end to end: SQLite metadata, local Spark, real Delta.

One story, in order: a first run ingests every ready window; a run with no new
data changes nothing; the feed grows and the next run ingests exactly the new
windows; a backfill re-processes a past range without moving the checkpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.blob.timegrid import HOUR, format_time

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SPEC = FeedSpec(hours=3, events_per_hour=400, shards=2, records_per_chunk=200, gap_hours=(1,), seed=21)


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    base = tmp_path_factory.mktemp("dag")
    config = {
        "feed_root": str(base / "feed"),
        "events_table": str(base / "lake" / "events"),
        "state_table": str(base / "lake" / "state"),
        "run_dir": str(base / "runs"),
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
        "windows_per_batch": 24,
    }
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(base / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG": json.dumps(config),
        "LAKEFEED_HOME": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    subprocess.run(["airflow", "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return base, env


def airflow_cli(env, *args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(["airflow", *args], env=env, capture_output=True, text=True, timeout=timeout)


def dags_test(env, conf: dict | None = None) -> subprocess.CompletedProcess:
    args = ["dags", "test", "blob_changefeed_to_delta"] + (["-c", json.dumps(conf)] if conf else [])
    result = airflow_cli(env, *args)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    return result


def checkpoint(env) -> dict | None:
    result = airflow_cli(env, "variables", "get", "lakefeed_blob_checkpoint")
    return json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0 else None


def tables(spark, base):
    events = {r["id"]: (r["claimWindow"], r["eventType"]) for r in
              spark.read.format("delta").load(str(base / "lake" / "events")).collect()}
    state = {r["subject"]: (r["eventId"], r["isDeleted"]) for r in
             spark.read.format("delta").load(str(base / "lake" / "state")).collect()}
    return events, state


def expected(truth):
    windows = truth.ready_windows()
    return ({e.id for e in truth.claimed(windows)},
            {s: (e.id, e.eventType == "BlobDeleted") for s, e in truth.state(windows).items()})


def batch_summaries(base) -> list[dict]:
    newest = max((base / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in sorted(newest.glob("*.json"))]


def test_scheduled_runs_no_new_data_growth_and_backfill(spark, airflow):
    base, env = airflow

    # 1. First run: every ready window, then the checkpoint sits at lastConsumable.
    truth = generate_feed(base / "feed", SPEC)
    dags_test(env)
    events, state = tables(spark, base)
    want_events, want_state = expected(truth)
    assert set(events) == want_events and state == want_state
    first = checkpoint(env)
    assert first["watermark"] == format_time(SPEC.last_consumable) == first["lastConsumable"]

    # 2. No new data: the sensor gives up, nothing is planned, nothing changes.
    dags_test(env)
    assert tables(spark, base) == (events, state)
    assert checkpoint(env) == first

    # 3. The feed grows: exactly the new windows are ingested.
    grown = FeedSpec(**{**SPEC.__dict__, "hours": SPEC.hours + 2})
    truth = generate_feed(base / "feed", grown)
    dags_test(env)
    [summary] = batch_summaries(base)
    assert summary["windows"] == [format_time(SPEC.last_consumable + i * HOUR) for i in range(2)]
    events, state = tables(spark, base)
    want_events, want_state = expected(truth)
    assert set(events) == want_events and state == want_state
    grown_checkpoint = checkpoint(env)
    assert grown_checkpoint["watermark"] == format_time(grown.last_consumable)

    # 4. A backfill of a past range re-processes exactly it; the checkpoint stays.
    start, end = SPEC.start, SPEC.start + 2 * HOUR
    dags_test(env, {"window_start": format_time(start), "window_end": format_time(end)})
    [summary] = batch_summaries(base)
    assert summary["windows"] == [format_time(start), format_time(start + HOUR)]
    assert summary["eventsInserted"] == 0 and summary["stateUpdated"] == 0
    assert tables(spark, base) == (events, state)
    assert checkpoint(env) == grown_checkpoint
