"""Delta change data feeds in the pipeline skeleton (:mod:`lakefeed.pipeline`): plan version ranges,
spark-submit arguments, checkpoint commit (:class:`CdfFeed`).

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

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.assets import cdf_changes
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.log import cdf_enabled
from lakefeed.cdf.run_plan import CHANGES, FULL_REFRESH, CdfJob, CdfPlan, PipelinePlan
from lakefeed.cdf.schedule import VersionRange, pending_ranges, split_range
from lakefeed.cdf.summary import CdfPipelineReport, CdfRunReport, CdfSummary
from lakefeed.checkpoint import TableMark, verify_definition, verify_table
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import PROJECT_ROOT, CdfConfig, CdfPipeline
from lakefeed.delta import REFRESH_MARKER
from lakefeed.deltalog import DeltaLog, TableState
from lakefeed.documents import to_document
from lakefeed.errors import (
    ChangeDataError,
    CheckpointMismatchError,
    ConfigError,
    DataLossError,
    WindowNotReadyError,
)
from lakefeed.ledger import AnnouncedSince, nothing_announced
from lakefeed.lineage import CDF, JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.run_params import cdf_request
from lakefeed.targets import current_marks, rebuilt_after, verify_adoptable, verify_own_writes, verify_targets

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "delta_cdf_job.py")


def adopt_remedy(pipeline: str) -> str:
    return f"trigger delta_cdf_to_delta once with the params pipeline={pipeline} and adopt_targets=true"


def refresh_remedy(pipeline: str) -> str:
    return (
        f"trigger delta_cdf_to_delta with pipeline={pipeline} and full_refresh=true: it rebuilds the target "
        f"from a snapshot of the source and restarts the checkpoint at that version"
    )


def plan(
    config: CdfConfig,
    checkpoints: dict[str, CdfCheckpoint],
    params: dict[str, Any],
    run: skeleton.RunContext,
    storage: skeleton.Storage = skeleton.LOCAL,
) -> CdfPlan:
    """Jobs for this run, per pipeline; refuses (a :class:`~lakefeed.errors.Refusal`) a request that cannot
    be served, or a checkpoint whose source or target is not the table it was made on."""
    request = cdf_request(params, [p.name for p in config.pipelines])
    start, end, full_refresh = request.start, request.end, request.full_refresh
    kind = skeleton.run_kind(run, request.names_a_range, full_refresh)
    name = request.pipeline
    if name is None and kind != SCHEDULED and not run.is_airflow_backfill:
        if len(config.pipelines) > 1:
            raise ConfigError(
                f"a backfill or full refresh needs the param pipeline (configured: "
                f"{', '.join(p.name for p in config.pipelines)})"
            )
        name = config.pipelines[0].name
    chosen = [config.pipeline(name)] if name else config.pipelines
    adopt = bool(params.get("adopt_targets"))
    jobs: list[CdfJob] = []
    pipelines: dict[str, PipelinePlan] = {}
    for pipeline in chosen:
        with storage.scope(pipeline.wasb_conn_id):  # its target ledgers with its own connection
            delta_log = DeltaLog(storage.table(pipeline.source_table, pipeline.wasb_conn_id))
            latest = _latest_version(pipeline, delta_log)
            checkpoint = checkpoints[pipeline.name]
            if kind == RESET:
                planned, origin, pipeline_kind = _refresh_at(end, latest, pipeline), None, RESET
            elif kind == BACKFILL and run.is_airflow_backfill:
                planned, origin, pipeline_kind = _committed_in_interval(delta_log, run, pipeline), None, BACKFILL
            elif kind == BACKFILL:
                planned, origin, pipeline_kind = _version_range(start, end, latest, pipeline), None, BACKFILL
            else:
                _verify(pipeline, checkpoint, delta_log)
                if not adopt:
                    verify_own_writes(
                        checkpoint.targets,
                        pipeline.checkpoint_variable,
                        f"Variable {pipeline.checkpoint_variable}",
                        adopt_remedy(pipeline.name),
                        refresh_remedy(pipeline.name),
                    )
                if checkpoint.applied_version is None:
                    planned, origin, pipeline_kind = _first_run(pipeline, delta_log, latest)
                else:
                    planned, origin, pipeline_kind = (
                        _changes(
                            pipeline,
                            pending_ranges(
                                checkpoint.applied_version,
                                latest,
                                pipeline.versions_per_job,
                                pipeline.max_versions_per_run,
                            ),
                        ),
                        None,
                        SCHEDULED,
                    )
            _check_in_log(pipeline, delta_log, [job for job in planned if job.mode == CHANGES])
            if pipeline_kind == SCHEDULED and checkpoint.applied_version is None and not adopt:
                verify_adoptable(
                    [pipeline.target_table],
                    pipeline.checkpoint_variable,
                    f"Variable {pipeline.checkpoint_variable}",
                    "adopt_targets",
                )
            jobs += planned
            pipelines[pipeline.name] = PipelinePlan(
                kind=pipeline_kind,
                origin=origin,
                latest=latest,
                source_table_id=delta_log.table_id(),
                applied_before=checkpoint.applied_version,
                target_marks=skeleton.plan_marks(pipeline_kind, [pipeline.target_table]),
            )
    result = CdfPlan(kind=kind, jobs=jobs, pipelines=pipelines, config=config)
    log.info("plan: %s", json.dumps(to_document(result)))
    return result


def _changes(pipeline: CdfPipeline, ranges: list[VersionRange]) -> list[CdfJob]:
    """One job per range; an SCD type 2 pipeline's ranges in one job, since a history is applied in version
    order and the jobs of a run run side by side (lakefeed.cdf.scd2)."""
    if pipeline.scd_type == 2 and ranges:
        ranges = [VersionRange(ranges[0].start, ranges[-1].end)]
    return [CdfJob(pipeline.name, CHANGES, start=r.start, end=r.end) for r in ranges]


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


def _check_in_log(pipeline: CdfPipeline, delta_log: DeltaLog, ranges: list[CdfJob]) -> None:
    """Refuse ranges reaching versions whose commits log cleanup removed: their change data cannot be read."""
    if not ranges:
        return
    oldest = delta_log.commit_versions()[0]
    first = min(job.first for job in ranges)
    if first < oldest:
        raise DataLossError(
            f"pipeline {pipeline.name}: versions {first}..{oldest - 1} of {pipeline.source_table} are no longer in "
            f"its log (removed by log cleanup after delta.logRetentionDuration); their change data cannot be read. "
            f"To go on, {refresh_remedy(pipeline.name)}."
        )


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


def _first_run(pipeline: CdfPipeline, delta_log: DeltaLog, latest: int) -> tuple[list[CdfJob], int | None, str]:
    """With no checkpoint: the change feed from version 0 when it was on from the start (a scheduled run
    from origin 0), else a snapshot at the latest version (a reset)."""
    versions = delta_log.commit_versions()
    if versions and versions[0] == 0 and cdf_enabled(delta_log.table_state(0)[0]):
        ranges = pending_ranges(None, latest, pipeline.versions_per_job, pipeline.max_versions_per_run)
        return _changes(pipeline, ranges), 0, SCHEDULED
    return [CdfJob(pipeline.name, FULL_REFRESH, version=latest)], None, RESET


def _refresh_at(version: int | None, latest: int, pipeline: CdfPipeline) -> list[CdfJob]:
    version = latest if version is None else version
    if version > latest:
        raise ChangeDataError(
            f"ending_version {version} is beyond the latest version {latest} of {pipeline.source_table}"
        )
    return [CdfJob(pipeline.name, FULL_REFRESH, version=version)]


def _version_range(start: int | None, end: int | None, latest: int, pipeline: CdfPipeline) -> list[CdfJob]:
    if start is None or end is None:
        raise ConfigError("a version backfill needs both starting_version and ending_version (inclusive)")
    if end < start:
        raise ConfigError(f"ending_version {end} must not be before starting_version {start}")
    if end > latest:
        raise ChangeDataError(f"ending_version {end} is beyond the latest version {latest} of {pipeline.source_table}")
    return _changes(pipeline, split_range(start, end, pipeline.versions_per_job))


def _committed_in_interval(delta_log: DeltaLog, run: skeleton.RunContext, pipeline: CdfPipeline) -> list[CdfJob]:
    """One of Airflow's Backfill runs re-applies the versions its source committed in the run's data
    interval (by commit timestamp, as DESCRIBE HISTORY shows them)."""
    interval_start, interval_end = run.interval
    start_ms = int(interval_start.timestamp() * 1000)
    versions = delta_log.commit_versions()
    oldest_stamp = delta_log.commit_timestamp(versions[0])
    if versions[0] > 0 and (oldest_stamp is None or start_ms < oldest_stamp):
        raise DataLossError(
            f"pipeline {pipeline.name}: this Backfill run re-applies the versions committed in {run.interval_start} "
            f".. {run.interval_end}, but versions 0..{versions[0] - 1} of {pipeline.source_table} are no longer in "
            f"its log (log cleanup), so the versions of that interval cannot be known or read. "
            f"To go on, {refresh_remedy(pipeline.name)}."
        )
    span = delta_log.versions_committed_between(start_ms, int(interval_end.timestamp() * 1000))
    if span is None:
        if interval_end > datetime.now(UTC):
            raise WindowNotReadyError(
                f"pipeline {pipeline.name}: no version of {pipeline.source_table} is committed in "
                f"{run.interval_start} .. {run.interval_end} yet, and the hour has not ended: versions may still be "
                f"committed in it"
            )
        log.info("pipeline %s: no version committed in %s .. %s", pipeline.name, run.interval_start, run.interval_end)
        return []
    return _changes(pipeline, split_range(*span, pipeline.versions_per_job))


def planned_config(planned: CdfPlan) -> CdfConfig:
    """The configuration the run's plan read (never the Variable as it is now)."""
    return planned.config


