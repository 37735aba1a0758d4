"""One run of the blob change feed pipeline: plan what it reads, decode, claim, dedupe, MERGE.

``main()`` of ``spark_jobs/blob_changefeed_job.py`` calls :func:`run`. The
order matters for the promises: every chunk file is decoded and checked
(an action over all records) before any target is created or written, so bad
input stops the run with nothing written; both MERGEs are idempotent, so a
re-run after a failure between them converges.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakefeed.blob.claim import CLAIMED_SCHEMA, ClaimCounts, ClaimRule
from lakefeed.blob.config import DECODERS
from lakefeed.blob.decode import ChunkTask, CountsByChunk
from lakefeed.blob.feed import ChangeFeed, ChunkRef
from lakefeed.blob.reading import Reading, plan_reading
from lakefeed.blob.schema import spark_schema
from lakefeed.blob.shards import RetentionDays
from lakefeed.blob.summary import RunSummary
from lakefeed.blob.timegrid import HOUR, to_ticks
from lakefeed.blob.transforms import dedupe_by_id, latest_state_per_blob, state_order, to_event_rows
from lakefeed.delta import (
    UPDATED_IN_PLACE,
    ensure_table,
    first_load,
    plain_encoded,
    reported_commit,
    session_settings,
    statistics_on,
    table_exists,
    table_location,
    table_version,
    tagged_write,
)
from lakefeed.documents import format_document, snake
from lakefeed.errors import refusal_from_worker
from lakefeed.spark import jvm_location
from lakefeed.storage import Store

log = logging.getLogger(__name__)

PIPELINE = "blob_changefeed"
EVENTS_PARTITIONS = ("eventDate",)
# Columns of the events table whose values hardly repeat within a file: written without a dictionary
# (:func:`lakefeed.delta.plain_encoded`).
EVENTS_PLAIN_COLUMNS = (
    "id",
    "eventTime",
    "eventTimestamp",
    "eventTimeTicks",
    "chunkRecordIndex",
    "data.clientRequestId",
    "data.requestId",
    "data.etag",
    "data.url",
    "data.sequencer",
    "data.contentLength",
)
# The events table keeps file statistics on the columns that follow the feed's time, which its MERGE (the
# batch's eventTimeTicks range) and queries by time prune with. Each file holds a hash-partitioned share of its
# run's events, so the minimum and maximum of the other columns (random ids and blob paths, lineage) span
# nearly their whole range in every file and prune nothing; collecting them cost ~15 % of a first load.
EVENTS_STATISTICS = statistics_on(("eventTimestamp", "eventTimeTicks", "claimWindow", "segmentStart", "ingestedAt"))
STATE_PROPERTIES = {"delta.enableChangeDataFeed": "true", **UPDATED_IN_PLACE}
# The dedupe keeps the first copy of each id (row_number() = 1). Spark would otherwise sort every decoding
# task's rows to drop copies before the shuffle (a window group limit), and copies of an event almost never
# share a chunk file: a sort of the whole batch for nothing (~10 % of the decode and dedupe).
DEDUPE_SETTINGS = {"spark.sql.optimizer.windowGroupLimitThreshold": "-1"}


def read_records(spark: SparkSession, reading: Reading, feed_root: str, decoder: str = "auto") -> DataFrame:
    """Decoded records (:data:`~lakefeed.blob.schema.RECORD_SCHEMA`) of every non-empty chunk file the run
    reads, unclaimed: one Spark task per chunk file, each decoded in a Python worker
    (:func:`lakefeed.blob.decode.decode_chunk`; ``decoder="python"`` forces the record-by-record path) and
    checked there, so a bad file fails the stage naming it."""
    chunks = _chunk_refs(reading, feed_root, decoder)
    return _one_task_each(spark, len(chunks)).mapInArrow(ChunkTask(chunks), spark_schema())


def read_claimed(
    spark: SparkSession,
    reading: Reading,
    feed_root: str,
    counts: Accumulator[dict[str, ClaimCounts]],
    decoder: str = "auto",
) -> DataFrame:
    """The records the run's windows own, ``Control`` records left out, with their claim
    (:data:`~lakefeed.blob.claim.CLAIMED_SCHEMA`), as :func:`read_records` decodes them; the coverage rule
    is applied in the decoding task (:func:`lakefeed.blob.claim.claim`), which adds each chunk file's
    figures to ``counts``."""
    chunks = _chunk_refs(reading, feed_root, decoder)
    rule = ClaimRule(reading.grid.offset_ticks, tuple(to_ticks(w) for w in reading.windows))
    return _one_task_each(spark, len(chunks)).mapInArrow(ChunkTask(chunks, rule, counts), spark_schema(CLAIMED_SCHEMA))


def _chunk_refs(reading: Reading, feed_root: str, decoder: str) -> list[ChunkRef]:
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be one of {', '.join(DECODERS)}, not {decoder!r}")
    # Largest files first: the longest tasks start first, so the stage ends evenly.
    chunks = sorted((c for c in reading.chunk_files if c.size > 0), key=lambda c: -c.size)
    return [ChunkRef(feed_root, c.path, c.shard, c.segment_start, decoder == "auto") for c in chunks]


def _one_task_each(spark: SparkSession, count: int) -> DataFrame:
    """``0 .. count-1``, one number in each of ``count`` partitions: made in the JVM, so no Python worker
    serves a task its input (each task finds its chunk file by that number)."""
    return spark.range(0, count, 1, max(1, count))


def reading(
    feed_root: str,
    window_start: datetime,
    window_end: datetime,
    *,
    acknowledge_data_loss: bool = False,
    retention_days: RetentionDays = None,
) -> Reading:
    """Plan a run without Spark: a window that is not ready, or a shard folder of a segment read that retention
    may have emptied (unless ``acknowledge_data_loss``: then it is skipped), is refused before any JVM starts;
    ``retention_days`` is the account's change feed retention (:mod:`lakefeed.blob.shards`)."""
    return plan_reading(
        ChangeFeed(Store(feed_root)),
        window_start,
        window_end,
        acknowledge_data_loss=acknowledge_data_loss,
        retention_days=retention_days,
    )


