"""One run of the CockroachDB pipeline: plan what a resolved range reads, read its files, keep the greatest
``updated`` per key, MERGE each topic into its Delta table guarded by ``updated``.

``main()`` of ``spark_jobs/cockroach_changefeed_job.py`` calls :func:`reading` (no JVM: a range whose
RESOLVED file is missing is refused before Spark starts) and :func:`run`. Every file is decoded and
checked (an action over all messages) before any target is written, so bad input stops the run with
nothing written. The MERGE applies a change only when its ``updated`` is newer than the stored row's
and keeps deletes as tombstones, so at-least-once duplicates, re-emissions and late files, in any
order and any number of replays, end with the targets one clean pass would leave.

A file of the sink's known naming bugs can appear after its RESOLVED file was applied, named before
it. The run lists ``late_file_lookback`` before its ``--after-resolved`` and applies the data files
there that the ledger ``<target-root>/_lakefeed_applied_files`` does not hold.
"""

from __future__ import annotations

import heapq
import logging
import time
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

from pyspark.accumulators import Accumulator
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lakefeed.crdb import APPLIED_FILES_TABLE, topic_tables
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.messages import (
    CHANGE_SCHEMA,
    FILE_INPUT_SCHEMA,
    LATEST_SCHEMA,
    TASK_BYTES,
    CountsByPartition,
    LinesQuarantined,
    Quarantined,
    Shape,
    ShapesSeen,
    TopicCounts,
    counts_by_topic,
    latest_in_task,
    latest_rows,
)
from lakefeed.crdb.sink import SinkFile, SinkRange, list_sink, listing_floor, plan_range, resolved_value
from lakefeed.crdb.summary import CrdbSummary, TopicSummary
from lakefeed.crdb.transforms import (
    DELETED_COLUMN,
    HLC_DECIMAL,
    KEY_COLUMN,
    TARGET_COLUMNS,
    UPDATED_COLUMN,
    cast_failures,
    column_type,
    kinds_by_column,
    target_rows,
)
from lakefeed.delta import (
    UPDATED_IN_PLACE,
    count_effects,
    effects_of_new_keys,
    ensure_table,
    first_load,
    reported_commit,
    table_location,
    table_version,
    tagged_write,
)
from lakefeed.documents import format_document, snake
from lakefeed.errors import FeedCorruptError, refusal_from_worker
from lakefeed.spark import jvm_location
from lakefeed.storage import Store
from lakefeed.tombstones import check_horizon, remove_expired

log = logging.getLogger(__name__)

PIPELINE = "cockroach_changefeed"
LEDGER = APPLIED_FILES_TABLE
TARGET_PROPERTIES = {"delta.enableChangeDataFeed": "true", **UPDATED_IN_PLACE}
DEFAULT_LATE_FILE_LOOKBACK = timedelta(hours=24)
COMPRESSED_RATIO = 8  # about how much larger a gzip or zstd file of changefeed JSON lines is decompressed


def reading(
    sink_root: str, after: Hlc | None, through: Hlc, late_file_lookback: timedelta = DEFAULT_LATE_FILE_LOOKBACK
) -> tuple[SinkRange, list[SinkFile]]:
    """The range to apply, without Spark: refused (exit 2) when a RESOLVED file is missing or invalid.
    Returns the range and the listing it came from (late files are settled against the ledger later)."""
    store = Store(sink_root)
    files = list_sink(store, since=listing_floor(after, late_file_lookback))
    sink_range = plan_range(files, after, through, store.root)
    for resolved in filter(None, (sink_range.after, sink_range.through)):
        resolved_value(store, resolved)
    return sink_range, files


