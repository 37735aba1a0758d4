"""Tombstone retention (the tombstone GC of Databricks' AUTO CDC) for the targets that keep deletes as rows:
the CDF pipeline's type 1 targets (``_cdf_deleted``) and the CockroachDB topic tables (``_crdb_deleted``).

A tombstone is what lets a late or replayed older change of a deleted key be recognised as older (its
version or ``updated`` is not newer than the tombstone's) instead of bringing the key back. Removing it gives
that up for the key: **a change of the key older than its delete, applied after the tombstone is gone, inserts
the key again.** Retention therefore removes only tombstones that are both older than the threshold (by the
source's own clock: the delete's commit time or ``updated``, against the newest change of the range being
applied) and from before the range (changes the checkpoint has moved past), and records the newest removed
tombstone in the table property :data:`HORIZON`. A later range that ends before the horizon is refused
(:func:`check_horizon`): it could hold an older change of a key whose tombstone is gone. What the threshold
must cover is the source's out-of-order span: a message delivered later than that, by the source's clock,
after its key's tombstone went, resurrects the key.

Only the first job of a scheduled DAG run removes tombstones (every other job of the run applies versions
after its range, so none of them ends before the horizon it may record)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from lakefeed.delta import reported_commit, sql_literal, tagged_write
from lakefeed.deltalog import DeltaLog
from lakefeed.errors import ChangeDataError, ConfigError
from lakefeed.storage import Store

log = logging.getLogger(__name__)

HORIZON = "lakefeed.tombstonesRemovedThrough"  # the newest removed tombstone's version or updated HLC


def retention(hours: float, where: str = "--tombstone-retention-hours") -> timedelta:
    """The threshold, checked: a positive number of hours (microseconds are kept exactly)."""
    if not hours > 0:
        raise ConfigError(f"{where} must be a positive number of hours, not {hours!r}")
    return timedelta(microseconds=round(hours * 3_600_000_000))


def horizon(table: str) -> str | None:
    """The newest tombstone retention removed from ``table`` (its log; None: none yet, or no table)."""
    return (DeltaLog(Store(table)).properties() or {}).get(HORIZON)


def check_horizon(table: str, end: str, before: Callable[[str, str], bool], what: str) -> None:
    """Refuse applying a range whose ``end`` lies ``before`` the table's horizon (:mod:`lakefeed.tombstones`)."""
    removed = horizon(table)
    if removed is not None and before(end, removed):
        raise ChangeDataError(
            f"{what} ends at {end}, before {removed}, the newest tombstone that tombstone retention removed from "
            f"{table}: a change in it could bring back a key deleted since. Apply a range ending at {removed} or "
            f"later, or rebuild the target."
        )


def remove_expired(
    spark: SparkSession,
    table: str,
    reported_as: str,
    expired: Column,
    newest: Column,
    later: Callable[[str, str], bool],
    metadata: dict[str, Any],
) -> tuple[int, list[dict[str, Any]]]:
    """Delete the tombstones ``expired`` selects from ``table`` (where Spark opens it; ``reported_as`` is how
    summaries name it). First the horizon: ``newest`` (an aggregate: the newest of them, as text) becomes the
    table's :data:`HORIZON` when it is ``later`` than the one recorded; then one DELETE. Killed between the
    two, the horizon only refuses a little more. Returns how many rows went and the commits made."""
    from delta.tables import DeltaTable

    found = spark.read.format("delta").load(table).where(expired).agg(F.count(F.lit(1)), newest).collect()[0]
    if not found[0]:
        return 0, []
    commits: list[dict[str, Any]] = []
    recorded = horizon(reported_as)
    if recorded is None or later(str(found[1]), recorded):
        setting = f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('{HORIZON}' = {sql_literal(str(found[1]))})"
        commits += reported_commit(
            reported_as, tagged_write(spark, table, {**metadata, "step": "horizon"}, lambda: spark.sql(setting))
        )
    deleted = tagged_write(
        spark, table, {**metadata, "step": "tombstones"}, lambda: DeltaTable.forPath(spark, table).delete(expired)
    )
    commits += reported_commit(reported_as, deleted)
    removed = deleted["metrics"].get("numDeletedRows", 0) if deleted else 0
    log.info("%s: %d tombstone(s) past retention removed (horizon %s)", reported_as, removed, found[1])
    return removed, commits
