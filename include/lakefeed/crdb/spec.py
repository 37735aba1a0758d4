"""A CockroachDB changefeed's cloud storage sink, declared once (:class:`lakefeed.feeds.FeedSpec`)."""

from __future__ import annotations

from lakefeed import forms
from lakefeed.crdb import DAG_ID, KEY, monitoring, pipeline, summary
from lakefeed.crdb.config import CrdbConfig
from lakefeed.feeds import FeedSpec
from lakefeed.forms import Field

RESOLVED_HINT = (
    "A RESOLVED timestamp as the sink writes it: <wall ns>.<10-digit logical>, e.g. "
    "1714751617108996000.0000000000 (the run summaries show resolved and newestResolved)."
)


def form() -> dict[str, Field]:
    return {
        "after_resolved": forms.range_end(
            "Backfill after (RESOLVED)",
            f"Re-apply the files after this RESOLVED file (empty: from the sink's "
            f"first file). Give through_resolved too. {RESOLVED_HINT}",
        ),
        "through_resolved": forms.range_end(
            "Backfill through (RESOLVED)",
            f"Re-apply the files up to this RESOLVED file. Leave empty for a normal run. {RESOLVED_HINT} "
            f"{forms.SINGLE_RUN_ONLY}",
        ),
        "reset_checkpoint": forms.flag(
            "Reset the checkpoint",
            "Forget the checkpoint and apply the sink from its first file, "
            "recording the sink and tables anew: the way on after the sink moved or "
            "a topic table was replaced.",
        ),
        "adopt_targets": forms.adopt_targets("the topic tables under the configured target_root"),
    }


SPEC = FeedSpec(
    key=KEY,
    dag_id=DAG_ID,
    description="CockroachDB changefeed files (cloud storage sink) → one Delta table per topic, exactly once",
    tags=("cockroachdb", "changefeed", "delta"),
    hooks=pipeline.HOOKS,
    config_type=CrdbConfig,
    config_variable="lakefeed_crdb_config",
    job_script=pipeline.JOB_SCRIPT,
    sensor_task="wait_for_resolved",
    plan_task="plan_ranges",
    apply_task="apply_ranges",
    commit_task="commit_checkpoint",
    alias="lakefeed_crdb_targets",
    range_params=("after_resolved", "through_resolved"),
    reset_param="reset_checkpoint",
    reset_control="Reset the checkpoint",
    form=form,
    watched=monitoring.watched,
    lineage_outcome=summary.lineage_outcome,
)
