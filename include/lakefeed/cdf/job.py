"""One run of the Delta CDF pipeline: check the range, read the change feed, keep the last change
per key, MERGE (insert, update, delete) into the target, guarded by source version.

The target keeps, per key, the source version that last touched it
(``_cdf_version``) and deleted keys as tombstones (``_cdf_deleted = true``).
A change is applied only when its version is newer than the key's, so
replaying any range, any number of times, in any order, can neither regress
a row nor resurrect a deleted one. Delta's idempotent-write options
(``txnAppId``/``txnVersion``) were not used: they keep one high-water version
per writer, so an older range replayed after a newer one would be skipped
whole, including keys it alone changed. Readers of the target filter
``NOT _cdf_deleted`` (tombstones are kept on purpose).

Spark reads every range with the source's latest schema: columns added
after the range come as null, so ranges apply across additive changes in any
chunking and order (the target's extra columns null where the source had
none). Drops, renames and type changes inside, before or after the range are
refused by name before any Spark job (:mod:`lakefeed.cdf.log`); should Delta
still refuse the read, its refusal becomes a :class:`ChangeDataError` too.

A range that changed a large share of the source's rows is applied by a *rebuild* instead
(:mod:`lakefeed.cdf.planner` decides, from the logs): the target overwritten, in one commit, with the
source's snapshot at the range's end, as a full refresh does, and that version recorded as the target's
base version, so ranges up to it are then no-ops and ranges across it read from the next version. The
overwrite keeps the target's table id (the checkpoint's marks and the ledger see the same table, which a
REPLACE would make another) and its table properties; the base version goes in the same commit as a Delta
application transaction (``txnAppId``/``txnVersion``, :func:`rebuild_app_id`) of that table id.
"""

from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from lakefeed.cdf.log import check_later_changes, check_range, check_target, latest_schema
from lakefeed.cdf.planner import (
    MERGE,
    PLAN_TAG,
    REBUILD,
    REBUILD_MIN_ROWS,
    REBUILD_SHARE,
    RangePlan,
    applied_beyond,
    plan_range,
)
from lakefeed.cdf.scd2 import (
    DELETED,
    END_AT,
    HISTORY_COLUMNS,
    HISTORY_THROUGH,
    INSERTED,
    START_AT,
    SUPERSEDED,
    History,
    changes_by_version,
    check_comparable,
    check_scd_type,
    effects,
    first_version_to_read,
    history_properties,
    history_rows,
    merge_history,
    snapshot_history,
)
from lakefeed.cdf.summary import CdfSummary
from lakefeed.cdf.transforms import (
    BASE_VERSION_PROPERTY,
    CDF_COLUMNS,
    CHANGE_TYPE,
    DELETED_COLUMN,
    ROWS_OF_KEY,
    TARGET_COLUMNS,
    TIMESTAMP_COLUMN,
    VERSION_COLUMN,
    last_change_per_key,
    snapshot_rows,
    to_target_rows,
)
from lakefeed.delta import (
    MAX_KEYS_NAMED,
    REFRESH_MARKER,
    UPDATED_IN_PLACE,
    count_effects,
    create_table_with_rows,
    effects_of_new_keys,
    ensure_table,
    first_load,
    keys_named,
    naming_keys_pays,
    reported_commit,
    table_location,
    table_version,
    tagged_write,
)
from lakefeed.deltalog import DeltaLog
from lakefeed.errors import ChangeDataError, FeedConfigError
from lakefeed.spark import jvm_location
from lakefeed.storage import Store
from lakefeed.tombstones import HORIZON, check_horizon, remove_expired

log = logging.getLogger(__name__)

PIPELINE = "delta_cdf"
TARGET_PROPERTIES = {"delta.enableChangeDataFeed": "true", **UPDATED_IN_PLACE}


