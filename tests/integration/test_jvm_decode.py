"""Spark's Avro reader and the Python decoder: the same records, lineage and errors."""

from __future__ import annotations

import json

import fastavro
import pytest
from pyspark.sql import functions as F

from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.blob.jvm_decode import event_time_ticks, one_file_per_partition
from lakefeed.blob.job import plan, plan_decode, read_records, run
from lakefeed.blob.timegrid import HOUR, parse_event_time
from lakefeed.errors import FeedCorruptError

pytestmark = pytest.mark.integration
SPEC = FeedSpec(hours=4, events_per_hour=500, shards=2, records_per_chunk=250, stray_rate=0.01, codec="deflate",
                duplicate_rate=0.01, seed=11)


@pytest.fixture
def feed(tmp_path):
    root = tmp_path / "change feed+1%"  # Spark names files by URI: %20, a literal + and %25
    truth = generate_feed(root, SPEC)
    windows = truth.ready_windows()
    return root, plan(str(root), windows[0], windows[-1] + HOUR)


def _add_unknown_field(path):
    """Rewrite a chunk file with a field the superset does not know (it must take the Python decoder)."""
    with path.open("rb") as handle:
        reader = fastavro.reader(handle)
        schema, records = reader.writer_schema, list(reader)
    schema["fields"].append({"name": "metadataVersion", "type": ["null", "string"], "default": None})
    for record in records:
        record["metadataVersion"] = "2"
    with path.open("wb") as handle:
        fastavro.writer(handle, schema, records)


def _rows(spark, records):
    with one_file_per_partition(spark):
        rows = records.drop("_recordProblem").collect()
    return sorted(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in rows)


def test_both_decoders_give_the_same_records_and_lineage(spark, feed):
    root, run_plan = feed
    odd = root / max((c for c in run_plan.chunk_files if c.path.startswith("log/00/")), key=lambda c: c.size).path
    _add_unknown_field(odd)
    decode = plan_decode(run_plan, str(root))
    assert decode.in_jvm and [c[1] for c in decode.in_python] == [str(odd.relative_to(root))]

    in_jvm = _rows(spark, read_records(spark, run_plan, str(root)))
    in_python = _rows(spark, read_records(spark, run_plan, str(root), decoder="python"))
    assert len(in_jvm) == sum(1 for c in run_plan.chunk_files if c.size for _ in fastavro.reader(
        (root / c.path).open("rb")))
    assert in_jvm == in_python
    extra = read_records(spark, run_plan, str(root)).where(F.col("extra").isNotNull())
    assert {r["chunkFile"] for r in extra.collect()} == {str(odd.relative_to(root))}


EVENT_TIMES = [
    "2026-01-01T00:10:00.1234567Z", "2026-01-01T00:09:59.9999999Z", "2026-02-28T23:59:59.0000001Z",
    "2026-01-01T00:10:00Z", "2026-01-01T00:10:00.123Z", "2026-01-01T00:10:00.123456789Z",
    "2026-01-01T05:40:00.5+05:30", "2026-01-01T00:10:00-01:00", "2026-01-01T00:10:00.25",
    "2026-01-01T00:10:60.0000000Z", "2026-13-01T00:10:00.0000000Z", "2026-01-01T00:10:00.+123456Z",
    "2026-01-01 00:10:00Z", "yesterday", "", None,
]


def test_event_time_ticks_in_sql_equal_the_python_parser(spark):
    def python(text):
        try:
            return parse_event_time(text if isinstance(text, str) else "")
        except ValueError:
            return None

    frame = spark.createDataFrame([(t,) for t in EVENT_TIMES], "eventTime string")
    got = {r["eventTime"]: r["ticks"] for r in
           frame.select("eventTime", event_time_ticks(F.col("eventTime")).alias("ticks")).collect()}
    assert got == {t: python(t) for t in EVENT_TIMES}


def test_a_bad_record_in_a_jvm_decoded_file_is_named_and_nothing_is_written(spark, feed, tmp_path):
    root, run_plan = feed
    chunk = root / max((c for c in run_plan.chunk_files if c.path.startswith("log/01/")), key=lambda c: c.size).path
    with chunk.open("rb") as handle:
        reader = fastavro.reader(handle)
        schema, records = reader.writer_schema, list(reader)
    records[3]["schemaVersion"] = 9
    records[5]["eventTime"] = "not a time"
    with chunk.open("wb") as handle:
        fastavro.writer(handle, schema, records)
    relative = str(chunk.relative_to(root))
    assert relative in [c[1] for c in plan_decode(run_plan, str(root)).in_jvm]
    with pytest.raises(FeedCorruptError, match=rf"{relative}: record 3: unknown schemaVersion 9 \(supported"):
        run(spark, run_plan, str(root), str(tmp_path / "events"), str(tmp_path / "state"))
    assert not (tmp_path / "events").exists() and not (tmp_path / "state").exists()
