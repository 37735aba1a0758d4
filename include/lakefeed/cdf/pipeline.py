"""Delta change data feeds in the pipeline skeleton (:mod:`lakefeed.pipeline`): plan version ranges,
spark-submit arguments, checkpoint commit (:class:`CdfHooks`, on the sequences of :class:`lakefeed.pipeline.FeedHooks`): each
configured pipeline is one checkpoint.

Per pipeline, what a run plans depends on its kind (:mod:`lakefeed.progress`):

- scheduled (and manual runs without params): the versions after the
  checkpoint; on a first run, the change feed from version 0 when it was on
  from the start, else a full refresh at the latest version;
- a backfill: exactly ``starting_version``..``ending_version`` of the
  ``pipeline`` param, or, for a run of Airflow's Backfill, the versions each
  source committed within the run's data interval; never moves a checkpoint;
- a reset (``full_refresh``): the target rebuilt from a snapshot at
  ``ending_version`` (default: the latest); the checkpoint is set to exactly
  that version (even when it was ahead: the next run applies the versions
  after it again) and records the source and target anew.

Positions (:func:`lakefeed.progress.position_after`) are "the next version to
apply": ``appliedVersion + 1``.

The plan reads the configuration once and carries it (``config``); the job
arguments and the commit step work from the plan. A source that does not exist,
versions cleaned from its log, a changed ``keys``/``columns`` definition, and (with
an empty checkpoint) a target holding rows the pipeline did not write are
refused, each naming the path, versions or values and the way on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.assets import cdf_changes
from lakefeed.cdf import DAG_ID, KEY
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.config import CdfConfig, CdfPipeline
from lakefeed.cdf.log import cdf_enabled
from lakefeed.cdf.params import CdfRequest, cdf_request
from lakefeed.cdf.run_plan import CHANGES, FULL_REFRESH, CdfJob, CdfPlan, PipelinePlan
from lakefeed.cdf.schedule import VersionRange, pending_ranges, split_range
from lakefeed.cdf.summary import CdfPipelineReport, CdfRunReport, CdfSummary
from lakefeed.checkpoint import TableMark, verify_definition, verify_table
from lakefeed.config import PROJECT_ROOT
from lakefeed.delta import REFRESH_MARKER, table_location
from lakefeed.deltalog import DeltaLog, TableState
from lakefeed.documents import to_document
from lakefeed.errors import ChangeDataError, CheckpointMismatchError, ConfigError, DataLossError, WindowNotReadyError
from lakefeed.lineage import JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.targets import current_marks, rebuilt_after, verify_targets

log = logging.getLogger(__name__)


JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "delta_cdf_job.py")


@dataclass(frozen=True)
class SourceSeen:
    """What a plan read of a pipeline's source table: its log and latest version."""

    log: DeltaLog
    latest: int


@dataclass(frozen=True)
class Versions:
    """What a pipeline's run applies: version ranges of the change feed, or (``refresh_at``) a full refresh
    of its target from a snapshot at that version; ``origin``, the version a first run's position starts
    from (0)."""

    kind: str
    ranges: list[VersionRange]
    origin: int | None = None
    refresh_at: int | None = None


Credit = skeleton.Credit[CdfPlan, CdfPipeline, CdfSummary]
Planning = skeleton.Planning[CdfRequest, CdfConfig, CdfPipeline, CdfCheckpoint, SourceSeen, Versions, CdfJob]


