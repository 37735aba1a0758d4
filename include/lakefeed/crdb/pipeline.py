"""The CockroachDB changefeed in the pipeline skeleton (:mod:`lakefeed.pipeline`): plan resolved ranges,
spark-submit arguments, checkpoint commit (:class:`CrdbHooks`, on the sequences of :class:`lakefeed.pipeline.FeedHooks`).

Positions are RESOLVED timestamps (:class:`~lakefeed.crdb.hlc.Hlc`); a range ``(after, through]``
is the data files between the two RESOLVED files. What a run plans depends on its kind
(:mod:`lakefeed.progress`):

- scheduled (and manual runs without params): the RESOLVED files after the checkpoint (from the
  sink's first file when there is none), ``resolved_per_batch`` to a spark-submit, at most
  ``max_batches_per_run``;
- a backfill: exactly ``after_resolved``..``through_resolved`` from the params, or, for one of
  Airflow's Backfill runs, from the last RESOLVED file at or before its data interval's start to the
  last one before its end; never moves the checkpoint;
- a reset (``reset_checkpoint``): from the sink's first file, as if there were no checkpoint.

The plan reads the configuration once and carries it (``config``); the job arguments and the commit step
work from the plan. The checkpoint records the ``target_root`` it was made with: a run refuses a moved
target root, and, with an empty checkpoint, topic tables under it that hold rows the pipeline did not
write (unless the run adopts them: ``adopt_targets``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.assets import crdb_changes
from lakefeed.checkpoint import TableMark, verify_definition
from lakefeed.config import PROJECT_ROOT
from lakefeed.crdb import DAG_ID, KEY, topic_tables
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.config import CrdbConfig
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.params import crdb_request
from lakefeed.crdb.run_plan import CrdbPlan, ResolvedRange
from lakefeed.crdb.sink import require_sink, resolved_stamps
from lakefeed.crdb.summary import CrdbRunReport, CrdbSummary
from lakefeed.delta import table_location
from lakefeed.errors import WindowNotReadyError
from lakefeed.lineage import JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.storage import StoreBase
from lakefeed.targets import current_marks, tables_under, verify_targets
from lakefeed.times import format_time

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "cockroach_changefeed_job.py")
ORIGIN = Hlc(0, 0)  # the position before the sink's first file
DAY = 24 * 3600 * 10**9  # nanoseconds
RESET_REMEDY = skeleton.reset_remedy(
    DAG_ID,
    "it applies the sink again from its first file into the configured target root and records them",
)

Span = tuple[Hlc | None, Hlc | None]  # after_resolved, through_resolved as a run's params name them


@dataclass(frozen=True)
class Resolved:
    """What a run applies: from ``after`` (None: the sink's first file) through each RESOLVED timestamp
    of ``stamps`` in order (a range ``(after, through]`` is the data files between two RESOLVED files)."""

    kind: str
    after: Hlc | None
    stamps: list[Hlc]


Credit = skeleton.Credit[CrdbPlan, CrdbConfig, CrdbSummary]
Outcome = skeleton.Outcome[CrdbConfig, ResolvedRange, CrdbSummary, CrdbCheckpoint]
Planning = skeleton.Planning[Span, CrdbConfig, CrdbConfig, CrdbCheckpoint, StoreBase, Resolved, ResolvedRange]


class CrdbHooks(
    skeleton.OnePipelineHooks[
        Span,
        CrdbConfig,
        CrdbCheckpoint,
        StoreBase,
        Resolved,
        ResolvedRange,
        CrdbSummary,
        CrdbPlan,
        CrdbRunReport,
    ]
):
    """A CockroachDB changefeed's cloud storage sink in the skeleton: RESOLVED ranges, ``resolved_per_batch``
    to a spark-submit. The checkpoint records the ``target_root`` it was made with: a run refuses a moved
    target root."""

    plan_type = CrdbPlan
    checkpoint_type = CrdbCheckpoint
    readiness = "lakefeed.crdb.readiness:ready"
    summary_type = CrdbSummary
    noun = "sink"

    def remedy(self, pipeline: CrdbConfig) -> str:
        return RESET_REMEDY

    def targets(self, pipeline: CrdbConfig) -> list[str]:
        return tables_under(pipeline.target_root)

    # -- the sensor --

    def watch(self, watching: skeleton.Watching[CrdbConfig, CrdbConfig, CrdbCheckpoint]) -> dict[str, Any]:
        config = watching.config
        checkpoint = watching.checkpoint(config)
        verify_recorded(config, checkpoint)
        return {
            "sink_root": config.sink_root,
            "wasb_conn_id": config.wasb_conn_id,
            "resolved": checkpoint.resolved,
            "sink_identity": checkpoint.sink,
            "checkpoint_variable": config.checkpoint_variable,
        }

    # -- plan --

    def request(self, params: Mapping[str, Any], config: CrdbConfig) -> skeleton.Request[Span]:
        after, through = (Hlc.parse(stamp) if stamp else None for stamp in crdb_request(dict(params)))
        return skeleton.Request.of(params, (after, through), through is not None, bool(params.get("reset_checkpoint")))

    def open(
        self, pipeline: CrdbConfig, checkpoint: CrdbCheckpoint, kind: str, where: str, storage: skeleton.Storage
    ) -> StoreBase:
        store = storage.feed(pipeline.sink_root, pipeline.wasb_conn_id)
        require_sink(store)
        return store

    def source_identity(self, source: StoreBase) -> str:
        return source.identity

    def verify_recorded(self, pipeline: CrdbConfig, checkpoint: CrdbCheckpoint) -> None:
        verify_recorded(pipeline, checkpoint)

    def pending(self, found: skeleton.Found[Span, CrdbConfig, CrdbCheckpoint, StoreBase]) -> Resolved:
        source, checkpoint = found.source, found.checkpoint
        cursor = Hlc.parse(checkpoint.resolved) if checkpoint.resolved else None
        return Resolved(SCHEDULED, cursor, resolved_stamps(source, cursor, after=cursor))

    def in_range(self, pipeline: CrdbConfig, source: StoreBase, request: skeleton.Request[Span]) -> Resolved:
        after, through = request.asked
        assert through is not None  # the params name a range: that made it a backfill
        listed = set(resolved_stamps(source, after or through))
        missing = [str(stamp) for stamp in (after, through) if stamp is not None and stamp not in listed]
        if missing:
            raise WindowNotReadyError(f"{source.root} has no RESOLVED file at {', '.join(missing)}")
        return Resolved(BACKFILL, after, [through])

    def in_interval(self, pipeline: CrdbConfig, source: StoreBase, start: datetime, end: datetime) -> Resolved:
        """From the last RESOLVED file at or before the interval's start to the last one before its end."""
        since, hour_end = Hlc(int(start.timestamp() * 1e9), 0), Hlc(int(end.timestamp() * 1e9), 0)
        resolved = resolved_stamps(source, Hlc(since.wall - DAY, 0))
        if not resolved or resolved[-1] < hour_end:
            raise WindowNotReadyError(
                f"the changefeed has not resolved this run's hour yet: the newest RESOLVED timestamp in "
                f"{source.root} is {resolved[-1] if resolved else 'none'}, before the hour's end {format_time(end)}"
            )
        before = [r for r in resolved if r <= since]
        inside = [r for r in resolved if r < hour_end]
        after = before[-1] if before else None
        return Resolved(BACKFILL, after, [inside[-1]] if inside and (after is None or inside[-1] > after) else [])

    def from_origin(self, pipeline: CrdbConfig, source: StoreBase, request: skeleton.Request[Span]) -> Resolved:
        return Resolved(RESET, None, resolved_stamps(source))

    def adoptable(self, pipeline: CrdbConfig, checkpoint: CrdbCheckpoint, ready: Resolved) -> list[str]:
        first = checkpoint.resolved is None and not checkpoint.targets
        return self.targets(pipeline) if ready.kind == RESET or first else []

    def batch(self, pipeline: CrdbConfig, ready: Resolved) -> list[ResolvedRange]:
        """``resolved_per_batch`` RESOLVED files to a job, at most ``max_batches_per_run`` jobs."""
        step = pipeline.resolved_per_batch
        chosen = ready.stamps if ready.kind == BACKFILL else ready.stamps[: step * pipeline.max_batches_per_run]
        ends = chosen[step - 1 :: step] + ([chosen[-1]] if chosen and len(chosen) % step else [])
        starts = [ready.after] + ends[:-1]
        return [ResolvedRange(str(a) if a else None, str(t)) for a, t in zip(starts, ends, strict=False)]

    def planned(self, planning: Planning) -> CrdbPlan:
        (part,), kind, config = planning.parts, planning.kind, planning.config
        cursor = part.ready.after if kind == SCHEDULED else None
        newest = max(resolved_stamps(part.source, cursor), default=None)
        return CrdbPlan(
            kind=kind,
            batches=part.jobs,
            sink=part.source.identity,
            resolved_before=part.checkpoint.resolved,
            newest_resolved=str(newest) if newest else None,
            target_root=root_of(config.target_root),
            target_marks=part.target_marks,
            config=config,
        )

    def arguments(self, plan: CrdbPlan) -> list[list[str]]:
        config = plan.config
        arguments = []
        for index, batch in enumerate(plan.batches):
            args = ["--sink-root", config.sink_root, "--target-root", config.target_root]
            if batch.after:
                args += ["--after-resolved", batch.after]
            args += [
                "--through-resolved",
                batch.through,
                "--late-file-lookback-hours",
                str(config.late_file_lookback_hours),
            ]
            if config.parquet_keys:
                keys = ";".join(f"{t}={','.join(c)}" for t, c in sorted(config.parquet_keys.items()))
                args += ["--parquet-keys", keys]
            if config.quarantine_table:
                args += ["--quarantine-table", config.quarantine_table]
            if config.tombstone_retention_hours is not None and index == 0 and plan.kind == SCHEDULED:
                # the first batch of a scheduled run only (lakefeed.tombstones)
                args += ["--tombstone-retention-hours", str(config.tombstone_retention_hours)]
            arguments.append(args + ["--pipeline-id", config.checkpoint_variable])
        return arguments

    def lineage(self, plan: CrdbPlan) -> list[JobLineage]:
        """What each batch reads (the sink) and writes (a table per topic under the target root, which its
        summary names, and the quarantine table)."""
        config = plan.config
        quarantine = [config.quarantine_table] if config.quarantine_table else []
        lineage = JobLineage(KEY, config.checkpoint_variable, [config.sink_root], quarantine, config.target_root)
        return [lineage] * len(plan.batches)

    # -- commit --

    def belongs(self, plan: CrdbPlan, summary: CrdbSummary, job: ResolvedRange) -> bool:
        """The summary is of this range, written under the target root the plan named."""
        return (summary.after_resolved, summary.through_resolved, root_of(summary.target_root or "")) == (
            job.after,
            job.through,
            plan.target_root,
        )

    def announcing(self, credit: Credit) -> skeleton.Announcing:
        plan, done = credit.plan, credit.done
        config = plan.config
        reported = {
            (config.topic_table(topic), figures.target_version): (figures.inserted, figures.updated, figures.deleted)
            for s in done.values()
            for topic, figures in s.topics.items()
            if figures.committed and figures.target_version is not None
        }
        return skeleton.Announcing(
            topic_tables(config.target_root, config.quarantine_table),
            reported,
            crdb_changes,
            # a checkpoint's target as the ledger's tables name it
            lambda location: config.topic_table(location.rstrip("/").rsplit("/", 1)[-1]),
        )

    def advance(self, credit: Credit, checkpoint: CrdbCheckpoint, announced: dict[str, TableMark]) -> CrdbCheckpoint:
        plan, done = credit.plan, credit.done
        kind, config = plan.kind, plan.config
        stored = Hlc.parse(checkpoint.resolved) if checkpoint.resolved and kind == SCHEDULED else None
        spans = [(Hlc.parse(b.after) if b.after else ORIGIN, Hlc.parse(b.through)) for b in plan.batches]
        position = position_after(kind, stored, spans, set(done), origin=ORIGIN)
        topics = {topic for s in done.values() for topic in s.topics}
        tables = sorted(
            set(checkpoint.targets if kind == SCHEDULED else ()) | {config.topic_table(topic) for topic in topics}
        )
        marks = current_marks(tables) if done or kind == RESET else checkpoint.targets
        return checkpoint.moved(
            resolved=None if position in (None, ORIGIN) else str(position),
            sink=plan.sink,
            targets=marks,
            target_root=plan.target_root,
            announced=announced,
            updated_by=credit.run_id,
        )

    def one_report(self, plan: CrdbPlan, outcome: Outcome, common: dict[str, Any]) -> CrdbRunReport:
        done, after, newest = outcome.done, outcome.after, plan.newest_resolved
        return CrdbRunReport(
            **common,
            late_files=[f for s in done.values() for f in s.late_files],
            topics=sorted({topic for s in done.values() for topic in s.topics}),
            resolved_before=outcome.before.resolved,
            resolved=after.resolved,
            newest_resolved=newest,
            lag_seconds=round((Hlc.parse(newest).wall - Hlc.parse(after.resolved).wall) / 1e9, 3)
            if newest and after.resolved
            else None,
        )

    def position(self, checkpoint: CrdbCheckpoint) -> str | None:
        return checkpoint.resolved


def verify_recorded(config: CrdbConfig, checkpoint: CrdbCheckpoint) -> None:
    """Refuse a target root other than the checkpoint's, and topic tables dropped, recreated or restored
    behind it (the plan and the sensor)."""
    where = f"Variable {config.checkpoint_variable}"
    verify_definition("target_root", recorded_root(checkpoint), root_of(config.target_root), where, RESET_REMEDY)
    topics = {f"topic {location.rsplit('/', 1)[-1]}": location for location in checkpoint.targets}
    verify_targets(checkpoint.targets, topics, where, RESET_REMEDY)


def root_of(location: str) -> str:
    """A target root as checkpoints record it: absolute, without a trailing slash."""
    return table_location(location).rstrip("/") or "/"


def recorded_root(checkpoint: CrdbCheckpoint) -> str | None:
    """The target root a checkpoint was made with; for a checkpoint written before it was recorded, the
    folder holding its topic tables."""
    if checkpoint.target_root is not None:
        return checkpoint.target_root
    parents = {root_of(location.rsplit("/", 1)[0]) for location in checkpoint.targets}
    return parents.pop() if len(parents) == 1 else None


HOOKS = CrdbHooks()