def run(
    spark: SparkSession,
    sink_root: str,
    target_root: str,
    sink_range: SinkRange,
    files: list[SinkFile],
    parquet_keys: dict[str, list[str]] | None = None,
    quarantine_table: str | None = None,
    tombstone_retention: timedelta | None = None,
    snapshot_topics: list[str] | None = None,
) -> CrdbSummary:
    """Apply the range's files to the topic tables. With ``quarantine_table``, lines that are not messages
    (:class:`~lakefeed.errors.UnreadableLine`) go to that Delta table instead of refusing the run. With
    ``tombstone_retention``, tombstones from before the range whose ``updated`` is older than that before its
    RESOLVED timestamp are then removed (:mod:`lakefeed.tombstones`). With ``snapshot_topics``, the range is
    an initial scan of those topics at its RESOLVED timestamp: a stored row of theirs the scan does not hold,
    last changed before it, was deleted meanwhile (changes a cluster's garbage collection removed before they
    were pulled) and becomes a tombstone at the scan's timestamp, so the table equals the scan."""
    clock = time.perf_counter()
    target_root = table_location(target_root)
    tables = jvm_location(target_root).rstrip("/")  # where Spark opens the topic tables and the ledger
    applied = _applied_files(spark, f"{tables}/{LEDGER}")
    sink_range = plan_range(
        files,
        sink_range.after.timestamp if sink_range.after else None,
        sink_range.through.timestamp,
        Store(sink_root).root,
        applied,
    )
    summary = CrdbSummary(
        **{
            snake(k): v
            for k, v in sink_range.describe().items()
            if k in ("afterResolved", "throughResolved", "files", "lateFiles")
        },
        bytes_read=sink_range.bytes,
        target_root=target_root,
    )
    summary.resolved_lag_seconds = round(time.time() - sink_range.through.timestamp.wall / 1e9, 3)
    if sink_range.late:
        log.warning(
            "%d late file(s) named before --after-resolved and never applied: %s",
            len(sink_range.late),
            ", ".join(f.key for f in sink_range.late),
        )
    # One decode of every file, checked: bad input fails here, before any target is written. The decode
    # feeds the last change per key directly (the messages are never cached); the counts come from the
    # latest rows, the column kinds from the shapes the decode tasks saw.
    shapes = spark.sparkContext.accumulator(set(), ShapesSeen())
    partition_counts = spark.sparkContext.accumulator({}, CountsByPartition())
    quarantine = spark.sparkContext.accumulator({}, LinesQuarantined()) if quarantine_table else None
    latest = _read_latest(
        spark, sink_root, sink_range, parquet_keys or {}, shapes, quarantine, partition_counts
    ).persist()
    try:
        try:
            latest.count()  # the latest rows cached; their figures come with them (CountsByPartition)
        except Exception as exc:
            raise refusal_from_worker(exc) or exc  # noqa: B904 (the worker error stays its context)
        per_topic = counts_by_topic(partition_counts.value)
        summary.messages_read = sum(figures.messages for figures in per_topic.values())
        summary.duplicates_dropped = summary.messages_read - sum(figures.changes for figures in per_topic.values())
        summary.superseded_in_batch = sum(figures.changes - figures.keys for figures in per_topic.values())
        newest = max((f.newest for f in per_topic.values() if f.newest is not None), default=None)
        if newest is not None:
            summary.newest_updated = str(newest)
        kinds = kinds_by_column(shapes.value)
        unnamed = sorted(set(per_topic) - set(snapshot_topics)) if snapshot_topics is not None else []
        if unnamed:  # a scan of a table the snapshot does not name: its deletes would go unseen
            raise FeedCorruptError(
                f"the initial scan through {sink_range.through.timestamp} holds rows of {', '.join(unnamed)}, "
                f"which --snapshot-topics ({', '.join(snapshot_topics or [])}) does not name: the configured "
                f"tables and the changefeed's table names differ"
            )
        for topic in per_topic:
            _check_tombstone_horizon(f"{target_root.rstrip('/')}/{topic}", sink_range)
        checked: dict[str, dict[str, str]] = {}  # topic -> the table's column types its values were checked against
        for topic in sorted(per_topic):  # every topic's values checked before any table is written
            checked[topic] = _existing_types(spark, f"{tables}/{topic}")
            _refuse_values_that_do_not_fit(
                latest.where(F.col("topic") == topic), topic, kinds.get(topic, {}), checked[topic]
            )
        summary.seconds["read"] = round(time.perf_counter() - clock, 3)
        metadata = {
            "pipeline": PIPELINE,
            "afterResolved": summary.after_resolved,
            "throughResolved": summary.through_resolved,
        }
        if quarantine is not None and quarantine_table is not None:
            summary.quarantined = len(quarantine.value)
            _refuse_a_misread_feed(quarantine.value, summary.messages_read)
            summary.commits += reported_commit(
                table_location(quarantine_table),
                _quarantine(spark, jvm_location(table_location(quarantine_table)), quarantine.value, metadata),
            )
        for topic, row in sorted(per_topic.items()):
            topic_summary = _merge_topic(
                spark,
                latest.where(F.col("topic") == topic),
                f"{tables}/{topic}",
                topic,
                kinds.get(topic, {}),
                row.keys,
                row.live,
                metadata,
                summary.commits,
                f"{target_root.rstrip('/')}/{topic}",
                sink_range,
                sink_range.through.timestamp if topic in (snapshot_topics or ()) else None,
                checked[topic],
            )
            topic_summary.messages = row.messages
            summary.topics[topic] = topic_summary
        for topic in sorted(set(snapshot_topics or ()) - set(per_topic)):  # empty at the scan: all deleted
            emptied = _empty_at_snapshot(
                spark, f"{tables}/{topic}", sink_range.through.timestamp, {**metadata, "topic": topic}
            )
            if emptied is not None:
                summary.commits += reported_commit(f"{target_root.rstrip('/')}/{topic}", emptied)
                deleted = int(emptied["metrics"].get("numUpdatedRows", 0))
                summary.topics[topic] = TopicSummary(
                    keys_changed=deleted, deleted=deleted, target_version=emptied["version"]
                )
        if tombstone_retention is not None and sink_range.after is not None:
            for table in topic_tables(target_root, quarantine_table):  # every topic, with messages here or not
                topic = table.rsplit("/", 1)[1]
                summary.tombstones_removed += _remove_expired_tombstones(
                    spark, f"{tables}/{topic}", table, sink_range, tombstone_retention, metadata, summary.commits
                )
        for figures in summary.topics.values():
            summary.inserted += figures.inserted
            summary.updated += figures.updated
            summary.deleted += figures.deleted
            summary.stale_skipped += figures.stale_skipped
            summary.commits_made += figures.committed
        summary.commits += reported_commit(
            f"{target_root.rstrip('/')}/{LEDGER}", _record_applied(spark, f"{tables}/{LEDGER}", sink_range, metadata)
        )
    finally:
        latest.unpersist()
    summary.seconds["merge"] = round(time.perf_counter() - clock - summary.seconds["read"], 3)
    return summary


