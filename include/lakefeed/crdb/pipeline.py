"""The CockroachDB changefeed in the pipeline skeleton (:mod:`lakefeed.pipeline`): plan resolved ranges,
spark-submit arguments, checkpoint commit (:class:`CrdbFeed`).

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

import json
import logging
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.assets import crdb_changes
from lakefeed.checkpoint import TableMark, verify_definition, verify_feed
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import PROJECT_ROOT, CrdbConfig
from lakefeed.crdb import topic_tables
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.run_plan import CrdbPlan, ResolvedRange
from lakefeed.crdb.sink import RESOLVED, list_sink, require_sink
from lakefeed.crdb.summary import CrdbRunReport, CrdbSummary
from lakefeed.delta import table_location
from lakefeed.documents import to_document
from lakefeed.errors import WindowNotReadyError
from lakefeed.ledger import AnnouncedSince, nothing_announced
from lakefeed.lineage import COCKROACH, JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.run_params import crdb_request
from lakefeed.targets import current_marks, tables_under, verify_adoptable, verify_own_writes, verify_targets
from lakefeed.times import format_time

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "cockroach_changefeed_job.py")
ORIGIN = Hlc(0, 0)  # the position before the sink's first file
RESET_REMEDY = skeleton.reset_remedy(
    "cockroach_changefeed_to_delta",
    "it applies the sink again from its first file into the configured target root and records them",
)


def plan(
    config: CrdbConfig,
    checkpoint: CrdbCheckpoint,
    params: dict[str, Any],
    run: skeleton.RunContext,
    where: str = "lakefeed_crdb_checkpoint",
    storage: skeleton.Storage = skeleton.LOCAL,
) -> CrdbPlan:
    """The resolved ranges this run applies; refuses a request that cannot be served or a checkpoint that
    does not belong to this sink and these tables."""
    after, through = (Hlc.parse(stamp) if stamp else None for stamp in crdb_request(params))
    kind = skeleton.run_kind(run, through is not None, bool(params.get("reset_checkpoint")))
    store = storage.feed(config.sink_root, config.wasb_conn_id)
    require_sink(store)
    target_root = root_of(config.target_root)
    if kind == SCHEDULED:
        verify_feed(checkpoint.sink, store.identity, where, RESET_REMEDY)
        verify_definition("target_root", recorded_root(checkpoint), target_root, where, RESET_REMEDY)
        verify_targets(
            checkpoint.targets,
            {f"topic {location.rsplit('/', 1)[-1]}": location for location in checkpoint.targets},
            where,
            RESET_REMEDY,
        )
        if not params.get("adopt_targets"):
            verify_own_writes(checkpoint.targets, config.checkpoint_variable, where, skeleton.ADOPT, RESET_REMEDY)
    if (
        kind != BACKFILL
        and (kind == RESET or (checkpoint.resolved is None and not checkpoint.targets))
        and not params.get("adopt_targets")
    ):
        verify_adoptable(tables_under(config.target_root), config.checkpoint_variable, where, "adopt_targets")
    cursor = Hlc.parse(checkpoint.resolved) if kind == SCHEDULED and checkpoint.resolved else None
    if kind == BACKFILL and run.is_airflow_backfill:
        interval_start, interval_end = run.interval
        since = Hlc(int(interval_start.timestamp() * 1e9), 0)
        resolved = [f.timestamp for f in list_sink(store, Hlc(since.wall - 24 * 3600 * 10**9, 0)) if f.kind == RESOLVED]
        hour_end = Hlc(int(interval_end.timestamp() * 1e9), 0)
        if not resolved or resolved[-1] < hour_end:
            raise WindowNotReadyError(
                f"the changefeed has not resolved this run's hour yet: the newest RESOLVED timestamp in "
                f"{store.root} is {resolved[-1] if resolved else 'none'}, before the hour's end {format_time(interval_end)}"
            )
        before = [r for r in resolved if r <= since]
        inside = [r for r in resolved if r < hour_end]
        start = before[-1] if before else None
        batches = [(start, inside[-1])] if inside and (start is None or inside[-1] > start) else []
    elif kind == BACKFILL:
        listed = {f.timestamp for f in list_sink(store, after or through) if f.kind == RESOLVED}
        missing = [str(stamp) for stamp in (after, through) if stamp is not None and stamp not in listed]
        if missing:
            raise WindowNotReadyError(f"{store.root} has no RESOLVED file at {', '.join(missing)}")
        assert through is not None  # the params name a range: that made it a backfill
        batches = [(after, through)]
    else:
        resolved = [
            f.timestamp
            for f in list_sink(store, cursor)
            if f.kind == RESOLVED and (cursor is None or f.timestamp > cursor)
        ]
        step = config.resolved_per_batch
        chosen = resolved[: step * config.max_batches_per_run]
        ends = chosen[step - 1 :: step] + ([chosen[-1]] if chosen and len(chosen) % step else [])
        starts = [cursor] + ends[:-1]
        batches = list(zip(starts, ends, strict=False))
    newest = max((f.timestamp for f in list_sink(store, cursor) if f.kind == RESOLVED), default=None)
    result = CrdbPlan(
        kind=kind,
        batches=[ResolvedRange(str(a) if a else None, str(t)) for a, t in batches],
        sink=store.identity,
        resolved_before=checkpoint.resolved,
        newest_resolved=str(newest) if newest else None,
        target_root=target_root,
        target_marks=skeleton.plan_marks(kind, tables_under(config.target_root)),
        config=config,
    )
    log.info("plan: %s", json.dumps(to_document(result)))
    return result


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


def planned_config(planned: CrdbPlan) -> CrdbConfig:
    """The configuration the run's plan read (never the Variable as it is now)."""
    return planned.config


