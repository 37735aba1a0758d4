"""The blob change feed in the pipeline skeleton (:mod:`lakefeed.pipeline`): plan, spark-submit arguments,
checkpoint commit (:class:`BlobFeed`).

Which windows a run plans depends on its kind (:mod:`lakefeed.progress`):

- scheduled (and manual runs without params): from the checkpoint's watermark,
  or the feed's first window when there is none, up to ``lastConsumable - 1h``;
- a backfill: exactly the windows of the ``window_start``/``window_end``
  params, or, for a run of Airflow's Backfill, the grid windows that start in
  the run's data interval; never moves the checkpoint;
- a reset (``reset_checkpoint``): from the feed's first window, as if there were
  no checkpoint; the checkpoint is replaced, recording the feed and targets anew.

The plan reads the configuration once and carries it (``config``); the job arguments, the Spark
settings and the commit step work from the plan, so an edit of the Variable during a run takes effect
with the next run. A scheduled run refuses to go on past segments that retention removed before they
were read (:mod:`lakefeed.blob.retention`) unless the run acknowledges the loss
(``acknowledge_data_loss``), and a first run refuses targets that hold rows it did not write unless it
adopts them (``adopt_targets``).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.assets import blob_changes
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.feed import SEGMENTS_JSON, ChangeFeed
from lakefeed.blob.retention import next_segment, retention_gap
from lakefeed.blob.run_plan import BlobPlan
from lakefeed.blob.schedule import (
    Batch,
    backfill_windows,
    batches_of,
    check_last_consumable,
    first_window,
    interval_windows,
    pending_windows,
)
from lakefeed.blob.summary import BlobRunReport, RunSummary
from lakefeed.blob.timegrid import HOUR
from lakefeed.checkpoint import TableMark, verify_feed
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import PROJECT_ROOT, BlobPipelineConfig
from lakefeed.documents import to_document
from lakefeed.errors import DataLossError, FeedError
from lakefeed.ledger import AnnouncedSince, nothing_announced
from lakefeed.lineage import BLOB, JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.run_params import blob_request
from lakefeed.targets import current_marks, verify_adoptable, verify_own_writes, verify_targets
from lakefeed.times import format_time, parse_time

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "blob_changefeed_job.py")
SEGMENT_LISTING_AHEAD = 24 * HOUR  # how far past its windows a plan lists segments for the checkpoint's nextSegment
RESET_REMEDY = skeleton.reset_remedy(
    "blob_changefeed_to_delta",
    "it ingests again from the feed's first segment (or start_from) into the configured targets and records them",
)


def plan(
    config: BlobPipelineConfig,
    checkpoint: BlobCheckpoint,
    params: dict[str, Any],
    run: skeleton.RunContext,
    where: str = "lakefeed_blob_checkpoint",
    storage: skeleton.Storage = skeleton.LOCAL,
) -> BlobPlan:
    """Which batches of windows this run submits; refuses (a :class:`~lakefeed.errors.Refusal`) a request
    that cannot be served, a checkpoint that does not belong to this feed and these targets, targets that
    hold rows this pipeline did not write while the checkpoint is empty, and segments lost to retention."""
    window_range = blob_request(params)
    kind = skeleton.run_kind(run, window_range is not None, bool(params.get("reset_checkpoint")))
    acknowledge_loss, adopt = bool(params.get("acknowledge_data_loss")), bool(params.get("adopt_targets"))
    store = storage.feed(config.feed_root, config.wasb_conn_id)
    feed = ChangeFeed(store)
    last_consumable = feed.last_consumable()
    first_segment = feed.first_segment_start()
    if first_segment is None:
        raise FeedError(f"{store.root} has no segments yet")
    grid_minute = first_segment.minute
    targets = {"events": config.events_table, "state": config.state_table}
    if kind != RESET:
        check_last_consumable(last_consumable, checkpoint.last_consumable, store.url(SEGMENTS_JSON))
    if kind == SCHEDULED:
        verify_feed(checkpoint.feed, store.identity, where, RESET_REMEDY)
        verify_targets(checkpoint.targets, targets, where, RESET_REMEDY)
        if not adopt:
            verify_own_writes(checkpoint.targets, config.checkpoint_variable, where, skeleton.ADOPT, RESET_REMEDY)
    if kind != BACKFILL and (kind == RESET or checkpoint.watermark is None) and not adopt:
        verify_adoptable(list(targets.values()), config.checkpoint_variable, where, "adopt_targets")
    start_from = parse_time(config.start_from) if config.start_from else None
    origin = first_window(feed, None, start_from)
    data_loss: dict[str, Any] | None = None
    if kind == BACKFILL and run.is_airflow_backfill:
        windows = interval_windows(grid_minute, *run.interval, last_consumable)
    elif kind == BACKFILL:
        assert window_range is not None  # the params name a range: that made it a backfill
        windows = backfill_windows(grid_minute, *window_range, last_consumable)
    else:
        first = checkpoint.watermark if kind == SCHEDULED and checkpoint.watermark else origin
        if kind == SCHEDULED and checkpoint.watermark:
            gap = retention_gap(
                checkpoint.watermark,
                checkpoint.next_segment,
                checkpoint.segments_listed_through,
                first_segment,
                last_consumable,
            )
            if gap is not None and not acknowledge_loss:
                raise DataLossError(gap.message(store.root, where))
            if gap is not None:
                log.warning("acknowledged data loss: %s", gap.message(store.root, where))
                data_loss = {**gap.describe(), "acknowledgedBy": run.run_id}
                first = gap.resume_window
        windows = pending_windows(first, last_consumable, config.max_windows_per_run)
    batches = batches_of(windows, config.windows_per_batch)
    segment_marks, listed_through = (
        _segment_marks(
            feed,
            kind,
            data_loss["resumeWindow"] if data_loss else checkpoint.watermark,
            origin,
            batches,
            last_consumable,
        )
        if kind != BACKFILL
        else ({}, None)
    )
    result = BlobPlan(
        kind=kind,
        batches=batches,
        windows=len(windows),
        last_consumable=last_consumable,
        feed=store.identity,
        grid_minute=grid_minute,
        origin=origin,
        watermark=checkpoint.watermark,
        targets=sorted(targets.values()),
        target_tables=targets,
        data_loss=data_loss,
        acknowledge_data_loss=acknowledge_loss,
        target_marks=skeleton.plan_marks(kind, sorted(targets.values())),
        segment_marks=segment_marks,
        segments_listed_through=listed_through,
        config=config,
    )
    log.info("plan: %s", json.dumps(to_document(result)))
    return result


def _segment_marks(
    feed: ChangeFeed,
    kind: str,
    watermark: datetime | str | None,
    origin: datetime | None,
    batches: list[Batch],
    last_consumable: datetime,
) -> tuple[dict[str, str | None], datetime | None]:
    """For each watermark the commit step may set (where the run starts, and each batch's end), the oldest
    segment the windows from there read (:func:`lakefeed.blob.retention.next_segment`), from one listing of
    the feed up to a day past the run's windows, and how far that listing went; the checkpoint records them
    for the next plan's retention check."""
    start = parse_time(watermark) if isinstance(watermark, str) else watermark
    start = start if kind == SCHEDULED and start is not None else origin
    if start is None:
        return {}, None
    positions = [start] + [b.end for b in batches]
    horizon = min(last_consumable, max(positions) + SEGMENT_LISTING_AHEAD)
    starts = [s for s in feed.segment_starts_between((start - HOUR).date(), horizon.date()) if s <= horizon]
    return {format_time(p): _time_text(next_segment(p, starts)) for p in positions}, horizon


def _time_text(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def planned_config(planned: BlobPlan) -> BlobPipelineConfig:
    """The configuration the run's plan read (never the Variable as it is now)."""
    return planned.config


def job_arguments(planned: BlobPlan) -> list[list[str]]:
    """``application_args`` of one spark-submit per batch (the job's command-line contract), from the plan."""
    config = planned.config
    loss = ["--acknowledge-data-loss"] if planned.acknowledge_data_loss else []
    if config.change_feed_retention_days is not None:
        loss += ["--change-feed-retention-days", str(config.change_feed_retention_days)]
    return [
        [
            "--feed-root",
            config.feed_root,
            "--window-start",
            format_time(batch.start),
            "--window-end",
            format_time(batch.end),
            "--events-table",
            config.events_table,
            "--state-table",
            config.state_table,
            "--decoder",
            config.decoder,
            *loss,
            "--pipeline-id",
            config.checkpoint_variable,
        ]
        for batch in planned.batches
    ]


def _windows_of(batch: Batch) -> list[str]:
    return [format_time(batch.start + i * HOUR) for i in range(batch.windows)]


def _belongs(summary: RunSummary, batch: Batch, targets: dict[str, str]) -> bool:
    """The summary is of this batch: its windows, and the events and state tables the plan named."""
    from lakefeed.delta import table_location

    return summary.windows == _windows_of(batch) and (summary.events_table, summary.state_table) == (
        table_location(targets["events"]),
        table_location(targets["state"]),
    )


def commit(
    store: CheckpointStore,
    planned: BlobPlan,
    outputs: skeleton.JobOutputs,
    run_id: str,
    announced_since: AnnouncedSince = nothing_announced,
) -> dict[str, Any]:
    """Move the checkpoint as the run's kind allows (compare-and-set); report the run; fail if any batch failed."""
    batches = planned.batches
    summaries = outputs.credited(
        batches, RunSummary, lambda summary, batch: _belongs(summary, batch, planned.target_tables)
    )
    pipeline_id = planned.config.checkpoint_variable
    kind = planned.kind
    skeleton.credit(summaries, kind, planned.target_marks, planned.targets, pipeline_id, store.where, RESET_REMEDY)
    last_consumable = planned.last_consumable
    origin = planned.origin
    data_loss = planned.data_loss
    resume = parse_time(data_loss["resumeWindow"]) if data_loss else None
    segment_marks = planned.segment_marks
    failed = skeleton.failed_jobs(enumerate(batches), summaries, outputs.refused)
    events, state = planned.target_tables["events"], planned.target_tables["state"]
    reported = {}
    for summary in summaries.values():
        if summary.events_inserted and summary.events_table_version is not None:
            reported[(events, summary.events_table_version)] = (summary.events_inserted, 0, 0)
        if (summary.state_inserted or summary.state_updated) and summary.state_table_version is not None:
            reported[(state, summary.state_table_version)] = (summary.state_inserted, summary.state_updated, 0)
    announcer = skeleton.Announcer(
        planned.targets,
        pipeline_id,
        announce=not failed,
        reported=reported,
        announced_since=announced_since,
    )

    def advance(checkpoint: BlobCheckpoint, announced: dict[str, TableMark]) -> BlobCheckpoint:
        stored = checkpoint.watermark
        if resume is not None and kind == SCHEDULED and (stored is None or stored < resume):
            stored = resume  # the windows before it were acknowledged as lost: the run starts there
        watermark = position_after(kind, stored, [(b.start, b.end) for b in batches], set(summaries), origin=origin)
        seen = (
            last_consumable
            if kind == RESET or checkpoint.last_consumable is None
            else max(last_consumable, checkpoint.last_consumable)
        )
        marks = current_marks(planned.targets) if summaries or kind == RESET else checkpoint.targets
        retention = {}
        if watermark is not None and format_time(watermark) in segment_marks:
            recorded = segment_marks[format_time(watermark)]
            retention = {
                "next_segment": parse_time(recorded) if recorded else None,
                "segments_listed_through": planned.segments_listed_through,
            }
        elif watermark != checkpoint.watermark:
            retention = {"next_segment": None, "segments_listed_through": None}  # not listed for this watermark
        return checkpoint.moved(
            watermark=watermark,
            last_consumable=seen,
            feed=planned.feed,
            grid_minute=planned.grid_minute,
            targets=marks,
            announced=announced,
            updated_by=run_id,
            **retention,
        )

    change = skeleton.checkpoint_change(
        kind, announcer.marks, lambda checkpoint: checkpoint.feed, planned.feed, advance
    )
    before, after = store.update(change)
    report = BlobRunReport(
        kind=kind,
        windows_planned=planned.windows,
        batches=len(batches),
        batches_failed=failed,
        totals=skeleton.summed(summaries.values(), RunSummary),
        last_consumable=last_consumable,
        grid_minute=planned.grid_minute,
        watermark_before=before.watermark,
        watermark=after.watermark,
        checkpoint_moved=not after.same_position(before),
        windows_applied=sorted({w for s in summaries.values() for w in s.windows}),
        data_loss_acknowledged=data_loss,
        missing_shards=[shard for i in sorted(summaries) for shard in summaries[i].missing_shards],
        lag_hours=((last_consumable - after.watermark) / HOUR) if after.watermark else None,
        **skeleton.announced_report(summaries.values(), announcer, blob_changes(announcer.entries, events, state)),
    )
    return skeleton.finished(report, failed, len(batches), _time_text(after.watermark))


def job_lineage(planned: BlobPlan) -> list[JobLineage]:
    """What each batch reads (the feed) and writes (the events and state tables), from the plan."""
    config = planned.config
    lineage = JobLineage(
        BLOB, config.checkpoint_variable, [config.feed_root], [config.events_table, config.state_table]
    )
    return [lineage] * len(planned.batches)


STEPS: skeleton.FeedSteps[BlobPipelineConfig, BlobPlan] = skeleton.FeedSteps(
    plan, commit, BlobPlan, planned_config, job_arguments, job_lineage
)