class CdfHooks(
    skeleton.FeedHooks[
        CdfRequest,
        CdfConfig,
        CdfPipeline,
        CdfCheckpoint,
        SourceSeen,
        Versions,
        CdfJob,
        CdfSummary,
        CdfPlan,
        CdfRunReport,
    ]
):
    """Delta change data feeds in the skeleton: one checkpoint per configured pipeline, each read and written
    with its own connection."""

    plan_type = CdfPlan
    checkpoint_type = CdfCheckpoint
    readiness = "lakefeed.cdf.readiness:ready"
    summary_type = CdfSummary

    def pipelines_of(self, config: CdfConfig) -> list[CdfPipeline]:
        return config.pipelines

    def name(self, pipeline: CdfPipeline) -> str:
        return pipeline.name

    def config_of(self, plan: CdfPlan) -> CdfConfig:
        return plan.config

    def remedy(self, pipeline: CdfPipeline) -> str:
        return refresh_remedy(pipeline.name)

    def adopt_remedy(self, pipeline: CdfPipeline) -> str:
        return adopt_remedy(pipeline.name)

    def targets(self, pipeline: CdfPipeline) -> list[str]:
        return [pipeline.target_table]

    # -- the sensor --

    def watch(self, watching: skeleton.Watching[CdfConfig, CdfPipeline, CdfCheckpoint]) -> dict[str, Any]:
        """The sources of every pipeline (or the one the run's params name)."""
        from lakefeed.cdf import readiness

        chosen = [p for p in watching.config.pipelines if watching.pipeline in (None, "", p.name)]
        sources = [readiness.watch(watching.checkpoint(p), readiness.source_of(p), watching.storage) for p in chosen]
        return {"sources": sources}

    # -- plan --

    def request(self, params: Mapping[str, Any], config: CdfConfig) -> skeleton.Request[CdfRequest]:
        asked = cdf_request(dict(params), [p.name for p in config.pipelines])
        return skeleton.Request.of(params, asked, asked.names_a_range, asked.full_refresh, asked.pipeline)

    def chosen(
        self, config: CdfConfig, request: skeleton.Request[CdfRequest], kind: str, run: skeleton.RunContext
    ) -> list[CdfPipeline]:
        """All pipelines, or the one the params name; a backfill or full refresh names one (unless only one
        is configured, or it is one of Airflow's Backfill runs, which re-applies its hour for all)."""
        name = request.pipeline
        if name is None and kind != SCHEDULED and not run.is_airflow_backfill:
            if len(config.pipelines) > 1:
                raise ConfigError(
                    f"a backfill or full refresh needs the param pipeline (configured: "
                    f"{', '.join(p.name for p in config.pipelines)})"
                )
            name = config.pipelines[0].name
        return [config.pipeline(name)] if name else config.pipelines

    def open(
        self, pipeline: CdfPipeline, checkpoint: CdfCheckpoint, kind: str, where: str, storage: skeleton.Storage
    ) -> SourceSeen:
        delta_log = DeltaLog(storage.table(pipeline.source_table, pipeline.wasb_conn_id))
        return SourceSeen(delta_log, _latest_version(pipeline, delta_log))

    def verify(self, pipeline: CdfPipeline, checkpoint: CdfCheckpoint, source: SourceSeen, where: str) -> None:
        _verify(pipeline, checkpoint, source.log)

    def pending(self, found: skeleton.Found[CdfRequest, CdfPipeline, CdfCheckpoint, SourceSeen]) -> Versions:
        """The versions after the checkpoint; on a first run, the change feed from version 0 when it was on
        from the start, else a full refresh at the latest version (a reset)."""
        pipeline, source, checkpoint = found.pipeline, found.source, found.checkpoint
        per_job, cap = pipeline.versions_per_job, pipeline.max_versions_per_run
        if checkpoint.applied_version is not None:
            ranges = pending_ranges(checkpoint.applied_version, source.latest, per_job, cap)
            return Versions(SCHEDULED, _in_log(pipeline, source.log, ranges))
        versions = source.log.commit_versions()
        if versions and versions[0] == 0 and cdf_enabled(source.log.table_state(0)[0]):
            return Versions(SCHEDULED, pending_ranges(None, source.latest, per_job, cap), origin=0)
        return Versions(RESET, [], refresh_at=source.latest)

    def in_range(self, pipeline: CdfPipeline, source: SourceSeen, request: skeleton.Request[CdfRequest]) -> Versions:
        start, end = request.asked.start, request.asked.end
        if start is None or end is None:
            raise ConfigError("a version backfill needs both starting_version and ending_version (inclusive)")
        if end < start:
            raise ConfigError(f"ending_version {end} must not be before starting_version {start}")
        _not_beyond(end, source.latest, pipeline)
        ranges = split_range(start, end, pipeline.versions_per_job)
        return Versions(BACKFILL, _in_log(pipeline, source.log, ranges))

    def in_interval(self, pipeline: CdfPipeline, source: SourceSeen, start: datetime, end: datetime) -> Versions:
        """The versions the source committed within the run's data interval (by commit timestamp, as
        DESCRIBE HISTORY shows them)."""
        start_ms = int(start.timestamp() * 1000)
        versions = source.log.commit_versions()
        oldest_stamp = source.log.commit_timestamp(versions[0])
        if versions[0] > 0 and (oldest_stamp is None or start_ms < oldest_stamp):
            raise DataLossError(
                f"pipeline {pipeline.name}: this Backfill run re-applies the versions committed in {start} "
                f".. {end}, but versions 0..{versions[0] - 1} of {pipeline.source_table} are no longer in "
                f"its log (log cleanup), so the versions of that interval cannot be known or read. "
                f"To go on, {refresh_remedy(pipeline.name)}."
            )
        span = source.log.versions_committed_between(start_ms, int(end.timestamp() * 1000))
        if span is None:
            if end > datetime.now(UTC):
                raise WindowNotReadyError(
                    f"pipeline {pipeline.name}: no version of {pipeline.source_table} is committed in "
                    f"{start} .. {end} yet, and the hour has not ended: versions may still be committed in it"
                )
            log.info("pipeline %s: no version committed in %s .. %s", pipeline.name, start, end)
            return Versions(BACKFILL, [])
        return Versions(BACKFILL, _in_log(pipeline, source.log, split_range(*span, pipeline.versions_per_job)))

    def from_origin(self, pipeline: CdfPipeline, source: SourceSeen, request: skeleton.Request[CdfRequest]) -> Versions:
        """A full refresh at ``ending_version`` (default: the latest)."""
        version = source.latest if request.asked.end is None else request.asked.end
        _not_beyond(version, source.latest, pipeline)
        return Versions(RESET, [], refresh_at=version)

    def adoptable(self, pipeline: CdfPipeline, checkpoint: CdfCheckpoint, ready: Versions) -> list[str]:
        """A first run of the change feed merges into its target; a full refresh replaces it."""
        return [pipeline.target_table] if ready.kind == SCHEDULED and checkpoint.applied_version is None else []

    def batch(self, pipeline: CdfPipeline, ready: Versions) -> list[CdfJob]:
        if ready.refresh_at is not None:
            return [CdfJob(pipeline.name, FULL_REFRESH, version=ready.refresh_at)]
        return _changes(pipeline, ready.ranges)

    def planned(self, planning: Planning) -> CdfPlan:
        parts = planning.parts
        return CdfPlan(
            kind=planning.kind,
            jobs=[job for part in parts for job in part.jobs],
            pipelines={
                part.pipeline.name: PipelinePlan(
                    kind=part.ready.kind,
                    origin=part.ready.origin,
                    latest=part.source.latest,
                    source_table_id=part.source.log.table_id(),
                    applied_before=part.checkpoint.applied_version,
                    target_marks=part.target_marks,
                )
                for part in parts
            },
            config=planning.config,
        )

    def arguments(self, plan: CdfPlan) -> list[list[str]]:
        config = plan.config
        arguments = []
        # Tombstone retention in the first job of each scheduled pipeline only (lakefeed.tombstones).
        removing = {name for name, seen in plan.pipelines.items() if seen.kind == SCHEDULED}
        for job in plan.jobs:
            pipeline = config.pipeline(job.pipeline)
            args = [
                "--source-table",
                pipeline.source_table,
                "--target-table",
                pipeline.target_table,
                "--keys",
                ",".join(pipeline.keys),
            ]
            if pipeline.columns:
                args += ["--columns", ",".join(pipeline.columns)]
            if pipeline.scd_type != 1:
                args += ["--scd-type", str(pipeline.scd_type)]
            if job.mode == FULL_REFRESH:
                args += ["--full-refresh", "--version", str(job.last)]
            else:
                args += ["--starting-version", str(job.first), "--ending-version", str(job.last)]
                if pipeline.tombstone_retention_hours is not None and job.pipeline in removing:
                    args += ["--tombstone-retention-hours", str(pipeline.tombstone_retention_hours)]
                    removing.discard(job.pipeline)
            arguments.append(args + ["--pipeline-id", pipeline.checkpoint_variable])
        return arguments

    def lineage(self, plan: CdfPlan) -> list[JobLineage]:
        """What each job reads (its pipeline's source table) and writes (its target)."""
        pipelines = [plan.config.pipeline(job.pipeline) for job in plan.jobs]
        return [JobLineage(KEY, p.checkpoint_variable, [p.source_table], [p.target_table]) for p in pipelines]

    # -- commit --

    def jobs(self, plan: CdfPlan) -> list[CdfJob]:
        return plan.jobs

    def pipeline_of(self, plan: CdfPlan, job: CdfJob) -> CdfPipeline:
        return plan.config.pipeline(job.pipeline)

    def belongs(self, plan: CdfPlan, summary: CdfSummary, job: CdfJob) -> bool:
        """The summary is of this job: its range and mode, and the source and target the plan named."""
        pipeline = plan.config.pipeline(job.pipeline)
        if (summary.source, summary.target) != (
            table_location(pipeline.source_table),
            table_location(pipeline.target_table),
        ):
            return False
        if job.mode == FULL_REFRESH:
            return summary.mode == FULL_REFRESH and summary.ending_version == job.last
        return summary.mode == CHANGES and (summary.starting_version, summary.ending_version) == (job.first, job.last)

    def voided(self, plan: CdfPlan, credited: Mapping[int, CdfSummary], storage: skeleton.Storage) -> dict[int, int]:
        """Jobs whose work a full refresh of their target replaced after they committed: the target version
        of the refresh. A refresh (another run, overlapping this one) rebuilds the target from a snapshot, so
        a range applied before it holds nothing past the snapshot's version; crediting it would move the
        checkpoint over versions the rebuilt target never received. Read from the target's log."""
        voided = {}
        for index, summary in credited.items():
            job = plan.jobs[index]
            if job.mode != CHANGES:
                continue
            pipeline = plan.config.pipeline(job.pipeline)
            with storage.scope(pipeline.wasb_conn_id):
                rebuilt = rebuilt_after(pipeline.target_table, summary.target_version, REFRESH_MARKER)
            if rebuilt is not None:
                log.warning(
                    "pipeline %s: a full refresh rebuilt %s at version %d after job %d (versions %d..%d) "
                    "committed: not credited, the next run applies them again",
                    job.pipeline,
                    pipeline.target_table,
                    rebuilt,
                    index,
                    job.first,
                    job.last,
                )
                voided[index] = rebuilt
        return voided

    def parts(self, plan: CdfPlan, credited: Mapping[int, CdfSummary]) -> list[skeleton.PipelinePart[CdfPipeline]]:
        parts = []
        for name, seen in plan.pipelines.items():
            mine = [i for i, job in enumerate(plan.jobs) if job.pipeline == name]
            read = next(
                (credited[i].source_table_id for i in mine if i in credited and credited[i].source_table_id), None
            )
            identity = read or seen.source_table_id
            parts.append(
                skeleton.PipelinePart(name, plan.config.pipeline(name), seen.kind, mine, seen.target_marks, identity)
            )
        return parts

    def announcing(self, credit: Credit) -> skeleton.Announcing:
        part, done = credit.part, credit.done
        target = part.pipeline.target_table
        reported = {
            (target, s.target_version): (s.inserted, s.updated, s.deleted)
            for s in done.values()
            if (s.committed or s.mode == FULL_REFRESH) and s.target_version is not None
        }
        return skeleton.Announcing([target], reported, lambda entries: cdf_changes(part.name, target, entries))

    def advance(self, credit: Credit, checkpoint: CdfCheckpoint, announced: dict[str, TableMark]) -> CdfCheckpoint:
        """Positions (:func:`lakefeed.progress.position_after`) are "the next version to apply":
        ``appliedVersion + 1``; a reset sets it to exactly the refreshed version."""
        plan, part, done = credit.plan, credit.part, credit.done
        pipeline, kind = part.pipeline, part.kind
        if kind == RESET and not done:
            return checkpoint.moved(announced=announced)
        if kind == RESET:
            refreshed = max(s.ending_version for s in done.values())
            position = position_after(RESET, None, [], set(), origin=refreshed + 1)
        else:
            mine = [plan.jobs[i] for i in part.jobs]
            ranges = [(job.first, job.last + 1) for job in mine]
            stored = None if checkpoint.applied_version is None else checkpoint.applied_version + 1
            completed = {n for n, i in enumerate(part.jobs) if i in done}
            position = position_after(SCHEDULED, stored, ranges, completed, origin=plan.pipelines[part.name].origin)
        applied = None if position is None or position == 0 else position - 1
        marks = current_marks([pipeline.target_table]) if done else checkpoint.targets
        return checkpoint.moved(
            applied_version=applied,
            source=pipeline.source_table,
            source_id=part.identity,
            targets=marks,
            keys=tuple(pipeline.keys),
            columns=tuple(pipeline.columns) if pipeline.columns else None,
            announced=announced,
            updated_by=credit.run_id,
        )

    def report(
        self, plan: CdfPlan, outcomes: list[skeleton.Outcome[CdfPipeline, CdfJob, CdfSummary, CdfCheckpoint]]
    ) -> CdfRunReport:
        report = CdfRunReport(kind=plan.kind)
        for outcome in outcomes:
            seen = plan.pipelines[outcome.part.name]
            before, after = outcome.before, outcome.after
            report.pipelines[outcome.part.name] = CdfPipelineReport(
                kind=seen.kind,
                jobs=len(outcome.jobs),
                refused=outcome.refused,
                jobs_failed=outcome.failed,
                jobs_voided=[
                    {**to_document(job), "rebuiltAt": outcome.voided[i]}
                    for i, job in outcome.jobs
                    if i in outcome.voided
                ],
                versions=[] if outcome.refused else [[job.first, job.last] for _, job in outcome.jobs],
                totals={} if outcome.refused else outcome.totals,
                applied_before=before.applied_version,
                applied_version=after.applied_version,
                checkpoint_reset=(
                    {"from": before.applied_version, "to": after.applied_version}
                    if seen.kind == RESET and outcome.moved
                    else None
                ),
                latest_version=seen.latest,
                lag_versions=(seen.latest - after.applied_version)
                if after.applied_version is not None and not outcome.refused
                else None,
                spark_seconds=None if outcome.refused else outcome.spark_seconds,
            )
        return report

    def position(self, checkpoint: CdfCheckpoint) -> str | None:
        return None if checkpoint.applied_version is None else str(checkpoint.applied_version)


