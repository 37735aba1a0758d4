"""The blob change feed in the pipeline skeleton (:mod:`lakefeed.pipeline`): plan, spark-submit arguments,
checkpoint commit (:class:`BlobHooks`, on the sequences of :class:`lakefeed.pipeline.FeedHooks`).

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

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.assets import blob_changes
from lakefeed.blob import DAG_ID, KEY
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.blob.feed import SEGMENTS_JSON, ChangeFeed
from lakefeed.blob.params import blob_request
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
from lakefeed.checkpoint import TableMark
from lakefeed.config import PROJECT_ROOT
from lakefeed.delta import table_location
from lakefeed.errors import DataLossError, FeedError
from lakefeed.lineage import JobLineage
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.targets import current_marks, verify_targets
from lakefeed.times import format_time, parse_time

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "blob_changefeed_job.py")
SEGMENT_LISTING_AHEAD = 24 * HOUR  # how far past its windows a plan lists segments for the checkpoint's nextSegment
RESET_REMEDY = skeleton.reset_remedy(
    DAG_ID,
    "it ingests again from the feed's first segment (or start_from) into the configured targets and records them",
)

Window = tuple[datetime, datetime] | None  # the range a run's params name


@dataclass(frozen=True)
class FeedSeen:
    """What a plan read of the change feed: its store, lastConsumable, the grid and where a first run starts."""

    feed: ChangeFeed
    root: str
    identity: str
    last_consumable: datetime
    first_segment: datetime
    grid_minute: int
    origin: datetime | None  # the feed's first window (or start_from's)


@dataclass(frozen=True)
class Windows:
    """The hour windows a run applies, in order, and the gap of lost segments it acknowledged."""

    kind: str
    windows: list[datetime]
    data_loss: dict[str, Any] | None = None


Credit = skeleton.Credit[BlobPlan, BlobPipelineConfig, RunSummary]
Outcome = skeleton.Outcome[BlobPipelineConfig, Batch, RunSummary, BlobCheckpoint]
Planning = skeleton.Planning[Window, BlobPipelineConfig, BlobPipelineConfig, BlobCheckpoint, FeedSeen, Windows, Batch]


class BlobHooks(
    skeleton.OnePipelineHooks[
        Window,
        BlobPipelineConfig,
        BlobCheckpoint,
        FeedSeen,
        Windows,
        Batch,
        RunSummary,
        BlobPlan,
        BlobRunReport,
    ]
):
    """The blob change feed in the skeleton: windows of ``lastConsumable``'s grid, batched per spark-submit.
    A scheduled run refuses to go on past segments that retention removed before they were read
    (:mod:`lakefeed.blob.retention`) unless the run acknowledges the loss (``acknowledge_data_loss``)."""

    plan_type = BlobPlan
    checkpoint_type = BlobCheckpoint
    readiness = "lakefeed.blob.readiness:ready"
    summary_type = RunSummary

    def remedy(self, pipeline: BlobPipelineConfig) -> str:
        return RESET_REMEDY

    def targets(self, pipeline: BlobPipelineConfig) -> list[str]:
        return sorted(_target_tables(pipeline).values())

    # -- the sensor --

    def watch(
        self, watching: skeleton.Watching[BlobPipelineConfig, BlobPipelineConfig, BlobCheckpoint]
    ) -> dict[str, Any]:
        from lakefeed.blob import readiness

        config = watching.config
        checkpoint = watching.checkpoint(config)
        verify_recorded(config, checkpoint)
        return readiness.watched(config, checkpoint)

    def check_params(
        self,
        params: Mapping[str, Any],
        config: BlobPipelineConfig,
        checkpoints: Callable[[BlobPipelineConfig], BlobCheckpoint],
    ) -> None:
        """Also on the feed's hourly grid, as the checkpoint recorded it."""
        blob_request(dict(params), checkpoints(config).grid_minute)

    # -- plan --

    def request(self, params: Mapping[str, Any], config: BlobPipelineConfig) -> skeleton.Request[Window]:
        window_range = blob_request(dict(params))
        return skeleton.Request.of(params, window_range, window_range is not None, bool(params.get("reset_checkpoint")))

    def open(
        self, pipeline: BlobPipelineConfig, checkpoint: BlobCheckpoint, kind: str, where: str, storage: skeleton.Storage
    ) -> FeedSeen:
        store = storage.feed(pipeline.feed_root, pipeline.wasb_conn_id)
        feed = ChangeFeed(store)
        last_consumable = feed.last_consumable()
        first_segment = feed.first_segment_start()
        if first_segment is None:
            raise FeedError(f"{store.root} has no segments yet")
        if kind != RESET:
            check_last_consumable(last_consumable, checkpoint.last_consumable, store.url(SEGMENTS_JSON))
        start_from = parse_time(pipeline.start_from) if pipeline.start_from else None
        origin = first_window(feed, None, start_from)
        return FeedSeen(feed, store.root, store.identity, last_consumable, first_segment, first_segment.minute, origin)

    def source_identity(self, source: FeedSeen) -> str:
        return source.identity

    def verify_recorded(self, pipeline: BlobPipelineConfig, checkpoint: BlobCheckpoint) -> None:
        verify_recorded(pipeline, checkpoint)

    def pending(self, found: skeleton.Found[Window, BlobPipelineConfig, BlobCheckpoint, FeedSeen]) -> Windows:
        pipeline, source, checkpoint = found.pipeline, found.source, found.checkpoint
        first, data_loss = checkpoint.watermark or source.origin, None
        if checkpoint.watermark:
            gap = retention_gap(
                checkpoint.watermark,
                checkpoint.next_segment,
                checkpoint.segments_listed_through,
                source.first_segment,
                source.last_consumable,
            )
            where = f"Variable {pipeline.checkpoint_variable}"
            if gap is not None and not found.request.acknowledge_data_loss:
                raise DataLossError(gap.message(source.root, where))
            if gap is not None:
                log.warning("acknowledged data loss: %s", gap.message(source.root, where))
                data_loss = {**gap.describe(), "acknowledgedBy": found.run.run_id}
                first = gap.resume_window
        return Windows(
            SCHEDULED, pending_windows(first, source.last_consumable, pipeline.max_windows_per_run), data_loss
        )

    def in_range(self, pipeline: BlobPipelineConfig, source: FeedSeen, request: skeleton.Request[Window]) -> Windows:
        assert request.asked is not None  # the params name a range: that made it a backfill
        return Windows(BACKFILL, backfill_windows(source.grid_minute, *request.asked, source.last_consumable))

    def in_interval(self, pipeline: BlobPipelineConfig, source: FeedSeen, start: datetime, end: datetime) -> Windows:
        return Windows(BACKFILL, interval_windows(source.grid_minute, start, end, source.last_consumable))

    def from_origin(self, pipeline: BlobPipelineConfig, source: FeedSeen, request: skeleton.Request[Window]) -> Windows:
        return Windows(RESET, pending_windows(source.origin, source.last_consumable, pipeline.max_windows_per_run))

    def adoptable(self, pipeline: BlobPipelineConfig, checkpoint: BlobCheckpoint, ready: Windows) -> list[str]:
        return self.targets(pipeline) if ready.kind == RESET or checkpoint.watermark is None else []

    def batch(self, pipeline: BlobPipelineConfig, ready: Windows) -> list[Batch]:
        return batches_of(ready.windows, pipeline.windows_per_batch)

    def planned(self, planning: Planning) -> BlobPlan:
        (part,), kind, config = planning.parts, planning.kind, planning.config
        seen, ready, watermark = part.source, part.ready, part.checkpoint.watermark
        start = parse_time(ready.data_loss["resumeWindow"]) if ready.data_loss else watermark
        segment_marks, listed_through = (
            _segment_marks(
                seen.feed, start if kind == SCHEDULED and start else seen.origin, part.jobs, seen.last_consumable
            )
            if kind != BACKFILL
            else ({}, None)
        )
        return BlobPlan(
            kind=kind,
            batches=part.jobs,
            windows=len(ready.windows),
            last_consumable=seen.last_consumable,
            feed=seen.identity,
            grid_minute=seen.grid_minute,
            origin=seen.origin,
            watermark=watermark,
            targets=self.targets(config),
            target_tables=_target_tables(config),
            data_loss=ready.data_loss,
            acknowledge_data_loss=planning.request.acknowledge_data_loss,
            target_marks=part.target_marks,
            segment_marks=segment_marks,
            segments_listed_through=listed_through,
            config=config,
        )

    def arguments(self, plan: BlobPlan) -> list[list[str]]:
        config = plan.config
        loss = ["--acknowledge-data-loss"] if plan.acknowledge_data_loss else []
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
            for batch in plan.batches
        ]

    def lineage(self, plan: BlobPlan) -> list[JobLineage]:
        """What each batch reads (the feed) and writes (the events and state tables)."""
        config = plan.config
        lineage = JobLineage(
            KEY, config.checkpoint_variable, [config.feed_root], [config.events_table, config.state_table]
        )
        return [lineage] * len(plan.batches)

    # -- commit --

    def belongs(self, plan: BlobPlan, summary: RunSummary, job: Batch) -> bool:
        """The summary is of this batch: its windows, and the events and state tables the plan named."""
        tables = plan.target_tables
        return summary.windows == windows_of(job) and (summary.events_table, summary.state_table) == (
            table_location(tables["events"]),
            table_location(tables["state"]),
        )

    def announcing(self, credit: Credit) -> skeleton.Announcing:
        plan, done = credit.plan, credit.done
        events, state = plan.target_tables["events"], plan.target_tables["state"]
        reported = {}
        for summary in done.values():
            if summary.events_inserted and summary.events_table_version is not None:
                reported[(events, summary.events_table_version)] = (summary.events_inserted, 0, 0)
            if (summary.state_inserted or summary.state_updated) and summary.state_table_version is not None:
                reported[(state, summary.state_table_version)] = (summary.state_inserted, summary.state_updated, 0)
        return skeleton.Announcing(plan.targets, reported, lambda entries: blob_changes(entries, events, state))

    def advance(self, credit: Credit, checkpoint: BlobCheckpoint, announced: dict[str, TableMark]) -> BlobCheckpoint:
        plan, done = credit.plan, credit.done
        kind, stored = plan.kind, checkpoint.watermark
        resume = parse_time(plan.data_loss["resumeWindow"]) if plan.data_loss else None
        if resume is not None and kind == SCHEDULED and (stored is None or stored < resume):
            stored = resume  # the windows before it were acknowledged as lost: the run starts there
        spans = [(b.start, b.end) for b in plan.batches]
        watermark = position_after(kind, stored, spans, set(done), origin=plan.origin)
        seen = (
            plan.last_consumable
            if kind == RESET or checkpoint.last_consumable is None
            else max(plan.last_consumable, checkpoint.last_consumable)
        )
        marks = current_marks(plan.targets) if done or kind == RESET else checkpoint.targets
        retention: dict[str, Any] = {}
        if watermark is not None and format_time(watermark) in plan.segment_marks:
            recorded = plan.segment_marks[format_time(watermark)]
            retention = {
                "next_segment": parse_time(recorded) if recorded else None,
                "segments_listed_through": plan.segments_listed_through,
            }
        elif watermark != checkpoint.watermark:
            retention = {"next_segment": None, "segments_listed_through": None}  # not listed for this watermark
        return checkpoint.moved(
            watermark=watermark,
            last_consumable=seen,
            feed=plan.feed,
            grid_minute=plan.grid_minute,
            targets=marks,
            announced=announced,
            updated_by=credit.run_id,
            **retention,
        )

    def one_report(self, plan: BlobPlan, outcome: Outcome, common: dict[str, Any]) -> BlobRunReport:
        done, before, after = outcome.done, outcome.before, outcome.after
        return BlobRunReport(
            **common,
            windows_planned=plan.windows,
            last_consumable=plan.last_consumable,
            grid_minute=plan.grid_minute,
            watermark_before=before.watermark,
            watermark=after.watermark,
            windows_applied=sorted({w for s in done.values() for w in s.windows}),
            data_loss_acknowledged=plan.data_loss,
            missing_shards=[shard for i in sorted(done) for shard in done[i].missing_shards],
            lag_hours=((plan.last_consumable - after.watermark) / HOUR) if after.watermark else None,
        )

    def position(self, checkpoint: BlobCheckpoint) -> str | None:
        return format_time(checkpoint.watermark) if checkpoint.watermark else None


