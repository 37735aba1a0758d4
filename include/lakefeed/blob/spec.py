"""The blob change feed, declared once (:class:`lakefeed.feeds.FeedSpec`)."""

from __future__ import annotations

from lakefeed import forms
from lakefeed.blob import DAG_ID, KEY, monitoring, pipeline, summary
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.feeds import FeedSpec
from lakefeed.forms import Field

ON_GRID = (
    "ISO-8601 UTC on the feed's hourly grid: windows start at the minute the feed's segments start at (hh:10 "
    "for Azure's feeds; the run summaries show it as gridMinute). Example: 2026-01-01T00:10:00Z."
)


def form() -> dict[str, Field]:
    return {
        "window_start": forms.range_end(
            "Backfill from (window start)",
            f"Re-process the windows from this one on. Leave empty for a normal run. Give window_end too. "
            f"{ON_GRID} {forms.SINGLE_RUN_ONLY}",
        ),
        "window_end": forms.range_end(
            "Backfill until (exclusive)", f"The first window not to re-process; after window_start. {ON_GRID}"
        ),
        "reset_checkpoint": forms.flag(
            "Reset the checkpoint",
            "Forget the checkpoint and ingest from the feed's first window (or "
            "start_from) into the configured targets, recording the feed and "
            "targets anew: the way on after the feed or a target was replaced.",
        ),
        "acknowledge_data_loss": forms.flag(
            "Acknowledge data loss",
            "Go on past change feed segments or chunk files that retention "
            "deleted before they were read. A run without it stops naming "
            "the windows that may be missing events; with it, the run "
            "applies what remains and its summary records the windows given "
            "up (dataLossAcknowledged, missingShards).",
        ),
        "adopt_targets": forms.adopt_targets("the configured events and state tables"),
    }


SPEC = FeedSpec(
    key=KEY,
    dag_id=DAG_ID,
    description="Azure Blob Storage change feed → Delta events and state tables, hourly, exactly once",
    tags=("azure-blob", "changefeed", "delta"),
    hooks=pipeline.HOOKS,
    config_type=BlobPipelineConfig,
    config_variable="lakefeed_blob_config",
    job_script=pipeline.JOB_SCRIPT,
    sensor_task="wait_for_ready_window",
    plan_task="plan_windows",
    apply_task="ingest_windows",
    commit_task="commit_checkpoint",
    alias="lakefeed_blob_targets",
    range_params=("window_start", "window_end"),
    reset_param="reset_checkpoint",
    reset_control="Reset the checkpoint",
    form=form,
    watched=monitoring.watched,
    lineage_outcome=summary.lineage_outcome,
)