def job_arguments(planned: CdfPlan) -> list[list[str]]:
    """``application_args`` of one spark-submit per job (the job's command-line contract), from the plan."""
    config = planned.config
    arguments = []
    # Tombstone retention in the first job of each scheduled pipeline only (lakefeed.tombstones).
    removing = {name for name, seen in planned.pipelines.items() if seen.kind == SCHEDULED}
    for job in planned.jobs:
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


def job_lineage(planned: CdfPlan) -> list[JobLineage]:
    """What each job reads (its pipeline's source table) and writes (its target), from the plan."""
    pipelines = [planned.config.pipeline(job.pipeline) for job in planned.jobs]
    return [JobLineage(CDF, p.checkpoint_variable, [p.source_table], [p.target_table]) for p in pipelines]


def _belongs(summary: CdfSummary, job: CdfJob, pipeline: CdfPipeline) -> bool:
    """The summary is of this job: its range and mode, and the source and target the plan named."""
    from lakefeed.delta import table_location

    if (summary.source, summary.target) != (
        table_location(pipeline.source_table),
        table_location(pipeline.target_table),
    ):
        return False
    if job.mode == FULL_REFRESH:
        return summary.mode == FULL_REFRESH and summary.ending_version == job.last
    return summary.mode == CHANGES and (summary.starting_version, summary.ending_version) == (job.first, job.last)


