"""The SQL-pulled CockroachDB feed in the pipeline skeleton (:class:`CrdbSqlHooks`): each run pulls bounded
changefeed ranges over SQL into a staged folder in the sink's layout (:mod:`lakefeed.crdbsql.pull`), and the
CockroachDB job applies them as it applies sink files. Everything after the pull (job arguments, which job
reported what, the checkpoint's advance, announcements, the report) is the CockroachDB feed's own
(:class:`lakefeed.crdb.pipeline.CrdbHooks`): this module only says which ranges a run pulls.

Positions are ``updated`` timestamps (:class:`~lakefeed.crdb.hlc.Hlc`); a range ``(after, through]``.

- scheduled: from the checkpoint to just before the cluster's clock less ``safety_lag_seconds`` (the
  range's ``end_time``, the timestamp after its end, is then never in the future), at most
  ``max_span_hours`` past the checkpoint; with no checkpoint, an initial scan there (the first range
  has no ``after``), then hourly increments from it;
- a backfill: ``after_resolved``..``through_resolved`` from the params (after empty: an initial scan at
  through), or, for one of Airflow's Backfill runs, the changes committed in its data interval
  (``(start.Prev(), end.Prev()]``); refused as not ready while the cluster's clock has not passed its end;
- a reset (``reset_checkpoint``): a new initial scan, recorded in the checkpoint. It is also how a run goes
  on after the cluster's garbage collection removed the changes after the checkpoint (the pull refuses
  such a cursor, naming the tables and the gap).

The checkpoint (:class:`~lakefeed.crdb.checkpoint.CrdbCheckpoint`) records the last range's ``through`` as
``resolved`` and the database and tables as its source identity: a run against another cluster, database
or set of tables is refused until a reset.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from lakefeed import pipeline as skeleton
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.hlc import NANOS, Hlc
from lakefeed.crdb.pipeline import CrdbHooks, Resolved, root_of, verify_recorded
from lakefeed.crdb.run_plan import CrdbPlan, ResolvedRange
from lakefeed.crdb.summary import CrdbSummary
from lakefeed.crdbsql import DAG_ID
from lakefeed.crdbsql.config import CrdbSqlConfig
from lakefeed.crdbsql.pull import Pulled, Staging, cluster_time, prev_of, pull, topic_of
from lakefeed.errors import WindowNotReadyError
from lakefeed.progress import BACKFILL, RESET, SCHEDULED
from lakefeed.sql import SqlEndpoint
from lakefeed.storage import Store, StoreBase
from lakefeed.times import format_time

log = logging.getLogger(__name__)

RESET_REMEDY = skeleton.reset_remedy(
    DAG_ID,
    "it starts again with an initial scan of the configured tables into the configured target root and records them",
)


@dataclass(frozen=True)
class ClusterSource:
    """What a plan reads of the cluster: the staged folder, the database, its clock less the safety lag
    (the newest ``through`` a range may have), and its version."""

    staging: StoreBase
    endpoint: SqlEndpoint
    tables: tuple[str, ...]
    horizon: Hlc
    version: str

    @property
    def identity(self) -> str:
        return f"{self.endpoint.identity}?tables={','.join(self.tables)}"


@dataclass(frozen=True, kw_only=True)
class CrdbSqlPlan(CrdbPlan):
    DOCUMENT_VERSION: ClassVar[int] = 1

    config: CrdbSqlConfig


class CrdbSqlHooks(CrdbHooks):
    """The CockroachDB hooks with ranges pulled over SQL instead of listed from a sink."""

    plan_type: type[CrdbPlan] = CrdbSqlPlan
    readiness = "lakefeed.crdbsql.readiness:ready"
    noun = "cluster"

    def remedy(self, pipeline: Any) -> str:
        return RESET_REMEDY

    def watch(self, watching: skeleton.Watching[Any, Any, CrdbCheckpoint]) -> dict[str, Any]:
        config: CrdbSqlConfig = watching.config
        checkpoint = watching.checkpoint(config)
        verify_recorded(config, checkpoint)
        return {
            "sql_conn_id": config.sql_conn_id,
            "resolved": checkpoint.resolved,
            "safety_lag_seconds": config.safety_lag_seconds,
        }

    # -- plan --

    def open(  # type: ignore[override]  # the cluster, not a sink folder: only this class's hooks read it
        self, pipeline: Any, checkpoint: CrdbCheckpoint, kind: str, where: str, storage: skeleton.Storage
    ) -> ClusterSource:
        config: CrdbSqlConfig = pipeline
        endpoint = storage.sql(config.sql_conn_id)
        now, version = cluster_time(endpoint)
        horizon = Hlc(now.wall - int(config.safety_lag_seconds * NANOS), 0)
        return ClusterSource(
            storage.feed(config.staging_root, config.wasb_conn_id), endpoint, tuple(config.tables), horizon, version
        )

    def source_identity(self, source: Any) -> str:
        found: ClusterSource = source
        return found.identity

    def pending(self, found: skeleton.Found[Any, Any, CrdbCheckpoint, Any]) -> Resolved:
        source: ClusterSource = found.source
        config: CrdbSqlConfig = found.pipeline
        if found.checkpoint.resolved is None:  # the first run: an initial scan, ending before the horizon
            return Resolved(SCHEDULED, None, [prev_of(source.horizon)])
        cursor = Hlc.parse(found.checkpoint.resolved)
        through = min(prev_of(source.horizon), Hlc(cursor.wall + int(config.max_span_hours * 3600 * NANOS), 0))
        return Resolved(SCHEDULED, cursor, [through] if through > cursor else [])

    def in_range(self, pipeline: Any, source: Any, request: skeleton.Request[Any]) -> Resolved:
        found: ClusterSource = source
        after, through = request.asked
        assert through is not None  # the params name a range: that made it a backfill
        if through >= found.horizon:  # its end_time, the next timestamp, must not be past the horizon
            raise WindowNotReadyError(
                f"through_resolved {through} ({format_time(through.datetime())}) is past the cluster's clock less "
                f"the safety lag ({found.horizon}, {format_time(found.horizon.datetime())})"
            )
        return Resolved(BACKFILL, after, [through])

    def in_interval(self, pipeline: Any, source: Any, start: datetime, end: datetime) -> Resolved:
        """The changes committed in ``[start, end)``: the range ``(start.Prev(), end.Prev()]``."""
        found: ClusterSource = source
        since, until = Hlc(int(start.timestamp() * 1e9), 0), Hlc(int(end.timestamp() * 1e9), 0)
        if until > found.horizon:
            raise WindowNotReadyError(
                f"the cluster's clock less the safety lag ({format_time(found.horizon.datetime())}) has not "
                f"passed this run's hour end {format_time(end)}"
            )
        return Resolved(BACKFILL, prev_of(since), [prev_of(until)])

    def from_origin(self, pipeline: Any, source: Any, request: skeleton.Request[Any]) -> Resolved:
        found: ClusterSource = source
        return Resolved(RESET, None, [prev_of(found.horizon)])

    def planned(self, planning: Any) -> CrdbSqlPlan:
        (part,), kind, config = planning.parts, planning.kind, planning.config
        source: ClusterSource = part.source
        return CrdbSqlPlan(
            kind=kind,
            batches=part.jobs,
            sink=source.identity,
            resolved_before=part.checkpoint.resolved,
            newest_resolved=str(source.horizon),
            target_root=root_of(config.target_root),
            target_marks=part.target_marks,
            config=config,
        )

    def arguments(self, plan: CrdbPlan) -> list[list[str]]:
        """The CockroachDB job's arguments; an initial scan reads its own files only (after its own RESOLVED
        file, at ``through.Prev()``) as a snapshot of the tables."""
        arguments = super().arguments(plan)
        config: CrdbSqlConfig = plan.config  # type: ignore[assignment]
        for args, batch in zip(arguments, plan.batches, strict=True):
            if batch.after is None:
                args += ["--after-resolved", str(scan_floor(batch)), "--snapshot-topics", ",".join(topics(config))]
        return arguments

    def belongs(self, plan: CrdbPlan, summary: CrdbSummary, job: ResolvedRange) -> bool:
        """As a sink range's; an initial scan's job reports the range after its own RESOLVED file."""
        after = job.after if job.after is not None else str(scan_floor(job))
        return super().belongs(plan, summary, ResolvedRange(after, job.through))

    # -- the pull, before the jobs --

    def stage(self, plan: Any, index: int, storage: skeleton.Storage) -> dict[str, Any]:
        """Pull job ``index``'s range and stage it for the job (a task before the jobs runs this)."""
        sql_plan: CrdbSqlPlan = plan
        config = sql_plan.config
        batch: ResolvedRange = sql_plan.batches[index]
        store = storage.table(config.staging_root, config.wasb_conn_id)  # a Store that writes
        assert isinstance(store, Store), f"{config.staging_root}: staging needs a writable store"
        staging = Staging(
            store,
            config.checkpoint_variable,
            Hlc.parse(batch.after) if batch.after else None,
            Hlc.parse(batch.through),
        )
        pulled: Pulled = pull(
            storage.sql(config.sql_conn_id),
            config.tables,
            staging,
            config.statement_form,
            config.min_checkpoint_frequency,
        )
        log.info("staged %s", pulled.describe())
        return pulled.describe()


def scan_floor(batch: ResolvedRange) -> Hlc:
    """The RESOLVED timestamp an initial scan's files follow (:attr:`~lakefeed.crdbsql.pull.Staging.lower_bound`)."""
    return prev_of(Hlc.parse(batch.through))


def topics(config: CrdbSqlConfig) -> list[str]:
    """The topic (the ``table`` column, a table's own name) of each configured table."""
    return [topic_of(table) for table in config.tables]


HOOKS = CrdbSqlHooks()