def run(
    spark: SparkSession, reading: Reading, feed_root: str, events_table: str, state_table: str, decoder: str = "auto"
) -> RunSummary:
    clock = _Clock()
    events_table, state_table = table_location(events_table), table_location(state_table)
    summary = RunSummary(
        **{
            snake(k): v
            for k, v in reading.describe().items()
            if k in ("windows", "lastConsumable", "segments", "missingShards", "emptyShards", "shardVerdicts")
        },
        chunk_files=len(reading.chunk_files),
        empty_chunk_files=sum(1 for c in reading.chunk_files if c.size == 0),
        bytes_read=reading.bytes,
        events_table=events_table,
        state_table=state_table,
        lag_hours=(reading.last_consumable - (reading.windows[-1] + HOUR)).total_seconds() / 3600,
    )
    log.info(
        "planned %d window(s) %s..%s: %d segment(s), %d chunk file(s), %d bytes",
        len(reading.windows),
        summary.windows[0],
        summary.windows[-1],
        len(reading.segments),
        summary.chunk_files,
        summary.bytes_read,
    )
    clock.lap("plan")

    # One pass decodes every chunk file, claims its records and counts what it saw (in the decoding
    # tasks, no second read), and caches only the deduplicated batch: corrupt input fails here, before
    # any target is created or written.
    counts = spark.sparkContext.accumulator({}, CountsByChunk())
    batch = to_event_rows(dedupe_by_id(read_claimed(spark, reading, feed_root, counts, decoder)), datetime.now(UTC))
    with session_settings(spark, DEDUPE_SETTINGS):  # persist() plans what the cache holds
        batch = batch.persist()
    try:
        try:
            summary.events_unique = batch.count()
        except Exception as exc:
            raise refusal_from_worker(exc) or exc  # noqa: B904 (the worker error stays its context)
        seen = sum(counts.value.values(), ClaimCounts())
        summary.records_read = seen.records
        summary.records_claimed = seen.claimed
        summary.control_dropped = seen.control
        summary.events_claimed = seen.claimed - seen.control
        summary.strays = seen.strays
        summary.duplicates_removed = summary.events_claimed - summary.events_unique
        clock.lap("decode_dedupe")
        _merge(spark, batch, jvm_location(events_table), jvm_location(state_table), summary)
        clock.lap("merge")
    finally:
        batch.unpersist()
    summary.seconds = clock.laps
    return summary


def _merge(spark: SparkSession, batch: DataFrame, events_table: str, state_table: str, summary: RunSummary) -> None:
    """Both MERGEs, each retried when a concurrent run commits first (both are idempotent)."""
    metadata = {"pipeline": PIPELINE, "windows": summary.windows, "lastConsumable": summary.last_consumable}
    state_rows = latest_state_per_blob(batch)
    if summary.events_unique == 0:
        log.info("no events claimed by %s: targets unchanged", ", ".join(summary.windows))
        for table, schema, partitions, properties in (
            (events_table, batch.schema, EVENTS_PARTITIONS, EVENTS_STATISTICS),
            (state_table, state_rows.schema, (), STATE_PROPERTIES),
        ):
            tagged_write(spark, table, metadata, lambda: ensure_table(spark, table, schema, partitions, properties))  # noqa: B023 (called at once)
        summary.events_table_version = table_version(spark, events_table)
        summary.state_table_version = table_version(spark, state_table)
        return
    _merge_events(spark, batch, events_table, metadata, summary)
    _merge_state(spark, state_rows, state_table, metadata, summary)


