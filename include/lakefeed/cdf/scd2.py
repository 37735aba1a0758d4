"""SCD type 2 targets of the Delta CDF pipeline: every version of a row, shaped like Databricks' AUTO CDC
(``STORED AS SCD TYPE 2``): the selected source columns plus ``__START_AT`` and ``__END_AT``, both source
commit versions.

For each key a history row starts at every commit version where the key is inserted, or updated with at
least one non-key selected column different from its current row (an update that changes nothing adds
nothing). ``__END_AT`` is null while the row is current; once superseded or deleted it is the version of
that change. A delete adds no row; a re-insert after it starts a new one. Within one commit version the
row that exists after the commit wins over a delete (a ``replaceWhere`` overwrite deletes and inserts a
key in one version), as in the type 1 pipeline.

History only grows forward. The target records in its table properties the first source version of its
history (:data:`HISTORY_FROM`, set when it is created) and the last version applied
(:data:`HISTORY_THROUGH`, set by a metadata commit after each range's MERGE). A range inside the history
is a replay and writes nothing; a range that overlaps its end applies only the versions after it (a history
started by a full refresh holds every version up to its snapshot, as a type 1 target does); a range
older than the history, or one that would leave versions unapplied between the history and itself, is
refused before anything is read (exit 2): its changes cannot be placed in a history that already went on
without them. A run killed between its MERGE and the metadata commit is re-applied safely: each key's
changes at or before the last version its history records are dropped, and the MERGE matches rows by key
and ``__START_AT``, so nothing is added twice.
"""

from __future__ import annotations

import functools
import logging
import operator
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from lakefeed.cdf.transforms import BASE_VERSION_PROPERTY, CHANGE_TYPE, COMMIT_VERSION, holds_map, one_change_per
from lakefeed.errors import ChangeDataError, FeedConfigError

log = logging.getLogger(__name__)

START_AT, END_AT = "__START_AT", "__END_AT"
HISTORY_COLUMNS = (START_AT, END_AT)
SCD_TYPE = "lakefeed.cdf.scdType"  # "2" on a history target
HISTORY_FROM = "lakefeed.cdf.historyFrom"  # the first source version of the history
HISTORY_THROUGH = "lakefeed.cdf.historyThrough"  # the last source version applied
SCD_TYPES = (1, 2)

# Columns of the sequence each key's changes are walked in (dropped before the MERGE).
_DELETED, _SEED, _EFFECT, _LAST = "__lakefeed_deleted", "__lakefeed_seed", "__lakefeed_effect", "__lakefeed_last"
INSERTED, SUPERSEDED, DELETED = "inserted", "superseded", "deleted"  # what a history boundary does


@dataclass(frozen=True)
class History:
    """The source versions a history target holds: ``first``..``through`` (``through`` None until the first
    range's metadata commit). ``snapshot``: the history started from a full refresh at ``first``, which holds
    every version up to it."""

    first: int | None
    through: int | None
    snapshot: bool = False

    @classmethod
    def of(cls, properties: dict[str, str]) -> History:
        def version(name: str) -> int | None:
            value = properties.get(name)
            return int(value) if value is not None else None

        return cls(version(HISTORY_FROM), version(HISTORY_THROUGH), BASE_VERSION_PROPERTY in properties)


def scd_type_of(properties: dict[str, str] | None) -> int | None:
    """The SCD type a target was made for (None: no target). A target without the property is type 1."""
    if properties is None:
        return None
    return int(properties.get(SCD_TYPE, "1"))


def check_scd_type(target: str, wanted: int, properties: dict[str, str] | None) -> None:
    """Refuse a run whose SCD type is not the one its existing target was made for."""
    made = scd_type_of(properties)
    if made is not None and made != wanted:
        raise ChangeDataError(
            f"target {target} is an SCD type {made} target and this run writes SCD type {wanted}: the two keep "
            f"different columns (type 1: the current row with _cdf_version; type 2: every version with "
            f"{START_AT}/{END_AT}). Set scd_type back to {made}, or point the pipeline at a new target."
        )


