"""The skeleton every lakefeed pipeline runs through, whatever its feed: plan → one Spark job per batch →
commit. No Airflow here: the plugin's tasks are thin adapters over it (``lakefeed_airflow``).

The plan and the commit step are written once, here (:meth:`FeedHooks.plan_run`,
:meth:`FeedHooks.commit_run`); a feed plugs in as :class:`FeedHooks`, a set of small questions: what its
params ask (:meth:`~FeedHooks.request`), what its source has ready for each kind of run
(:meth:`~FeedHooks.pending`, :meth:`~FeedHooks.in_range`, :meth:`~FeedHooks.in_interval`,
:meth:`~FeedHooks.from_origin`), how that is split into jobs (:meth:`~FeedHooks.batch`), which reported
job belongs to which piece of work (:meth:`~FeedHooks.belongs`), how its checkpoint advances
(:meth:`~FeedHooks.advance`) and what its report says (:meth:`~FeedHooks.report`). A feed is a list of
single-checkpoint pipelines: its configuration itself, or (Delta CDF) each configured pipeline.

What the sequences guarantee for every feed: the kind of run (:func:`run_kind`), a summary credited only
to the job it describes (:meth:`JobOutputs.credited`), a checkpoint kept when its jobs' commits are not in
the targets' logs (:func:`verify_in_ledger`) or its targets changed under the run
(:func:`verify_unchanged`), and the asset events of the ledger entries no event names yet
(:class:`Announcer`). :class:`Feed` binds a feed's hooks to where its configuration and checkpoints live.

Storage reaches a feed through :class:`Storage`: the plugin's opens Azure through Airflow's ``wasb``
connections; :class:`LocalStorage` opens paths and URLs with the credentials of the environment.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar, cast

from lakefeed.checkpoint import TableMark, verify_feed
from lakefeed.checkpoint_store import CheckpointKind, CheckpointStore, TextCell
from lakefeed.documents import counted_fields, from_document, optional, to_document
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
from lakefeed.sql import SqlEndpoint
from lakefeed.storage import StoreBase
from lakefeed.targets import current_marks, verify_adoptable, verify_own_writes, verify_unchanged_during_run

__all__ = [
    "ADOPT",
    "BACKFILL",
    "LOCAL",
    "RESET",
    "SCHEDULED",
    "AnnouncedSince",
    "Announcer",
    "Announcing",
    "BatchesFailed",
    "Credit",
    "Feed",
    "FeedHooks",
    "Found",
    "JobOutputs",
    "JobSummary",
    "LocalStorage",
    "OnePipelineHooks",
    "Outcome",
    "PipelineConfig",
    "PipelinePart",
    "Planned",
    "Planning",
    "RefusedWithReport",
    "Request",
    "RunContext",
    "RunReport",
    "Storage",
    "Watching",
    "backfill_not_ready",
    "nothing_announced",
    "plan_marks",
    "reset_remedy",
    "run_kind",
    "verify_in_ledger",
    "verify_unchanged",
]


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
    refused: str | None = optional()  # why the commit step kept the checkpoint (its targets changed under it)


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

    def sql(self, connection: str) -> SqlEndpoint: ...


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

    def sql(self, connection: str) -> SqlEndpoint:
        """The database of Airflow's ``AIRFLOW_CONN_<ID>`` convention (a URI in the environment)."""
        return SqlEndpoint.from_environment(connection)


LOCAL = LocalStorage()


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


# -- the two sequences every feed runs through: plan and commit --


class Movable(Protocol):
    """A checkpoint as the sequences read and move it (:class:`lakefeed.checkpoint.Moves`): the targets it
    vouches for, the ledger marks of announced entries, and ``identity``, the feed, sink or source table it
    was made on."""

    @property
    def targets(self) -> dict[str, TableMark]: ...

    @property
    def announced(self) -> dict[str, TableMark]: ...

    @property
    def identity(self) -> str | None: ...

    @property
    def generation(self) -> int: ...

    def to_json(self) -> str: ...

    def moved(self, **changes: Any) -> Any: ...

    def same_position(self, other: Any) -> bool: ...