def job_arguments(planned: CrdbPlan) -> list[list[str]]:
    """``application_args`` of one spark-submit per batch (the job's command-line contract), from the plan."""
    config = planned.config
    arguments = []
    for index, batch in enumerate(planned.batches):
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
            args += ["--parquet-keys", ";".join(f"{t}={','.join(c)}" for t, c in sorted(config.parquet_keys.items()))]
        if config.quarantine_table:
            args += ["--quarantine-table", config.quarantine_table]
        if config.tombstone_retention_hours is not None and index == 0 and planned.kind == SCHEDULED:
            # the first batch of a scheduled run only (lakefeed.tombstones)
            args += ["--tombstone-retention-hours", str(config.tombstone_retention_hours)]
        arguments.append(args + ["--pipeline-id", config.checkpoint_variable])
    return arguments


def commit(
    store: CheckpointStore,
    planned: CrdbPlan,
    outputs: skeleton.JobOutputs,
    run_id: str,
    announced_since: AnnouncedSince = nothing_announced,
) -> dict[str, Any]:
    """Move the checkpoint as the run's kind allows (compare-and-set); report the run; fail if any batch failed.
    Works from the plan's configuration only."""
    config = planned.config
    batches = planned.batches
    summaries = outputs.credited(
        batches,
        CrdbSummary,
        lambda s, b: (
            (s.after_resolved, s.through_resolved, root_of(s.target_root or ""))
            == (b.after, b.through, planned.target_root)
        ),
    )
    kind = planned.kind
    targets_now = tables_under(config.target_root)
    skeleton.credit(
        summaries, kind, planned.target_marks, targets_now, config.checkpoint_variable, store.where, RESET_REMEDY
    )
    spans = [(Hlc.parse(b.after) if b.after else ORIGIN, Hlc.parse(b.through)) for b in batches]
    topics = sorted({topic for s in summaries.values() for topic in s.topics})
    failed = skeleton.failed_jobs(enumerate(batches), summaries, outputs.refused)
    root = config.target_root.rstrip("/")
    reported = {
        (f"{root}/{topic}", figures.target_version): (figures.inserted, figures.updated, figures.deleted)
        for s in summaries.values()
        for topic, figures in s.topics.items()
        if figures.committed and figures.target_version is not None
    }
    announcer = skeleton.Announcer(
        topic_tables(config.target_root, config.quarantine_table),
        config.checkpoint_variable,
        announce=not failed,
        reported=reported,
        announced_since=announced_since,
        # the checkpoint's targets: <target_root as configured>/<topic>
        table_key=lambda location: f"{root}/{location.rstrip('/').rsplit('/', 1)[-1]}",
    )

    def advance(checkpoint: CrdbCheckpoint, announced: dict[str, TableMark]) -> CrdbCheckpoint:
        stored = Hlc.parse(checkpoint.resolved) if checkpoint.resolved and kind == SCHEDULED else None
        position = position_after(kind, stored, spans, set(summaries), origin=ORIGIN)
        tables = sorted(
            set(checkpoint.targets if kind == SCHEDULED else ()) | {f"{config.target_root}/{topic}" for topic in topics}
        )
        marks = current_marks(tables) if summaries or kind == RESET else checkpoint.targets
        return checkpoint.moved(
            resolved=None if position in (None, ORIGIN) else str(position),
            sink=planned.sink,
            targets=marks,
            target_root=planned.target_root,
            announced=announced,
            updated_by=run_id,
        )

    change = skeleton.checkpoint_change(
        kind, announcer.marks, lambda checkpoint: checkpoint.sink, planned.sink, advance, "sink"
    )
    before, after = store.update(change)
    newest = planned.newest_resolved
    report = CrdbRunReport(
        kind=kind,
        batches=len(batches),
        batches_failed=failed,
        totals=skeleton.summed(summaries.values(), CrdbSummary),
        late_files=[f for s in summaries.values() for f in s.late_files],
        topics=topics,
        resolved_before=before.resolved,
        resolved=after.resolved,
        newest_resolved=newest,
        checkpoint_moved=not after.same_position(before),
        lag_seconds=round((Hlc.parse(newest).wall - Hlc.parse(after.resolved).wall) / 1e9, 3)
        if newest and after.resolved
        else None,
        **skeleton.announced_report(summaries.values(), announcer, crdb_changes(announcer.entries)),
    )
    return skeleton.finished(report, failed, len(batches), after.resolved)


def job_lineage(planned: CrdbPlan) -> list[JobLineage]:
    """What each batch reads (the sink) and writes (a table per topic under the target root, which its
    summary names, and the quarantine table), from the plan."""
    config = planned.config
    quarantine = [config.quarantine_table] if config.quarantine_table else []
    lineage = JobLineage(COCKROACH, config.checkpoint_variable, [config.sink_root], quarantine, config.target_root)
    return [lineage] * len(planned.batches)


STEPS: skeleton.FeedSteps[CrdbConfig, CrdbPlan] = skeleton.FeedSteps(
    plan, commit, CrdbPlan, planned_config, job_arguments, job_lineage
)
