"""Which plan applies a range of a Delta change data feed to a type 1 target: the version-guarded MERGE of
its changes (:func:`lakefeed.cdf.job.run`), or a *rebuild*: the target overwritten, in one commit, with the
source's snapshot at the range's end.

A MERGE costs about what the range changed (its change rows read, reduced per key, joined with the target
and written); a rebuild costs about the snapshot (its files read once and written once). When a range
changed a large share of the table (a catch-up where most keys changed), the rebuild is the cheaper one:
on the bench (``bench/cdf_bench.py``: 1M changed rows over a 200k-row table) the MERGE took ~7.5 s (its
event log, ``bench/README.md``: reading and reducing the changes 2.7 s, the MERGE 4.8 s), where a plain
read and write of the 2M change rows took ~3 s; a rebuild reads and writes the 200k snapshot rows once.
The decision is made from the logs alone, before any Spark job:

- the rows the range changed: each commit's ``operationMetrics`` as Delta writes them per operation
  (:func:`rows_changed`), summed over the range (:func:`range_rows_changed`). A commit that changed rows
  without saying how many (metrics off, a RESTORE, a full overwrite that names no deleted rows) leaves
  the count unknown, and an unknown count never rebuilds;
- the rows a rebuild reads: the ``numRecords`` statistics of the snapshot's files
  (:func:`snapshot_row_count`). Rows a deletion vector hides are counted too: a rebuild still reads them;
- whether the target holds anything newer than the range's end (:func:`applied_beyond`), in which case a
  rebuild would take it back, so the range MERGEs.

:func:`choose_plan` is the decision itself, pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakefeed.delta import REFRESH_MARKER
from lakefeed.deltalog import DeltaLog, changes_rows
from lakefeed.errors import ChangeDataError
from lakefeed.targets import user_metadata

MERGE, REBUILD = "merge", "rebuild"
# Rebuild when the range changed at least this share of the rows the snapshot holds. Per row, a MERGE costs
# several times a plain write (the bench's event-log figures above: ~7.5 µs a changed row against ~1.5 µs a
# row written), so the two plans should meet well below a share of 1; 0.5 is a conservative default, not a
# measured crossover, leaving a margin for MERGEs that touch few files (changes clustered by key).
REBUILD_SHARE = 0.5
# ... and only when the range changed at least this many rows: below it both plans take a few seconds of
# fixed cost, and the MERGE keeps what a rebuild cannot (tombstones of deleted keys, per-key counts).
REBUILD_MIN_ROWS = 100_000
# The commit tag (``userMetadata``) of a rebuild, beside the range's ``startingVersion``/``endingVersion``.
PLAN_TAG = "plan"

# Rows changed by one commit, by operation, from its operationMetrics (Spark's names, strings in the log).
_MERGE_ROWS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")
_ROWS_BY_OPERATION: dict[str, tuple[str, ...]] = {
    "MERGE": _MERGE_ROWS,
    "UPDATE": ("numUpdatedRows",),
    "DELETE": ("numDeletedRows",),
}


@dataclass(frozen=True)
class RangePlan:
    """The plan chosen for a range, and why (a job summary's ``plan``)."""

    chosen: str = MERGE
    reason: str = ""
    changed_rows: int | None = None  # rows the range's commits changed, from their metrics (None: unknown)
    snapshot_rows: int | None = None  # rows of the source's snapshot at the range's end (None: unknown)
    share: float = REBUILD_SHARE


def choose_plan(
    changed_rows: int | None,
    snapshot_rows: int | None,
    *,
    share: float = REBUILD_SHARE,
    min_rows: int = REBUILD_MIN_ROWS,
    blocked: str | None = None,
) -> RangePlan:
    """Rebuild when the range changed at least ``share`` of the snapshot's rows (and at least ``min_rows``),
    nothing ``blocked`` it, and both counts are known; else MERGE.

    >>> choose_plan(1_000_000, 200_000).chosen, choose_plan(10_000, 200_000).chosen
    ('rebuild', 'merge')
    >>> choose_plan(None, 200_000).reason
    'the metrics of the range do not say how many rows it changed'
    >>> choose_plan(500, 600, min_rows=0).chosen, choose_plan(500, 600).chosen
    ('rebuild', 'merge')
    >>> choose_plan(900, 1000, min_rows=0, blocked="the target is ahead").reason
    'the target is ahead'
    """

    def chosen(what: str, reason: str) -> RangePlan:
        return RangePlan(what, reason, changed_rows, snapshot_rows, share)

    if changed_rows is None:
        return chosen(MERGE, "the metrics of the range do not say how many rows it changed")
    if snapshot_rows is None:
        return chosen(MERGE, "the statistics of the source's snapshot do not say how many rows it holds")
    if changed_rows < min_rows:
        return chosen(MERGE, f"{changed_rows} rows changed, fewer than {min_rows}")
    if changed_rows < share * snapshot_rows:
        return chosen(MERGE, f"{changed_rows} rows changed, less than {share:g} of the {snapshot_rows} rows")
    if blocked is not None:
        return chosen(MERGE, blocked)
    return chosen(REBUILD, f"{changed_rows} rows changed, at least {share:g} of the {snapshot_rows} rows")


def rows_changed(commit_info: dict[str, Any], actions: list[dict[str, Any]]) -> int | None:
    """How many rows one commit changed (inserted, updated or deleted), from its ``operationMetrics``; 0 for
    a commit that changed no rows (a schema or property change, OPTIMIZE); None when its metrics do not say.

    A MERGE counts the rows it inserted, updated and deleted; an UPDATE or DELETE its rows; any other write
    (WRITE, STREAMING UPDATE, CREATE … AS SELECT …) its ``numOutputRows`` less the rows it only copied,
    plus ``numDeletedRows`` when it overwrote rows. An overwrite that removed files without counting their
    rows is unknown.

    >>> rows_changed({"operation": "UPDATE", "operationMetrics": {"numUpdatedRows": "10"}}, [{"cdc": {}}])
    10
    >>> rows_changed(
    ...     {"operation": "WRITE", "operationMetrics": {"numOutputRows": "40", "numCopiedRows": "30",
    ...      "numDeletedRows": "10", "numRemovedFiles": "0"}}, [{"add": {"dataChange": True}}])
    20
    >>> rows_changed({"operation": "WRITE", "operationMetrics": {"numOutputRows": "5", "numRemovedFiles": "2"}},
    ...              [{"add": {"dataChange": True}}]) is None
    True
    >>> rows_changed({"operation": "OPTIMIZE"}, [{"add": {"dataChange": False}}])
    0
    """
    if not changes_rows(actions):
        return 0
    metrics = commit_info.get("operationMetrics") or {}

    def count(name: str) -> int | None:
        value = metrics.get(name)
        try:
            return int(value) if value is not None else None
        except (TypeError, ValueError):
            return None

    operation = str(commit_info.get("operation") or "")
    names = _ROWS_BY_OPERATION.get(operation)
    if names is not None:
        counts = [count(name) for name in names]
        return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)
    written = count("numOutputRows")
    if written is None:
        return None
    deleted = count("numDeletedRows")
    if deleted is None and (count("numRemovedFiles") or 0) > 0:
        return None  # an overwrite that removed rows without counting them
    return written - (count("numCopiedRows") or 0) + (deleted or 0)


