"""The targets' commit history as the ledger of what a pipeline applied (JVM-free).

Every Delta commit a lakefeed job makes carries, in its ``userMetadata``, the pipeline that made it
(``pipelineId``, the checkpoint Variable's name) and what it applied (blob windows, CDF versions,
CockroachDB RESOLVED span); Delta adds the operation and its metrics. A *ledger entry* is such a
commit that changed the table's rows. Entries are facts about the tables themselves, so they hold
whatever happened to the Airflow side: a run that failed after its jobs committed, a retry after a
kill between a commit and the checkpoint update, two runs at once.

The commit steps announce asset events from the ledger, not from the job summaries they were handed,
and Airflow's own asset events are the record of what was announced: each event names the commits it
announces (``commits``, ``commitIds``: the versions and Delta's ``txnId`` of each). A commit step
announces the entries after the pipeline's ``announced`` marks that no event of the pipeline's asset
alias names yet (:func:`unannounced`); the marks move only past entries that an event names, so they
lag one commit step behind. Airflow records a task's events when the task succeeds (never for a failed,
timed-out or killed one), so no entry is announced twice (a cleared or retried commit step finds its
events) and none is lost (a later commit step announces what a failed, timed-out or killed one did not).
The commit steps of a pipeline take turns (:mod:`lakefeed_airflow.turns`), so two never announce at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakefeed.checkpoint import TableMark
from lakefeed.delta import COMMIT_TOKEN
from lakefeed.deltalog import LOG_DIR, DeltaLog, changes_rows
from lakefeed.errors import ChangeDataError
from lakefeed.storage import Store
from lakefeed.targets import PIPELINE_ID, user_metadata, written_by

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
    table_id: str | None = None  # the table's metaData.id as of this commit
    commit_id: str | None = None  # Delta's commitInfo.txnId
    committed_ms: int | None = None  # commitInfo.timestamp (the writer's clock)

    @property
    def mark(self) -> TableMark:
        """The mark just past this entry."""
        return TableMark(self.table_id or "", self.version)


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


def entries_after(
    location: str, pipeline_id: str, mark: TableMark | None
) -> tuple[list[LedgerEntry], TableMark | None, TableMark | None]:
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
    if (
        mark is not None
        and 0 <= mark.version <= versions[-1]
        and (mark.table_id == table_id or _id_at(delta_log, mark.version) == mark.table_id)
    ):
        start = mark
    pending = [v for v in versions if v > start.version]
    if pending and pending[0] > start.version + 1 and start.version + 1 < versions[0]:
        log.warning(
            "%s: versions %d..%d were removed by log cleanup before they were announced",
            location,
            start.version + 1,
            versions[0] - 1,
        )
    entries = []
    table_id_then = start.table_id
    for version in pending:
        actions = _actions(delta_log, version)
        for action in actions:
            if "metaData" in action and action["metaData"].get("id"):
                table_id_then = str(action["metaData"]["id"])
        if not actions or not changes_rows(actions):
            continue
        info: dict[str, Any] = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
        tags = user_metadata(info)
        if tags.get(PIPELINE_ID) != pipeline_id:
            continue
        timestamp = info.get("timestamp")
        entries.append(
            LedgerEntry(
                location,
                version,
                str(info.get("operation") or ""),
                tags,
                **row_counts(info),
                table_id=table_id_then,
                commit_id=info.get("txnId") or None,
                committed_ms=timestamp if isinstance(timestamp, int) else None,
            )
        )
    return entries, now, start


def _actions(delta_log: DeltaLog, version: int) -> list[dict[str, Any]]:
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
    """What a commit step found: the ledger entries no asset event names yet, by table (to announce now,
    or later when this step will fail), and the ``announced`` marks to record: per table, past every
    entry up to the first of those (all of them when an event names each)."""

    entries: dict[str, list[LedgerEntry]]
    marks: dict[str, TableMark]
    named: bool = False  # whether the marks pass entries an event names (they must not wait for the next
    #                      announcement to do so: events purged meanwhile would have them announced again)


# An asset event may be recorded a little before the commit time the writer's clock gave (clock skew):
# events are looked up from this long before the oldest entry not covered by the marks.
EVENT_CLOCK_MARGIN_MS = 24 * 3600 * 1000

IsAnnounced = Callable[[LedgerEntry], bool]
# Given the commit time (ms) of the oldest entry in question, which entries Airflow's events name.
AnnouncedSince = Callable[[int | None], IsAnnounced]


def nothing_announced(since_ms: int | None) -> IsAnnounced:
    """For a commit step outside Airflow (no events): every entry is still to announce."""
    return lambda entry: False


def unannounced(
    locations: list[str],
    pipeline_id: str,
    announced: dict[str, TableMark],
    fallback: dict[str, TableMark],
    announced_since: AnnouncedSince,
) -> Announcement:
    """The entries of ``pipeline_id`` on each table of ``locations`` after its ``announced`` mark (or, for a
    table with none, after the mark the checkpoint recorded for it (``fallback``), whose work was
    announced by the runs that made it) that no asset event names (``announced_since``); and the marks to
    record: past each entry an event names, up to the first one none names."""
    found: dict[str, tuple[list[LedgerEntry], TableMark, TableMark]] = {}
    for location in sorted(set(locations)):
        entries, now, start = entries_after(location, pipeline_id, announced.get(location) or fallback.get(location))
        if now is not None and start is not None:
            found[location] = (entries, now, start)
    times = [e.committed_ms for entries, _, _ in found.values() for e in entries if e.committed_ms is not None]
    is_announced = (
        announced_since(min(times) - EVENT_CLOCK_MARGIN_MS if times else None)
        if any(entries for entries, _, _ in found.values())
        else nothing_announced(None)
    )
    pending, marks, named = {}, dict(announced), False
    for location, (entries, now, start) in found.items():
        todo = [e for e in entries if not is_announced(e)]
        if todo:
            pending[location] = todo
        done = entries[: entries.index(todo[0])] if todo else entries
        named = named or bool(done)
        marks[location] = now if not todo else done[-1].mark if done else start
    return Announcement(pending, marks, named)


@dataclass(frozen=True)
class ReportedCommit:
    """A commit a job's summary says it made (:func:`lakefeed.delta.reported_commit`)."""

    table: str
    version: int
    token: str | None

    @classmethod
    def from_dict(cls, document: Any) -> ReportedCommit | None:
        if not isinstance(document, dict) or not isinstance(document.get("version"), int):
            return None
        return cls(str(document.get("table")), document["version"], document.get("token"))