def _columns(
    source_columns: list[str], keys: list[str], wanted: list[str] | None, own: tuple[str, ...] = TARGET_COLUMNS
) -> list[str]:
    data_columns = [c for c in source_columns if c not in CDF_COLUMNS]
    missing = [k for k in keys if k not in data_columns]
    if missing:
        raise FeedConfigError(f"key column(s) {', '.join(missing)} not in the source ({', '.join(data_columns)})")
    clash = [c for c in data_columns if c in own]
    if clash:
        raise FeedConfigError(f"source column(s) {', '.join(clash)} clash with the target's own columns")
    if not wanted:
        return data_columns
    unknown = [c for c in wanted if c not in data_columns]
    if unknown:
        raise FeedConfigError(f"column(s) {', '.join(unknown)} not in the source ({', '.join(data_columns)})")
    return keys + [c for c in wanted if c not in keys]


def read_changes(spark: SparkSession, source: str, start: int, end: int) -> DataFrame:
    return (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", start)
        .option("endingVersion", end)
        .load(source)
    )


def _check_target(
    source_log: DeltaLog,
    target: str,
    range_fields: list[dict[str, Any]],
    latest_fields: list[dict[str, Any]],
    own: tuple[str, ...] = TARGET_COLUMNS,
) -> None:
    """The target's data columns against the source's as of the range's end, columns added later accepted
    (JVM-free: both logs)."""
    metadata = DeltaLog(Store(target)).latest_metadata()
    if metadata is None or not metadata.get("schemaString"):
        return
    target_fields = json.loads(metadata["schemaString"])["fields"]
    check_target(source_log.root, target, range_fields, target_fields, own, latest_fields)


def _target_properties(target: str) -> dict[str, str] | None:
    """The target's table properties from its log (no Spark job); None when there is no target yet."""
    return DeltaLog(Store(target)).properties()


def rebuild_app_id(table_id: str) -> str:
    """The Delta application transaction whose version is the source version a planned rebuild overwrote the
    target with ``table_id`` at. Keyed by the table id: a full refresh (a REPLACE, a new id) leaves it behind."""
    return f"lakefeed.cdf.rebuild.{table_id}"


def _target_base_version(target: str) -> int | None:
    """The source version the target was last rebuilt at, by a full refresh (its table property) or a planned
    rebuild (its application transaction), read from the target's log (no Spark job); None when never."""
    table = DeltaLog(Store(target)).snapshot()
    if table is None:
        return None
    metadata = table.metadata()
    value = (metadata.configuration or {}).get(BASE_VERSION_PROPERTY)
    bases = [int(value)] if value is not None else []
    rebuilt = table.transaction_version(rebuild_app_id(str(metadata.id)))
    if rebuilt is not None:
        bases.append(int(rebuilt))
    return max(bases) if bases else None