def commit(
    stores: dict[str, CheckpointStore],
    planned: CdfPlan,
    outputs: skeleton.JobOutputs,
    run_id: str,
    announced_since: AnnouncedSince = nothing_announced,
    storage: skeleton.Storage = skeleton.LOCAL,
) -> dict[str, Any]:
    """Per pipeline: move its checkpoint as the run's kind allows (compare-and-set); report; fail if any job failed.
    Works from the plan's configuration only."""
    config = planned.config
    jobs = planned.jobs
    summaries = outputs.credited(
        jobs, CdfSummary, lambda summary, job: _belongs(summary, job, config.pipeline(job.pipeline))
    )
    voided = _rebuilt_since(jobs, summaries, config, storage)
    summaries = {i: s for i, s in summaries.items() if i not in voided}
    failed = [to_document(job) for i, job in enumerate(jobs) if i not in summaries and i not in voided]
    report = CdfRunReport(kind=planned.kind)
    refusals: list[CheckpointMismatchError] = []
    # A commit step that fails after some pipelines' checkpoints were written leaves no harm: their
    # ``announced`` marks only ever pass entries that Airflow's events name.
    for name, plan_of in planned.pipelines.items():
        with storage.scope(config.pipeline(name).wasb_conn_id):  # its target ledgers with its own connection
            pipeline = config.pipeline(name)
            mine = [(i, job) for i, job in enumerate(jobs) if job.pipeline == name]
            done = {i: summaries[i] for i, _ in mine if i in summaries}
            try:  # a pipeline whose target lost its jobs' commits, or took others' rows, keeps its checkpoint
                skeleton.credit(
                    done,
                    plan_of.kind,
                    plan_of.target_marks,
                    [pipeline.target_table],
                    pipeline.checkpoint_variable,
                    stores[name].where,
                    refresh_remedy(name),
                    adopt_remedy(name),
                )
            except CheckpointMismatchError as exc:
                log.error("pipeline %s: %s", name, exc)
                refusals.append(exc)
                applied = stores[name].load().applied_version
                report.pipelines[name] = CdfPipelineReport(
                    kind=plan_of.kind,
                    jobs=len(mine),
                    refused=str(exc),
                    jobs_failed=skeleton.failed_jobs(mine, {*summaries, *voided}, outputs.refused),
                    applied_before=applied,
                    applied_version=applied,
                    latest_version=plan_of.latest,
                )
                continue
            reported = {
                (pipeline.target_table, s.target_version): (s.inserted, s.updated, s.deleted)
                for s in done.values()
                if (s.committed or s.mode == FULL_REFRESH) and s.target_version is not None
            }
            announcer = skeleton.Announcer(
                [pipeline.target_table],
                pipeline.checkpoint_variable,
                announce=not failed,
                reported=reported,
                announced_since=announced_since,
            )
            before, after = stores[name].update(pipeline_change(plan_of, mine, done, pipeline, run_id, announcer.marks))
            latest = plan_of.latest
            report.pipelines[name] = CdfPipelineReport(
                kind=plan_of.kind,
                jobs=len(mine),
                jobs_failed=skeleton.failed_jobs(mine, {*summaries, *voided}, outputs.refused),
                jobs_voided=[{**to_document(job), "rebuiltAt": voided[i]} for i, job in mine if i in voided],
                versions=[[job.first, job.last] for _, job in mine],
                totals=skeleton.summed(done.values(), CdfSummary),
                applied_before=before.applied_version,
                applied_version=after.applied_version,
                checkpoint_reset=(
                    {"from": before.applied_version, "to": after.applied_version}
                    if plan_of.kind == RESET and not after.same_position(before)
                    else None
                ),
                latest_version=latest,
                lag_versions=(latest - after.applied_version) if after.applied_version is not None else None,
                spark_seconds=skeleton.spark_seconds(done.values()),
            )
            report.targets_changed.extend(cdf_changes(name, pipeline.target_table, announcer.entries))
            report.announcements_deferred += announcer.deferred
    report.spark_seconds = skeleton.spark_seconds(summaries.values())
    positions = json.dumps({name: p.applied_version for name, p in report.pipelines.items()})
    if refusals:
        document = to_document(report)
        log.info("run summary: %s", json.dumps(document, indent=2))
        raise skeleton.RefusedWithReport(" ".join(map(str, refusals)), document)
    return skeleton.finished(report, failed, len(jobs), positions)