def _not_beyond(version: int, latest: int, pipeline: CdfPipeline) -> None:
    if version > latest:
        raise ChangeDataError(
            f"ending_version {version} is beyond the latest version {latest} of {pipeline.source_table}"
        )


def adopt_remedy(pipeline: str) -> str:
    return f"trigger {DAG_ID} once with the params pipeline={pipeline} and adopt_targets=true"


def refresh_remedy(pipeline: str) -> str:
    return (
        f"trigger {DAG_ID} with pipeline={pipeline} and full_refresh=true: it rebuilds the target "
        f"from a snapshot of the source and restarts the checkpoint at that version"
    )


def verify_source(
    name: str,
    source_table: str,
    checkpoint_variable: str,
    recorded_id: str | None,
    applied: int | None,
    delta_log: DeltaLog,
) -> TableState | None:
    """Refuse a source that is not the table its checkpoint was made on: dropped and recreated (another
    table id), or replaced by an older copy (its latest version is below the applied one). The sensor
    and the planner both call this, so neither waits forever for versions the new table does not have.
    A source path without a Delta table is refused too, naming it: a run never waits, green, for a table
    that is not there. Returns the source's state."""
    where, remedy = f"Variable {checkpoint_variable}", refresh_remedy(name)
    state = delta_log.state()
    if state is None:
        raise ChangeDataError(_no_source(name, source_table))
    verify_table("source", source_table, recorded_id, None, state, where, remedy)
    if state is not None and applied is not None and applied > state.latest_version:
        raise ChangeDataError(
            f"checkpoint {where} says versions up to {applied} of {source_table} are applied, but its latest "
            f"version is {state.latest_version}: the table was replaced by an older copy. To start over on it, "
            f"{remedy}."
        )
    return state


