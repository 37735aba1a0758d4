"""Delta Lake helpers shared by every pipeline: tables, tagged commits retried on conflict, commit metrics."""

from __future__ import annotations

import json
import logging
import os
import random
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import date, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from delta.tables import DeltaTable
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
COMMIT_TOKEN = "commitToken"
REFRESH_MARKER = "fullRefreshVersion"  # commit metadata of a CDF full refresh: the source snapshot version
CONFLICT_ATTEMPTS = 8
# Targets that are updated in place: an update marks the old row deleted (a deletion vector) and writes
# only the new one, instead of rewriting every file holding a touched key, and a MERGE whose guard
# lets nothing through commits nothing.
UPDATED_IN_PLACE = {"delta.enableDeletionVectors": "true"}
# Delta's answers when two writers create one table at once: retried like a commit conflict.
CREATION_RACES = (
    "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION",
    "DELTA_TABLE_ALREADY_EXISTS",
    "TABLE_OR_VIEW_ALREADY_EXISTS",
    "DELTA_PATH_EXISTS",
)
# ... and, from ``createIfNotExists`` only, when the other writer's log appeared between its own checks.
CREATE_IF_NOT_EXISTS_RACES = ("DELTA_TABLE_NOT_FOUND",)


class TableCreationRace(RuntimeError):
    """Another writer created the table while this one did: retried like a commit conflict."""


def table_location(path: str) -> str:
    """A URL stays as it is; a local path becomes absolute (Delta reads a relative one as a table name)."""
    if "://" in path or path.startswith("/"):
        return path
    return os.path.abspath(path)


