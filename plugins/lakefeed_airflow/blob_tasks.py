"""The work behind the blob DAG's tasks: plan, spark-submit arguments, checkpoint commit.

Plain functions called from ``@task`` bodies, so the DAG file stays wiring.
Each Spark batch writes its summary to ``<run_dir>/<run>/<batch>.json`` after
its MERGEs commit; the commit step advances the checkpoint over the
contiguous prefix of batches that have one.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.schedule import (
    Batch,
    advance_watermark,
    backfill_windows,
    batches_of,
    check_last_consumable,
    first_window,
    pending_windows,
)
from lakefeed.blob.timegrid import HOUR, format_time, parse_time
from lakefeed.config import PROJECT_ROOT, BlobPipelineConfig
from lakefeed.errors import FeedConfigError
from lakefeed_airflow.wasb_feed import feed_store
from lakefeed_airflow.runs import fail_if_any_failed, finished_summaries, fresh_run_folder, summary_path

log = logging.getLogger(__name__)

JOB_SCRIPT = str(PROJECT_ROOT / "spark_jobs" / "blob_changefeed_job.py")
SUMMED = ("chunkFiles", "emptyChunkFiles", "bytesRead", "recordsRead", "recordsClaimed", "controlDropped",
          "eventsClaimed", "strays", "duplicatesRemoved", "eventsUnique", "eventsInserted", "stateInserted",
          "stateUpdated")


def plan(config: BlobPipelineConfig, checkpoint, params: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Which batches of windows this run submits, from the checkpoint (or the backfill params)."""
    feed = ChangeFeed(feed_store(config.feed_root, config.wasb_conn_id))
    last_consumable = feed.last_consumable()
    check_last_consumable(last_consumable, checkpoint.last_consumable, feed.store.url("meta/Segments.json"))
    start, end = params.get("window_start"), params.get("window_end")
    if start or end:
        if not (start and end):
            raise FeedConfigError("a backfill needs both window_start and window_end")
        anchor = checkpoint.watermark or feed.first_segment_start()
        if anchor is None:
            raise FeedConfigError(f"{feed.store.root} has no segments to backfill")
        windows = backfill_windows(anchor.minute, _param_time("window_start", start), _param_time("window_end", end),
                                   last_consumable)
        mode = "backfill"
    else:
        start_from = parse_time(config.start_from) if config.start_from else None
        windows = pending_windows(first_window(feed, checkpoint.watermark, start_from), last_consumable,
                                  config.max_windows_per_run)
        mode = "scheduled"
    batches = batches_of(windows, config.windows_per_batch)
    folder = fresh_run_folder(config.run_dir, run_id)
    result = {
        "mode": mode,
        "batches": [b.to_dict() for b in batches],
        "windows": len(windows),
        "lastConsumable": format_time(last_consumable),
        "watermark": format_time(checkpoint.watermark) if checkpoint.watermark else None,
        "runFolder": str(folder),
    }
    log.info("plan: %s", json.dumps(result))
    return result


def _param_time(name: str, value: str):
    try:
        return parse_time(value)
    except ValueError:
        raise FeedConfigError(f"param {name}={value!r} is not an ISO-8601 time") from None


def job_arguments(config: BlobPipelineConfig, planned: dict[str, Any]) -> list[list[str]]:
    """``application_args`` of one spark-submit per batch (the job's command-line contract)."""
    return [
        ["--feed-root", config.feed_root, "--window-start", batch["start"], "--window-end", batch["end"],
         "--events-table", config.events_table, "--state-table", config.state_table,
         "--decoder", config.decoder, "--summary-json", summary_path(planned["runFolder"], index)]
        for index, batch in enumerate(planned["batches"])
    ]


def commit(store, planned: dict[str, Any], run_id: str) -> dict[str, Any]:
    """Advance the checkpoint over the finished prefix; report the run; fail if any batch failed."""
    batches = [Batch.from_dict(b) for b in planned["batches"]]
    summaries = finished_summaries(planned["runFolder"], len(batches))
    checkpoint = store.load()
    last_consumable = parse_time(planned["lastConsumable"])
    watermark = advance_watermark(checkpoint.watermark, batches, set(summaries))
    advanced = checkpoint.advanced(watermark, last_consumable, run_id)
    if advanced != checkpoint:
        store.save(advanced)
    failed = [b.to_dict() for i, b in enumerate(batches) if i not in summaries]
    report = {
        "mode": planned["mode"],
        "windowsPlanned": planned["windows"],
        "batches": len(batches),
        "batchesFailed": failed,
        **{key: sum(s.get(key, 0) for s in summaries.values()) for key in SUMMED},
        "lastConsumable": planned["lastConsumable"],
        "watermarkBefore": planned["watermark"],
        "watermark": format_time(advanced.watermark) if advanced.watermark else None,
        "lagHours": ((last_consumable - advanced.watermark) / HOUR) if advanced.watermark else None,
        "sparkSeconds": round(sum(sum(s.get("seconds", {}).values()) for s in summaries.values()), 3),
    }
    log.info("run summary: %s", json.dumps(report, indent=2))
    fail_if_any_failed(failed, len(batches), report["watermark"])
    return report
