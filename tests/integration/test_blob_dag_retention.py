"""`airflow dags test blob_changefeed_to_delta` sequences where change feed retention removed data before the
pipeline read it (issue 20): segments deleted behind the checkpoint, and a segment manifest naming chunk files
that are gone. Each stops the pipeline with a failed run naming the windows, the watermark unchanged, until a
run acknowledges the loss (``acknowledge_data_loss``); that run's summary records what was given up. Checked
against the generator's ground truth and the checkpoint Variable."""

from __future__ import annotations

import shutil

import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.blob.timegrid import HOUR
from lakefeed.times import format_time, parse_time
from tests.airflow_env import dags_test, dags_test_env, last_run_id, variable, with_config, xcom

pytestmark = pytest.mark.integration
DAG = "blob_changefeed_to_delta"
SPEC = FeedSpec(hours=6, events_per_hour=300, shards=2, records_per_chunk=150, gap_hours=(), seed=41)


def delete_segment(feed, start: str) -> None:
    """What retention does to a segment: its manifest and every shard's chunk files go."""
    moment = parse_time(start)
    shutil.rmtree(feed / "idx" / "segments" / f"{moment:%Y/%m/%d/%H%M}")
    for shard in (feed / "log").iterdir():
        shutil.rmtree(shard / f"{moment:%Y/%m/%d/%H%M}", ignore_errors=True)


def events_by_id(spark, config) -> dict[str, str]:
    return {
        r["id"]: r["segmentStart"]
        for r in spark.read.format("delta").load(config["events_table"]).select("id", "segmentStart").collect()
    }


def test_segments_and_chunk_files_lost_to_retention_stop_the_pipeline_until_acknowledged(spark, tmp_path):
    feed = tmp_path / "feed"
    truth = generate_feed(feed, SPEC)
    config = {
        "feed_root": str(feed),
        "events_table": str(tmp_path / "lake" / "events"),
        "state_table": str(tmp_path / "lake" / "state"),
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
        "max_windows_per_run": 2,
        "windows_per_batch": 2,
    }
    env = with_config(dags_test_env(tmp_path / "airflow"), "lakefeed_blob_config", config)
    t = lambda hours: format_time(SPEC.start + hours * HOUR)  # noqa: E731  (segment/window starts)

    dags_test(env, DAG)  # windows 23:10 and 00:10
    checkpoint = variable(env, "lakefeed_blob_checkpoint")
    assert checkpoint["watermark"] == t(1) and checkpoint["nextSegment"] == t(0)
    first_windows = [SPEC.start - HOUR, SPEC.start]
    assert {e.id for e in truth.claimed(first_windows)} <= set(events_by_id(spark, config))

    # The pipeline paused; retention deleted the segments of 00:10 and 01:10, which windows 01:10 and 02:10
    # still need. Before, the next run read what remained, moved the watermark past them, and was green.
    delete_segment(feed, t(0))
    delete_segment(feed, t(1))
    result = dags_test(env, DAG, succeed=False)
    text = result.stdout + result.stderr
    assert "were deleted by the change feed's retention" in text
    assert f"The windows {t(1)} .. {t(3)} (end exclusive) may be missing events" in text
    assert "acknowledge_data_loss=true" in text
    assert variable(env, "lakefeed_blob_checkpoint") == checkpoint

    dags_test(env, DAG, {"acknowledge_data_loss": True})
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    assert report["dataLossAcknowledged"]["windows"] == [t(1), t(3)] and report["dataLossAcknowledged"]["certain"]
    assert report["watermark"] == t(3)

    # Retention goes on with the feed's oldest segment now, 02:10: the chunk files of its shard 01 are gone, its
    # manifest still there. Shard 01 of the 04:10 segment holds no chunk file either, but the 03:10 segment
    # before it still holds all of its: retention deletes by age, so that one is an empty shard (an hour
    # without events on it). The job refuses (exit 2, nothing written) naming the 02:10 folder only; before,
    # it read the other shard and was green.
    def empty_shard(hours: int) -> str:
        return f"log/01/{parse_time(t(hours)):%Y/%m/%d/%H%M}/"

    for hours in (2, 4):
        for chunk in (feed / empty_shard(hours)).glob("*.avro"):
            chunk.unlink()
    result = dags_test(env, DAG, succeed=False)
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    refused = report["batchesFailed"][0]["refused"]
    assert "holding no chunk file" in refused and "it is the feed's oldest segment" in refused
    assert empty_shard(2) in refused and empty_shard(4) not in refused
    assert variable(env, "lakefeed_blob_checkpoint")["watermark"] == t(3)

    dags_test(env, DAG, {"acknowledge_data_loss": True})
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    assert report["missingShards"] == [{"segment": t(2), "shard": empty_shard(2)}]
    assert report["emptyShards"] == 1  # the jobs' counts, added up
    assert report["watermark"] == t(5)

    # Ground truth: nothing the feed still holds is missing, nothing is invented.
    events = events_by_id(spark, config)
    assert set(events) <= {e.id for e in truth.events}
    kept = [e for e in truth.claimed([parse_time(t(3)), parse_time(t(4))]) if e.segment not in (t(0), t(1), t(2), t(4))]
    assert kept and {e.id for e in kept} <= set(events)