def _rebuilt_since(
    jobs: list[CdfJob], summaries: dict[int, CdfSummary], config: CdfConfig, storage: skeleton.Storage
) -> dict[int, int]:
    """Jobs whose work a full refresh of their target replaced after they committed, by job index: the
    target version of the refresh. A refresh (another run, overlapping this one) rebuilds the target from a
    snapshot, so a range applied before it holds nothing past the snapshot's version; crediting it would
    move the checkpoint over versions the rebuilt target never received. Read from the target's log."""
    voided = {}
    for index, summary in summaries.items():
        job = jobs[index]
        if job.mode != CHANGES:
            continue
        pipeline = config.pipeline(job.pipeline)
        with storage.scope(pipeline.wasb_conn_id):
            rebuilt = rebuilt_after(pipeline.target_table, summary.target_version, REFRESH_MARKER)
        target = pipeline.target_table
        if rebuilt is not None:
            log.warning(
                "pipeline %s: a full refresh rebuilt %s at version %d after job %d (versions %d..%d) "
                "committed: not credited, the next run applies them again",
                job.pipeline,
                target,
                rebuilt,
                index,
                job.first,
                job.last,
            )
            voided[index] = rebuilt
    return voided


def pipeline_change(
    plan_of: PipelinePlan,
    mine: list[tuple[int, CdfJob]],
    done: dict[int, CdfSummary],
    pipeline: CdfPipeline,
    run_id: str,
    announced: Callable[[CdfCheckpoint], dict[str, TableMark]],
) -> Callable[[CdfCheckpoint], CdfCheckpoint]:
    """The compare-and-set change of one pipeline's checkpoint (:func:`lakefeed.pipeline.checkpoint_change`)."""
    kind = plan_of.kind
    source_id = next((s.source_table_id for s in done.values() if s.source_table_id), plan_of.source_table_id)

    def advance(checkpoint: CdfCheckpoint, announced: dict[str, TableMark]) -> CdfCheckpoint:
        if kind == RESET and not done:
            return checkpoint.moved(announced=announced)
        if kind == RESET:
            refreshed = max(s.ending_version for s in done.values())
            position = position_after(RESET, None, [], set(), origin=refreshed + 1)
        else:
            ranges = [(job.first, job.last + 1) for _, job in mine]
            stored = None if checkpoint.applied_version is None else checkpoint.applied_version + 1
            completed = {n for n, (i, _) in enumerate(mine) if i in done}
            position = position_after(SCHEDULED, stored, ranges, completed, origin=plan_of.origin)
        applied = None if position is None or position == 0 else position - 1
        marks = current_marks([pipeline.target_table]) if done else checkpoint.targets
        return checkpoint.moved(
            applied_version=applied,
            source=pipeline.source_table,
            source_id=source_id,
            targets=marks,
            keys=tuple(pipeline.keys),
            columns=tuple(pipeline.columns) if pipeline.columns else None,
            announced=announced,
            updated_by=run_id,
        )

    return skeleton.checkpoint_change(
        kind, announced, lambda c: c.source_id, source_id, advance, f"source table of pipeline {pipeline.name}"
    )