def _read_latest(
    spark: SparkSession,
    sink_root: str,
    sink_range: SinkRange,
    parquet_keys: dict[str, list[str]],
    shapes: Accumulator[set[Shape]],
    quarantine: Accumulator[Quarantined] | None = None,
    counts: Accumulator[dict[int, dict[str, TopicCounts]]] | None = None,
) -> DataFrame:
    """The latest change per key of the range's files, with its columns and the key's counts.

    Each read task takes a group of files (:func:`read_tasks`), parses every line's envelope in the workers
    and keeps the greatest message per key it saw (:class:`~lakefeed.crdb.messages.LatestPerKey`), so only
    those cross the shuffle, by key; :func:`~lakefeed.crdb.messages.final_picks` picks among them, and only the picks kept
    have their columns read (:func:`~lakefeed.crdb.messages.latest_rows`, which adds the shapes of the rows
    to ``shapes``, and each partition's figures per topic to ``counts``). Unreadable lines are added to
    ``quarantine`` when given."""
    from pyspark.sql.pandas.types import from_arrow_schema

    groups = [
        [
            (
                sink_root,
                f.key,
                f.topic,
                f.schema_id,
                f.format,
                f.compression,
                ",".join(parquet_keys.get(f.topic, []) if f.topic is not None else []),
            )
            for f in group
        ]
        for group in read_tasks(sink_range.files, spark.sparkContext.defaultParallelism)
    ]
    inputs = spark.createDataFrame(
        spark.sparkContext.parallelize(groups, max(1, len(groups))).flatMap(lambda group: group),
        from_arrow_schema(FILE_INPUT_SCHEMA),
    )
    picks = inputs.mapInArrow(partial(latest_in_task, quarantine=quarantine), from_arrow_schema(CHANGE_SCHEMA))
    return picks.repartition("topic", "key").mapInArrow(
        partial(latest_rows, root=sink_root, shapes=shapes, counts=counts), from_arrow_schema(LATEST_SCHEMA)
    )