def first_version_to_read(target: str, start: int, end: int, history: History) -> int | None:
    """The first source version of ``start..end`` a history target still needs, or None when the range is
    already in its history (a replay: nothing to read or write). Refuses a range older than the history
    or one that leaves a gap after it."""
    if history.first is None:
        return start
    if history.snapshot and start <= history.first:  # versions up to the snapshot are in it, as in type 1
        if end <= history.first:
            return None
        start = history.first + 1
    if start < history.first:
        raise ChangeDataError(
            f"versions {start}..{end} are older than the history of SCD type 2 target {target}, which starts at "
            f"source version {history.first}: history only grows forward, so an older range cannot be placed in "
            f"it. To rebuild the history from version {start}, delete the target and apply {start}.. again."
        )
    applied = history.through if history.through is not None else history.first - 1
    if end <= applied:
        return None
    if start > applied + 1:
        raise ChangeDataError(
            f"versions {start}..{end} would leave source versions {applied + 1}..{start - 1} out of the history of "
            f"SCD type 2 target {target} (applied through {applied}): apply {applied + 1}..{end} instead."
        )
    return max(start, applied + 1)


def check_comparable(schema: StructType, columns: list[str]) -> None:
    """Refuse selected columns whose values Spark cannot compare for equality (maps and variants, at any
    depth): the history needs to know whether an update changed anything."""
    maps = [f.name for f in schema.fields if f.name in columns and holds_map(f.dataType)]
    if maps:
        raise FeedConfigError(
            f"column(s) {', '.join(maps)} hold maps or variants, which cannot be compared to tell whether an "
            f"update changed a row: leave them out of an SCD type 2 target's columns (--columns / the pipeline's "
            f"columns)"
        )