@dataclass(frozen=True)
class CdfFeed:
    """Delta change data feeds as a :class:`~lakefeed.pipeline.Feed`, one checkpoint per configured pipeline:
    ``config`` reads the configuration (once, at the plan), ``checkpoints`` opens a pipeline's checkpoint
    store, ``storage`` opens the sources and targets with each pipeline's connection."""

    config: Callable[[], CdfConfig]
    checkpoints: Callable[[CdfPipeline, CdfConfig], CheckpointStore]
    storage: skeleton.Storage = skeleton.LOCAL

    def plan(self, params: Mapping[str, Any], run: skeleton.RunContext) -> skeleton.Plan:
        config = self.config()
        loaded = {p.name: self.checkpoints(p, config).load() for p in config.pipelines}
        with self.storage.scope(config.wasb_conn_id):
            return to_document(plan(config, loaded, dict(params), run, self.storage))

    def job_arguments(self, planned: skeleton.Plan) -> list[list[str]]:
        return job_arguments(skeleton.read_plan(CdfPlan, planned))

    def job_connections(self, planned: skeleton.Plan) -> list[str | None]:
        """The ``wasb`` connection each job reads and writes with: its pipeline's (the top-level one unless
        the pipeline names its own)."""
        plan = skeleton.read_plan(CdfPlan, planned)
        return [plan.config.pipeline(job.pipeline).wasb_conn_id for job in plan.jobs]

    def job_lineage(self, planned: skeleton.Plan) -> list[JobLineage]:
        return job_lineage(skeleton.read_plan(CdfPlan, planned))

    def commit(
        self,
        planned: skeleton.Plan,
        outputs: skeleton.JobOutputs,
        run_id: str,
        announced_since: AnnouncedSince = nothing_announced,
    ) -> skeleton.Summary:
        plan = skeleton.read_plan(CdfPlan, planned)
        stores = {p.name: self.checkpoints(p, plan.config) for p in plan.config.pipelines}
        with self.storage.scope(plan.config.wasb_conn_id):
            return commit(stores, plan, outputs, run_id, announced_since, self.storage)
