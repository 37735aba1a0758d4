"""Delta change data feeds, declared once (:class:`lakefeed.feeds.FeedSpec`)."""

from __future__ import annotations

from lakefeed import forms
from lakefeed.cdf import DAG_ID, KEY, monitoring, pipeline, summary
from lakefeed.cdf.config import CdfConfig
from lakefeed.feeds import FeedSpec
from lakefeed.forms import Field


def form() -> dict[str, Field]:
    return {
        "pipeline": {
            "default": None,
            "type": ["null", "string"],
            "title": "Pipeline",
            "description": "The configured pipeline to backfill or refresh (its name in the lakefeed_cdf_config "
            "Variable); empty for a normal run (needed for a range or a full refresh when several are configured).",
        },
        "starting_version": forms.range_end(
            "Starting version (inclusive)",
            f"Re-apply source versions from this one; give ending_version too. {forms.SINGLE_RUN_ONLY}",
            "integer",
        ),
        "ending_version": forms.range_end(
            "Ending version (inclusive)",
            "Last source version to re-apply; with full_refresh, the snapshot version (default: the latest).",
            "integer",
        ),
        "full_refresh": forms.flag(
            "Full refresh",
            "Rebuild the target from a snapshot of the source (at ending_version, "
            "default the latest) and set the checkpoint to exactly that version, "
            "even when it was ahead: the next run applies the versions after it.",
        ),
        "adopt_targets": forms.adopt_targets("the configured target tables"),
    }


SPEC = FeedSpec(
    key=KEY,
    dag_id=DAG_ID,
    description="Delta change data feeds → Delta mirror tables with tombstones, hourly, exactly once",
    tags=("delta", "cdf"),
    hooks=pipeline.HOOKS,
    config_type=CdfConfig,
    config_variable="lakefeed_cdf_config",
    job_script=pipeline.JOB_SCRIPT,
    sensor_task="wait_for_new_versions",
    plan_task="plan_ranges",
    apply_task="apply_ranges",
    commit_task="commit_checkpoints",
    alias="lakefeed_cdf_targets",
    range_params=("starting_version", "ending_version"),
    reset_param="full_refresh",
    reset_control="Full refresh",
    form=form,
    watched=monitoring.watched,
    lineage_outcome=summary.lineage_outcome,
    delta_inputs=True,
)
