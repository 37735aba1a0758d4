"""The claim of decoded records (Arrow) and the pure transforms after it, on tiny DataFrames built from
really decoded Avro records."""

from datetime import UTC, datetime

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lakefeed_testing.blob_generator import avro_schema

from lakefeed.blob.claim import ClaimCounts, ClaimRule, claim
from lakefeed.blob.decode import ChunkRef, decode_chunk
from lakefeed.blob.schema import RECORD_SCHEMA
from lakefeed.blob.timegrid import HOUR_TICKS, TICKS_PER_SECOND, WindowGrid, to_ticks
from lakefeed.blob.transforms import dedupe_by_id, latest_state_per_blob, to_event_rows
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


WINDOW_4 = datetime(2026, 1, 1, 4, 10, tzinfo=UTC)
WINDOW_5 = datetime(2026, 1, 1, 5, 10, tzinfo=UTC)
OFFSET = 10 * 60 * 10_000_000  # the grid's windows start at minute 10


def decoded(tmp_path, records, chunk="log/00/2026/01/01/0510/00000.avro", segment=SEGMENT):
    """The records written by fastavro into a chunk file, as the job's decoder reads them."""
    path = tmp_path / chunk
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        fastavro.writer(handle, fastavro.parse_schema(avro_schema(1, "legacy")), records)
    return pa.Table.from_batches(
        list(decode_chunk(Store(str(tmp_path)), ChunkRef(str(tmp_path), chunk, "00", segment)))
    )


def claimed(table, windows=(WINDOW_5,)):
    """The records ``windows`` own, claimed as the decoding tasks claim them, and their counts."""
    kept, counts = claim(table.to_batches()[0], ClaimRule(OFFSET, tuple(to_ticks(w) for w in windows)))
    return pa.Table.from_batches([kept]), counts


def records_df(spark, tmp_path, records, windows=(WINDOW_5,), **chunk):
    return spark.createDataFrame(claimed(decoded(tmp_path, records, **chunk), windows)[0])


def aware(moment):
    """Spark hands back session-time-zone (UTC) timestamps without tzinfo."""
    return moment.replace(tzinfo=UTC)