def range_rows_changed(source_log: DeltaLog, start: int, end: int) -> tuple[int | None, int | None]:
    """The rows versions ``start..end`` changed (:func:`rows_changed`, summed), and the first version whose
    metrics do not say (then the rows are None). One read of each commit file, no replay."""
    total = 0
    for version in range(start, end + 1):
        try:
            actions = source_log.actions(version)
        except ChangeDataError:
            return None, version
        info: dict[str, Any] = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
        rows = rows_changed(info, actions)
        if rows is None:
            return None, version
        total += rows
    return total, None


def snapshot_row_count(source_log: DeltaLog, version: int) -> int | None:
    """The rows of the source's files as of ``version`` (``numRecords`` of each, deletion vectors not
    subtracted: a rebuild reads those rows too); None when a file has no such statistics."""
    import pyarrow as pa

    table = source_log.snapshot(version)
    if table is None:
        return None
    files = pa.table(table.get_add_actions(flatten=True))
    if "num_records" not in files.column_names:
        return 0 if files.num_rows == 0 else None
    records = files.column("num_records").to_pylist()
    if any(r is None for r in records):
        return None
    return int(sum(records))


def applied_through(tags: dict[str, Any]) -> int | None:
    """The last source version a target commit applied, from its tags: a full refresh's snapshot version,
    else the ``endingVersion`` of the range it applied (a MERGE, a rebuild, their schema steps, tombstone
    removal); None for a commit a CDF job did not tag.

    >>> applied_through({"fullRefreshVersion": 7}), applied_through({"endingVersion": 9}), applied_through({})
    (7, 9, None)
    """
    value = tags.get(REFRESH_MARKER, tags.get("endingVersion"))
    return int(value) if isinstance(value, int) or (isinstance(value, str) and value.isdigit()) else None


def is_rebuild(tags: dict[str, Any]) -> bool:
    """Whether a target commit replaced the target's rows: a full refresh, or a rebuild by the planner."""
    return REFRESH_MARKER in tags or tags.get(PLAN_TAG) == REBUILD


def applied_beyond(target_log: DeltaLog, end: int) -> str | None:
    """Why the target may hold source versions after ``end`` (a rebuild at ``end`` would take them back), or
    None when it holds none: every commit since its last rebuild (or its creation) applied versions up to
    ``end`` at most, by its tags (:func:`applied_through`). Commits log cleanup removed before any rebuild
    cannot be read, so they are a reason too. None when there is no target. Read with delta-rs, no JVM."""
    versions = target_log.commit_versions()
    if not versions:
        return None
    for info in reversed(target_log.history(-1)):
        tags = user_metadata(info)
        through = applied_through(tags)
        if through is not None and through > end:
            return f"version {info['version']} of the target applied source versions through {through}, after {end}"
        if is_rebuild(tags):
            return None
    if versions[0] > 0:
        return (
            f"versions 0..{versions[0] - 1} of the target were removed by log cleanup: what they applied is not known"
        )
    return None


def plan_range(
    source_log: DeltaLog,
    target_log: DeltaLog,
    start: int,
    end: int,
    *,
    share: float = REBUILD_SHARE,
    min_rows: int = REBUILD_MIN_ROWS,
) -> RangePlan:
    """The plan of versions ``start..end`` (the versions a MERGE would read) for the target at
    ``target_log``: :func:`choose_plan` over the range's metrics and the snapshot's statistics; the target
    is looked at only when those call for a rebuild. An absent target is rebuilt only by a range from
    version 0 (else the snapshot would hold versions before the range). JVM-free."""
    changed, unknown = range_rows_changed(source_log, start, end)
    if changed is None:
        return RangePlan(MERGE, f"the metrics of version {unknown} do not say how many rows it changed", share=share)
    plan = choose_plan(changed, snapshot_row_count(source_log, end), share=share, min_rows=min_rows)
    if plan.chosen != REBUILD:
        return plan
    if not target_log.commit_versions():
        blocked = None if start == 0 else f"there is no target yet and the range starts at version {start}, not 0"
    else:
        blocked = applied_beyond(target_log, end)
    return choose_plan(changed, plan.snapshot_rows, share=share, min_rows=min_rows, blocked=blocked)