def run(
    spark: SparkSession,
    source: str,
    target: str,
    keys: list[str],
    start: int,
    end: int,
    columns: list[str] | None = None,
    scd_type: int = 1,
    tombstone_retention: timedelta | None = None,
    rebuild_share: float = REBUILD_SHARE,
    rebuild_min_rows: int = REBUILD_MIN_ROWS,
) -> CdfSummary:
    """Apply versions ``start..end`` of ``source``'s change feed to ``target`` (type 1: each key's current row,
    by the plan :mod:`lakefeed.cdf.planner` chooses with ``rebuild_share`` and ``rebuild_min_rows``: a MERGE of
    the changes or a rebuild (:func:`_rebuild`); type 2: :func:`apply_history`). With ``tombstone_retention``,
    tombstones older than that before the range's last commit, and from before the range, are then removed
    (:mod:`lakefeed.tombstones`)."""
    laps: dict[str, float] = {}
    clock = time.perf_counter()
    source, target = table_location(source), table_location(target)
    delta_log = DeltaLog(Store(source))
    check_range(delta_log, start, end)
    latest = delta_log.latest_version()
    assert latest is not None  # check_range refused a path without commits
    summary = CdfSummary(
        source=source,
        target=target,
        starting_version=start,
        ending_version=end,
        latest_version=latest,
        lag_versions=latest - end,
        source_table_id=delta_log.table_id(),
        scd_type=scd_type,
    )
    check_scd_type(target, scd_type, _target_properties(target))
    if scd_type == 2:
        if tombstone_retention is not None:
            raise FeedConfigError("an SCD type 2 target keeps no tombstones: tombstone retention does not apply")
        summary.plan = RangePlan(MERGE, "an SCD type 2 target is never rebuilt: its history would be lost")
        return apply_history(spark, delta_log, summary, keys, columns)
    base = _target_base_version(target)
    if base is not None and end <= base:  # nothing read nor written: whatever changed since, no check applies
        log.info("target was rebuilt at source version %d: range [%d, %d] is already in it", base, start, end)
        return summary
    _check_tombstone_horizon(target, start, end)
    read_from = max(start, base + 1) if base is not None else start
    # Schema rules by range: the range's columns as of its end, against the target and the latest schema
    # Spark will read the range with.
    range_fields, latest_fields = delta_log.table_state(end)[1], latest_schema(delta_log)
    _check_target(delta_log, target, range_fields, latest_fields)
    check_later_changes(delta_log, start, end, range_fields, latest_fields)

    summary.plan = plan_range(
        delta_log, DeltaLog(Store(target)), read_from, end, share=rebuild_share, min_rows=rebuild_min_rows
    )
    log.info("versions %d..%d of %s: %s (%s)", read_from, end, source, summary.plan.chosen, summary.plan.reason)
    if summary.plan.chosen == REBUILD and _rebuild(spark, delta_log, summary, keys, columns):
        summary.seconds = {"rebuild": round(time.perf_counter() - clock, 3)}
        return summary  # the rebuilt target holds no tombstone: none for retention to remove

    spark_source, spark_target = jvm_location(source), jvm_location(target)  # the URLs Spark opens
    changes = read_changes(spark, spark_source, read_from, end)
    selected = _columns(changes.columns, keys, columns)
    last_changes = last_change_per_key(changes, keys).persist()
    try:
        counts = _read_counts(
            last_changes,
            [
                F.count(F.lit(1)),
                F.sum(ROWS_OF_KEY),
                F.min(keys[0]),
                F.max(keys[0]),
                F.count_if(F.col(CHANGE_TYPE) != "delete"),
            ],
            spark_source,
            delta_log,
            read_from,
            end,
        )
        summary.keys_changed, summary.rows_read = int(counts[0]), int(counts[1] or 0)
        live = int(counts[4])
        laps["read"] = round(time.perf_counter() - clock, 3)
        summary.added_columns = _merge(
            spark,
            to_target_rows(last_changes, selected),
            spark_target,
            keys,
            summary,
            metadata={"pipeline": PIPELINE, "source": source, "startingVersion": start, "endingVersion": end},
            key_range=(counts[2], counts[3]),
            table=target,
            live=live,
            read_from=read_from,
        )
    finally:
        last_changes.unpersist()
    laps["merge"] = round(time.perf_counter() - clock - laps["read"], 3)
    if tombstone_retention is not None:
        _remove_expired_tombstones(spark, delta_log, summary, spark_target, tombstone_retention)
    summary.seconds = laps
    return summary


def _check_tombstone_horizon(target: str, start: int, end: int) -> None:
    """Refuse a range ending before the newest tombstone retention removed (:mod:`lakefeed.tombstones`)."""
    check_horizon(target, str(end), lambda end, removed: int(end) < int(removed), f"versions {start}..{end}")


def _remove_expired_tombstones(
    spark: SparkSession, source_log: DeltaLog, summary: CdfSummary, spark_target: str, retention: timedelta
) -> None:
    """Remove the target's tombstones whose delete was committed more than ``retention`` before the range's
    last commit, and before the range (:mod:`lakefeed.tombstones`)."""
    newest = source_log.commit_timestamp(summary.ending_version)
    if newest is None:
        log.warning("no commit time of version %d in the source's log: no tombstone removed", summary.ending_version)
        return
    threshold = datetime.fromtimestamp(newest / 1000, UTC) - retention
    expired = (
        F.col(DELETED_COLUMN)
        & (F.col(TIMESTAMP_COLUMN) < F.lit(threshold))
        & (F.col(VERSION_COLUMN) < F.lit(summary.starting_version))
    )
    removed, commits = remove_expired(
        spark,
        spark_target,
        summary.target,
        expired,
        F.max(VERSION_COLUMN).cast("string"),
        lambda found, recorded: int(found) > int(recorded),
        {"pipeline": PIPELINE, "source": summary.source, "endingVersion": summary.ending_version},
    )
    summary.tombstones_removed = removed
    summary.commits += commits  # the target version stays the MERGE's: the run's counts are of that commit