def _merge_events(
    spark: SparkSession, batch: DataFrame, events_table: str, metadata: dict[str, Any], summary: RunSummary
) -> None:
    """Insert-if-absent on ``(eventDate, id)`` (:func:`_events_condition`); a table not there yet is
    created holding the batch, in one commit."""
    properties = EVENTS_STATISTICS
    tags = {**metadata, "target": "events"}
    created = None
    with plain_encoded(spark, EVENTS_PLAIN_COLUMNS):
        if not table_exists(spark, events_table):
            created = first_load(spark, events_table, batch, properties, tags, partition_by=EVENTS_PARTITIONS)
        if created is None:
            condition = _events_condition(batch)

            def write() -> None:
                events = ensure_table(spark, events_table, batch.schema, EVENTS_PARTITIONS, properties)
                events.alias("t").merge(batch.alias("s"), condition).whenNotMatchedInsertAll().execute()

            commit = tagged_write(spark, events_table, tags, write)
    if created is not None:
        commit = created
        summary.events_inserted = commit["metrics"].get("numOutputRows", 0)
        summary.events_bytes_written = commit["metrics"].get("numOutputBytes", 0)
    else:
        metrics = commit["metrics"] if commit else {}
        summary.events_inserted = metrics.get("numTargetRowsInserted", 0)
        summary.events_bytes_written = metrics.get("numTargetBytesAdded", 0)
    summary.events_table_version = commit["version"] if commit else table_version(spark, events_table)
    summary.commits += reported_commit(summary.events_table or events_table, commit)
    summary.commits_made += commit is not None


def _events_condition(batch: DataFrame) -> str:
    """The events MERGE's condition, pruned to the dates and event times in the batch.

    The literal dates prune partitions; the literal tick range prunes files within them by their
    eventTimeTicks statistics (rows land in window order, so a file spans a few hours), so finding the
    ids already present reads the files of these hours, not whole days. An event's id and its eventTime
    travel together (a copy of an event is the same record), so a stored copy always falls in the range.
    """
    bounds = batch.agg(
        F.collect_set("eventDate").alias("dates"),
        F.min("eventTimeTicks").alias("low"),
        F.max("eventTimeTicks").alias("high"),
    ).collect()[0]
    date_list = ", ".join(f"DATE'{d.isoformat()}'" for d in sorted(bounds["dates"]))
    return (
        f"t.eventDate IN ({date_list}) AND t.eventTimeTicks BETWEEN {bounds['low']} AND {bounds['high']} "
        f"AND t.eventDate = s.eventDate AND t.id = s.id"
    )


def _merge_state(
    spark: SparkSession, state_rows: DataFrame, state_table: str, metadata: dict[str, Any], summary: RunSummary
) -> None:
    """Per blob, the latest event by :func:`state_order`; an update only when the incoming event is later
    in that order than the stored one."""
    newer = state_order("s") > state_order("t")
    tags = {**metadata, "target": "state"}
    commit = None
    if not table_exists(spark, state_table):
        commit = first_load(spark, state_table, state_rows, STATE_PROPERTIES, tags)
    if commit is not None:
        summary.state_inserted = commit["metrics"].get("numOutputRows", 0)
        summary.state_bytes_written = commit["metrics"].get("numOutputBytes", 0)
    else:

        def write() -> None:
            state = ensure_table(spark, state_table, state_rows.schema, properties=STATE_PROPERTIES)
            (
                state.alias("t")
                .merge(state_rows.alias("s"), "t.subject = s.subject")
                .whenMatchedUpdateAll(condition=newer)
                .whenNotMatchedInsertAll()
                .execute()
            )

        commit = tagged_write(spark, state_table, tags, write)
        metrics = commit["metrics"] if commit else {}
        summary.state_inserted = metrics.get("numTargetRowsInserted", 0)
        summary.state_updated = metrics.get("numTargetRowsUpdated", 0)
        summary.state_bytes_written = metrics.get("numTargetBytesAdded", 0)
        summary.state_files_rewritten = metrics.get("numTargetFilesRemoved", 0)
        summary.state_rows_copied = metrics.get("numTargetRowsCopied", 0)
    summary.state_table_version = commit["version"] if commit else table_version(spark, state_table)
    summary.commits += reported_commit(summary.state_table or state_table, commit)
    summary.commits_made += commit is not None


class _Clock:
    def __init__(self) -> None:
        import time

        self._time = time.perf_counter
        self._last = self._time()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = self._time()
        self.laps[name] = round(now - self._last, 3)
        self._last = now


def format_summary(summary: RunSummary) -> str:
    d = summary.to_dict()
    title = f"blob change feed run: windows {d['windows'][0]} .. {d['windows'][-1]} ({len(d['windows'])})"
    return format_document(title, d, leave_out=("windows", "segments", "eventsTable", "stateTable", "commits"))