def _no_source(name: str, source_table: str) -> str:
    return (
        f"pipeline {name}: the source table {source_table} does not exist (no Delta log there). Fix "
        f"source_table in the configuration, or create the table (with delta.enableChangeDataFeed = true)."
    )


def _latest_version(pipeline: CdfPipeline, delta_log: DeltaLog) -> int:
    latest = delta_log.latest_version()
    if latest is None:
        raise ChangeDataError(_no_source(pipeline.name, pipeline.source_table))
    return latest


def _in_log(pipeline: CdfPipeline, delta_log: DeltaLog, ranges: list[VersionRange]) -> list[VersionRange]:
    """``ranges``; refuses ranges reaching versions whose commits log cleanup removed: their change data
    cannot be read."""
    if not ranges:
        return ranges
    oldest = delta_log.commit_versions()[0]
    first = min(r.start for r in ranges)
    if first < oldest:
        raise DataLossError(
            f"pipeline {pipeline.name}: versions {first}..{oldest - 1} of {pipeline.source_table} are no longer in "
            f"its log (removed by log cleanup after delta.logRetentionDuration); their change data cannot be read. "
            f"To go on, {refresh_remedy(pipeline.name)}."
        )
    return ranges


def verify_definition_of(
    name: str, checkpoint: CdfCheckpoint, keys: list[str], columns: list[str] | None, where: str
) -> None:
    """Refuse keys or columns other than those the checkpoint recorded (the sensor and the planner)."""
    if checkpoint.keys is not None:
        remedy = refresh_remedy(name)
        verify_definition(f"pipeline {name}'s keys", list(checkpoint.keys), list(keys), where, remedy)
        verify_definition(
            f"pipeline {name}'s columns", _columns_text(checkpoint.columns), _columns_text(columns), where, remedy
        )