def reported_commits(summary: dict[str, Any]) -> list[ReportedCommit]:
    """The commits a job's summary document reports (none from a job that predates the report)."""
    return commits_of(summary.get("commits") or [])


def commits_of(commits: list[Any]) -> list[ReportedCommit]:
    """The commits of a summary's ``commits`` list, ``[{"table", "version", "token"}]`` (a malformed entry is
    none)."""
    return [c for c in map(ReportedCommit.from_dict, commits) if c is not None]


@dataclass(frozen=True)
class _Undoing:
    """A later commit that took rows away from the commits before it: a rebuild (another table id), or a
    RESTORE (to ``restored_to``; None: to a timestamp)."""

    version: int
    text: str
    restore: bool = False
    restored_to: int | None = None

    def undoes(self, version: int) -> bool:
        return self.version > version and not (
            self.restore and self.restored_to is not None and self.restored_to >= version
        )


def disproved(commits: list[ReportedCommit], pipeline_id: str) -> list[str]:
    """Why the targets' logs, as they are now, do not hold each of ``commits`` ([] when they hold every one).

    A job's summary is credited only when the ledger bears it out: each commit it reports is in its table's
    log at its version, made by ``pipeline_id`` with the job's commit token, and the table has been neither
    rebuilt (another table id: dropped and recreated, or replaced) nor RESTOREd to an earlier version since.
    Otherwise the rows the job wrote are not in the table at that location (it was moved, recreated, restored
    or replaced by another writer while the run ran), and a checkpoint moved over the job's range would vouch
    for work that table does not hold. Versions removed by log cleanup cannot be read; they pass, with a
    warning. JVM-free; each commit from the oldest reported on is read once."""
    problems = []
    for table in sorted({c.table for c in commits}):
        mine = sorted((c for c in commits if c.table == table), key=lambda c: c.version)
        delta_log = DeltaLog(Store(table))
        versions = delta_log.commit_versions()
        if not versions:
            problems.append(
                f"the job committed version {mine[0].version} of {table}, but there is no Delta table "
                "there any more (dropped or moved)"
            )
            continue
        if mine[-1].version > versions[-1]:
            problems.append(
                f"the job committed version {mine[-1].version} of {table}, but that table is now at "
                f"version {versions[-1]}: another table (or an older copy) took its place"
            )
            continue
        for cleaned in (c for c in mine if c.version < versions[0]):
            log.warning(
                "%s: version %d, which a job committed, was removed by log cleanup; not checked", table, cleaned.version
            )
        wanted = {c.version: c for c in mine if c.version >= versions[0]}
        if not wanted:
            continue
        first = min(wanted)
        table_id = _id_at(delta_log, first)
        undoings: list[_Undoing] = []
        mismatched = set()
        for version in (v for v in versions if v >= first):
            actions = _actions(delta_log, version)
            info: dict[str, Any] = next((action["commitInfo"] for action in actions if "commitInfo" in action), {})
            operation = info.get("operation") or "a commit"
            new_id = next(
                (str(a["metaData"]["id"]) for a in actions if "metaData" in a and a["metaData"].get("id")), None
            )
            if new_id is not None and new_id != table_id and version > first:
                undoings.append(
                    _Undoing(version, f"version {version} ({operation} by {written_by(info)}) made it another table")
                )
            table_id = new_id or table_id
            if operation == "RESTORE":
                to = (info.get("operationParameters") or {}).get("version")
                to = int(to) if isinstance(to, (int, str)) and str(to).isdigit() else None
                undoings.append(
                    _Undoing(
                        version,
                        f"version {version} RESTOREd it to "
                        f"{'version ' + str(to) if to is not None else 'an earlier timestamp'}",
                        restore=True,
                        restored_to=to,
                    )
                )
            claimed = wanted.get(version)
            tags = user_metadata(info)
            if claimed is not None and (tags.get(PIPELINE_ID), tags.get(COMMIT_TOKEN)) != (pipeline_id, claimed.token):
                mismatched.add(version)
                problems.append(
                    f"the job committed version {version} of {table}, but version {version} there now is "
                    f"{operation} by {written_by(info)}, not the job's commit: the table was dropped and "
                    "recreated, or replaced, since"
                )
        for version in sorted(set(wanted) - mismatched):
            undone = next((u for u in undoings if u.undoes(version)), None)
            if undone is not None:
                problems.append(f"the job committed version {version} of {table}, but then {undone.text}")
    return problems
