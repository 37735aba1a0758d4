"""Pure transforms of Delta change data feed rows."""

from __future__ import annotations

from datetime import datetime

from pyspark.sql import DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructType, VariantType

CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP = "_change_type", "_commit_version", "_commit_timestamp"
CDF_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
# Columns the target carries besides the source's: which source version last
# touched the key, when, and whether that change deleted it (a tombstone).
VERSION_COLUMN, TIMESTAMP_COLUMN, DELETED_COLUMN = "_cdf_version", "_cdf_commit_timestamp", "_cdf_deleted"
TARGET_COLUMNS = (VERSION_COLUMN, TIMESTAMP_COLUMN, DELETED_COLUMN)
# The source version a full refresh rebuilt the target at (a table property): versions up to it are in it.
BASE_VERSION_PROPERTY = "lakefeed.cdf.baseVersion"
# On each reduced row: how many change rows (pre-images aside) of its key it stands for.
ROWS_OF_KEY = "__lakefeed_rows_of_key"
# The working columns of the reductions (prefixed: a source column may be named _rank or _deleted).
RANK = "__lakefeed_rank"


def holds_map(data_type: DataType) -> bool:
    """Whether values of ``data_type`` hold a map or a variant at any depth (Spark neither hashes nor compares
    them)."""
    if isinstance(data_type, (MapType, VariantType)):
        return True
    if isinstance(data_type, ArrayType):
        return holds_map(data_type.elementType)
    if isinstance(data_type, StructType):
        return any(holds_map(f.dataType) for f in data_type.fields)
    return False


def _latest_first(changes: DataFrame, partition: list[str]) -> WindowSpec:
    """Each ``partition``'s change rows, last first: by commit version; within a version the row that exists
    after the commit (insert / update_postimage) before a delete."""
    after_commit = F.when(F.col(CHANGE_TYPE) == "delete", 0).otherwise(1)
    # The hash only breaks ties a well-keyed source never has (duplicate keys in one version). Spark hashes no
    # map nor variant, so a column holding one is hashed as its JSON text.
    tiebreak = F.xxhash64(
        *[
            F.to_json(F.col(f"`{f.name}`")) if holds_map(f.dataType) else F.col(f"`{f.name}`")
            for f in changes.schema.fields
            if f.name not in CDF_COLUMNS
        ]
    )
    return Window.partitionBy(*partition).orderBy(F.col(COMMIT_VERSION).desc(), after_commit.desc(), tiebreak.desc())


def one_change_per(changes: DataFrame, partition: list[str]) -> DataFrame:
    """The last change of each ``partition`` (pre-images dropped): per key and commit version, for the
    history of an SCD type 2 target."""
    return (
        changes.where(F.col(CHANGE_TYPE) != "update_preimage")
        .withColumn(RANK, F.row_number().over(_latest_first(changes, partition)))
        .where(F.col(RANK) == 1)
        .drop(RANK)
    )


def last_change_per_key(changes: DataFrame, keys: list[str]) -> DataFrame:
    """One row per key: its last change by commit version; within a version the row that exists
    after the commit (insert / update_postimage) beats a delete. Pre-images are dropped.
    ``ROWS_OF_KEY`` counts the key's change rows in the same pass (one window, one shuffle)."""
    latest_first = _latest_first(changes, keys)
    return (
        changes.where(F.col(CHANGE_TYPE) != "update_preimage")
        .withColumn(RANK, F.row_number().over(latest_first))
        .withColumn(
            ROWS_OF_KEY,
            F.count(F.lit(1)).over(latest_first.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)),
        )
        .where(F.col(RANK) == 1)
        .drop(RANK)
    )


def to_target_rows(last_changes: DataFrame, columns: list[str]) -> DataFrame:
    """Source columns, then the version, timestamp and tombstone flag of the change."""
    return last_changes.select(
        *columns,
        F.col(COMMIT_VERSION).alias(VERSION_COLUMN),
        F.col(COMMIT_TIMESTAMP).alias(TIMESTAMP_COLUMN),
        (F.col(CHANGE_TYPE) == "delete").alias(DELETED_COLUMN),
    )


def snapshot_rows(snapshot: DataFrame, columns: list[str], version: int, timestamp: datetime | None) -> DataFrame:
    """A source snapshot as target rows (the full-refresh path)."""
    return snapshot.select(
        *columns,
        F.lit(version).cast("long").alias(VERSION_COLUMN),
        F.lit(timestamp).cast("timestamp").alias(TIMESTAMP_COLUMN),
        F.lit(False).alias(DELETED_COLUMN),
    )
