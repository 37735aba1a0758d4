"""`airflow dags test blob_changefeed_to_delta` end to end: SQLite metadata, local Spark, real Delta.

One story, in order: a first run ingests every ready window; a run with no new
data changes nothing; the feed grows and the next run ingests exactly the new
windows; a backfill re-processes a past range without moving the checkpoint.
"""

from __future__ import annotations

import json

import pytest

from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.blob.timegrid import HOUR, format_time
from tests.airflow_env import dags_test, dags_test_env, variable

pytestmark = pytest.mark.integration
DAG = "blob_changefeed_to_delta"
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
    return base, dags_test_env(base / "airflow", AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG=json.dumps(config))


def checkpoint(env) -> dict | None:
    return variable(env, "lakefeed_blob_checkpoint")


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
    dags_test(env, DAG)
    events, state = tables(spark, base)
    want_events, want_state = expected(truth)
    assert set(events) == want_events and state == want_state
    first = checkpoint(env)
    assert first["watermark"] == format_time(SPEC.last_consumable) == first["lastConsumable"]

    # 2. No new data: the sensor gives up, nothing is planned, nothing changes.
    dags_test(env, DAG)
    assert tables(spark, base) == (events, state)
    assert checkpoint(env) == first

    # 3. The feed grows: exactly the new windows are ingested.
    grown = FeedSpec(**{**SPEC.__dict__, "hours": SPEC.hours + 2})
    truth = generate_feed(base / "feed", grown)
    dags_test(env, DAG)
    [summary] = batch_summaries(base)
    assert summary["windows"] == [format_time(SPEC.last_consumable + i * HOUR) for i in range(2)]
    events, state = tables(spark, base)
    want_events, want_state = expected(truth)
    assert set(events) == want_events and state == want_state
    grown_checkpoint = checkpoint(env)
    assert grown_checkpoint["watermark"] == format_time(grown.last_consumable)

    # 4. A backfill of a past range re-processes exactly it; the checkpoint stays.
    start, end = SPEC.start, SPEC.start + 2 * HOUR
    dags_test(env, DAG, {"window_start": format_time(start), "window_end": format_time(end)})
    [summary] = batch_summaries(base)
    assert summary["windows"] == [format_time(start), format_time(start + HOUR)]
    assert summary["eventsInserted"] == 0 and summary["stateUpdated"] == 0
    assert tables(spark, base) == (events, state)
    assert checkpoint(env) == grown_checkpoint