class PipelineConfig(Protocol):
    """What the sequences read of one pipeline's configuration (a feed's whole configuration when it has
    one checkpoint; one of its pipelines when it has several)."""

    @property
    def wasb_conn_id(self) -> str | None: ...

    @property
    def checkpoint_variable(self) -> str: ...


class Selected(Protocol):
    """What a feed found ready for one pipeline (its own type); the sequences read only the kind it runs as."""

    @property
    def kind(self) -> str: ...


AskT = TypeVar("AskT")
ConfigT = TypeVar("ConfigT")
PipelineT = TypeVar("PipelineT", bound=PipelineConfig)
CheckpointT = TypeVar("CheckpointT", bound=Movable)
SourceT = TypeVar("SourceT")
ReadyT = TypeVar("ReadyT", bound=Selected)
PlanT = TypeVar("PlanT")
ReportT = TypeVar("ReportT", bound=RunReport)


@dataclass(frozen=True)
class Request(Generic[AskT]):
    """A run's params as the plan reads them: ``asked``, the feed's reading of its range params; whether
    they name a range (a backfill) or ask for a reset; the pipeline they name (a feed of several);
    whether the run adopts targets holding others' rows, or acknowledges data lost to retention."""

    asked: AskT
    names_a_range: bool
    reset: bool
    adopt: bool = False
    acknowledge_data_loss: bool = False
    pipeline: str | None = None

    @classmethod
    def of(
        cls, params: Mapping[str, Any], asked: AskT, names_a_range: bool, reset: bool, pipeline: str | None = None
    ) -> Request[AskT]:
        return cls(
            asked,
            names_a_range,
            reset,
            adopt=bool(params.get("adopt_targets")),
            acknowledge_data_loss=bool(params.get("acknowledge_data_loss")),
            pipeline=pipeline,
        )


@dataclass(frozen=True)
class Found(Generic[AskT, PipelineT, CheckpointT, SourceT]):
    """What a scheduled run's plan found for one pipeline: its configuration and checkpoint, its source as
    opened, the run's request, and the run."""

    pipeline: PipelineT
    checkpoint: CheckpointT
    source: SourceT
    request: Request[AskT]
    run: RunContext


@dataclass(frozen=True)
class Planned(Generic[PipelineT, CheckpointT, SourceT, ReadyT, JobT]):
    """One pipeline's part of a plan as the plan sequence made it, for the feed to write into its plan."""

    pipeline: PipelineT
    checkpoint: CheckpointT
    source: SourceT
    ready: ReadyT
    jobs: list[JobT]
    target_marks: dict[str, TableMark]


@dataclass(frozen=True)
class Planning(Generic[AskT, ConfigT, PipelineT, CheckpointT, SourceT, ReadyT, JobT]):
    """What the plan sequence made of a run, for the feed to write as its plan: the configuration it read,
    the run's kind and request, and each chosen pipeline's part."""

    config: ConfigT
    kind: str
    request: Request[AskT]
    parts: list[Planned[PipelineT, CheckpointT, SourceT, ReadyT, JobT]]


@dataclass(frozen=True)
class PipelinePart(Generic[PipelineT]):
    """One pipeline's part of a plan as the commit sequence reads it: its checkpoint (by pipeline name),
    how its run moves it, which of the plan's jobs are its own (indices), the target marks of the plan
    (None: planned before they were recorded), and the identity of what the plan read (a scheduled run
    moves a checkpoint only while it still records it)."""

    name: str
    pipeline: PipelineT
    kind: str
    jobs: list[int]
    target_marks: dict[str, TableMark] | None
    identity: str | None


@dataclass(frozen=True)
class Credit(Generic[PlanT, PipelineT, SummaryT]):
    """A pipeline's credited work at its commit step: the run's plan, the pipeline's part of it, the
    summaries credited to its jobs (by job index) and the run."""

    plan: PlanT
    part: PipelinePart[PipelineT]
    done: Mapping[int, SummaryT]
    run_id: str


