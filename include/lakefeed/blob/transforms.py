"""Pure DataFrame → DataFrame transforms of decoded change feed records.

No paths, no configuration, no actions: each function takes and returns a
DataFrame, so each is unit-tested on a handful of rows.
"""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakefeed.blob.schema import DELETE_EVENT_TYPE
from lakefeed.blob.timegrid import TICKS_PER_MICROSECOND, TICKS_PER_SECOND

TICKS_PER_DAY = 86_400 * TICKS_PER_SECOND
SUBJECT_PATTERN = r"^/blobServices/default/containers/([^/]+)/blobs/(.+)$"
SEQUENCER_WIDTH = 64

# Lineage order: which copy of a duplicated event id is kept.
LINEAGE_ORDER = ("segmentStart", "shard", "chunkFile", "chunkRecordIndex")

STATE_BLOB_PROPERTIES = (
    "contentType",
    "contentLength",
    "blobType",
    "blobTier",
    "etag",
    "url",
    "blobVersion",
    "snapshot",
    "api",
)


def _floor_div(column: str, divisor: int) -> Column:
    """Exact integer floor division: ticks (~1.8e16) do not fit a double's 53-bit mantissa."""
    return F.expr(f"({column} - pmod({column}, {divisor})) div {divisor}")


def _ticks_to_timestamp(column: str) -> Column:
    # Truncates to microseconds: the string eventTime keeps the full 100 ns value.
    return F.timestamp_micros(_floor_div(column, TICKS_PER_MICROSECOND))


def dedupe_by_id(events: DataFrame) -> DataFrame:
    """One row per event ``id``: the first copy in lineage order (deterministic)."""
    first = Window.partitionBy("id").orderBy(*LINEAGE_ORDER)
    return events.withColumn("_copy", F.row_number().over(first)).where(F.col("_copy") == 1).drop("_copy")


def to_event_rows(events: DataFrame, ingested_at: datetime) -> DataFrame:
    """Rows of the events table: the feed's own fields, then derived and lineage columns."""
    return events.select(
        "id",
        "eventType",
        "eventTime",
        _ticks_to_timestamp("eventTimeTicks").alias("eventTimestamp"),
        F.date_from_unix_date(_floor_div("eventTimeTicks", TICKS_PER_DAY).cast("int")).alias("eventDate"),
        "subject",
        "topic",
        "schemaVersion",
        "data",
        "extra",
        "eventTimeTicks",
        "claimWindow",
        "isStray",
        "segmentStart",
        "shard",
        "chunkFile",
        "chunkRecordIndex",
        F.lit(ingested_at).cast("timestamp").alias("ingestedAt"),
    )


def sequencer_key(sequencer: Column) -> Column:
    """Sequencers are hex strings: left-padding makes string order numeric order."""
    return F.coalesce(F.lpad(sequencer, SEQUENCER_WIDTH, "0"), F.lit(""))


def _state_order_fields(alias: str | None = None) -> list[Column]:
    """The fields of :func:`state_order`, most significant first."""

    def column(name: str) -> Column:
        return F.col(f"{alias}.{name}" if alias else name)

    return [
        sequencer_key(column("sequencer")).alias("sequencer"),
        column("eventTimestamp").alias("eventTimestamp"),
        column("eventId").alias("eventId"),
    ]


def state_order(alias: str | None = None) -> Column:
    """The order of a blob's events for its state row, one rule for the batch and the MERGE guard:
    ``data.sequencer`` as a hex number (an event without one before every event with one), then
    ``eventTimestamp``, then ``eventId``. A total order on distinct events, so which event a blob's row
    ends with never depends on the order runs apply them."""
    return F.struct(*_state_order_fields(alias))


def latest_first() -> list[Column]:
    """:func:`state_order` descending, as sort keys: its fields one by one, each descending (a struct compares
    field by field, a null field first, so descending puts a null last, as ``desc()`` does). Spark sorts
    by plain keys with its prefix sort, and by a struct key with whole-row comparisons only."""
    return [field.desc() for field in _state_order_fields()]


def latest_state_per_blob(event_rows: DataFrame) -> DataFrame:
    """Rows of the state table: per ``subject``, the latest event by :func:`state_order`."""
    # Only the state's own columns go through the shuffle, not whole events.
    narrow = event_rows.where(F.col("subject").isNotNull()).select(
        "subject",
        F.col("data.sequencer").alias("sequencer"),
        F.col("id").alias("eventId"),
        "eventType",
        "eventTime",
        "eventTimestamp",
        "eventTimeTicks",
        *[F.col(f"data.{name}").alias(name) for name in STATE_BLOB_PROPERTIES],
        "claimWindow",
        F.col("ingestedAt").alias("updatedAt"),
    )
    by_subject = Window.partitionBy("subject").orderBy(*latest_first())
    latest = narrow.withColumn("_rank", F.row_number().over(by_subject)).where(F.col("_rank") == 1)
    container = F.regexp_extract("subject", SUBJECT_PATTERN, 1)
    blob_name = F.regexp_extract("subject", SUBJECT_PATTERN, 2)
    return latest.select(
        "subject",
        F.when(container != "", container).alias("container"),
        F.when(blob_name != "", blob_name).alias("blobName"),
        "sequencer",
        "eventId",
        "eventType",
        "eventTime",
        "eventTimestamp",
        (F.col("eventType") == F.lit(DELETE_EVENT_TYPE)).alias("isDeleted"),
        *STATE_BLOB_PROPERTIES,
        "claimWindow",
        "updatedAt",
    )