def changes_by_version(changes: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    """One row per key and commit version: the selected columns, the version and whether the change deleted
    the key (pre-images dropped; the row that exists after the commit wins over a delete)."""
    return one_change_per(changes, [*keys, COMMIT_VERSION]).select(
        *columns, F.col(COMMIT_VERSION).alias(START_AT), (F.col(CHANGE_TYPE) == "delete").alias(_DELETED)
    )


def history_rows(events: DataFrame, target: DataFrame, keys: list[str], columns: list[str]) -> DataFrame:
    """What a range adds to the history: the rows it starts (with ``__END_AT`` when a later change in the
    range ends them) and the current rows it ends, each with ``_seed`` (true: an existing current row, to
    close) and ``_effect`` (:data:`INSERTED`, :data:`SUPERSEDED`; :data:`DELETED` rows are boundaries only
    and are dropped here, but counted by :func:`effects`).

    ``events`` comes from :func:`changes_by_version`; ``target`` is the history target (any rows: it is
    joined on the keys of ``events``). Each key's changes at or before the last version its history records
    are dropped (a re-run after a MERGE that landed), the rest are walked in version order after its
    current row."""
    values = [c for c in columns if c not in keys]
    on_keys = [F.col(f"e.`{k}`").eqNullSafe(F.col(f"h.`{k}`")) for k in keys]
    changed = events.select(*keys).distinct().alias("e")
    history = target.alias("h").join(changed, _all(on_keys), "left_semi")
    last_recorded = history.groupBy(*keys).agg(F.max(F.coalesce(END_AT, START_AT)).alias(_LAST))
    seeds = history.where(F.col(END_AT).isNull()).select(
        *columns, START_AT, F.lit(False).alias(_DELETED), F.lit(True).alias(_SEED)
    )
    fresh = (
        events.alias("e")
        .join(last_recorded.alias("h"), _all(on_keys), "left")
        .where(F.col(f"h.{_LAST}").isNull() | (F.col(f"e.{START_AT}") > F.col(f"h.{_LAST}")))
        .select(*[F.col(f"e.`{c}`") for c in columns], F.col(f"e.{START_AT}"), F.col(f"e.{_DELETED}"))
        .withColumn(_SEED, F.lit(False))
    )
    in_order = Window.partitionBy(*keys).orderBy(START_AT)
    sequence = seeds.unionByName(fresh)
    previous_deleted = F.lag(_DELETED).over(in_order)
    previous_values = F.lag(_values(values)).over(in_order)
    starts = ~F.col(_DELETED) & (
        previous_deleted.isNull() | previous_deleted | ~previous_values.eqNullSafe(_values(values))
    )
    ends_by_delete = F.col(_DELETED) & ~previous_deleted  # null (no row before) is no boundary either
    effect = (
        F.when(starts & (previous_deleted.isNull() | previous_deleted), F.lit(INSERTED))
        .when(starts, F.lit(SUPERSEDED))
        .when(ends_by_delete, F.lit(DELETED))
    )
    boundaries = sequence.withColumn(_EFFECT, effect).where(F.col(_EFFECT).isNotNull())
    return boundaries.withColumn(END_AT, F.lead(START_AT).over(in_order))


def effects(history: DataFrame) -> dict[str, int]:
    """How many history rows the range starts for new or re-inserted keys (``inserted``), starts over a
    current row (``superseded``), and ends by a delete (``deleted``); existing rows it only closes are
    counted by their successor's effect."""
    counted = history.where(~F.col(_SEED)).groupBy(_EFFECT).count().collect()
    found = {row[_EFFECT]: int(row["count"]) for row in counted}
    return {name: found.get(name, 0) for name in (INSERTED, SUPERSEDED, DELETED)}


def merge_history(
    spark: SparkSession, target: str, history: DataFrame, keys: list[str], columns: list[str], prune: Column | None
) -> None:
    """One MERGE: insert the rows the range starts, set ``__END_AT`` on the rows it ends. Rows are matched by
    key and ``__START_AT``, so a row already there (a re-run) is not added again, and only a current row
    (``__END_AT`` null) is ever ended."""
    from delta.tables import DeltaTable

    source = history.where(~F.col(_DELETED) & (~F.col(_SEED) | F.col(END_AT).isNotNull()))
    on = _all([F.col(f"t.`{k}`").eqNullSafe(F.col(f"s.`{k}`")) for k in keys]) & (
        F.col(f"t.{START_AT}") == F.col(f"s.{START_AT}")
    )
    if prune is not None:
        on = prune & on
    (
        DeltaTable.forPath(spark, target)
        .alias("t")
        .merge(source.alias("s"), on)
        .whenMatchedUpdate(condition=f"t.{END_AT} IS NULL AND s.{END_AT} IS NOT NULL", set={END_AT: f"s.{END_AT}"})
        .whenNotMatchedInsert(
            condition=f"NOT s.{_SEED}",
            values={**{f"`{c}`": f"s.`{c}`" for c in columns}, START_AT: f"s.{START_AT}", END_AT: f"s.{END_AT}"},
        )
        .execute()
    )


def snapshot_history(snapshot: DataFrame, columns: list[str], version: int) -> DataFrame:
    """A source snapshot as the first rows of a history: every live row current since ``version``."""
    return snapshot.select(
        *columns, F.lit(version).cast("long").alias(START_AT), F.lit(None).cast("long").alias(END_AT)
    )


def history_properties(first: int, through: int | None = None, snapshot: bool = False) -> dict[str, Any]:
    """The table properties a history target is created with: ``first`` its first version (a snapshot's
    also marked as the full refresh's base version)."""
    properties = {SCD_TYPE: "2", HISTORY_FROM: str(first)}
    if through is not None:
        properties[HISTORY_THROUGH] = str(through)
    if snapshot:
        properties[BASE_VERSION_PROPERTY] = str(first)
    return properties


def _values(values: list[str]) -> Column:
    return F.struct(*[F.col(f"`{c}`") for c in values]) if values else F.lit(True)


def _all(conditions: list[Column]) -> Column:
    return functools.reduce(operator.and_, conditions)
