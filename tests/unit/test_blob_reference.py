"""The benchmark's yardstick for the blob job (bench/blob_reference.py, a plain-Python script, no Spark) writes
what our job's targets hold: on a tiny generated feed, its two Delta tables against the generator's ground
truth, and every event row against the job's own decoder and claim rule, copy for copy."""

from __future__ import annotations

import importlib.util
import json
from datetime import UTC
from pathlib import Path
from types import ModuleType

import pytest
from deltalake import DeltaTable
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.blob.decode import decode_chunk
from lakefeed.blob.feed import ChangeFeed, ChunkRef
from lakefeed.blob.reading import plan_reading
from lakefeed.blob.schema import CONTROL_EVENT_TYPE, DATA_TYPE, RECORD_SCHEMA
from lakefeed.blob.timegrid import HOUR, HOUR_TICKS, to_ticks
from lakefeed.storage import Store
from lakefeed.times import format_time

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "blob_reference.py"
# Strays, Control records, duplicated records, an hour with no segment, a 0-byte chunk file and an
# empty Avro file (hour 1, shard 0), a Publishing segment past lastConsumable.
SPEC = FeedSpec(hours=4, events_per_hour=600, shards=2, records_per_chunk=200, stray_rate=0.01, seed=3)
LINEAGE = ("segmentStart", "shard", "chunkFile", "chunkRecordIndex")


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    spec = importlib.util.spec_from_file_location("blob_reference", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(reference: ModuleType, capsys, *argv: str) -> dict:
    assert reference.main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def rows(table: Path, key: str) -> dict:
    return {row[key]: row for row in DeltaTable(str(table)).to_pyarrow_table().to_pylist()}


def job_copies(feed: Path, windows: list) -> tuple[dict[str, list[dict]], int]:
    """Per event id, every copy our job claims for ``windows`` (Control dropped), decoded by its own decoder
    (:func:`decode_chunk`) from the chunk files its own plan reads, claimed by :func:`WindowGrid.window_of`;
    and the number of records in those files."""
    reading = plan_reading(ChangeFeed(Store(str(feed))), windows[0], windows[-1] + HOUR)
    owned = {to_ticks(w) for w in windows}
    copies: dict[str, list[dict]] = {}
    read = 0
    for chunk in (c for c in reading.chunk_files if c.size):
        ref = ChunkRef(str(feed), chunk.path, chunk.shard, chunk.segment_start)
        for batch in decode_chunk(Store(str(feed)), ref):
            read += batch.num_rows
            for record in batch.to_pylist():
                segment = to_ticks(record["segmentStart"])
                window = reading.grid.window_of(record["eventTimeTicks"])
                claim = segment if abs(window - segment) > HOUR_TICKS else window
                if claim in owned and record["eventType"] != CONTROL_EVENT_TYPE:
                    copies.setdefault(record["id"], []).append({**record, "claim": claim})
    return copies, read


@pytest.mark.parametrize("writer", ["service", "legacy"])
def test_both_tables_hold_what_the_job_writes(reference, capsys, tmp_path, writer):
    feed = tmp_path / "feed"
    truth = generate_feed(feed, FeedSpec(**{**SPEC.__dict__, "writer": writer}))
    windows = truth.ready_windows()
    counts = run(reference, capsys, str(feed), str(tmp_path / "lake"))
    events, state = rows(tmp_path / "lake" / "events", "id"), rows(tmp_path / "lake" / "state", "subject")

    expected = {e.id: e for e in truth.claimed(windows)}
    assert set(events) == set(expected) and counts["eventsUnique"] == len(expected)
    for event_id, want in expected.items():
        got = events[event_id]
        assert (
            format_time(got["claimWindow"]),
            got["isStray"],
            got["eventTime"],
            got["eventType"],
            got["subject"],
            got["data"]["sequencer"],
        ) == (want.window, want.stray, want.eventTime, want.eventType, want.subject, want.sequencer)
        assert to_ticks(got["eventTimestamp"]) == got["eventTimeTicks"] // 10 * 10  # truncated to microseconds
        assert got["eventDate"] == got["eventTimestamp"].date()
    assert len({row["ingestedAt"] for row in events.values()}) == 1
    assert counts["strays"] > 0 and counts["controlDropped"] > 0 and counts["recordsClaimed"] > counts["eventsUnique"]

    # Every row is the copy our job keeps (the first in lineage order), its columns as our decoder reads them.
    copies, read = job_copies(feed, windows)
    assert set(copies) == set(events) and counts["recordsRead"] == read
    assert sum(len(c) for c in copies.values()) - len(copies) > 0  # duplicates were there to drop
    for event_id, found in copies.items():
        kept = min(found, key=lambda r: tuple(r[k] for k in LINEAGE))
        got = events[event_id]
        assert {name: got[name] for name in RECORD_SCHEMA.names} == {name: kept[name] for name in RECORD_SCHEMA.names}
        assert to_ticks(got["claimWindow"]) == kept["claim"]

    expected_state = truth.state(windows)
    assert set(state) == set(expected_state) and counts["blobs"] == len(expected_state)
    for subject, want in expected_state.items():
        got, event = state[subject], events[want.id]
        assert got["eventId"] == want.id and got["isDeleted"] is (want.eventType == "BlobDeleted")
        container, blob = subject.removeprefix("/blobServices/default/containers/").split("/blobs/")
        assert (got["container"], got["blobName"], got["updatedAt"]) == (container, blob, event["ingestedAt"])
        for name in ("eventType", "eventTime", "eventTimestamp", "claimWindow"):
            assert got[name] == event[name]
        for name in ("sequencer", *reference.STATE_PROPERTIES):
            assert got[name] == event["data"][name]


def test_window_arguments_and_the_tables_columns(reference, capsys, tmp_path):
    """A range of windows claims only its own events; the columns are our job's (the decoder's superset)."""
    feed = tmp_path / "feed"
    truth = generate_feed(feed, SPEC)
    windows = truth.ready_windows()[1:3]
    run(reference, capsys, str(feed), str(tmp_path / "lake"), format_time(windows[0]), format_time(windows[-1] + HOUR))
    events = rows(tmp_path / "lake" / "events", "id")
    assert set(events) == {e.id for e in truth.claimed(windows)}
    assert {format_time(e["claimWindow"].astimezone(UTC)) for e in events.values()} == {format_time(w) for w in windows}

    assert reference.DATA == DATA_TYPE
    for field in RECORD_SCHEMA:
        assert reference.EVENTS.field(field.name).type == field.type
    assert set(reference.EVENTS.names) - set(RECORD_SCHEMA.names) == {
        "eventTimestamp",
        "eventDate",
        "claimWindow",
        "isStray",
        "ingestedAt",
    }
    assert DeltaTable(str(tmp_path / "lake" / "events")).metadata().partition_columns == ["eventDate"]

    with pytest.raises(SystemExit, match="not ready"):
        reference.main(
            [
                str(feed),
                str(tmp_path / "late"),
                format_time(SPEC.last_consumable),
                format_time(SPEC.last_consumable + HOUR),
            ]
        )
