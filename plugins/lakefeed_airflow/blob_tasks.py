"""The work behind the blob DAG's tasks: plan, spark-submit arguments, checkpoint commit.

Plain functions called from ``@task`` bodies, so the DAG file stays wiring.
Which windows a run plans depends on its kind (:mod:`lakefeed.progress`):

- scheduled (and manual runs without params): from the checkpoint's watermark,
  or the feed's first window when there is none, up to ``lastConsumable - 1h``;
- a backfill: exactly the windows of the ``window_start``/``window_end``
  params, or, for a run of Airflow's Backfill, the grid windows that start in
  the run's data interval; never moves the checkpoint;
- a reset (``reset_checkpoint``): from the feed's first window, as if there were
  no checkpoint; the checkpoint is replaced, recording the feed and targets anew.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from lakefeed.assets import blob_changes
from lakefeed.blob.feed import SEGMENTS_JSON, ChangeFeed
from lakefeed.blob.schedule import (
    Batch,
    backfill_windows,
    batches_of,
    check_last_consumable,
    first_window,
    interval_windows,
    pending_windows,
)
from lakefeed.blob.timegrid import HOUR, format_time, parse_time
from lakefeed.checkpoint import BlobCheckpoint, verify_feed
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import PROJECT_ROOT, BlobPipelineConfig
from lakefeed.errors import ConfigError, FeedError
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.targets import current_marks, verify_targets
from lakefeed_airflow.runs import (
    RunContext,
    fail_if_any_failed,
    finished_summaries,
    plan_folder,
    refusals,
    run_kind,
    summary_path,
)
from lakefeed_airflow.wasb_feed import feed_store

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "blob_changefeed_job.py")
COMMIT_TASK_ID = "commit_checkpoint"  # the task whose XCom is the run summary (read by the monitor)
SUMMED = ("chunkFiles", "emptyChunkFiles", "bytesRead", "recordsRead", "recordsClaimed", "controlDropped",
          "eventsClaimed", "strays", "duplicatesRemoved", "eventsUnique", "eventsInserted", "stateInserted",
          "stateUpdated", "commitsMade", "eventsBytesWritten", "stateBytesWritten", "stateFilesRewritten",
          "stateRowsCopied")
RESET_REMEDY = ("trigger blob_changefeed_to_delta with the param reset_checkpoint=true: it ingests again from the "
                "feed's first segment (or start_from) into the configured targets and records them")


def requested_range(params: dict[str, Any]) -> tuple[datetime, datetime] | None:
    """The ``window_start``/``window_end`` params: both or neither, ISO times, start before end."""
    start, end = params.get("window_start") or None, params.get("window_end") or None
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise ConfigError("a backfill needs both window_start and window_end (window_end is exclusive)")
    start_time, end_time = _param_time("window_start", start), _param_time("window_end", end)
    if end_time <= start_time:
        raise ConfigError(f"window_end {format_time(end_time)} must be after window_start {format_time(start_time)}")
    return start_time, end_time


def _param_time(name: str, value: Any) -> datetime:
    try:
        return parse_time(str(value))
    except ValueError:
        raise ConfigError(f"param {name}={value!r} is not an ISO-8601 time such as 2026-01-01T00:10:00Z") from None


def plan(config: BlobPipelineConfig, checkpoint: BlobCheckpoint, params: dict[str, Any], run: RunContext,
         where: str = "lakefeed_blob_checkpoint") -> dict[str, Any]:
    """Which batches of windows this run submits; refuses (a :class:`~lakefeed.errors.Refusal`) a request
    that cannot be served or a checkpoint that does not belong to this feed and these targets."""
    window_range = requested_range(params)
    kind = run_kind(run, window_range is not None, bool(params.get("reset_checkpoint")))
    store = feed_store(config.feed_root, config.wasb_conn_id)
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
    start_from = parse_time(config.start_from) if config.start_from else None
    origin = first_window(feed, None, start_from)
    if kind == BACKFILL and run.is_airflow_backfill:
        windows = interval_windows(grid_minute, run.interval_start, run.interval_end, last_consumable)
    elif kind == BACKFILL:
        windows = backfill_windows(grid_minute, *window_range, last_consumable)
    else:
        first = checkpoint.watermark if kind == SCHEDULED and checkpoint.watermark else origin
        windows = pending_windows(first, last_consumable, config.max_windows_per_run)
    batches = batches_of(windows, config.windows_per_batch)
    result = {
        "kind": kind,
        "batches": [b.to_dict() for b in batches],
        "windows": len(windows),
        "lastConsumable": format_time(last_consumable),
        "feed": store.identity,
        "gridMinute": grid_minute,
        "origin": format_time(origin) if origin else None,
        "watermark": format_time(checkpoint.watermark) if checkpoint.watermark else None,
        "targets": sorted(targets.values()),
        "targetTables": targets,
        "runFolder": str(plan_folder(config.run_dir, run)),
    }
    log.info("plan: %s", json.dumps(result))
    return result


def job_arguments(config: BlobPipelineConfig, planned: dict[str, Any]) -> list[list[str]]:
    """``application_args`` of one spark-submit per batch (the job's command-line contract)."""
    return [
        ["--feed-root", config.feed_root, "--window-start", batch["start"], "--window-end", batch["end"],
         "--events-table", config.events_table, "--state-table", config.state_table,
         "--decoder", config.decoder, "--summary-json", summary_path(planned["runFolder"], index)]
        for index, batch in enumerate(planned["batches"])
    ]


def _windows_of(batch: Batch) -> list[str]:
    return [format_time(batch.start + i * HOUR) for i in range(batch.windows)]


def commit(store: CheckpointStore, planned: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Move the checkpoint as the run's kind allows (compare-and-set); report the run; fail if any batch failed."""
    batches = [Batch.from_dict(b) for b in planned["batches"]]
    summaries = finished_summaries(planned["runFolder"], planned["batches"],
                                   lambda summary, job: summary.get("windows") == _windows_of(Batch.from_dict(job)))
    refused = refusals(planned["runFolder"], len(batches))
    kind = planned["kind"]
    last_consumable = parse_time(planned["lastConsumable"])
    origin = parse_time(planned["origin"]) if planned["origin"] else None

    def change(checkpoint: BlobCheckpoint) -> BlobCheckpoint:
        if kind == BACKFILL:
            return checkpoint
        if kind == SCHEDULED and checkpoint.feed not in (None, planned["feed"]):
            log.warning("the checkpoint was reset to another feed (%s) while this run ran: not moving it",
                        checkpoint.feed)
            return checkpoint
        watermark = position_after(kind, checkpoint.watermark, [(b.start, b.end) for b in batches],
                                   set(summaries), origin=origin)
        seen = last_consumable if kind == RESET or checkpoint.last_consumable is None \
            else max(last_consumable, checkpoint.last_consumable)
        marks = current_marks(planned["targets"]) if summaries or kind == RESET else checkpoint.targets
        return checkpoint.moved(watermark=watermark, last_consumable=seen, feed=planned["feed"],
                                grid_minute=planned["gridMinute"], targets=marks, updated_by=run_id)

    before, after = store.update(change)
    failed = [{**b.to_dict(), **({"refused": refused[i]} if i in refused else {})}
              for i, b in enumerate(batches) if i not in summaries]
    report = {
        "kind": kind,
        "windowsPlanned": planned["windows"],
        "batches": len(batches),
        "batchesFailed": failed,
        **{key: sum(s.get(key, 0) for s in summaries.values()) for key in SUMMED},
        "lastConsumable": planned["lastConsumable"],
        "gridMinute": planned["gridMinute"],
        "watermarkBefore": format_time(before.watermark) if before.watermark else None,
        "watermark": format_time(after.watermark) if after.watermark else None,
        "checkpointMoved": after != before,
        "lagHours": ((last_consumable - after.watermark) / HOUR) if after.watermark else None,
        "sparkSeconds": round(sum(sum(s.get("seconds", {}).values()) for s in summaries.values()), 3),
        "targetsChanged": blob_changes([summaries[i] for i in sorted(summaries)], planned["targetTables"]["events"],
                                       planned["targetTables"]["state"]),
    }
    log.info("run summary: %s", json.dumps(report, indent=2))
    fail_if_any_failed(failed, len(batches), report["watermark"], report)
    return report


# -- what the DAG's tasks call: configuration and checkpoint from their Variables, when the task runs --

def plan_task(params: dict[str, Any], run: RunContext) -> dict[str, Any]:
    from lakefeed_airflow.settings import blob_checkpoint_store, blob_config

    config = blob_config()
    store = blob_checkpoint_store(config)
    return plan(config, store.load(), params, run, store.where)


def arguments_task(planned: dict[str, Any]) -> list[list[str]]:
    from lakefeed_airflow.settings import blob_config

    return job_arguments(blob_config(), planned)


def commit_task(planned: dict[str, Any], run_id: str) -> dict[str, Any]:
    from lakefeed_airflow.settings import blob_checkpoint_store, blob_config

    return commit(blob_checkpoint_store(blob_config()), planned, run_id)