@dataclass(frozen=True)
class Watching(Generic[ConfigT, PipelineT, CheckpointT]):
    """What a sensor checks before it waits: the configuration, a pipeline's checkpoint as it is now, the
    pipeline the run's params name (None: every one), and storage."""

    config: ConfigT
    checkpoint: Callable[[PipelineT], CheckpointT]
    pipeline: str | None
    storage: Storage


@dataclass(frozen=True)
class Announcing:
    """What a pipeline's commit step announces from: the ledgers it reads (``tables``), the rows its jobs
    reported per commit (``reported``, by ``(table, version)``: inserted, updated, deleted), how a
    checkpoint's target location reads among ``tables`` (``table_key``), and the asset events of the
    entries found (``events``: :mod:`lakefeed.assets`)."""

    tables: list[str]
    reported: dict[tuple[str, int], tuple[int, int, int]]
    events: Callable[[dict[str, list[LedgerEntry]]], list[dict[str, Any]]]
    table_key: Callable[[str], str] = str


@dataclass(frozen=True)
class Outcome(Generic[PipelineT, JobT, SummaryT, CheckpointT]):
    """What one pipeline's commit step did: its jobs (``(index, job)``), the credited summaries, the jobs
    that failed (documents, with their refusals) or were voided (by job index: the target version of the
    refresh that replaced their work), the checkpoint before and after, and the refusal that kept it."""

    part: PipelinePart[PipelineT]
    jobs: list[tuple[int, JobT]]
    done: dict[int, SummaryT]
    failed: list[dict[str, Any]]
    voided: dict[int, int]
    before: CheckpointT
    after: CheckpointT
    totals: dict[str, int]
    spark_seconds: float
    refused: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    deferred: int = 0

    @property
    def moved(self) -> bool:
        return not self.after.same_position(self.before)