def apply_history(
    spark: SparkSession, delta_log: DeltaLog, summary: CdfSummary, keys: list[str], columns: list[str] | None
) -> CdfSummary:
    """Apply ``summary``'s range to an SCD type 2 target (:mod:`lakefeed.cdf.scd2`): the versions its history
    lacks, one MERGE that adds the rows they start and ends the rows they supersede or delete, then a
    metadata commit recording the last version applied. A range already in the history reads nothing."""
    laps: dict[str, float] = {}
    clock = time.perf_counter()
    source, target, start, end = summary.source, summary.target, summary.starting_version, summary.ending_version
    needed = first_version_to_read(target, start, end, History.of(_target_properties(target) or {}))
    if needed is None:
        log.info("versions %d..%d are already in the history of %s", start, end, target)
        return summary
    range_fields, latest_fields = delta_log.table_state(end)[1], latest_schema(delta_log)
    _check_target(delta_log, target, range_fields, latest_fields, HISTORY_COLUMNS)
    check_later_changes(delta_log, start, end, range_fields, latest_fields)
    spark_source, spark_target = jvm_location(source), jvm_location(target)
    metadata = {"pipeline": PIPELINE, "source": source, "startingVersion": start, "endingVersion": end}

    def prepare() -> None:
        """Create the target (its history starting at ``needed``) or add the source's new columns."""
        changes = read_changes(spark, spark_source, needed, end)
        selected = _columns(changes.columns, keys, columns, HISTORY_COLUMNS)
        check_comparable(changes.schema, selected)
        shape = (
            changes_by_version(changes, keys, selected)
            .select(*selected, START_AT)
            .withColumn(END_AT, F.lit(None).cast("long"))
        )
        # The history's first version only on creation: a target another run created meanwhile keeps its own.
        table = ensure_table(
            spark,
            spark_target,
            shape.schema,
            properties=TARGET_PROPERTIES,
            creation_properties=history_properties(needed),
        )
        summary.added_columns = _add_new_columns(spark, spark_target, table.toDF().columns, shape)

    tagged_write(spark, spark_target, {**metadata, "step": "schema"}, prepare)
    # Read again: another run may have created the target, or applied versions, since the check above.
    read_from = first_version_to_read(target, start, end, History.of(_target_properties(target) or {}))
    if read_from is None:
        summary.target_version = table_version(spark, spark_target)
        return summary
    changes = read_changes(spark, spark_source, read_from, end)
    selected = _columns(changes.columns, keys, columns, HISTORY_COLUMNS)
    events = changes_by_version(changes, keys, selected).persist()
    try:
        counts = _read_counts(
            events,
            [F.count(F.lit(1)), F.count_distinct(F.struct(*keys)), F.min(keys[0]), F.max(keys[0])],
            spark_source,
            delta_log,
            read_from,
            end,
        )
        summary.rows_read, summary.keys_changed = int(counts[0]), int(counts[1])
        laps["read"] = round(time.perf_counter() - clock, 3)
        key_range = (counts[2], counts[3])
        in_range = _in_key_range(F.col(f"`{keys[0]}`"), key_range)
        existing = spark.read.format("delta").load(spark_target)
        history = history_rows(
            events, existing.where(in_range) if in_range is not None else existing, keys, selected
        ).persist()
        try:
            found = effects(history)
            prune = _in_key_range(F.col(f"t.`{keys[0]}`"), key_range)
            commit = None
            if any(found.values()):  # else the range only holds changes that add nothing: no MERGE
                commit = tagged_write(
                    spark,
                    spark_target,
                    metadata,
                    lambda: merge_history(spark, spark_target, history, keys, selected, prune),
                )
        finally:
            history.unpersist()
    finally:
        events.unpersist()
    summary.inserted, summary.updated, summary.deleted = found[INSERTED], found[SUPERSEDED], found[DELETED]
    summary.unchanged = summary.rows_read - summary.inserted - summary.updated - summary.deleted
    summary.commits += reported_commit(target, commit)
    _record_commit(summary, commit)
    laps["merge"] = round(time.perf_counter() - clock - laps["read"], 3)

    def record_through() -> None:
        through = History.of(_target_properties(target) or {}).through
        if through is None or through < end:
            spark.sql(f"ALTER TABLE delta.`{spark_target}` SET TBLPROPERTIES ('{HISTORY_THROUGH}' = '{end}')")

    recorded = tagged_write(spark, spark_target, {**metadata, "step": "history"}, record_through)
    summary.commits += reported_commit(target, recorded)
    if commit is None:  # else the MERGE's version: the run's counts are of that commit
        summary.target_version = table_version(spark, spark_target)
    summary.seconds = laps
    return summary