def ensure_table(
    spark: SparkSession,
    path: str,
    schema: StructType,
    partition_by: tuple[str, ...] = (),
    properties: dict[str, str] | None = None,
    creation_properties: dict[str, str] | None = None,
) -> DeltaTable:
    """Create the Delta table at ``path`` if absent, with ``properties`` and ``creation_properties``; on an
    existing table, set those of ``properties`` it lacks (a table made by an earlier version gains deletion
    vectors, say), never ``creation_properties`` (what its creator recorded stays). Returns its
    ``DeltaTable``."""
    from delta.tables import DeltaTable

    properties = properties or {}
    if not DeltaTable.isDeltaTable(spark, path):
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        for key, value in {**properties, **(creation_properties or {})}.items():
            builder = builder.property(key, value)
        try:
            builder.execute()
        except Exception as exc:
            if any(code in str(exc) for code in CREATE_IF_NOT_EXISTS_RACES):
                raise TableCreationRace(f"{path}: created by another writer at the same time") from exc
            raise
    elif properties:
        current = {row["key"]: row["value"] for row in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
        missing = {k: v for k, v in properties.items() if current.get(k) != v}
        if missing:
            log.warning("%s: setting %s (a one-time upgrade of a table made before them)", path, missing)
            spark.sql(f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES ({_properties_sql(missing)})")
    return DeltaTable.forPath(spark, path)


def create_table_with_rows(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    properties: dict[str, str],
    *,
    partition_by: tuple[str, ...] = (),
    replace: bool = False,
    exclusive: bool = False,
) -> None:
    """Create the Delta table at ``path`` holding ``rows``, partitioned by ``partition_by``, with
    ``properties``, in one commit: a first load written once instead of a table creation and a MERGE.
    When a table is already there (another writer created it first), Delta refuses and nothing is
    written: :func:`created_by_another` tells that refusal apart. Data files without a log (what a first
    load killed while writing leaves) are not a table: they stay unreferenced and the load goes ahead.
    ``replace``: CREATE OR REPLACE, a table there or not (a full refresh). ``exclusive``: CREATE TABLE … AS
    SELECT, refused when a table is there, and keeping properties other than ``delta.*`` (which the default
    save does not)."""
    from pyspark.sql import functions as F

    # Writers, not SQL over a temporary view: dropping that view would uncache ``rows``.
    if replace or exclusive:
        replacing = rows.writeTo(f"delta.{_identifier(path)}").using("delta")
        if partition_by:
            replacing = replacing.partitionedBy(*(F.col(name) for name in partition_by))
        for key, value in sorted(properties.items()):
            replacing = replacing.tableProperty(key, value)
        if replace:
            replacing.createOrReplace()
        else:
            replacing.create()
        return
    # A save that refuses an existing table (DELTA_PATH_EXISTS), where CREATE TABLE would also refuse a
    # folder holding a killed load's files; the ``delta.*`` options become the new table's properties.
    creating = rows.write.format("delta").mode("errorifexists").options(**properties)
    if partition_by:
        creating = creating.partitionBy(*partition_by)
    creating.save(path)


def first_load(
    spark: SparkSession,
    path: str,
    rows: DataFrame,
    properties: dict[str, str],
    metadata: dict[str, Any],
    *,
    partition_by: tuple[str, ...] = (),
    exclusive: bool = False,
) -> dict[str, Any] | None:
    """Create the absent table at ``path`` holding ``rows`` in one tagged commit
    (:func:`create_table_with_rows`; ``exclusive`` as there: properties other than ``delta.*`` kept) and
    return that commit (:func:`tagged_write`); None, with nothing written, when another writer created the
    table first (the caller then merges into that one)."""
    try:
        commit = tagged_write(
            spark,
            path,
            metadata,
            lambda: create_table_with_rows(
                spark, path, rows, properties, partition_by=partition_by, exclusive=exclusive
            ),
            attempts=1,
        )
    except Exception as exc:
        if not created_by_another(exc):
            raise
        log.warning("%s: created by another run meanwhile; merging into it", path)
        return None
    assert commit is not None  # a table creation always commits
    return commit


def statistics_on(columns: Sequence[str]) -> dict[str, str]:
    """The table property that keeps file statistics (minimum, maximum, null count) on exactly ``columns``
    (top-level names). Delta's default, the first 32 leaf columns, spends them inside wide structs and misses
    the columns after them; statistics of a struct's strings cost ~20 % of a write of nested rows and no
    query prunes by them."""
    return {
        "delta.dataSkippingStatsColumns": ",".join(
            name if name.isidentifier() else _identifier(name) for name in columns
        )
    }


def _identifier(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _properties_sql(properties: dict[str, str]) -> str:
    """``'key' = 'value', …`` of a TBLPROPERTIES clause, each text escaped as a SQL literal."""
    return ", ".join(f"{sql_literal(str(k))} = {sql_literal(str(v))}" for k, v in sorted(properties.items()))


def created_by_another(exc: Exception) -> bool:
    """Whether a table creation failed because another writer created the table first (its first commit
    won, or its table is there), rather than for a reason of its own."""
    return isinstance(exc, conflict_errors()) or _creation_race(exc)


# Tags every commit of this process carries besides its own metadata: the job's ``--pipeline-id`` (the
# checkpoint Variable of the pipeline that runs it) as ``pipelineId``, set by the spark-submit entry points.
COMMIT_TAGS: dict[str, str] = {}


@contextmanager
def commit_metadata(spark: SparkSession, metadata: dict[str, Any]) -> Iterator[None]:
    """Tag the Delta commits made inside the block with ``metadata`` and :data:`COMMIT_TAGS` (JSON
    ``userMetadata``)."""
    spark.conf.set(USER_METADATA_CONF, json.dumps({**COMMIT_TAGS, **metadata}, sort_keys=True))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA_CONF)


@contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """``settings`` in force in the session inside the block; those in place before are restored after it."""
    before = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, earlier in before.items():
            if earlier is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, earlier)


def plain_encoded(spark: SparkSession, columns: tuple[str, ...]) -> AbstractContextManager[None]:
    """Parquet files written inside the block store ``columns`` (dotted paths: ``data.url``) without a
    dictionary. For columns of values that hardly repeat (ids, times, URLs): Parquet's writer otherwise
    builds a dictionary of each of them in every file and falls back to plain values once it passes 1 MB,
    which cost ~10 % of the blob events' write for no smaller file. Session settings (``parquet.enable.
    dictionary#<path>``), which reach the writers' Hadoop configuration (:func:`session_settings`)."""
    return session_settings(spark, {f"parquet.enable.dictionary#{column}": "false" for column in columns})


def conflict_errors() -> tuple[type[BaseException], ...]:
    """Delta's optimistic-concurrency conflicts: another writer committed first."""
    from delta import exceptions as delta_exceptions  # importing it converts JVM conflicts to these classes

    return tuple(
        getattr(delta_exceptions, name)
        for name in (
            "ConcurrentWriteException",
            "MetadataChangedException",
            "ProtocolChangedException",
            "ConcurrentAppendException",
            "ConcurrentDeleteReadException",
            "ConcurrentDeleteDeleteException",
            "ConcurrentTransactionException",
            "DeltaConcurrentModificationException",
        )
        if hasattr(delta_exceptions, name)
    )


def tagged_write(
    spark: SparkSession,
    path: str,
    metadata: dict[str, Any],
    write: Callable[[], object],
    *,
    attempts: int = CONFLICT_ATTEMPTS,
    first_delay: float = 0.5,
    max_delay: float = 15.0,
) -> dict[str, Any] | None:
    """Run ``write`` (one Delta commit to ``path``) tagged with ``metadata``; retry it when a concurrent
    writer wins the commit; return that commit (:func:`find_commit`), or None when it committed nothing.

    Only for idempotent writes (insert-if-absent or guarded MERGEs, overwrites): a retry re-reads the
    table and re-applies the whole write, which changes nothing that the other writer already did.
    """
    token = uuid.uuid4().hex
    before = table_version(spark, path)
    errors = conflict_errors()
    for attempt in range(1, attempts + 1):
        try:
            with commit_metadata(spark, {**metadata, COMMIT_TOKEN: token}):
                write()
            break
        except Exception as exc:
            if attempt == attempts or not (isinstance(exc, errors) or _creation_race(exc)):
                raise
            delay = min(max_delay, first_delay * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            log.warning(
                "%s: a concurrent writer committed first (%s); retrying in %.1fs (attempt %d of %d)",
                path,
                type(exc).__name__,
                delay,
                attempt,
                attempts,
            )
            time.sleep(delay)
    return find_commit(spark, path, -1 if before is None else before, token)


def _creation_race(exc: Exception) -> bool:
    """Another writer was creating the table at the same moment (its first commit not yet visible)."""
    return isinstance(exc, TableCreationRace) or any(code in str(exc) for code in CREATION_RACES)


def find_commit(
    spark: SparkSession, path: str, after_version: int, token: str, depth: int = 100
) -> dict[str, Any] | None:
    """Version, operation, metrics and userMetadata of the commit after ``after_version`` tagged with
    ``token`` (other writers may have committed around it), among the next ``depth`` commits.

    Read from the commit files themselves (``_delta_log/<version>.json``, from ``after_version + 1`` on until
    one is not there yet: commits are numbered without gaps), a read or two of small objects; Delta's
    ``history()`` would read the table's last ``depth`` commits and run a Spark job over them (~0.5-1 s a
    write here, more on object storage). A location this process cannot read asks ``history()``."""
    from lakefeed.deltalog import DeltaLog
    from lakefeed.storage import Store

    if path in _LOG_UNREADABLE:
        commits = _history_after(spark, path, after_version, depth)
    else:
        try:
            commits = DeltaLog(Store(path)).commit_infos_after(after_version, depth)
        except Exception as exc:  # any reason this process cannot read the log: Delta's own history, from now on
            log.warning(
                "%s: reading its commits from Delta's history (this process cannot read its log: %s)", path, exc
            )
            _LOG_UNREADABLE.add(path)
            commits = _history_after(spark, path, after_version, depth)
    for version, info in commits:
        raw = info.get("userMetadata")
        metadata = json.loads(raw) if raw else None
        if metadata and metadata.get(COMMIT_TOKEN) == token:
            return {
                "version": version,
                "operation": info.get("operation"),
                "metrics": {k: int(v) for k, v in (info.get("operationMetrics") or {}).items() if str(v).isdigit()},
                "userMetadata": metadata,
            }
    return None


# Tables whose log this process could not read from Python (a credential only Spark's Hadoop settings hold,
# say): their commits are found through Delta's history without trying again (each try may wait out retries).
_LOG_UNREADABLE: set[str] = set()


def _history_after(spark: SparkSession, path: str, after_version: int, depth: int) -> list[tuple[int, dict[str, Any]]]:
    from delta.tables import DeltaTable
    from pyspark.sql import functions as F

    rows = (
        DeltaTable.forPath(spark, path)
        .history(depth)
        .where(F.col("version") > after_version)
        .select("version", "operation", "operationMetrics", "userMetadata")
        .collect()
    )
    return [(row["version"], row.asDict()) for row in rows]


def reported_commit(table: str, commit: dict[str, Any] | None) -> list[dict[str, Any]]:
    """What a job's summary says of a commit it made to ``table`` (its location as the summary names it),
    from :func:`tagged_write`: the version and the commit's token, which the commit step finds in the
    table's log (:func:`lakefeed.ledger.disproved`) before it credits the job. [] when nothing was committed."""
    if commit is None:
        return []
    return [{"table": table, "version": commit["version"], "token": commit["userMetadata"].get(COMMIT_TOKEN)}]


def table_exists(spark: SparkSession, path: str) -> bool:
    """Whether a Delta table is at ``path`` (its log alone: no Spark job)."""
    from delta.tables import DeltaTable

    exists: bool = DeltaTable.isDeltaTable(spark, path)
    return exists


def table_version(spark: SparkSession, path: str) -> int | None:
    """The table's latest version, or None when there is no Delta table at ``path``."""
    from delta.tables import DeltaTable

    if not table_exists(spark, path):
        return None
    version: int = DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]
    return version


# A MERGE that may insert joins source LEFT OUTER target, so Spark shuffles every row of every file the
# keys fall in; naming the changed keys in its condition (``t.key IN (...)``) filters the target rows
# before that shuffle. Each named key costs planning time (~0.1 ms per key in each of the MERGE's plans)
# and each target byte left unshuffled saves ~30 ns (measured: bench/scaling_bench.py), so keys are named
# only up to MAX_KEYS_NAMED and when the target holds at least TARGET_BYTES_PER_KEY_NAMED bytes a key.
MAX_KEYS_NAMED = 20_000
TARGET_BYTES_PER_KEY_NAMED = 4096


def naming_keys_pays(keys: int, target_bytes: int) -> bool:
    """Whether a MERGE of ``keys`` changed keys into a target of ``target_bytes`` should name them.

    >>> naming_keys_pays(10_000, 180_000_000), naming_keys_pays(10_000, 2_000_000), naming_keys_pays(0, 10**9)
    (True, False, False)
    """
    return 0 < keys <= MAX_KEYS_NAMED and target_bytes >= keys * TARGET_BYTES_PER_KEY_NAMED


def sql_literal(value: object) -> str | None:
    r"""``value`` as a Spark SQL literal of its own type, for the types keys usually have (integers, text,
    dates); None for any other (a timestamp, a float, binary), which is then not named.

    >>> sql_literal(12), sql_literal("it's"), sql_literal(date(2024, 1, 5)), sql_literal(1.5)
    ('12', "'it\\'s'", "DATE'2024-01-05'", None)
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    if isinstance(value, date) and not isinstance(value, datetime):
        return f"DATE'{value.isoformat()}'"
    return None


def keys_named(column: str, values: list[object], limit: int = MAX_KEYS_NAMED) -> str | None:
    """A target-only MERGE condition naming the source's values of one key column: ``column IN (...)``,
    with ``OR column IS NULL`` when a value is null (keys compared null-safe). It holds for every row a
    key can match, so adding it changes no match; None when there are more than ``limit`` values or one
    has no literal (the MERGE then goes without).

    >>> keys_named("t.`id`", [3, 1, None])
    '(t.`id` IN (3, 1) OR t.`id` IS NULL)'
    >>> keys_named("t.`id`", [1, 2], limit=1) is None, keys_named("t.`at`", [0.5]) is None
    (True, True)
    """
    if len(values) > limit:
        return None
    literals = [sql_literal(v) for v in values if v is not None]
    if any(literal is None for literal in literals):
        return None
    named = f"{column} IN ({', '.join(str(literal) for literal in literals)})" if literals else "false"
    return f"({named} OR {column} IS NULL)" if len(literals) < len(values) else named


def effects_of_new_keys(metrics: dict[str, int], rows: int, live: int) -> tuple[int, int, int] | None:
    """(inserted, updated, deleted) of a guarded MERGE of ``rows`` source rows, one per key (``live`` of
    them not tombstones), when its metrics prove every row went in as a new key: no row matched, so
    readers see ``live`` inserts and nothing else. None when some row matched a target row (count with
    :func:`count_effects`, from the table's change feed).

    >>> effects_of_new_keys({"numTargetRowsInserted": 5}, 5, 4), effects_of_new_keys({"numTargetRowsInserted": 4}, 5, 4)
    ((4, 0, 0), None)
    """
    if rows > 0 and metrics.get("numTargetRowsInserted", 0) == rows:
        return live, 0, 0
    return None


def count_effects(
    spark: SparkSession, path: str, version: int, keys: list[str], deleted_column: str
) -> tuple[int, int, int]:
    """(inserted, updated, deleted) of one commit as readers of a tombstoned table see them, from the
    table's own change feed: a new live key (or a tombstone made live again), a live key changed, a live
    key made a tombstone."""
    from pyspark.sql import functions as F

    changes = (
        spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", version)
        .option("endingVersion", version)
        .load(path)
    )
    kind = F.col("_change_type")
    live = ~F.col(deleted_column)
    per_key = changes.groupBy(*keys).agg(
        F.max(F.when(kind == "update_preimage", live)).alias("was_live"),
        F.max(F.when(kind != "update_preimage", live)).alias("now_live"),
    )
    was, now = F.col("was_live"), F.col("now_live")
    counts = per_key.agg(
        F.count_if(now & (was.isNull() | ~was)).alias("inserted"),
        F.count_if(was & now).alias("updated"),
        F.count_if(was & ~now).alias("deleted"),
    ).collect()[0]
    inserted, updated, deleted = (int(counts[name] or 0) for name in ("inserted", "updated", "deleted"))
    return inserted, updated, deleted
