"""Pure transforms on tiny DataFrames built from really decoded Avro records."""

from datetime import UTC, datetime

import fastavro
import pyarrow as pa
import pytest
from lakefeed_testing.blob_generator import avro_schema

from lakefeed.blob.decode import ChunkRef, decode_chunk
from lakefeed.blob.transforms import dedupe_by_id, drop_control, latest_state_per_blob, owned, to_event_rows, with_claim
from lakefeed.storage import Store

SEGMENT = datetime(2026, 1, 1, 5, 10, tzinfo=UTC)
SUBJECT = "/blobServices/default/containers/photos/blobs/2026/cat.jpg"


def event(id, time, type="BlobCreated", seq=1, subject=SUBJECT):
    return {
        "schemaVersion": 1,
        "topic": "t",
        "subject": subject,
        "eventType": type,
        "eventTime": time,
        "id": id,
        "data": {
            "api": "PutBlob",
            "clientRequestId": "c",
            "requestId": "r",
            "etag": "e",
            "contentType": "image/jpeg",
            "contentLength": seq,
            "blobType": "BlockBlob",
            "url": "",
            "sequencer": f"{seq:x}",
            "storageDiagnostics": {},
        },
    }


def records_df(spark, tmp_path, records, chunk="log/00/2026/01/01/0510/00000.avro", segment=SEGMENT):
    path = tmp_path / chunk
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        fastavro.writer(handle, fastavro.parse_schema(avro_schema(1, "legacy")), records)
    batches = list(decode_chunk(Store(str(tmp_path)), ChunkRef(str(tmp_path), chunk, "00", segment)))
    return spark.createDataFrame(pa.Table.from_batches(batches))


WINDOW_4 = datetime(2026, 1, 1, 4, 10, tzinfo=UTC)
WINDOW_5 = datetime(2026, 1, 1, 5, 10, tzinfo=UTC)


def aware(moment):
    """Spark hands back session-time-zone (UTC) timestamps without tzinfo."""
    return moment.replace(tzinfo=UTC)


def test_with_claim_applies_the_coverage_rule_at_100ns(spark, tmp_path):
    df = records_df(
        spark,
        tmp_path,
        [
            event("before-edge", "2026-01-01T05:09:59.9999999Z"),
            event("on-edge", "2026-01-01T05:10:00.0000000Z"),
            event("late", "2026-01-01T06:12:00Z"),
            event("stray", "2026-01-01T08:00:00Z"),
            event("early-stray", "2026-01-01T02:00:00Z"),
            event("ctl", "2026-01-01T05:20:00Z", type="Control"),
        ],
    )
    rows = {r["id"]: r for r in with_claim(df, 10 * 60 * 10_000_000, [WINDOW_5]).collect()}
    assert aware(rows["before-edge"]["claimWindow"]) == WINDOW_4
    assert aware(rows["on-edge"]["claimWindow"]) == WINDOW_5
    assert aware(rows["late"]["claimWindow"]) == datetime(2026, 1, 1, 6, 10, tzinfo=UTC)
    assert aware(rows["stray"]["claimWindow"]) == WINDOW_5 and rows["stray"]["isStray"]
    assert aware(rows["early-stray"]["claimWindow"]) == WINDOW_5 and rows["early-stray"]["isStray"]
    assert not any(rows[i]["isStray"] for i in ("before-edge", "on-edge", "late"))
    assert not rows["late"]["isStray"]
    assert {k for k, r in rows.items() if r["isOwned"]} == {"on-edge", "stray", "early-stray", "ctl"}
    assert rows["ctl"]["isControl"] and not rows["on-edge"]["isControl"]


def test_owned_events_without_control_deduped_in_lineage_order(spark, tmp_path):
    df = records_df(
        spark,
        tmp_path,
        [
            event("a", "2026-01-01T05:20:00Z", seq=1),
            event("ctl", "2026-01-01T05:21:00Z", type="Control"),
            event("a", "2026-01-01T05:20:00Z", seq=1),
            event("b", "2026-01-01T05:22:00Z", seq=2),
        ],
    )
    out = dedupe_by_id(drop_control(owned(with_claim(df, 10 * 60 * 10_000_000, [WINDOW_5])))).collect()
    assert sorted((r["id"], r["chunkRecordIndex"]) for r in out) == [("a", 0), ("b", 3)]