def _read_counts(
    changes: DataFrame, aggregates: list[Column], source: str, source_log: DeltaLog, start: int, end: int
) -> Row:
    """The first action on a range's change rows (``aggregates`` of them): Delta's refusals to read the range
    become the job's (:func:`_vacuumed`, :func:`_unreadable_schema`)."""
    try:
        return changes.agg(*aggregates).collect()[0]
    except Exception as exc:
        raise (  # noqa: B904 (the Spark error stays its context)
            _vacuumed(exc, source, start, end) or _unreadable_schema(exc, source_log, start, end) or exc
        )


def _in_key_range(column: Column, key_range: tuple[Any, Any]) -> Column | None:
    """``column`` within the batch's range of the first key (or null), which lets Delta skip the target files
    whose statistics lie outside it; None when the batch has no such range."""
    low, high = key_range
    if low is None or high is None:
        return None
    return column.between(F.lit(low), F.lit(high)) | column.isNull()


def _record_commit(summary: CdfSummary, commit: dict[str, Any] | None) -> None:
    """What the MERGE ``commit`` wrote, from Delta's metrics, into ``summary``."""
    if commit is None:
        return
    metrics = commit["metrics"]
    summary.committed = True
    summary.bytes_written = metrics.get("numTargetBytesAdded", 0)
    summary.files_rewritten = metrics.get("numTargetFilesRemoved", 0)
    summary.rows_copied = metrics.get("numTargetRowsCopied", 0)
    summary.target_version = commit["version"]


_NOT_FOUND = ("CHANGE_DATA_FILE_NOT_FOUND", "FILE_NOT_FOUND", "FileNotFound", "FILE_NOT_EXIST", "does not exist")


def _vacuumed(exc: Exception, source: str, start: int, end: int) -> ChangeDataError | None:
    """The refusal for change data removed by VACUUM: only when the error says a Parquet file of the source
    (its ``_change_data/`` or a data file) is missing; any other error stays what it is."""
    text = str(exc)
    location = re.escape(re.sub(r"^[a-z][a-z0-9+.-]*:/*", "", source).rstrip("/"))
    if not any(marker in text for marker in _NOT_FOUND) or not re.search(location + r"/\S*\.parquet", text):
        return None
    return ChangeDataError(
        f"change data files of {source} for versions {start}..{end} are gone (removed by VACUUM); "
        f"rebuild the target with a full refresh (delta_cdf_job.py --full-refresh) and resume from its version"
    )


_INCOMPATIBLE_SCHEMA = (
    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA",
    "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE",
)


def _unreadable_schema(exc: Exception, source_log: DeltaLog, start: int, end: int) -> ChangeDataError | None:
    """The refusal for a range Delta will not read with the source's latest schema, when the check before
    the read did not foresee it (a schema change committed meanwhile, or one the check does not model):
    the check again, against the schema now latest, or else Delta's reason with the full-refresh hint.
    Any other error stays what it is."""
    text = str(exc)
    if not any(code in text for code in _INCOMPATIBLE_SCHEMA):
        return None
    try:
        check_later_changes(source_log, start, end)
    except ChangeDataError as refusal:
        return refusal
    found = re.search(r"found an incompatible (?:data )?schema(?: change)? at version \d+", text)
    return ChangeDataError(
        f"the range [{start}, {end}] of {source_log.root} cannot be read as change data with the table's latest "
        f"schema (Delta: {found.group(0) if found else text.strip().splitlines()[0]}). Rebuild the target with a "
        f"full refresh (delta_cdf_job.py --full-refresh) and resume from its version; older ranges are then no-ops."
    )