class FeedHooks(ABC, Generic[AskT, ConfigT, PipelineT, CheckpointT, SourceT, ReadyT, JobT, SummaryT, PlanT, ReportT]):
    """A change feed plugged into the skeleton: the plan and commit sequences (:meth:`plan_run`,
    :meth:`commit_run`) are written here once, and call the feed's hooks, each a question about the feed.
    A feed is a list of single-checkpoint pipelines (its configuration itself when it has one)."""

    plan_type: type[PlanT]
    summary_type: type[SummaryT]
    checkpoint_type: CheckpointKind  # reads a pipeline's checkpoint document
    # ``module:function`` of the feed's ``ready(storage, **watched) -> (ready, details)``: what a waiting
    # sensor's trigger polls (cheap listings, never a JVM), with what :meth:`watch` found.
    readiness: str
    noun: str = "feed"  # what a checkpoint's identity names, in a warning

    def stage(self, plan: PlanT, index: int, storage: Storage) -> dict[str, Any]:
        """Work job ``index`` of ``plan`` needs done outside Spark first, such as a range pulled from a database
        into object storage: a feed whose spec names a ``stage_task`` gets that task, mapped over the jobs,
        between the plan and the jobs, and retried on its own. Returns what it did (the task's XCom)."""
        raise NotImplementedError(f"{type(self).__name__} stages nothing")

    # -- configuration --

    def pipelines_of(self, config: ConfigT) -> list[PipelineT]:
        """The configuration's pipelines, one checkpoint each (default: the configuration is the one)."""
        return [cast(PipelineT, config)]

    def name(self, pipeline: PipelineT) -> str:
        """The key of a pipeline's checkpoint and plan part (default: its checkpoint Variable)."""
        return pipeline.checkpoint_variable

    @abstractmethod
    def config_of(self, plan: PlanT) -> ConfigT:
        """The configuration the plan read (never the Variable as it is now)."""

    @abstractmethod
    def remedy(self, pipeline: PipelineT) -> str:
        """The way on from a refusal: a reset of the pipeline, and what it does."""

    def adopt_remedy(self, pipeline: PipelineT) -> str:
        return ADOPT

    @abstractmethod
    def targets(self, pipeline: PipelineT) -> list[str]:
        """The pipeline's Delta targets now (their marks guard the run)."""

    # -- the sensor --

    @abstractmethod
    def watch(self, watching: Watching[ConfigT, PipelineT, CheckpointT]) -> dict[str, Any]:
        """What a sensor's trigger polls (:attr:`readiness`'s keyword arguments: primitives), from the
        checkpoints of the pipelines a run waits for; refuses, before any wait, checkpoints that do not
        belong to the configured targets."""

    def check_params(
        self, params: Mapping[str, Any], config: ConfigT, checkpoints: Callable[[PipelineT], CheckpointT]
    ) -> None:
        """Refuse params no run can serve, in a sentence naming the value (the api-server's check when a run
        is triggered; ``checkpoints`` may add what they recorded). Default: the feed's :meth:`request`."""
        self.request(params, config)

    # -- plan hooks --

    @abstractmethod
    def request(self, params: Mapping[str, Any], config: ConfigT) -> Request[AskT]:
        """The run's params as this feed reads them; refuses ones it cannot serve."""

    def chosen(self, config: ConfigT, request: Request[AskT], kind: str, run: RunContext) -> list[PipelineT]:
        """The pipelines this run plans (default: all)."""
        return self.pipelines_of(config)

    @abstractmethod
    def open(self, pipeline: PipelineT, checkpoint: CheckpointT, kind: str, where: str, storage: Storage) -> SourceT:
        """What the plan reads of the pipeline's source; refuses a source that cannot be read."""

    def verify(self, pipeline: PipelineT, checkpoint: CheckpointT, source: SourceT, where: str) -> None:
        """A scheduled run's check that the checkpoint belongs to this source (:meth:`source_identity`) and
        that what it recorded still holds (:meth:`verify_recorded`)."""
        identity = self.source_identity(source)
        if identity is not None:
            verify_feed(checkpoint.identity, identity, where, self.remedy(pipeline))
        self.verify_recorded(pipeline, checkpoint)

    def source_identity(self, source: SourceT) -> str | None:
        """The identity of the source as opened, which a checkpoint records (None: checked by the feed)."""
        return None

    def verify_recorded(self, pipeline: PipelineT, checkpoint: CheckpointT) -> None:
        """Refuse a checkpoint whose targets (or definition) are no longer what it recorded: the plan's check
        and the sensor's, before it waits (default: none)."""

    @abstractmethod
    def pending(self, found: Found[AskT, PipelineT, CheckpointT, SourceT]) -> ReadyT:
        """What a scheduled run applies: what is ready after the checkpoint (from the origin without one)."""

    @abstractmethod
    def in_range(self, pipeline: PipelineT, source: SourceT, request: Request[AskT]) -> ReadyT:
        """What a backfill re-applies: the range its params name."""

    @abstractmethod
    def in_interval(self, pipeline: PipelineT, source: SourceT, start: datetime, end: datetime) -> ReadyT:
        """What one of Airflow's Backfill runs re-applies: what the source holds of its data interval;
        :class:`~lakefeed.errors.WindowNotReadyError` while the source has not reached its end."""

    @abstractmethod
    def from_origin(self, pipeline: PipelineT, source: SourceT, request: Request[AskT]) -> ReadyT:
        """What a reset applies: the source from its origin."""

    @abstractmethod
    def adoptable(self, pipeline: PipelineT, checkpoint: CheckpointT, ready: ReadyT) -> list[str]:
        """The targets that must hold only this pipeline's rows before ``ready`` runs without
        ``adopt_targets`` (none: this run needs no such check)."""

    @abstractmethod
    def batch(self, pipeline: PipelineT, ready: ReadyT) -> list[JobT]:
        """How the ready work is split into jobs (one spark-submit each)."""

    @abstractmethod
    def planned(self, planning: Planning[AskT, ConfigT, PipelineT, CheckpointT, SourceT, ReadyT, JobT]) -> PlanT:
        """The feed's plan, from what the sequence planned for each pipeline."""

    @abstractmethod
    def arguments(self, plan: PlanT) -> list[list[str]]:
        """``application_args`` of each job's spark-submit (the job's command-line contract)."""

    @abstractmethod
    def lineage(self, plan: PlanT) -> list[JobLineage]:
        """What each job reads and writes."""

    # -- commit hooks --

    @abstractmethod
    def jobs(self, plan: PlanT) -> Sequence[JobT]:
        """The plan's jobs, in job (map) index order."""

    @abstractmethod
    def pipeline_of(self, plan: PlanT, job: JobT) -> PipelineT:
        """The pipeline a job works for."""

    @abstractmethod
    def belongs(self, plan: PlanT, summary: SummaryT, job: JobT) -> bool:
        """A job's summary describes that job (its span, and the targets the plan named)."""

    def voided(self, plan: PlanT, credited: Mapping[int, SummaryT], storage: Storage) -> dict[int, int]:
        """Credited jobs whose work was replaced after they committed (by job index: the target version
        that replaced it); their summaries are not credited (default: none)."""
        return {}

    @abstractmethod
    def parts(self, plan: PlanT, credited: Mapping[int, SummaryT]) -> list[PipelinePart[PipelineT]]:
        """Each planned pipeline's part, as the commit sequence reads it."""

    @abstractmethod
    def announcing(self, credit: Credit[PlanT, PipelineT, SummaryT]) -> Announcing:
        """What the pipeline's commit step announces from."""

    @abstractmethod
    def advance(
        self, credit: Credit[PlanT, PipelineT, SummaryT], checkpoint: CheckpointT, announced: dict[str, TableMark]
    ) -> CheckpointT:
        """The checkpoint moved over the credited jobs, with the ``announced`` marks (pure: it may run again
        after a conflict)."""

    @abstractmethod
    def report(self, plan: PlanT, outcomes: list[Outcome[PipelineT, JobT, SummaryT, CheckpointT]]) -> ReportT:
        """The run summary from each pipeline's outcome (the skeleton adds Spark time and asset events)."""

    @abstractmethod
    def position(self, checkpoint: CheckpointT) -> str | None:
        """Where a checkpoint stands, as a failure message names it."""

    # -- the plan sequence --

    def plan_run(
        self,
        config: ConfigT,
        checkpoints: Mapping[str, CheckpointT],
        params: Mapping[str, Any],
        run: RunContext,
        storage: Storage = LOCAL,
    ) -> PlanT:
        """Which jobs this run submits, for each chosen pipeline; refuses (a :class:`~lakefeed.errors.Refusal`)
        params it cannot serve, a checkpoint of another source or other targets, and targets holding rows
        the pipeline did not write (unless the run adopts them)."""
        request = self.request(params, config)
        kind = run_kind(run, request.names_a_range, request.reset)
        parts = []
        for pipeline in self.chosen(config, request, kind, run):
            with storage.scope(pipeline.wasb_conn_id):
                checkpoint = checkpoints[self.name(pipeline)]
                parts.append(self._plan_pipeline(pipeline, checkpoint, kind, request, run, storage))
        planned = self.planned(Planning(config, kind, request, parts))
        log.info("plan: %s", json.dumps(to_document(planned)))
        return planned

    def _plan_pipeline(
        self,
        pipeline: PipelineT,
        checkpoint: CheckpointT,
        kind: str,
        request: Request[AskT],
        run: RunContext,
        storage: Storage,
    ) -> Planned[PipelineT, CheckpointT, SourceT, ReadyT, JobT]:
        where = f"Variable {pipeline.checkpoint_variable}"
        source = self.open(pipeline, checkpoint, kind, where, storage)
        if kind == SCHEDULED:
            self.verify(pipeline, checkpoint, source, where)
            if not request.adopt:
                remedies = self.adopt_remedy(pipeline), self.remedy(pipeline)
                verify_own_writes(checkpoint.targets, pipeline.checkpoint_variable, where, *remedies)
        if kind == BACKFILL and run.is_airflow_backfill:
            ready = self.in_interval(pipeline, source, *run.interval)
        elif kind == BACKFILL:
            ready = self.in_range(pipeline, source, request)
        elif kind == RESET:
            ready = self.from_origin(pipeline, source, request)
        else:
            ready = self.pending(Found(pipeline, checkpoint, source, request, run))
        adoptable = [] if ready.kind == BACKFILL or request.adopt else self.adoptable(pipeline, checkpoint, ready)
        if adoptable:
            verify_adoptable(adoptable, pipeline.checkpoint_variable, where, "adopt_targets")
        jobs = self.batch(pipeline, ready)
        return Planned(pipeline, checkpoint, source, ready, jobs, plan_marks(ready.kind, self.targets(pipeline)))

    # -- the commit sequence --

    def commit_run(
        self,
        plan: PlanT,
        stores: Mapping[str, CheckpointStore],
        outputs: JobOutputs,
        run_id: str,
        announced_since: AnnouncedSince = nothing_announced,
        storage: Storage = LOCAL,
    ) -> ReportT:
        """Per pipeline: credit the jobs that finished, refuse (keeping its checkpoint) a pipeline whose
        targets lost the jobs' commits or changed under the run, move its checkpoint as the run's kind
        allows (compare-and-set) and find the ledger entries to announce. Then report the run; fail when
        any pipeline was refused (:class:`RefusedWithReport`) or any job failed (:class:`BatchesFailed`),
        the report kept all the same. Works from the plan alone."""
        jobs = self.jobs(plan)
        credited = outputs.credited(jobs, self.summary_type, lambda summary, job: self.belongs(plan, summary, job))
        with storage.scope(getattr(self.config_of(plan), "wasb_conn_id", None)):
            voided = self.voided(plan, credited, storage)
            credited = {i: s for i, s in credited.items() if i not in voided}
            all_done = len(credited) + len(voided) == len(jobs)
            outcomes = []
            for part in self.parts(plan, credited):
                with storage.scope(part.pipeline.wasb_conn_id):
                    mine = [(i, jobs[i]) for i in part.jobs]
                    outcomes.append(
                        self._commit_pipeline(
                            plan,
                            part,
                            stores[part.name],
                            mine,
                            credited,
                            voided,
                            outputs,
                            all_done,
                            run_id,
                            announced_since,
                        )
                    )
        report = self.report(plan, outcomes)
        report.spark_seconds = spark_seconds(credited.values())
        report.targets_changed = [event for outcome in outcomes for event in outcome.events]
        report.announcements_deferred = sum(outcome.deferred for outcome in outcomes)
        document = to_document(report)
        log.info("run summary: %s", json.dumps(document, indent=2))
        refusals = [outcome.refused for outcome in outcomes if outcome.refused]
        if refusals:
            raise RefusedWithReport(" ".join(refusals), document)
        failed = [job for outcome in outcomes for job in outcome.failed]
        if failed:
            positions = {o.part.name: self.position(o.after) for o in outcomes}
            at = next(iter(positions.values())) if len(positions) == 1 else json.dumps(positions)
            raise BatchesFailed(
                f"{len(failed)} of {len(jobs)} batch(es) failed (first: {failed[0]}); checkpoint is at {at}: "
                "the next run resumes from there",
                document,
            )
        return report

    def change(
        self, credit: Credit[PlanT, PipelineT, SummaryT], announced: Callable[[CheckpointT], dict[str, TableMark]]
    ) -> Callable[[CheckpointT], CheckpointT]:
        """The compare-and-set change of a pipeline's commit step (pure: it may run again after a conflict).
        A backfill only records the ``announced`` marks (:meth:`Announcer.marks`); so does a scheduled run
        whose checkpoint was reset to another source (another ``identity``) while it ran; otherwise
        :meth:`advance` moves it."""
        part = credit.part

        def change(checkpoint: CheckpointT) -> CheckpointT:
            marks = announced(checkpoint)
            if part.kind == BACKFILL:
                return cast(CheckpointT, checkpoint.moved(announced=marks))
            if part.kind == SCHEDULED and checkpoint.identity not in (None, part.identity):
                log.warning(
                    "the checkpoint was reset to another %s (%s) while this run ran: not moving it",
                    self.noun,
                    checkpoint.identity,
                )
                return cast(CheckpointT, checkpoint.moved(announced=marks))
            return self.advance(credit, checkpoint, marks)

        return change

    def _commit_pipeline(
        self,
        plan: PlanT,
        part: PipelinePart[PipelineT],
        store: CheckpointStore,
        mine: list[tuple[int, JobT]],
        credited: Mapping[int, SummaryT],
        voided: Mapping[int, int],
        outputs: JobOutputs,
        all_done: bool,
        run_id: str,
        announced_since: AnnouncedSince,
    ) -> Outcome[PipelineT, JobT, SummaryT, CheckpointT]:
        done = {i: credited[i] for i, _ in mine if i in credited}
        failed = failed_jobs(mine, {*credited, *voided}, outputs.refused)
        mine_voided = {i: voided[i] for i, _ in mine if i in voided}
        totals, seconds = summed(done.values(), self.summary_type), spark_seconds(done.values())

        def outcome(
            before: CheckpointT,
            after: CheckpointT,
            refused: str | None = None,
            events: Sequence[Any] = (),
            deferred: int = 0,
        ) -> Outcome[PipelineT, JobT, SummaryT, CheckpointT]:
            return Outcome(
                part, mine, done, failed, mine_voided, before, after, totals, seconds, refused, list(events), deferred
            )

        pipeline_id, where = part.pipeline.checkpoint_variable, store.where
        try:
            verify_in_ledger(done, pipeline_id, where, self.remedy(part.pipeline))
            remedies = self.remedy(part.pipeline), self.adopt_remedy(part.pipeline)
            verify_unchanged(part.kind, part.target_marks, self.targets(part.pipeline), pipeline_id, where, *remedies)
        except CheckpointMismatchError as exc:  # its checkpoint stays; the other pipelines' move
            log.error("pipeline %s: %s", part.name, exc)
            kept = store.load()
            return outcome(kept, kept, refused=str(exc))
        credit = Credit(plan, part, done, run_id)
        announcing = self.announcing(credit)
        announcer = Announcer(
            announcing.tables,
            pipeline_id,
            announce=all_done,
            reported=announcing.reported,
            table_key=announcing.table_key,
            announced_since=announced_since,
        )

        change = self.change(credit, announcer.marks)
        before, after = store.update(change)
        return outcome(before, after, events=announcing.events(announcer.entries), deferred=announcer.deferred)


