"""What every lakefeed DAG run shares: which kind of run it is, what its jobs left in XCom, and the
check that a summary really is the one of the job it is credited to.

Each spark-submit task returns its job's summary (written by its driver after the
MERGEs committed) as its XCom, or, when the job refused its input, pushes the
reason under ``refusal``; the commit step pulls them by map index
(:class:`JobOutputs`). Nothing passes between tasks through a local folder, so
every task may run on another worker. A summary is credited to a job only when it
describes that job (its range, and the tables the plan named).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from lakefeed.checkpoint import TableMark
from lakefeed.errors import CheckpointMismatchError, ConfigError
from lakefeed.ledger import (
    AnnouncedSince,
    Announcement,
    LedgerEntry,
    disproved,
    nothing_announced,
    reported_commits,
    unannounced,
)
from lakefeed.progress import BACKFILL, RESET, SCHEDULED
from lakefeed.targets import current_marks, verify_unchanged_during_run

log = logging.getLogger(__name__)

REFUSAL_KEY = "refusal"  # XCom of a job task that refused: the reason (read by the commit step)
FAILURE_KEY = "failure"  # XCom of any task that failed: {"error": "<ErrorClass>: message"} (shown by the monitor)
AIRFLOW_BACKFILL = "backfill"  # DagRunType of runs made by Airflow's Backfill (UI or `airflow backfill create`)


@dataclass(frozen=True)
class RunContext:
    """The DAG run a task belongs to, as the task logic needs it."""

    dag_id: str
    run_id: str
    run_type: str = "manual"
    interval_start: datetime | None = None
    interval_end: datetime | None = None

    @property
    def is_airflow_backfill(self) -> bool:
        return self.run_type == AIRFLOW_BACKFILL

    @classmethod
    def from_airflow(cls, context: dict[str, Any]) -> RunContext:
        dag_run = context["dag_run"]
        run_type = getattr(dag_run.run_type, "value", dag_run.run_type)
        return cls(
            dag_id=dag_run.dag_id,
            run_id=dag_run.run_id,
            run_type=str(run_type),
            interval_start=context.get("data_interval_start"),
            interval_end=context.get("data_interval_end"),
        )


def backfill_not_ready(run: RunContext, exc: Exception) -> str:
    """Why one of Airflow's Backfill runs ends skipped when its hour is not in the source yet: its "To" date
    is inclusive, so the last run of a backfill up to now names an hour the source has not reached. That
    is no failure: the scheduled runs ingest the hour once it is ready."""
    return (
        f"not ready yet, nothing applied: this Backfill run covers {run.interval_start} .. {run.interval_end}, "
        f"which the source has not reached ({exc}). Airflow's Backfill includes its 'To' date, so its last run "
        f"may name such an hour; the scheduled runs ingest it once it is ready."
    )


def run_kind(run: RunContext, params_name_a_range: bool, reset: bool) -> str:
    """How this run may move the checkpoint (:mod:`lakefeed.progress`): Airflow's Backfill runs and
    runs whose params name a range are backfills; ``reset`` asks for a re-initialisation."""
    if run.is_airflow_backfill:
        if not (run.interval_start and run.interval_end and run.interval_end > run.interval_start):
            raise ConfigError(
                f"this Backfill run has no data interval ({run.interval_start} .. {run.interval_end}): its DAG must "
                "run on a data-interval timetable (CronDataIntervalTimetable) for a Backfill to name its hours"
            )
        if params_name_a_range or reset:
            raise ConfigError(
                "this is one of Airflow's Backfill runs: it re-processes exactly its data interval "
                f"({run.interval_start} .. {run.interval_end}); leave the range and reset params empty "
                "(use them with a Single Run instead)"
            )
        return BACKFILL
    if params_name_a_range and reset:
        raise ConfigError("a run either re-processes a range or resets the checkpoint, not both")
    if params_name_a_range:
        return BACKFILL
    return RESET if reset else SCHEDULED


@dataclass
class JobOutputs:
    """What a run's spark-submit tasks left in XCom, by job (map) index: the summaries of the jobs that
    finished and the reasons of those that refused their input."""

    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)

    @classmethod
    def pulled(cls, ti: Any, task_id: str, count: int) -> JobOutputs:
        """From the XComs of the ``count`` mapped instances of ``task_id`` (their latest tries)."""
        indexes = list(range(count))
        if not indexes:
            return cls()
        pulled = ti.xcom_pull(task_ids=task_id, map_indexes=indexes)
        summaries = {i: s for i, s in zip(indexes, pulled, strict=False) if isinstance(s, dict)}
        unfinished = [i for i in indexes if i not in summaries]  # only those can have refused
        reasons = ti.xcom_pull(task_ids=task_id, map_indexes=unfinished, key=REFUSAL_KEY) if unfinished else []
        return cls(summaries, {i: str(r) for i, r in zip(unfinished, reasons, strict=False) if r})

    def credited(
        self, jobs: list[dict[str, Any]], belongs: Callable[[dict[str, Any], dict[str, Any]], bool]
    ) -> dict[int, dict[str, Any]]:
        """Summaries of the jobs that finished, by job index; a summary that does not describe the job of
        its index (``belongs(summary, job)`` is false) is not credited."""
        found = {}
        for index, job in enumerate(jobs):
            summary = self.summaries.get(index)
            if summary is None:
                continue
            if belongs(summary, job):
                found[index] = summary
            else:
                log.error("the summary of job %d does not describe it (%s); not credited", index, job)
        return found


def verify_in_ledger(summaries: dict[int, dict[str, Any]], pipeline_id: str, where: str, remedy: str) -> None:
    """Refuse, before the checkpoint moves, when the targets' logs do not hold a commit that a credited
    summary reports (:func:`lakefeed.ledger.disproved`): a target moved, recreated, restored or replaced
    while the run ran. The checkpoint stays as it was (its target marks too), so the next run refuses the
    target by name instead of vouching for a table that lacks the work. A range that committed nothing (an
    empty window, a replay) reports no commit: its summary is the record that it was applied."""
    problems = disproved([c for s in summaries.values() for c in reported_commits(s)], pipeline_id)
    if problems:
        raise CheckpointMismatchError(
            f"checkpoint {where} was left as it was: the targets' logs do not hold what this run's jobs committed: "
            f"{'; '.join(problems)}. The rows are not in the table now at that location. Point the configuration "
            f"at the table that holds them, or {remedy}."
        )


ADOPT = "trigger the DAG once with the param adopt_targets=true"


def plan_marks(kind: str, locations: list[str]) -> dict[str, Any]:
    """What a plan records of the targets it saw (their ids and versions), for the commit step's
    :func:`verify_unchanged`; a backfill records none (it never moves the checkpoint)."""
    return {} if kind == BACKFILL else {location: mark.to_dict() for location, mark in current_marks(locations).items()}


def verify_unchanged(
    kind: str,
    recorded: dict[str, Any] | None,
    locations: list[str],
    pipeline_id: str,
    where: str,
    remedy: str,
    adopt: str = ADOPT,
) -> None:
    """Refuse, before the checkpoint moves, targets that stopped being the pipeline's own work while the run
    ran (:func:`lakefeed.targets.verify_unchanged_during_run`): dropped, replaced, or rows changed by another
    writer since the plan's marks (``recorded``, from :func:`plan_marks`). A backfill passes: it never moves
    the checkpoint; so does a run whose plan predates the marks (``recorded`` None: planned by an earlier
    version of this code, before an upgrade)."""
    if kind == BACKFILL or recorded is None:
        return
    marks = {location: TableMark.from_dict(mark, "the run's plan") for location, mark in recorded.items()}
    verify_unchanged_during_run(marks, locations, pipeline_id, where, adopt, remedy)


class Announcer:
    """The asset events of a commit step, from the targets' ledger (:mod:`lakefeed.ledger`) and the events
    Airflow already recorded (``announced_since``).

    Called inside the checkpoint's compare-and-set (:meth:`marks`), so what it reads of the ledger and
    the ``announced`` marks it records are one consistent step; it keeps what the last attempt found.
    ``announce`` False (the task will fail, and Airflow drops a failed task's events): a later commit
    step announces the entries."""

    def __init__(
        self,
        locations: list[str],
        pipeline_id: str,
        announce: bool,
        reported: dict[tuple[str, int], tuple[int, int, int]] | None = None,
        table_key: Callable[[str], str] = str,
        announced_since: AnnouncedSince = nothing_announced,
    ):
        """``reported``: the rows inserted, updated and deleted that the run's jobs reported for their
        commits, by ``(table, version)``, as readers of the tombstoned targets count them; an entry whose
        job never reported (its task was killed, its run failed) keeps Delta's commit metrics.
        ``table_key``: a location of the checkpoint's ``targets`` as ``locations`` name it."""
        self.locations, self.pipeline_id, self.announce = locations, pipeline_id, announce
        self.reported = reported or {}
        self.table_key = table_key
        self.announced_since = announced_since
        self.found: Announcement | None = None

    def marks(self, checkpoint: Any) -> dict[str, TableMark]:
        """The ``announced`` marks ``checkpoint`` gets: past the entries Airflow's events name, up to the
        first one none names (a target mark the checkpoint moves now is not taken for an announced one).
        They move with a step that announces something, finds entries announced since the marks (by the
        step before it: an idle pipeline's marks do not wait for its next commit, when ``airflow db
        clean`` may have purged the events) or sees a table first; otherwise the step leaves them, so it
        writes nothing it need not (commits of other writers alone do not move them)."""
        fallback = {self.table_key(location): mark for location, mark in checkpoint.targets.items()}
        self.found = unannounced(self.locations, self.pipeline_id, checkpoint.announced, fallback, self.announced_since)
        if self.found.entries or self.found.named or set(self.found.marks) - set(checkpoint.announced):
            return self.found.marks
        return dict(checkpoint.announced)

    @property
    def entries(self) -> dict[str, list[LedgerEntry]]:
        """The entries this commit step announces (none when it will fail), with the counts their jobs
        reported where they did."""
        if not self.announce or self.found is None:
            return {}
        return {table: [self._counted(entry) for entry in entries] for table, entries in self.found.entries.items()}

    def _counted(self, entry: LedgerEntry) -> LedgerEntry:
        counts = self.reported.get((entry.table, entry.version))
        if counts is None:
            return entry
        return replace(entry, inserted=counts[0], updated=counts[1], deleted=counts[2])

    @property
    def deferred(self) -> int:
        """How many entries found are left for a later commit step to announce."""
        return 0 if self.announce or self.found is None else sum(map(len, self.found.entries.values()))


class RefusedWithReport(CheckpointMismatchError):
    """Some pipelines of a run were refused at its commit step; ``report`` is the run summary all the same
    (the other pipelines' checkpoints moved)."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message)
        self.report = report


class BatchesFailed(RuntimeError):
    """Some of a run's jobs failed; ``report`` is the run summary all the same."""

    def __init__(self, message: str, report: dict[str, Any]):
        super().__init__(message)
        self.report = report


def fail_if_any_failed(failed: list, total: int, position: str | None, report: dict[str, Any]) -> None:
    if failed:
        raise BatchesFailed(
            f"{len(failed)} of {total} batch(es) failed (first: {failed[0]}); checkpoint is at {position}: "
            "the next run resumes from there",
            report,
        )