def verify_recorded(config: BlobPipelineConfig, checkpoint: BlobCheckpoint) -> None:
    """Refuse targets dropped, recreated or restored behind the checkpoint (the plan and the sensor)."""
    where = f"Variable {config.checkpoint_variable}"
    verify_targets(checkpoint.targets, _target_tables(config), where, RESET_REMEDY)


def _target_tables(config: BlobPipelineConfig) -> dict[str, str]:
    return {"events": config.events_table, "state": config.state_table}


def _segment_marks(
    feed: ChangeFeed, start: datetime | None, batches: list[Batch], last_consumable: datetime
) -> tuple[dict[str, str | None], datetime | None]:
    """For each watermark the commit step may set (where the run starts, and each batch's end), the oldest
    segment the windows from there read (:func:`lakefeed.blob.retention.next_segment`), from one listing of
    the feed up to a day past the run's windows, and how far that listing went; the checkpoint records them
    for the next plan's retention check."""
    if start is None:
        return {}, None
    positions = [start] + [b.end for b in batches]
    horizon = min(last_consumable, max(positions) + SEGMENT_LISTING_AHEAD)
    starts = [s for s in feed.segment_starts_between((start - HOUR).date(), horizon.date()) if s <= horizon]
    return {format_time(p): _time_text(next_segment(p, starts)) for p in positions}, horizon


def _time_text(moment: datetime | None) -> str | None:
    return format_time(moment) if moment is not None else None


def windows_of(batch: Batch) -> list[str]:
    """The windows of a batch, as its job's summary names them."""
    return [format_time(batch.start + i * HOUR) for i in range(batch.windows)]


HOOKS = BlobHooks()