def _merge(
    spark: SparkSession,
    rows: DataFrame,
    target: str,
    keys: list[str],
    summary: CdfSummary,
    metadata: dict[str, Any],
    key_range: tuple[Any, Any],
    table: str,
    live: int,
    read_from: int,
) -> list[str]:
    """Create the target or add the source's new columns, then the version-guarded MERGE; each step
    retried when a concurrent run commits first (both are idempotent). Each attempt reads the target's base
    version again (``rows`` are of versions ``read_from`` on): a run that rebuilt the target meanwhile
    (:func:`_rebuild`) leaves only the changes after it to apply, or none.

    The range of the changed first key column bounds the target rows that can match, so Delta skips
    the files whose statistics lie outside it and joins only the rows inside it: a run that changes
    recent keys (new orders, say) reads the files holding them, not the whole table. When the changed
    keys spread over many target rows, the condition also names them (``_first_keys_named``). ``table``
    is the target as the log reader opens it (``target`` is where Spark does).
    """
    from delta.tables import DeltaTable

    added: list[str] = []

    def prepare() -> None:
        table = ensure_table(spark, target, rows.schema, properties=TARGET_PROPERTIES)
        added[:] = _add_new_columns(spark, target, table.toDF().columns, rows)

    tagged_write(spark, target, {**metadata, "step": "schema"}, prepare)
    if summary.keys_changed == 0:
        summary.target_version = table_version(spark, target)
        return added
    on = F.expr(" AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys))
    in_range = _in_key_range(F.col(f"t.`{keys[0]}`"), key_range)
    if in_range is not None:
        on = in_range & on
    named = _first_keys_named(rows, table, keys[0], summary.keys_changed, key_range)
    if named is not None:
        on = F.expr(named) & on
    guard = f"s.{VERSION_COLUMN} > t.{VERSION_COLUMN}"

    def write() -> None:
        # Again at each attempt: tombstone retention commits its horizon before it deletes, so a run that removed
        # tombstones meanwhile makes this MERGE conflict and come back here.
        _check_tombstone_horizon(table, summary.starting_version, summary.ending_version)
        base = _target_base_version(table)
        if base is not None and base >= summary.ending_version:
            log.info("target was rebuilt at source version %d meanwhile: the range is in it", base)
            return
        newer = rows if base is None or base < read_from else rows.where(F.col(VERSION_COLUMN) > base)
        (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(newer.alias("s"), on)
            .whenMatchedUpdate(
                condition=f"{guard} AND s.{DELETED_COLUMN}",
                set={
                    VERSION_COLUMN: f"s.{VERSION_COLUMN}",
                    TARGET_COLUMNS[1]: f"s.{TARGET_COLUMNS[1]}",
                    DELETED_COLUMN: "true",
                },
            )
            .whenMatchedUpdateAll(condition=guard)
            .whenNotMatchedInsertAll()  # a delete seen first is kept as a tombstone
            .execute()
        )

    commit = tagged_write(spark, target, metadata, write)
    summary.commits += reported_commit(summary.target, commit)
    _record_commit(summary, commit)
    if commit is not None:
        metrics = commit["metrics"]
        summary.inserted, summary.updated, summary.deleted = effects_of_new_keys(
            metrics, summary.keys_changed, live
        ) or count_effects(spark, target, commit["version"], keys, DELETED_COLUMN)
    else:
        summary.target_version = table_version(spark, target)
    summary.unchanged = summary.keys_changed - summary.inserted - summary.updated - summary.deleted
    return added


def _first_keys_named(
    rows: DataFrame, target: str, key: str, keys_changed: int, key_range: tuple[Any, Any]
) -> str | None:
    """The MERGE's target-only condition naming the changed values of the first key column (see
    ``lakefeed.delta.keys_named``), when the target rows in their range are many enough for it to pay: a
    run that changes a few keys spread over a large target then joins only the rows holding them, instead
    of shuffling every row in the range."""
    low, high = key_range
    if low is None or high is None or keys_changed > MAX_KEYS_NAMED:
        return None
    if not naming_keys_pays(keys_changed, DeltaLog(Store(target)).bytes_in_range(key, low, high)):
        return None
    values = [row[0] for row in rows.select(key).distinct().collect()]
    return keys_named(f"t.`{key}`", values)


def _add_new_columns(spark: SparkSession, target: str, existing: list[str], rows: DataFrame) -> list[str]:
    """Additive schema changes of the source flow into the target."""
    new = [f for f in rows.schema.fields if f.name not in existing]
    if new:
        spec = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in new)
        spark.sql(f"ALTER TABLE delta.`{target}` ADD COLUMNS ({spec})")
        log.info("added column(s) %s to %s", ", ".join(f.name for f in new), target)
    return [f.name for f in new]


