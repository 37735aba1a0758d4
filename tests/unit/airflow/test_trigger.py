"""The sensor's trigger: exact serialization, and real polls of a real feed folder."""

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.times import format_time
from lakefeed_airflow.triggers import ChangeFeedReadyTrigger


def make(feed_root, watermark=None, seen=None, deadline_in=60.0, feed_identity=None):
    deadline = format_time(datetime.now(UTC) + timedelta(seconds=deadline_in))
    return ChangeFeedReadyTrigger(
        feed_root=str(feed_root),
        watermark=watermark,
        last_consumable_seen=seen,
        start_from=None,
        deadline=deadline,
        poke_interval=0.05,
        feed_identity=feed_identity,
        checkpoint_variable="cp",
    )


def test_serialize_is_exact_and_round_trips():
    trigger = ChangeFeedReadyTrigger(
        feed_root="az://$blobchangefeed",
        wasb_conn_id="wasb_feed",
        watermark="2026-01-01T02:10:00Z",
        last_consumable_seen="2026-01-01T03:10:00Z",
        start_from=None,
        deadline="2026-01-01T05:00:00Z",
        poke_interval=30.0,
        feed_identity="azure://acct/$blobchangefeed",
        checkpoint_variable="cp",
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "lakefeed_airflow.triggers.ChangeFeedReadyTrigger"
    assert kwargs == {
        "feed_root": "az://$blobchangefeed",
        "wasb_conn_id": "wasb_feed",
        "watermark": "2026-01-01T02:10:00Z",
        "last_consumable_seen": "2026-01-01T03:10:00Z",
        "start_from": None,
        "feed_identity": "azure://acct/$blobchangefeed",
        "checkpoint_variable": "cp",
        "deadline": "2026-01-01T05:00:00Z",
        "poke_interval": 30.0,
    }
    assert ChangeFeedReadyTrigger(**kwargs).serialize() == (classpath, kwargs)


def first_event(trigger):
    async def go():
        return await anext(trigger.run())

    return asyncio.run(go()).payload


@pytest.fixture(scope="module")
def feed(tmp_path_factory):
    root = tmp_path_factory.mktemp("feed")
    generate_feed(root, FeedSpec(hours=3, events_per_hour=20, gap_hours=()))
    return root  # lastConsumable 02:10: windows up to 01:10 are ready


def test_fires_when_a_window_past_the_watermark_is_ready(feed):
    event = first_event(make(feed, watermark="2026-01-01T01:10:00Z"))
    assert event == {
        "status": "ready",
        "ready": True,
        "lastConsumable": "2026-01-01T02:10:00Z",
        "nextWindow": "2026-01-01T01:10:00Z",
    }


def test_first_run_starts_an_hour_before_the_first_segment(feed):
    assert first_event(make(feed))["nextWindow"] == "2025-12-31T23:10:00Z"


def test_times_out_when_nothing_is_ready(feed):
    event = first_event(make(feed, watermark="2026-01-01T02:10:00Z", deadline_in=0.2))
    assert event["status"] == "timeout" and event["nextWindow"] == "2026-01-01T02:10:00Z"


def test_regressing_last_consumable_is_refused(feed):
    event = first_event(make(feed, watermark="2026-01-01T01:10:00Z", seen="2026-01-01T05:10:00Z"))
    assert event["status"] == "refused"
    assert "lastConsumable moved backwards" in event["message"] and "meta/Segments.json" in event["message"]


def test_a_checkpoint_of_another_feed_is_refused(feed):
    event = first_event(make(feed, watermark="2026-01-01T01:10:00Z", feed_identity="azure://acct/$blobchangefeed"))
    assert event["status"] == "refused" and "belongs to the feed azure://acct/$blobchangefeed" in event["message"]
    assert first_event(make(feed, watermark="2026-01-01T01:10:00Z", feed_identity=f"file://{feed}"))["ready"]


def test_delta_version_trigger_serialize_is_exact_and_round_trips():
    from lakefeed_airflow.triggers import DeltaVersionTrigger

    sources = [
        {
            "name": "orders",
            "source_table": "/src",
            "checkpoint_variable": "cp",
            "applied_version": 7,
            "source_table_id": "3f1c",
        }
    ]
    trigger = DeltaVersionTrigger(sources=sources, deadline="2026-01-01T05:00:00Z", poke_interval=15.0)
    classpath, kwargs = trigger.serialize()
    assert classpath == "lakefeed_airflow.triggers.DeltaVersionTrigger"
    assert kwargs == {"sources": sources, "deadline": "2026-01-01T05:00:00Z", "poke_interval": 15.0}
    assert DeltaVersionTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_delta_version_trigger_fires_when_a_source_is_behind(tmp_path):
    import pyarrow as pa
    from deltalake import write_deltalake

    from lakefeed_airflow.triggers import DeltaVersionTrigger

    write_deltalake(str(tmp_path), pa.table({"id": [1]}))
    write_deltalake(str(tmp_path), pa.table({"id": [2]}), mode="append")

    def event(applied, deadline_in=60.0):
        deadline = format_time(datetime.now(UTC) + timedelta(seconds=deadline_in))
        trigger = DeltaVersionTrigger(
            sources=[
                {"name": "t", "source_table": str(tmp_path), "applied_version": applied, "checkpoint_variable": "cp"}
            ],
            deadline=deadline,
            poke_interval=0.05,
        )
        return first_event(trigger)

    assert event(0) == {"status": "ready", "behind": {"t": {"latest": 1, "applied": 0}}}
    assert event(None)["status"] == "ready"
    assert event(1, deadline_in=0.1) == {"status": "timeout", "behind": {}}
    replaced = event(5)  # the checkpoint is past the table's latest version: an older copy replaced it
    assert (
        replaced["status"] == "refused"
        and "up to 5" in replaced["message"]
        and "full_refresh=true" in replaced["message"]
    )


def test_a_deeply_nested_segments_json_is_refused_naming_it_not_a_crash(tmp_path):
    """Before: RecursionError escaped the parser unnamed."""
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "Segments.json").write_text('{"lastConsumable": ' + "[" * 200_000 + "]" * 200_000 + "}")

    async def first_event():
        async for event in make(tmp_path).run():
            return event.payload

    payload = asyncio.run(first_event())
    assert payload["status"] == "refused"
    assert "meta/Segments.json: malformed JSON (nested too deeply)" in payload["message"]
