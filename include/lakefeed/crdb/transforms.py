"""Pure pieces of the CockroachDB pipeline: the last change per key, column types, target rows."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

# Columns every target carries besides the row's own: the merge key, the change's HLC, the tombstone flag.
KEY_COLUMN, UPDATED_COLUMN, DELETED_COLUMN = "_crdb_key", "_crdb_updated", "_crdb_deleted"
TARGET_COLUMNS = (KEY_COLUMN, UPDATED_COLUMN, DELETED_COLUMN)
# An HLC "<wall>.<10-digit logical>" as an exact decimal: 19 + 10 digits, so SQL compares it exactly.
HLC_DECIMAL = "decimal(38,10)"
_LONG_DIGITS = 18  # integers with more digits than this may not fit a bigint


def latest_per_key(messages: DataFrame) -> DataFrame:
    """Per (topic, key) the change with the greatest ``updated`` (wall, then logical); an equal ``updated``
    is the same change emitted again, where the higher schema version (a backfill's re-emission), then the
    later file, then the later line wins. File order never decides between different ``updated``."""
    newest_first = Window.partitionBy("topic", "key").orderBy(
        F.col("wall").desc(),
        F.col("logical").desc(),
        F.col("schemaId").desc(),
        F.col("file").desc(),
        F.col("line").desc(),
    )
    return messages.withColumn("_rank", F.row_number().over(newest_first)).where("_rank = 1").drop("_rank")


def column_kinds(messages: DataFrame) -> DataFrame:
    """Per (topic, column): the kinds of its non-null values and the longest integer, in one small result."""
    cells = messages.select("topic", F.explode("values").alias("column", "text"), "kinds")
    return cells.groupBy("topic", "column").agg(
        F.collect_set(F.col("kinds")[F.col("column")]).alias("kinds"),
        F.max(F.when(F.col("kinds")[F.col("column")] == "i", F.length(F.ltrim(F.col("text"))))).alias("digits"),
    )


def column_type(kinds: set[str], digits: int | None) -> str:
    """The Spark type of a column first seen with values of these kinds (later batches keep it).

    >>> column_type({"i"}, 5), column_type({"i", "f"}, 3), column_type({"s", "i"}, 2), column_type(set(), None)
    ('bigint', 'double', 'string', 'string')
    """
    if kinds == {"i"}:
        return "bigint" if (digits or 0) <= _LONG_DIGITS else "decimal(38,0)"
    if kinds and kinds <= {"i", "f"}:
        return "double"
    if kinds == {"b"}:
        return "boolean"
    return "string"  # text, JSON objects and arrays as their JSON text, mixed kinds, or never seen non-null


def target_rows(latest: DataFrame, types: dict[str, str]) -> DataFrame:
    """One topic's latest changes as target rows: its columns typed, then key, updated, tombstone flag."""
    return latest.select(
        *[F.col("values")[name].cast(kind).alias(name) for name, kind in types.items()],
        F.col("key").alias(KEY_COLUMN),
        F.col("updated").alias(UPDATED_COLUMN),
        F.col("deleted").alias(DELETED_COLUMN),
    )


def cast_failures(latest: DataFrame, types: dict[str, str]) -> DataFrame:
    """Rows where a non-null value does not fit its column's type (it would be lost): file, line, column."""
    checks = [
        F.when(F.col("values")[name].isNotNull() & F.col("values")[name].cast(kind).isNull(), F.lit(name))
        for name, kind in types.items()
        if kind != "string"
    ]
    if not checks:
        return latest.limit(0).select("file", "line", F.lit(None).cast("string").alias("column"))
    return latest.select("file", "line", F.coalesce(*checks).alias("column")).where(F.col("column").isNotNull())