def read_tasks(files: list[SinkFile], slots: int, task_bytes: int = TASK_BYTES) -> list[list[SinkFile]]:
    """The range's files in groups, one read task each: as many groups as task slots, or more so that groups
    average no more than ``task_bytes`` of text (a compressed file counts :data:`COMPRESSED_RATIO` times its
    size: a task's table of picks grows with what it decodes), never more groups than files; of even bytes
    (the largest file first into the lightest group). Fewer, larger groups see more of a key's messages, so
    fewer picks cross the shuffle.

    >>> files = [SinkFile(f"{n}", "DATA", Hlc(1), size, "t") for n, size in enumerate([5, 4, 3, 3, 1])]
    >>> [[f.size for f in group] for group in read_tasks(files, 2)]
    [[5, 3], [4, 3, 1]]
    >>> [len(group) for group in read_tasks(files, 2, task_bytes=4)], read_tasks([], 2)
    ([1, 1, 2, 1], [])
    """
    total = sum(f.size * (COMPRESSED_RATIO if f.compression else 1) for f in files)
    count = min(len(files), max(1, slots, -(-total // task_bytes)))
    groups: list[tuple[int, int, list[SinkFile]]] = [(0, n, []) for n in range(count)]
    for f in sorted(files, key=lambda f: -f.size):
        size, n, group = heapq.heappop(groups)
        group.append(f)
        heapq.heappush(groups, (size + f.size, n, group))
    return [group for _, _, group in sorted(groups, key=lambda g: g[1]) if group]


def _merge_topic(
    spark: SparkSession,
    latest: DataFrame,
    target: str,
    topic: str,
    kinds: dict[str, set[str]],
    keys_changed: int,
    live: int,
    metadata: dict[str, Any],
    commits: list[dict[str, Any]],
    reported_as: str,
    sink_range: SinkRange,
    snapshot: Hlc | None = None,
    checked: dict[str, str] | None = None,
) -> TopicSummary:
    """MERGE one topic's latest changes into its table, applying each only when its updated is newer; a
    table not there yet is created holding them, in one commit. The commit made is added to ``commits``
    (the table named ``reported_as``, the target root as configured). ``checked``: the table's column types
    the values were checked against (:func:`_refuse_values_that_do_not_fit`); checked again against the
    table's when they differ (another run created or changed the table meanwhile)."""
    from delta.tables import DeltaTable

    summary = TopicSummary(keys_changed=keys_changed)
    tags = {**metadata, "topic": topic}
    existing = _existing_types(spark, target)
    if not existing:
        commit = first_load(spark, target, _typed_rows(latest, kinds, existing), TARGET_PROPERTIES, tags)
        if commit is not None:
            commits += reported_commit(reported_as, commit)
            summary.target_version = commit["version"]
            summary.bytes_written = commit["metrics"].get("numOutputBytes", 0)
            summary.inserted = live  # every key is new: tombstones of unseen keys are kept, not counted
            return summary
        existing = _existing_types(spark, target)
    if existing != checked:
        _refuse_values_that_do_not_fit(latest, topic, kinds, existing)
    types = _types(kinds, existing)
    rows = _typed_rows(latest, kinds, existing)
    summary.added_columns = sorted(set(types) - set(existing)) if existing else []

    def prepare() -> None:
        ensure_table(spark, target, rows.schema, properties=TARGET_PROPERTIES)
        if summary.added_columns:
            spec = ", ".join(f"`{name}` {types[name]}" for name in summary.added_columns)
            spark.sql(f"ALTER TABLE delta.`{target}` ADD COLUMNS ({spec})")

    tagged_write(spark, target, {**tags, "step": "schema"}, prepare)
    newer = f"CAST(s.{UPDATED_COLUMN} AS {HLC_DECIMAL}) > CAST(t.{UPDATED_COLUMN} AS {HLC_DECIMAL})"

    def write() -> None:
        # Again at each attempt: tombstone retention commits its horizon before it deletes, so a run that removed
        # tombstones meanwhile makes this MERGE conflict and come back here.
        _check_tombstone_horizon(reported_as, sink_range)
        merge = (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(rows.alias("s"), f"t.{KEY_COLUMN} = s.{KEY_COLUMN}")
            .whenMatchedUpdate(
                condition=f"{newer} AND s.{DELETED_COLUMN}",
                set={UPDATED_COLUMN: f"s.{UPDATED_COLUMN}", DELETED_COLUMN: "true"},
            )
            .whenMatchedUpdateAll(condition=newer)
            .whenNotMatchedInsertAll()  # a delete of a key never seen is kept as a tombstone
        )
        if snapshot is not None:  # not in the scan: deleted before it
            merge = merge.whenNotMatchedBySourceUpdate(
                condition=_older_than(snapshot), set={UPDATED_COLUMN: f"'{snapshot}'", DELETED_COLUMN: "true"}
            )
        merge.execute()

    commit = tagged_write(spark, target, tags, write)
    commits += reported_commit(reported_as, commit)
    if commit is None:
        summary.target_version = table_version(spark, target)
        summary.stale_skipped = keys_changed
        return summary
    metrics = commit["metrics"]
    summary.target_version = commit["version"]
    summary.bytes_written = metrics.get("numTargetBytesAdded", 0)
    summary.rows_copied = metrics.get("numTargetRowsCopied", 0)
    applied = metrics.get("numTargetRowsInserted", 0) + metrics.get("numTargetRowsUpdated", 0)
    summary.stale_skipped = max(0, keys_changed - applied)  # a snapshot's own tombstones count as updates
    summary.inserted, summary.updated, summary.deleted = (
        None if snapshot is not None else effects_of_new_keys(metrics, keys_changed, live)
    ) or count_effects(spark, target, commit["version"], [KEY_COLUMN], DELETED_COLUMN)
    return summary


def _older_than(snapshot: Hlc) -> str:
    """A stored live row last changed before ``snapshot`` (the MERGE's target, ``t``)."""
    return f"NOT t.{DELETED_COLUMN} AND CAST(t.{UPDATED_COLUMN} AS {HLC_DECIMAL}) < CAST('{snapshot}' AS {HLC_DECIMAL})"


def _empty_at_snapshot(spark: SparkSession, target: str, snapshot: Hlc, tags: dict[str, Any]) -> dict[str, Any] | None:
    """A snapshot topic that held no row at ``snapshot``: its stored live rows from before it become
    tombstones (None: no table, or nothing to change)."""
    from delta.tables import DeltaTable

    if not _existing_types(spark, target):
        return None

    def write() -> None:
        DeltaTable.forPath(spark, target).alias("t").update(
            condition=_older_than(snapshot), set={UPDATED_COLUMN: f"'{snapshot}'", DELETED_COLUMN: "true"}
        )

    return tagged_write(spark, target, tags, write)


def _types(kinds: dict[str, set[str]], existing: dict[str, str]) -> dict[str, str]:
    """The type of each column of the batch: the table's for a column it has, else from the kinds seen."""
    return {name: existing.get(name) or column_type(found) for name, found in kinds.items()}


def _refuse_values_that_do_not_fit(
    latest: DataFrame, topic: str, kinds: dict[str, set[str]], existing: dict[str, str]
) -> None:
    """Refuse the batch, naming the file, line and column, when a value of the topic's latest changes does not
    fit its column's type (one kept from earlier data, say); a check only of the columns where that can happen
    (:func:`~lakefeed.crdb.transforms.may_not_fit`)."""
    types = _types(kinds, existing)
    failures = cast_failures(latest, types, kinds)
    failure = failures.first() if failures is not None else None
    if failure is not None:
        raise FeedCorruptError(
            f"{failure['file']}: line {failure['line']}: the value of column "
            f"{failure['column']!r} of topic {topic} does not fit its type "
            f"{types[failure['column']]} (kept from earlier data); nothing was written"
        )


def _typed_rows(latest: DataFrame, kinds: dict[str, set[str]], existing: dict[str, str]) -> DataFrame:
    """The topic's latest changes as target rows, every column typed (the table's columns it lacks
    included); its values were checked to fit (:func:`_refuse_values_that_do_not_fit`)."""
    types = _types(kinds, existing)
    return target_rows(latest, {**{name: kind for name, kind in existing.items() if name not in types}, **types})


def _existing_types(spark: SparkSession, target: str) -> dict[str, str]:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, target):
        return {}
    schema = DeltaTable.forPath(spark, target).toDF().schema
    return {f.name: f.dataType.simpleString() for f in schema.fields if f.name not in TARGET_COLUMNS}


def _applied_files(spark: SparkSession, ledger: str) -> set[str]:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, ledger):
        return set()
    return {row["key"] for row in spark.read.format("delta").load(ledger).select("key").collect()}


def _record_applied(
    spark: SparkSession, ledger: str, sink_range: SinkRange, metadata: dict[str, Any]
) -> dict[str, Any] | None:
    """Add the range's files to the ledger, after every topic's MERGE committed (insert-if-absent); the
    commit made (None: none, every file was there)."""
    from delta.tables import DeltaTable

    if not sink_range.files:
        return None
    now = datetime.now(UTC)
    rows = spark.createDataFrame(
        [(f.key, f.topic, f.size, str(sink_range.through.timestamp), now) for f in sink_range.files],
        "key string, topic string, bytes long, throughResolved string, appliedAt timestamp",
    )

    tags = {**metadata, "step": "ledger"}
    if not DeltaTable.isDeltaTable(spark, ledger):  # the first range: created holding its files, one commit
        created = first_load(spark, ledger, rows, {}, tags)
        if created is not None:
            return created

    def write() -> None:
        ensure_table(spark, ledger, rows.schema)
        DeltaTable.forPath(spark, ledger).alias("t").merge(
            rows.alias("s"), "t.key = s.key"
        ).whenNotMatchedInsertAll().execute()

    return tagged_write(spark, ledger, tags, write)


def _check_tombstone_horizon(table: str, sink_range: SinkRange) -> None:
    """Refuse a range through a RESOLVED before the newest tombstone retention removed (lakefeed.tombstones)."""
    through = str(sink_range.through.timestamp)
    check_horizon(
        table,
        through,
        lambda end, removed: Hlc.parse(end) < Hlc.parse(removed),
        f"the resolved range through {through}",
    )


def _refuse_a_misread_feed(lines: Quarantined, messages: int) -> None:
    """More lines set aside than messages read is no longer a few bad lines but a feed this reader misreads
    (``key_in_value`` off, say): refused before anything is written, instead of a green run that moves past
    the data."""
    if len(lines) > messages:
        (url, line), (_, _, reason) = min(lines.items())
        raise FeedCorruptError(
            f"{len(lines)} line(s) of this range are not changefeed messages, more than the {messages} that are "
            f"(first: {url}: line {line}: {reason}): is the changefeed created as this reader expects "
            f"(envelope=wrapped, key_in_value, updated)? Nothing was written."
        )


def _remove_expired_tombstones(
    spark: SparkSession,
    table: str,
    reported_as: str,
    sink_range: SinkRange,
    retention: timedelta,
    metadata: dict[str, Any],
    commits: list[dict[str, Any]],
) -> int:
    """Remove a topic table's tombstones whose ``updated`` is more than ``retention`` before the range's
    RESOLVED timestamp and not after the range's start (:mod:`lakefeed.tombstones`); how many went."""
    assert sink_range.after is not None
    through = sink_range.through.timestamp
    limit = Hlc(through.wall - retention // timedelta(microseconds=1) * 1000, 0)
    updated = F.col(UPDATED_COLUMN).cast(HLC_DECIMAL)
    expired = (
        F.col(DELETED_COLUMN)
        & (updated < F.lit(str(limit)).cast(HLC_DECIMAL))
        & (updated <= F.lit(str(sink_range.after.timestamp)).cast(HLC_DECIMAL))
    )
    removed, made = remove_expired(
        spark,
        table,
        reported_as,
        expired,
        F.max_by(UPDATED_COLUMN, updated),
        lambda found, recorded: Hlc.parse(found) > Hlc.parse(recorded),
        {**metadata, "topic": reported_as.rsplit("/", 1)[-1]},
    )
    commits += made
    return removed


QUARANTINE_SCHEMA = (
    "source_file string, line long, raw string, reason string, topic string, "
    "through_resolved string, quarantined_at timestamp"
)


def _quarantine(spark: SparkSession, table: str, lines: Quarantined, metadata: dict[str, Any]) -> dict[str, Any] | None:
    """Add the lines set aside to the quarantine table, one row per line (insert-if-absent on file and line:
    a replay adds nothing), before any topic is written; the commit made (None: none)."""
    from delta.tables import DeltaTable

    if not lines:
        return None
    now = datetime.now(UTC)
    rows = spark.createDataFrame(
        [
            (url, line, raw, reason, topic, metadata["throughResolved"], now)
            for (url, line), (topic, raw, reason) in sorted(lines.items())
        ],
        QUARANTINE_SCHEMA,
    )

    def write() -> None:
        ensure_table(spark, table, rows.schema, properties=UPDATED_IN_PLACE)
        DeltaTable.forPath(spark, table).alias("t").merge(
            rows.alias("s"), "t.source_file = s.source_file AND t.line = s.line"
        ).whenNotMatchedInsertAll().execute()

    log.warning("%d line(s) set aside in the quarantine table %s", len(lines), table)
    return tagged_write(spark, table, {**metadata, "step": "quarantine"}, write)


def format_summary(summary: CrdbSummary) -> str:
    d = summary.to_dict()
    title = f"cockroach changefeed run: resolved {d['afterResolved']} .. {d['throughResolved']}"
    left_out = ("afterResolved", "throughResolved", "topics", "commits", "targetRoot")
    topics = [f"  topic {topic}: {figures}" for topic, figures in d["topics"].items()]
    return "\n".join([format_document(title, d, left_out), *topics])