class OnePipelinePlan(Protocol):
    """What :class:`OnePipelineHooks` reads of its feed's plan."""

    @property
    def kind(self) -> str: ...

    @property
    def batches(self) -> Sequence[Any]: ...

    @property
    def config(self) -> Any: ...

    @property
    def target_marks(self) -> dict[str, TableMark] | None: ...

    @property
    def identity(self) -> str: ...


class OnePipelineHooks(
    FeedHooks[AskT, PipelineT, PipelineT, CheckpointT, SourceT, ReadyT, JobT, SummaryT, PlanT, ReportT]
):
    """The hooks of a feed whose configuration is its one pipeline, with a plan of ``batches`` (an
    :class:`OnePipelinePlan`): one part, all the jobs its own."""

    def config_of(self, plan: PlanT) -> PipelineT:
        return cast(PipelineT, cast(OnePipelinePlan, plan).config)

    def jobs(self, plan: PlanT) -> Sequence[JobT]:
        return cast(Sequence[JobT], cast(OnePipelinePlan, plan).batches)

    def pipeline_of(self, plan: PlanT, job: JobT) -> PipelineT:
        return self.config_of(plan)

    def parts(self, plan: PlanT, credited: Mapping[int, SummaryT]) -> list[PipelinePart[PipelineT]]:
        one, config = cast(OnePipelinePlan, plan), self.config_of(plan)
        jobs = list(range(len(one.batches)))
        return [PipelinePart(self.name(config), config, one.kind, jobs, one.target_marks, one.identity)]

    def report(self, plan: PlanT, outcomes: list[Outcome[PipelineT, JobT, SummaryT, CheckpointT]]) -> ReportT:
        (outcome,) = outcomes
        one = cast(OnePipelinePlan, plan)
        common = {
            "kind": one.kind,
            "refused": outcome.refused,
            "batches": len(one.batches),
            "batches_failed": outcome.failed,
            "totals": outcome.totals,
            "checkpoint_moved": outcome.moved,
        }
        return self.one_report(plan, outcome, common)

    @abstractmethod
    def one_report(
        self, plan: PlanT, outcome: Outcome[PipelineT, JobT, SummaryT, CheckpointT], common: dict[str, Any]
    ) -> ReportT:
        """The run summary, with the figures every one-pipeline report has (``common``: the run's kind, its
        refusal, batches, failed batches, the jobs' totals, whether the checkpoint moved)."""