def _rebuild(
    spark: SparkSession, source_log: DeltaLog, summary: CdfSummary, keys: list[str], columns: list[str] | None
) -> bool:
    """Apply ``summary``'s range by a rebuild (:mod:`lakefeed.cdf.planner`): the target overwritten with the
    source's snapshot at the range's end, in one commit that also records that version as the target's base
    version (:func:`rebuild_app_id`; an absent target is created holding it, with the base version as its
    table property, as a full refresh does). The commit is tagged as the application of the range (its
    ``startingVersion`` and ``endingVersion``, and ``plan``: the ledger and the DAG's commit step take it for
    that range, not for a user's full refresh), and retried when a concurrent run commits first: each
    attempt first reads the target again, writing nothing when it was rebuilt at the range's end or later
    meanwhile. False, with nothing written, when the target has meanwhile applied versions after the range
    (or another run created it): the caller MERGEs instead, and ``summary.plan`` says why.

    The rows are the snapshot's, in the columns a MERGE of the range would write (the source's latest
    schema: columns added after the range's end are null), each with the range's end as its version and
    that commit's time. The target keeps its columns, table properties and id; it keeps no tombstone (the
    base version stands in for them: older ranges are no-ops). Summary: the rows written, as inserted
    (and read), as for a full refresh."""
    source, target, start, end = summary.source, summary.target, summary.starting_version, summary.ending_version
    spark_source, spark_target = jvm_location(source), jvm_location(target)
    latest = spark.read.format("delta").load(spark_source)
    selected = _columns(latest.columns, keys, columns)
    snapshot = spark.read.format("delta").option("versionAsOf", end).load(spark_source)
    types = {f.name: f.dataType for f in latest.schema.fields}
    shaped = snapshot.select(
        *[
            F.col(f"`{name}`") if name in snapshot.columns else F.lit(None).cast(types[name]).alias(name)
            for name in selected
        ]
    )
    committed_ms = source_log.commit_timestamp(end)
    timestamp = datetime.fromtimestamp(committed_ms / 1000, UTC) if committed_ms is not None else None
    rows = snapshot_rows(shaped, selected, end, timestamp)
    metadata = {"pipeline": PIPELINE, "source": source, "startingVersion": start, "endingVersion": end}
    rebuild = {**metadata, PLAN_TAG: REBUILD}
    target_log = DeltaLog(Store(target))
    if not target_log.commit_versions():
        properties = {**TARGET_PROPERTIES, BASE_VERSION_PROPERTY: str(end)}
        commit = first_load(spark, spark_target, rows, properties, rebuild, exclusive=True)
        if commit is None:
            summary.plan = replace(summary.plan or RangePlan(), chosen=MERGE, reason="another run created the target")
            return False
    else:

        def prepare() -> None:
            table = ensure_table(spark, spark_target, rows.schema, properties=TARGET_PROPERTIES)
            summary.added_columns = _add_new_columns(spark, spark_target, table.toDF().columns, rows)

        tagged_write(spark, spark_target, {**metadata, "step": "schema"}, prepare)
        refused: list[str] = []

        def overwrite() -> None:
            refused.clear()
            base = _target_base_version(target)
            if base is not None and base >= end:
                log.info("target was rebuilt at source version %d meanwhile: the range is in it", base)
                return
            ahead = applied_beyond(target_log, end)
            if ahead is not None:
                refused.append(ahead)
                return
            (
                rows.write.format("delta")
                .mode("overwrite")
                .option("txnAppId", rebuild_app_id(str(target_log.table_id())))
                .option("txnVersion", end)
                .save(spark_target)
            )

        commit = tagged_write(spark, spark_target, rebuild, overwrite)
        if refused:
            summary.plan = replace(summary.plan or RangePlan(), chosen=MERGE, reason=refused[0])
            return False
    summary.commits += reported_commit(target, commit)
    if commit is None:
        summary.target_version = table_version(spark, spark_target)
        return True
    metrics = commit["metrics"]
    summary.committed = True
    summary.target_version = commit["version"]
    summary.bytes_written = metrics.get("numOutputBytes", 0)
    summary.files_rewritten = metrics.get("numRemovedFiles", 0)
    summary.inserted = summary.rows_read = metrics.get("numOutputRows", 0)
    return True


