"""The targets' commit history as the ledger of what a pipeline applied (JVM-free).

Every Delta commit a lakefeed job makes carries, in its ``userMetadata``, the pipeline that made it
(``pipelineId``, the checkpoint Variable's name) and what it applied (blob windows, CDF versions,
CockroachDB RESOLVED span); Delta adds the operation and its metrics. A *ledger entry* is such a
commit that changed the table's rows. Entries are facts about the tables themselves, so they hold
whatever happened to the Airflow side: a run that failed after its jobs committed, a retry after a
kill between a commit and the checkpoint update, two runs at once.

The commit steps announce asset events from the ledger, not from the job summaries they were handed:
each pipeline's checkpoint records, per target, the version through which its entries were announced
(``announced``), and a commit step announces exactly the entries after it, then moves it in the same
compare-and-set as the checkpoint, and only when its task will succeed (Airflow drops the events of a
failed task). So no entry is announced twice (a cleared commit step finds nothing new) and none is lost
(a later run announces what a failed or timed-out one committed).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from lakefeed.checkpoint import TableMark
from lakefeed.deltalog import LOG_DIR, DeltaLog, changes_rows
from lakefeed.errors import ChangeDataError
from lakefeed.storage import Store
from lakefeed.targets import PIPELINE_ID, user_metadata

log = logging.getLogger(__name__)

# Row counts of a commit from Delta's operationMetrics (Spark's names, as strings in the log), by operation.
_MERGE = {"inserted": "numTargetRowsInserted", "updated": "numTargetRowsUpdated", "deleted": "numTargetRowsDeleted"}
_WRITES = {"inserted": "numOutputRows"}  # WRITE, CREATE OR REPLACE TABLE AS SELECT, REPLACE TABLE AS SELECT, …
_ROW_METRICS = {"MERGE": _MERGE, "DELETE": {"deleted": "numDeletedRows"}, "UPDATE": {"updated": "numUpdatedRows"}}


@dataclass(frozen=True)
class LedgerEntry:
    """One commit of a pipeline that changed a target's rows."""

    table: str
    version: int
    operation: str
    tags: dict[str, Any] = field(default_factory=dict)  # the job's userMetadata
    inserted: int = 0
    updated: int = 0
    deleted: int = 0


def row_counts(commit_info: dict[str, Any]) -> dict[str, int]:
    """Rows inserted, updated and deleted by a commit, from its ``operationMetrics`` (0 when not recorded)."""
    metrics = commit_info.get("operationMetrics") or {}
    names = _ROW_METRICS.get(str(commit_info.get("operation")), _WRITES)
    counts = {"inserted": 0, "updated": 0, "deleted": 0}
    for what, name in names.items():
        try:
            counts[what] = int(metrics.get(name) or 0)
        except (TypeError, ValueError):
            counts[what] = 0
    return counts


def entries_after(location: str, pipeline_id: str,
                  mark: TableMark | None) -> tuple[list[LedgerEntry], TableMark | None, TableMark | None]:
    """The ledger entries of ``pipeline_id`` on the table at ``location`` after ``mark``; the table's mark
    now; and the mark they follow: ``mark`` itself when it is placed in this table's log (the same table,
    or one a REPLACE after the mark gave a new id: its log goes on), else ``(id now, -1)``, every entry (no
    mark, or the table was dropped and recreated). ``([], None, None)`` when there is no table. Commits
    removed by log cleanup cannot be read; they are skipped with a warning. A commit that is there but
    unreadable, or a storage error, raises: nothing may pass for announced that was not read."""
    delta_log = DeltaLog(Store(location))
    versions = delta_log.commit_versions()
    table_id = delta_log.table_id() if versions else None
    if not versions or not table_id:
        return [], None, None
    now = TableMark(table_id, versions[-1])
    start = TableMark(table_id, -1)
    if mark is not None and mark.version <= versions[-1] and (
            mark.table_id == table_id or _id_at(delta_log, mark.version) == mark.table_id):
        start = mark
    pending = [v for v in versions if v > start.version]
    if pending and pending[0] > start.version + 1 and start.version + 1 < versions[0]:
        log.warning("%s: versions %d..%d were removed by log cleanup before they were announced", location,
                    start.version + 1, versions[0] - 1)
    entries = []
    for version in pending:
        actions = _actions(delta_log, version)
        if not actions or not changes_rows(actions):
            continue
        info = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
        tags = user_metadata(info)
        if tags.get(PIPELINE_ID) != pipeline_id:
            continue
        entries.append(LedgerEntry(location, version, str(info.get("operation") or ""), tags, **row_counts(info)))
    return entries, now, start


def _actions(delta_log: DeltaLog, version: int) -> list[dict]:
    """A commit's actions; [] when log cleanup removed it after the listing."""
    try:
        return delta_log.actions(version)
    except ChangeDataError as exc:
        _cleaned_up(delta_log, version, exc)
        return []


def _id_at(delta_log: DeltaLog, version: int) -> str | None:
    """The table id as of ``version``; None when the log no longer holds that version (cleaned up)."""
    from deltalake.exceptions import DeltaError

    try:
        return delta_log.table_id(version)
    except (ChangeDataError, DeltaError) as exc:
        _cleaned_up(delta_log, version, exc)
        return None


def _cleaned_up(delta_log: DeltaLog, version: int, error: Exception) -> None:
    """Log that ``version`` could not be read because log cleanup removed it; re-raise ``error`` when the
    commit is still there (malformed, or unreadable for another reason)."""
    if isinstance(error, ChangeDataError) and delta_log.store.exists(f"{LOG_DIR}/{version:020d}.json"):
        raise error
    log.warning("%s: version %d cannot be read (removed by log cleanup?): %s", delta_log.root, version, error)


@dataclass(frozen=True)
class Announcement:
    """What a commit step found to announce: the ledger entries not yet announced, by table; the marks
    just before them (``since``: what to record when they cannot be announced now), and the marks past
    every entry found (``through``: what to record once they are)."""

    entries: dict[str, list[LedgerEntry]]
    since: dict[str, TableMark]
    through: dict[str, TableMark]


def unannounced(locations: list[str], pipeline_id: str, announced: dict[str, TableMark],
                fallback: dict[str, TableMark]) -> Announcement:
    """The entries of ``pipeline_id`` not yet announced on each table of ``locations``: those after its
    ``announced`` mark, or, for a table with none (a checkpoint written before marks were kept), after the
    mark the checkpoint recorded for it (``fallback``; its work up to there was announced by the runs that
    made it)."""
    entries, since, through = {}, dict(announced), dict(announced)
    for location in sorted(set(locations)):
        found, now, start = entries_after(location, pipeline_id, announced.get(location) or fallback.get(location))
        if now is None or start is None:
            continue
        through[location] = now
        since[location] = start if found else now  # announced so far
        if found:
            entries[location] = found
    return Announcement(entries, since, through)
