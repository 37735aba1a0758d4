"""Pure pieces of the CockroachDB pipeline: column types and target rows (the last change per key is picked in
the workers: :func:`lakefeed.crdb.messages.final_picks`)."""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from lakefeed.crdb.messages import Shape

# Columns every target carries besides the row's own: the merge key, the change's HLC, the tombstone flag.
KEY_COLUMN, UPDATED_COLUMN, DELETED_COLUMN = "_crdb_key", "_crdb_updated", "_crdb_deleted"
TARGET_COLUMNS = (KEY_COLUMN, UPDATED_COLUMN, DELETED_COLUMN)
# An HLC "<wall>.<10-digit logical>" as an exact decimal: 19 + 10 digits, so SQL compares it exactly.
HLC_DECIMAL = "decimal(38,10)"


def kinds_by_column(shapes: Iterable[Shape]) -> dict[str, dict[str, set[str]]]:
    """topic -> column -> the kinds of its non-null values (empty: only nulls seen), from the shapes of
    the batch's rows (:func:`lakefeed.crdb.messages.row_shapes`); columns in name order.

    >>> found = kinds_by_column([("t", ("b", "a"), (("a", "i"),)), ("t", ("a", "b"), (("a", "f"), ("b", "s")))])
    >>> found == {"t": {"a": {"f", "i"}, "b": {"s"}}}, list(found["t"])
    (True, ['a', 'b'])
    """
    found: dict[str, dict[str, set[str]]] = {}
    for topic, columns, kinds in shapes:
        per_column = found.setdefault(topic, {})
        for column in columns:
            per_column.setdefault(column, set())
        for column, kind in kinds:
            per_column.setdefault(column, set()).add(kind)
    return {topic: dict(sorted(per_column.items())) for topic, per_column in sorted(found.items())}


def column_type(kinds: set[str]) -> str:
    """The Spark type of a column first seen with values of these kinds (later batches keep it).

    >>> column_type({"i"}), column_type({"i", "I"}), column_type({"i", "f"}), column_type({"s", "i"})
    ('bigint', 'decimal(38,0)', 'double', 'string')
    >>> column_type({"I", "f"}), column_type({"b"}), column_type(set())
    ('double', 'boolean', 'string')
    """
    if kinds == {"i"}:
        return "bigint"
    if kinds and kinds <= {"i", "I"}:
        return "decimal(38,0)"
    if kinds and kinds <= {"i", "I", "f"}:
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


def may_not_fit(kinds: set[str], kind: str) -> bool:
    """Whether a value of one of ``kinds`` (its JSON literal's text) may not fit a column of type ``kind``: the
    types :func:`column_type` gives hold every value of the kinds they were chosen for, but a ``decimal(38,0)``
    not an integer of more than 38 digits, and a table's column keeps its type whatever later batches hold.

    >>> may_not_fit({"i"}, "bigint"), may_not_fit({"i", "I", "f"}, "double"), may_not_fit({"j", "b"}, "string")
    (False, False, False)
    >>> may_not_fit({"I"}, "decimal(38,0)"), may_not_fit({"s"}, "bigint"), may_not_fit({"i"}, "int")
    (True, True, True)
    """
    safe = {"string": None, "bigint": {"i"}, "boolean": {"b"}, "double": {"i", "I", "f"}, "decimal(38,0)": {"i"}}
    if kind not in safe:
        return True
    holds = safe[kind]
    return holds is not None and not kinds <= holds


def cast_failures(latest: DataFrame, types: dict[str, str], kinds: dict[str, set[str]]) -> DataFrame | None:
    """Rows where a non-null value does not fit its column's type (it would be lost): file, line, column;
    None when the kinds of values seen (``kinds``: column -> kinds) all fit their columns, nothing to check."""
    checks = [
        F.when(F.col("values")[name].isNotNull() & F.col("values")[name].try_cast(kind).isNull(), F.lit(name))
        for name, kind in types.items()
        if may_not_fit(kinds.get(name, set()), kind)
    ]
    if not checks:
        return None
    return latest.select("file", "line", F.coalesce(*checks).alias("column")).where(F.col("column").isNotNull())
