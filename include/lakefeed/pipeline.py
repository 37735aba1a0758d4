"""The skeleton every lakefeed pipeline runs through, whatever its feed: plan → one Spark job per batch →
commit. No Airflow here: the plugin's tasks are thin adapters over it (``lakefeed_airflow``).

A feed plugs in as a :class:`Feed`: it plans a run from its configuration, checkpoint and the run's params
(:class:`RunContext`), names each job's command line, and moves its checkpoint from what the jobs
reported (:class:`JobOutputs`). What every feed's plan and commit step share lives here: the kind of run
(:func:`run_kind`), crediting a summary only to the job it describes (:meth:`JobOutputs.credited`),
refusing a commit step whose jobs' commits the targets' logs do not hold (:func:`verify_in_ledger`) or
whose targets changed under the run (:func:`verify_unchanged`), and the asset events of the ledger
entries no event names yet (:class:`Announcer`).

Storage reaches a feed through :class:`Storage`: the plugin's opens Azure through Airflow's ``wasb``
connections; :class:`LocalStorage` opens paths and URLs with the credentials of the environment.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from lakefeed.checkpoint import TableMark
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.documents import counted_fields, from_document, to_document
from lakefeed.errors import CheckpointMismatchError, ConfigError, DocumentError
from lakefeed.ledger import (
    AnnouncedSince,
    Announcement,
    LedgerEntry,
    commits_of,
    disproved,
    nothing_announced,
    unannounced,
)
from lakefeed.lineage import JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED
from lakefeed.storage import StoreBase
from lakefeed.targets import current_marks, verify_unchanged_during_run

__all__ = [
    "ADOPT",
    "BACKFILL",
    "LOCAL",
    "RESET",
    "SCHEDULED",
    "AnnouncedSince",
    "Announcer",
    "BatchesFailed",
    "Feed",
    "FeedSteps",
    "JobOutputs",
    "JobSummary",
    "LocalStorage",
    "OneCheckpointFeed",
    "PipelineConfig",
    "Plan",
    "RefusedWithReport",
    "RunContext",
    "RunReport",
    "Storage",
    "Summary",
    "announced_report",
    "backfill_not_ready",
    "checkpoint_change",
    "credit",
    "fail_if_any_failed",
    "failed_jobs",
    "finished",
    "nothing_announced",
    "plan_marks",
    "read_plan",
    "reset_remedy",
    "run_kind",
    "spark_seconds",
    "summed",
    "verify_in_ledger",
    "verify_unchanged",
]

Plan = dict[str, Any]  # a run's plan document as it crosses to the later tasks (XCom), from the feed's typed plan
Summary = dict[str, Any]  # what a commit step reports of the run (JSON: its XCom, the monitor's card)


@dataclass(kw_only=True)
class RunReport:
    """What a commit step reports of its run (its XCom, the run summary the monitor's rows read); each feed's
    report adds its figures (``lakefeed.<feed>.summary``). Serialised by :mod:`lakefeed.documents`."""

    DOCUMENT_VERSION: ClassVar[int] = 1

    version: int = DOCUMENT_VERSION
    kind: str  # scheduled, backfill or reset (lakefeed.progress)
    spark_seconds: float = 0.0  # the Spark time its jobs reported
    targets_changed: list[dict[str, Any]] = field(default_factory=list)  # its asset events (lakefeed.assets)
    announcements_deferred: int = 0  # ledger entries found that a later commit step announces instead


class JobSummary(Protocol):
    """What the skeleton reads of a job's typed summary (``lakefeed.<feed>.summary``)."""

    commits: list[dict[str, Any]]  # [{"table", "version", "token"}]: the ledger entries the job committed
    seconds: dict[str, float]  # Spark time by step


class Storage(Protocol):
    """How a feed opens what it reads outside the Spark jobs: feed folders and Delta tables by URL, each with
    the named connection (None: the environment's credentials), and a scope in which stores opened without a
    credential of their own (target ledgers, tables under a root) use a connection's."""

    def feed(self, url: str, connection: str | None) -> StoreBase: ...

    def table(self, url: str, connection: str | None) -> StoreBase: ...

    def scope(self, connection: str | None) -> AbstractContextManager[None]: ...


class LocalStorage:
    """Paths and URLs opened with the environment's credentials (local runs, tests, a Spark driver)."""

    def feed(self, url: str, connection: str | None) -> StoreBase:
        from lakefeed.storage import Store

        return Store(url)

    def table(self, url: str, connection: str | None) -> StoreBase:
        return self.feed(url, connection)

    @contextmanager
    def scope(self, connection: str | None) -> Iterator[None]:
        yield


LOCAL = LocalStorage()


class Feed(Protocol):
    """One change feed plugged into the skeleton. ``plan`` is the only step that reads the configuration and
    the checkpoint; it carries the configuration in the plan, and the later steps work from the plan alone."""

    def plan(self, params: Mapping[str, Any], run: RunContext) -> Plan: ...

    def job_arguments(self, planned: Plan) -> list[list[str]]: ...

    def job_connections(self, planned: Plan) -> list[str | None]: ...

    def job_lineage(self, planned: Plan) -> list[JobLineage]: ...

    def commit(
        self, planned: Plan, outputs: JobOutputs, run_id: str, announced_since: AnnouncedSince = nothing_announced
    ) -> Summary: ...


log = logging.getLogger(__name__)

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

    @property
    def interval(self) -> tuple[datetime, datetime]:
        """The run's data interval (one of Airflow's Backfill runs has one, or :func:`run_kind` refuses it)."""
        if self.interval_start is None or self.interval_end is None:
            raise ConfigError(f"run {self.run_id} has no data interval")
        return self.interval_start, self.interval_end


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


JobT = TypeVar("JobT")
SummaryT = TypeVar("SummaryT", bound=JobSummary)


@dataclass
class JobOutputs:
    """What a run's spark-submit tasks left in XCom, by job (map) index: the summary documents of the jobs
    that finished and the reasons of those that refused their input."""

    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    refused: dict[int, str] = field(default_factory=dict)

    def credited(
        self, jobs: Sequence[JobT], summary_type: type[SummaryT], belongs: Callable[[SummaryT, JobT], bool]
    ) -> dict[int, SummaryT]:
        """The typed summaries of the jobs that finished, by job index; a summary that cannot be read as
        ``summary_type``, or does not describe the job of its index (``belongs(summary, job)`` is false),
        is not credited."""
        found = {}
        for index, job in enumerate(jobs):
            document = self.summaries.get(index)
            if document is None:
                continue
            try:
                summary = from_document(summary_type, document, f"the summary of job {index}")
            except DocumentError as exc:
                log.error("%s; not credited", exc)
                continue
            if belongs(summary, job):
                found[index] = summary
            else:
                log.error("the summary of job %d does not describe it (%s); not credited", index, job)
        return found


def verify_in_ledger(summaries: Mapping[int, JobSummary], pipeline_id: str, where: str, remedy: str) -> None:
    """Refuse, before the checkpoint moves, when the targets' logs do not hold a commit that a credited
    summary reports (:func:`lakefeed.ledger.disproved`): a target moved, recreated, restored or replaced
    while the run ran. The checkpoint stays as it was (its target marks too), so the next run refuses the
    target by name instead of vouching for a table that lacks the work. A range that committed nothing (an
    empty window, a replay) reports no commit: its summary is the record that it was applied."""
    problems = disproved([c for s in summaries.values() for c in commits_of(s.commits)], pipeline_id)
    if problems:
        raise CheckpointMismatchError(
            f"checkpoint {where} was left as it was: the targets' logs do not hold what this run's jobs committed: "
            f"{'; '.join(problems)}. The rows are not in the table now at that location. Point the configuration "
            f"at the table that holds them, or {remedy}."
        )


ADOPT = "trigger the DAG once with the param adopt_targets=true"


def reset_remedy(dag_id: str, what_it_does: str) -> str:
    """The way on from a refusal of a feed with ``reset_checkpoint``: the DAG, the param, and what it does."""
    return f"trigger {dag_id} with the param reset_checkpoint=true: {what_it_does}"


def plan_marks(kind: str, locations: list[str]) -> dict[str, TableMark]:
    """What a plan records of the targets it saw (their ids and versions), for the commit step's
    :func:`verify_unchanged`; a backfill records none (it never moves the checkpoint)."""
    return {} if kind == BACKFILL else current_marks(locations)


def verify_unchanged(
    kind: str,
    recorded: dict[str, TableMark] | None,
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
    verify_unchanged_during_run(recorded, locations, pipeline_id, where, adopt, remedy)


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


def fail_if_any_failed(failed: list[dict[str, Any]], total: int, position: str | None, report: dict[str, Any]) -> None:
    if failed:
        raise BatchesFailed(
            f"{len(failed)} of {total} batch(es) failed (first: {failed[0]}); checkpoint is at {position}: "
            "the next run resumes from there",
            report,
        )


# -- the commit step every feed runs, one checkpoint at a time --


class Movable(Protocol):
    """A checkpoint as the commit step moves it (:class:`lakefeed.checkpoint.Moves`)."""

    def moved(self, **changes: Any) -> Any: ...


CheckpointT = TypeVar("CheckpointT", bound=Movable)


def credit(
    done: Mapping[int, JobSummary],
    kind: str,
    recorded_marks: dict[str, TableMark] | None,
    locations: list[str],
    pipeline_id: str,
    where: str,
    remedy: str,
    adopt: str = ADOPT,
) -> None:
    """Before a checkpoint moves over the work of ``done`` (credited summaries, by job index): the targets'
    logs hold what the jobs committed (:func:`verify_in_ledger`), and the targets did not change under the
    run (:func:`verify_unchanged`); either refuses, leaving the checkpoint as it was."""
    verify_in_ledger(done, pipeline_id, where, remedy)
    verify_unchanged(kind, recorded_marks, locations, pipeline_id, where, remedy, adopt)


def failed_jobs(
    jobs: Iterable[tuple[int, Any]], done: Container[int], refused: Mapping[int, str]
) -> list[dict[str, Any]]:
    """The jobs (``(index, job)``, the plan's typed jobs) that left no credited summary, as documents, each
    with its refusal where it refused."""
    return [
        {**to_document(job), **({"refused": refused[i]} if i in refused else {})} for i, job in jobs if i not in done
    ]


def checkpoint_change(
    kind: str,
    announced: Callable[[CheckpointT], dict[str, TableMark]],
    source: Callable[[CheckpointT], str | None],
    planned_source: str | None,
    advance: Callable[[CheckpointT, dict[str, TableMark]], CheckpointT],
    what: str = "feed",
) -> Callable[[CheckpointT], CheckpointT]:
    """The compare-and-set change of a commit step (pure: it may run again after a conflict). A backfill
    only records the ``announced`` marks (:meth:`Announcer.marks`); so does a scheduled run whose checkpoint was reset to another source
    (``source(checkpoint)`` is not ``planned_source``) while it ran; otherwise ``advance`` moves it."""

    def change(checkpoint: CheckpointT) -> CheckpointT:
        marks = announced(checkpoint)
        if kind == BACKFILL:
            return cast(CheckpointT, checkpoint.moved(announced=marks))
        recorded = source(checkpoint)
        if kind == SCHEDULED and recorded not in (None, planned_source):
            log.warning("the checkpoint was reset to another %s (%s) while this run ran: not moving it", what, recorded)
            return cast(CheckpointT, checkpoint.moved(announced=marks))
        return advance(checkpoint, marks)

    return change


def summed(summaries: Iterable[SummaryT], summary_type: type[SummaryT]) -> dict[str, int]:
    """The jobs' counts (the :func:`~lakefeed.documents.counted` fields of ``summary_type``), added up, by
    field name (a report's :func:`~lakefeed.documents.totals`)."""
    rows = list(summaries)
    return {name: sum(getattr(s, name) for s in rows) for name in counted_fields(summary_type)}


def spark_seconds(summaries: Iterable[JobSummary]) -> float:
    """The Spark time the jobs reported, in seconds."""
    return round(sum(sum(s.seconds.values()) for s in summaries), 3)


# -- a feed with one checkpoint per configuration (the blob change feed, a CockroachDB sink) --


class PipelineConfig(Protocol):
    """What the skeleton reads of a feed's configuration."""

    @property
    def wasb_conn_id(self) -> str | None: ...

    @property
    def checkpoint_variable(self) -> str: ...


ConfigT = TypeVar("ConfigT", bound=PipelineConfig)
PlanT = TypeVar("PlanT")

PLAN = "the run's plan"  # where a plan document is read (named in a refusal of it)


def read_plan(plan_type: type[PlanT], planned: Plan) -> PlanT:
    """The feed's typed plan from its document (the plan task's XCom)."""
    return from_document(plan_type, planned, PLAN)


@dataclass(frozen=True)
class FeedSteps(Generic[ConfigT, PlanT]):
    """What a feed with one checkpoint brings to the skeleton: ``plan`` (configuration, checkpoint, params,
    run, the checkpoint's name, storage → a ``plan_type`` plan), ``commit`` (checkpoint store, plan, job
    outputs, run id, announced events → run summary), ``config_of`` (the configuration a plan carries),
    ``arguments`` (each job's command line) and ``lineage`` (what each job reads and writes)."""

    plan: Callable[[ConfigT, Any, dict[str, Any], RunContext, str, Storage], PlanT]
    commit: Callable[[CheckpointStore, PlanT, JobOutputs, str, AnnouncedSince], Summary]
    plan_type: type[PlanT]
    config_of: Callable[[PlanT], ConfigT]
    arguments: Callable[[PlanT], list[list[str]]]
    lineage: Callable[[PlanT], list[JobLineage]]


@dataclass(frozen=True)
class OneCheckpointFeed(Generic[ConfigT, PlanT]):
    """A :class:`Feed` whose configuration has one checkpoint, from the feed's ``steps``: ``config`` reads the
    configuration (once, at the plan), ``checkpoints`` opens a configuration's checkpoint store, ``storage``
    opens feeds and tables. Plans cross to the later tasks as documents (:mod:`lakefeed.documents`)."""

    config: Callable[[], ConfigT]
    checkpoints: Callable[[ConfigT], CheckpointStore]
    steps: FeedSteps[ConfigT, PlanT]
    storage: Storage = LOCAL

    def plan(self, params: Mapping[str, Any], run: RunContext) -> Plan:
        config = self.config()
        store = self.checkpoints(config)
        with self.storage.scope(config.wasb_conn_id):
            planned = self.steps.plan(config, store.load(), dict(params), run, store.where, self.storage)
        return to_document(planned)

    def job_arguments(self, planned: Plan) -> list[list[str]]:
        return self.steps.arguments(read_plan(self.steps.plan_type, planned))

    def job_connections(self, planned: Plan) -> list[str | None]:
        plan = read_plan(self.steps.plan_type, planned)
        return [self.steps.config_of(plan).wasb_conn_id] * len(self.steps.arguments(plan))

    def job_lineage(self, planned: Plan) -> list[JobLineage]:
        return self.steps.lineage(read_plan(self.steps.plan_type, planned))

    def commit(
        self, planned: Plan, outputs: JobOutputs, run_id: str, announced_since: AnnouncedSince = nothing_announced
    ) -> Summary:
        plan = read_plan(self.steps.plan_type, planned)
        config = self.steps.config_of(plan)
        with self.storage.scope(config.wasb_conn_id):
            return self.steps.commit(self.checkpoints(config), plan, outputs, run_id, announced_since)


def announced_report(
    summaries: Iterable[JobSummary], announcer: Announcer, targets_changed: list[dict[str, Any]]
) -> dict[str, Any]:
    """The :class:`RunReport` figures every feed reports alike: Spark time, the asset events of the targets
    the run changed, and how many ledger entries a later commit step announces instead."""
    return {
        "spark_seconds": spark_seconds(summaries),
        "targets_changed": targets_changed,
        "announcements_deferred": announcer.deferred,
    }


def finished(report: RunReport, failed: list[dict[str, Any]], total: int, position: str | None) -> Summary:
    """Log the run summary; fail the commit step (keeping the summary) when any of the ``total`` jobs failed.
    Returns the summary's document."""
    document = to_document(report)
    log.info("run summary: %s", json.dumps(document, indent=2))
    fail_if_any_failed(failed, total, position, document)
    return document