def test_event_rows_keep_time_string_and_partition_date(spark, tmp_path):
    df = records_df(
        spark,
        tmp_path,
        [event("a", "2026-01-01T23:59:59.9999999Z")],
        chunk="log/00/2026/01/01/2310/00000.avro",
        segment=datetime(2026, 1, 1, 23, 10, tzinfo=UTC),
    )
    [row] = to_event_rows(with_claim(df, 10 * 60 * 10_000_000, []), datetime(2026, 2, 1, tzinfo=UTC)).collect()
    assert row["eventTime"] == "2026-01-01T23:59:59.9999999Z"
    assert row["eventDate"].isoformat() == "2026-01-01"
    assert aware(row["eventTimestamp"]) == datetime(2026, 1, 1, 23, 59, 59, 999999, tzinfo=UTC)


@pytest.mark.parametrize("last_type, deleted", [("BlobDeleted", True), ("BlobPropertiesUpdated", False)])
def test_latest_state_is_highest_sequencer_not_latest_time(spark, tmp_path, last_type, deleted):
    df = records_df(
        spark,
        tmp_path,
        [
            event("newest", "2026-01-01T05:20:00Z", type=last_type, seq=0x10),  # hex 10 > hex f
            event("older", "2026-01-01T05:59:00Z", seq=0xF),
            event(
                "other", "2026-01-01T05:30:00Z", seq=3, subject="/blobServices/default/containers/c2/blobs/a/b/c.txt"
            ),
        ],
    )
    rows = to_event_rows(with_claim(df, 10 * 60 * 10_000_000, [WINDOW_5]), datetime(2026, 2, 1, tzinfo=UTC))
    state = {r["subject"]: r for r in latest_state_per_blob(rows).collect()}
    assert state[SUBJECT]["eventId"] == "newest"
    assert state[SUBJECT]["isDeleted"] is deleted
    assert (state[SUBJECT]["container"], state[SUBJECT]["blobName"]) == ("photos", "2026/cat.jpg")
    other = state["/blobServices/default/containers/c2/blobs/a/b/c.txt"]
    assert (other["container"], other["blobName"], other["isDeleted"]) == ("c2", "a/b/c.txt", False)


@pytest.mark.integration  # nine Delta MERGEs: with the slow suite
def test_events_without_sequencer_end_the_same_in_any_run_order(spark, tmp_path):
    """Before: an event without ``data.sequencer`` compared as "" in the MERGE guard, so the first run to
    apply one kept its row and the state depended on run order. Now one total order (sequencer, then
    eventTimestamp, then eventId) serves the batch and the guard."""
    from lakefeed.blob.job import _merge_state
    from lakefeed.blob.summary import RunSummary

    def no_sequencer(id, time):
        e = event(id, time)
        e["data"]["sequencer"] = ""
        return e

    def state_rows(folder, records):
        df = records_df(spark, tmp_path / folder, records)
        rows = to_event_rows(with_claim(df, 10 * 60 * 10_000_000, [WINDOW_5]), datetime(2026, 2, 1, tzinfo=UTC))
        return latest_state_per_blob(rows)

    early, late = no_sequencer("a-early", "2026-01-01T05:20:00Z"), no_sequencer("b-late", "2026-01-01T05:40:00Z")
    tie = no_sequencer("c-tie", "2026-01-01T05:40:00Z")  # same time as late: the greater id wins
    outcomes = []
    for order in ([early, late, tie], [tie, late, early], [late, early, tie]):
        table = str(tmp_path / f"state-{len(outcomes)}")
        for i, record in enumerate(order):
            summary = RunSummary(
                windows=["w"], last_consumable="x", segments=[], chunk_files=1, empty_chunk_files=0, bytes_read=0
            )
            _merge_state(spark, state_rows(f"run-{len(outcomes)}-{i}", [record]), table, {}, summary)
        outcomes.append([r["eventId"] for r in spark.read.format("delta").load(table).collect()])
    assert outcomes == [["c-tie"]] * 3
    batch = state_rows("one-batch", [early, late, tie]).collect()
    assert [r["eventId"] for r in batch] == ["c-tie"]