@dataclass(frozen=True)
class Feed(Generic[ConfigT, PipelineT, PlanT, ReportT]):
    """A feed as the DAGs run it: its ``hooks``, ``config`` (read once, by the plan), ``cells`` (where the
    checkpoint of a name is kept: an Airflow Variable) and ``storage``. Plans and reports cross as their
    dataclasses; the Airflow tasks turn them into documents (XCom) and back (:meth:`read_plan`)."""

    hooks: FeedHooks[Any, ConfigT, PipelineT, Any, Any, Any, Any, Any, PlanT, ReportT]
    config: Callable[[], ConfigT]
    cells: Callable[[str], TextCell]
    storage: Storage = LOCAL

    def checkpoints(self, pipeline: PipelineT) -> CheckpointStore:
        """A pipeline's checkpoint store."""
        return CheckpointStore(self.cells(pipeline.checkpoint_variable), self.hooks.checkpoint_type)

    def plan(self, params: Mapping[str, Any], run: RunContext) -> PlanT:
        config = self.config()
        loaded = {self.hooks.name(p): self.checkpoints(p).load() for p in self.hooks.pipelines_of(config)}
        return self.hooks.plan_run(config, loaded, params, run, self.storage)

    def read_plan(self, document: Mapping[str, Any]) -> PlanT:
        """The plan from its document (the plan task's XCom)."""
        return from_document(self.hooks.plan_type, dict(document), PLAN)

    def job_arguments(self, plan: PlanT) -> list[list[str]]:
        return self.hooks.arguments(plan)

    def stage(self, plan: PlanT, index: int) -> dict[str, Any]:
        """Job ``index``'s work before Spark (:meth:`FeedHooks.stage`)."""
        return self.hooks.stage(plan, index, self.storage)

    def job_connections(self, plan: PlanT) -> list[str | None]:
        """The ``wasb`` connection each job reads and writes with: its pipeline's."""
        return [self.hooks.pipeline_of(plan, job).wasb_conn_id for job in self.hooks.jobs(plan)]

    def job_lineage(self, plan: PlanT) -> list[JobLineage]:
        return self.hooks.lineage(plan)

    def commit(
        self, plan: PlanT, outputs: JobOutputs, run_id: str, announced_since: AnnouncedSince = nothing_announced
    ) -> ReportT:
        pipelines = self.hooks.pipelines_of(self.hooks.config_of(plan))
        stores = {self.hooks.name(p): self.checkpoints(p) for p in pipelines}
        return self.hooks.commit_run(plan, stores, outputs, run_id, announced_since, self.storage)


PLAN = "the run's plan"  # where a plan document is read (named in a refusal of it)


def failed_jobs(
    jobs: Iterable[tuple[int, Any]], done: Container[int], refused: Mapping[int, str]
) -> list[dict[str, Any]]:
    """The jobs (``(index, job)``, the plan's typed jobs) that left no credited summary, as documents, each
    with its refusal where it refused."""
    return [
        {**to_document(job), **({"refused": refused[i]} if i in refused else {})} for i, job in jobs if i not in done
    ]


def summed(summaries: Iterable[SummaryT], summary_type: type[SummaryT]) -> dict[str, int]:
    """The jobs' counts (the :func:`~lakefeed.documents.counted` fields of ``summary_type``), added up, by
    field name (a report's :func:`~lakefeed.documents.totals`)."""
    rows = list(summaries)
    return {name: sum(getattr(s, name) for s in rows) for name in counted_fields(summary_type)}


def spark_seconds(summaries: Iterable[JobSummary]) -> float:
    """The Spark time the jobs reported, in seconds."""
    return round(sum(sum(s.seconds.values()) for s in summaries), 3)