def _verify(pipeline: CdfPipeline, checkpoint: CdfCheckpoint, delta_log: DeltaLog) -> None:
    where, remedy = f"Variable {pipeline.checkpoint_variable}", refresh_remedy(pipeline.name)
    verify_definition_of(pipeline.name, checkpoint, pipeline.keys, pipeline.columns, where)
    if checkpoint.source not in (None, pipeline.source_table):
        raise CheckpointMismatchError(
            f"checkpoint {where} was made reading {checkpoint.source}, but pipeline {pipeline.name} now reads "
            f"{pipeline.source_table}: its applied version says nothing about that table. Point the configuration "
            f"back, or {remedy}."
        )
    verify_source(
        pipeline.name,
        pipeline.source_table,
        pipeline.checkpoint_variable,
        checkpoint.source_id,
        checkpoint.applied_version,
        delta_log,
    )
    verify_targets(checkpoint.targets, {"target": pipeline.target_table}, where, remedy)


def _columns_text(columns: Sequence[str] | None) -> str:
    return ", ".join(columns) if columns else "all columns"


def _changes(pipeline: CdfPipeline, ranges: list[VersionRange]) -> list[CdfJob]:
    """One job per range; an SCD type 2 pipeline's ranges in one job, since a history is applied in version
    order and the jobs of a run run side by side (lakefeed.cdf.scd2)."""
    if pipeline.scd_type == 2 and ranges:
        ranges = [VersionRange(ranges[0].start, ranges[-1].end)]
    return [CdfJob(pipeline.name, CHANGES, start=r.start, end=r.end) for r in ranges]


HOOKS = CdfHooks()