def test_claim_applies_the_coverage_rule_at_100ns(tmp_path):
    table = decoded(
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
    every_window = (WINDOW_4, WINDOW_5, datetime(2026, 1, 1, 6, 10, tzinfo=UTC))
    rows = {r["id"]: r for r in claimed(table, every_window)[0].to_pylist()}
    assert set(rows) == {"before-edge", "on-edge", "late", "stray", "early-stray"}  # Control dropped
    assert rows["before-edge"]["claimWindow"] == WINDOW_4
    assert rows["on-edge"]["claimWindow"] == WINDOW_5
    assert rows["late"]["claimWindow"] == datetime(2026, 1, 1, 6, 10, tzinfo=UTC)
    assert rows["stray"]["claimWindow"] == WINDOW_5 and rows["stray"]["isStray"]
    assert rows["early-stray"]["claimWindow"] == WINDOW_5 and rows["early-stray"]["isStray"]
    assert not any(rows[i]["isStray"] for i in ("before-edge", "on-edge", "late"))
    assert all(r["claimWindowTicks"] == to_ticks(r["claimWindow"]) for r in rows.values())
    kept, counts = claimed(table, (WINDOW_5,))
    assert set(kept.column("id").to_pylist()) == {"on-edge", "stray", "early-stray"}
    assert counts == ClaimCounts(records=6, claimed=4, control=1, strays=2)
    assert kept.column("chunkRecordIndex").to_pylist() == [1, 3, 4]  # the decoded columns travel with them


@given(
    st.lists(
        st.tuples(st.integers(-3 * 3600, 3 * 3600), st.integers(0, 9_999_999), st.booleans()),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 59),
    st.sets(st.integers(-3, 3), max_size=4),
)
def test_claim_of_a_batch_is_the_rule_for_each_record(offsets, grid_minute, window_hours):
    """The vectorised claim against :meth:`WindowGrid.claim`, record by record, on any grid."""
    grid = WindowGrid(grid_minute)
    segment = to_ticks(SEGMENT)
    times = [segment + seconds * TICKS_PER_SECOND + fraction for seconds, fraction, _ in offsets]
    windows = tuple(grid.window_of(segment) + h * HOUR_TICKS for h in sorted(window_hours))
    n = len(times)
    batch = pa.RecordBatch.from_pydict(
        {
            **{f.name: pa.nulls(n, f.type) for f in RECORD_SCHEMA},
            "id": [str(i) for i in range(n)],
            "eventType": ["Control" if control else "BlobCreated" for _, _, control in offsets],
            "eventTimeTicks": times,
            "segmentStart": [SEGMENT] * n,
        },
        schema=RECORD_SCHEMA,
    )
    kept, counts = claim(batch, ClaimRule(grid.offset_ticks, windows))
    expected = []
    claimed_count = control_count = stray_count = 0
    for i, (ticks, (_, _, control)) in enumerate(zip(times, offsets, strict=True)):
        window, stray = grid.claim(ticks, segment)
        if window in windows:
            claimed_count += 1
            control_count += control
            if not control:
                stray_count += stray
                expected.append((str(i), window, stray))
    assert [(r["id"], r["claimWindowTicks"], r["isStray"]) for r in kept.to_pylist()] == expected
    assert counts == ClaimCounts(n, claimed_count, control_count, stray_count)


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
    out = dedupe_by_id(df).collect()
    assert sorted((r["id"], r["chunkRecordIndex"]) for r in out) == [("a", 0), ("b", 3)]


def test_event_rows_keep_time_string_and_partition_date(spark, tmp_path):
    df = records_df(
        spark,
        tmp_path,
        [event("a", "2026-01-01T23:59:59.9999999Z")],
        windows=(datetime(2026, 1, 1, 23, 10, tzinfo=UTC),),
        chunk="log/00/2026/01/01/2310/00000.avro",
        segment=datetime(2026, 1, 1, 23, 10, tzinfo=UTC),
    )
    [row] = to_event_rows(df, datetime(2026, 2, 1, tzinfo=UTC)).collect()
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
    rows = to_event_rows(df, datetime(2026, 2, 1, tzinfo=UTC))
    state = {r["subject"]: r for r in latest_state_per_blob(rows).collect()}
    assert state[SUBJECT]["eventId"] == "newest"
    assert state[SUBJECT]["isDeleted"] is deleted
    assert (state[SUBJECT]["container"], state[SUBJECT]["blobName"]) == ("photos", "2026/cat.jpg")
    other = state["/blobServices/default/containers/c2/blobs/a/b/c.txt"]
    assert (other["container"], other["blobName"], other["isDeleted"]) == ("c2", "a/b/c.txt", False)


def test_the_state_windows_sort_keys_order_events_as_the_merge_guards_struct_does(spark):
    """The state batch sorts by :func:`latest_first` (plain keys, one by one); the MERGE guard compares
    :func:`state_order` structs: for any events, nulls and ties included, the batch's pick per blob is the
    greatest by the guard's order."""
    import random

    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from lakefeed.blob.transforms import latest_first, state_order

    rng = random.Random(11)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    rows = [
        (
            f"s{rng.randrange(40)}",
            rng.choice([None, "", "f", "10", "0f", "a" * 3, format(rng.randrange(300), "x")]),
            rng.choice([None, base, base.replace(minute=rng.randrange(3))]),
            f"e{i:04d}",
        )
        for i in range(600)
    ]
    events = spark.createDataFrame(rows, "subject string, sequencer string, eventTimestamp timestamp, eventId string")
    picked = (
        events.withColumn("_rank", F.row_number().over(Window.partitionBy("subject").orderBy(*latest_first())))
        .where("_rank = 1")
        .select("subject", "eventId")
    )
    greatest = events.groupBy("subject").agg(F.max(F.struct(state_order(), F.col("eventId").alias("id"))).alias("m"))
    expected = {r["subject"]: r["m"]["id"] for r in greatest.collect()}
    assert {r["subject"]: r["eventId"] for r in picked.collect()} == expected
    assert len(expected) > 30


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
        rows = to_event_rows(df, datetime(2026, 2, 1, tzinfo=UTC))
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


@given(st.lists(st.integers(-(2**62), 2**62), max_size=20), st.integers(1, 2**40))
def test_the_claims_modulo_is_pythons_floor_modulo(values, divisor):
    from lakefeed.blob.claim import _floor_mod

    assert _floor_mod(pa.array(values, pa.int64()), divisor).to_pylist() == [v % divisor for v in values]