def full_refresh(
    spark: SparkSession,
    source: str,
    target: str,
    keys: list[str],
    version: int | None = None,
    columns: list[str] | None = None,
    scd_type: int = 1,
) -> CdfSummary:
    """Rebuild the target from a snapshot of the source at ``version`` (default: latest). An SCD type 2
    target is only ever made this way, never replaced: its history would be lost."""
    source, target = table_location(source), table_location(target)
    source_log = DeltaLog(Store(source))
    latest = source_log.latest_version()
    if latest is None:
        raise ChangeDataError(f"{source} is not a Delta table")
    version = latest if version is None else version
    if version > latest:
        raise ChangeDataError(f"version {version} is beyond the latest version {latest} of {source}")
    target_properties = _target_properties(target)
    check_scd_type(target, scd_type, target_properties)
    if scd_type == 2 and target_properties is not None:
        raise ChangeDataError(
            f"SCD type 2 target {target} already holds a history, which a full refresh would replace: "
            f"to rebuild it from a snapshot at version {version} (its history then starting there), delete the "
            f"target first"
        )
    from delta.tables import DeltaTable

    spark_source, spark_target = jvm_location(source), jvm_location(target)  # the URLs Spark opens
    commit = DeltaTable.forPath(spark, spark_source).history().where(F.col("version") == version).collect()
    timestamp = commit[0]["timestamp"] if commit else None
    snapshot = spark.read.format("delta").option("versionAsOf", version).load(spark_source)
    if scd_type == 2:
        selected = _columns(snapshot.columns, keys, columns, HISTORY_COLUMNS)
        check_comparable(snapshot.schema, selected)
        rows = snapshot_history(snapshot, selected, version)
        # One commit holds the rows and the history's versions (the snapshot's, both ends): a CREATE TABLE … AS
        # SELECT, refused if a history was created since the log was read above.
        properties = {**TARGET_PROPERTIES, **history_properties(version, through=version, snapshot=True)}
    else:
        selected = _columns(snapshot.columns, keys, columns)
        rows = snapshot_rows(snapshot, selected, version, timestamp)
        # One commit (a CREATE OR REPLACE … AS SELECT) holds the rows and the base version: a kill can never
        # leave new rows with a stale base version. The target's own table properties are carried over.
        # The horizon of removed tombstones is not carried: the rebuilt target holds no tombstone.
        current = DeltaLog(Store(target)).latest_metadata() or {}
        carried = {k: v for k, v in (current.get("configuration") or {}).items() if k != HORIZON}
        properties = {**carried, **TARGET_PROPERTIES, BASE_VERSION_PROPERTY: str(version)}
    refreshed = tagged_write(
        spark,
        spark_target,
        {"pipeline": PIPELINE, "source": source, REFRESH_MARKER: version},
        lambda: create_table_with_rows(
            spark, spark_target, rows, properties, replace=scd_type == 1, exclusive=scd_type == 2
        ),
    )
    summary = CdfSummary(
        source=source,
        target=target,
        starting_version=version,
        ending_version=version,
        latest_version=latest,
        mode="full-refresh",
        lag_versions=latest - version,
        source_table_id=source_log.table_id(),
        scd_type=scd_type,
    )
    summary.commits += reported_commit(target, refreshed)
    summary.inserted = spark.read.format("delta").load(spark_target).count()
    summary.target_version = refreshed["version"] if refreshed else table_version(spark, spark_target)  # the REPLACE's
    return summary
