"""CockroachDB changefeeds pulled over SQL, declared once (:class:`lakefeed.feeds.FeedSpec`)."""

from __future__ import annotations

from lakefeed import forms
from lakefeed.crdb import summary
from lakefeed.crdb.pipeline import JOB_SCRIPT
from lakefeed.crdbsql import DAG_ID, KEY, monitoring, pipeline
from lakefeed.crdbsql.config import CrdbSqlConfig
from lakefeed.feeds import FeedSpec
from lakefeed.forms import Field

UPDATED_HINT = (
    "An updated timestamp as CockroachDB writes it: <wall ns>.<10-digit logical>, e.g. "
    "1714751617108996000.0000000000 (the run summaries show resolved and newestResolved)."
)


def form() -> dict[str, Field]:
    return {
        "after_resolved": forms.range_end(
            "Backfill after (updated)",
            f"Pull and apply again the changes after this timestamp (empty: an initial scan at "
            f"through_resolved). Give through_resolved too. {UPDATED_HINT}",
        ),
        "through_resolved": forms.range_end(
            "Backfill through (updated)",
            f"Pull and apply again the changes up to this timestamp. Leave empty for a normal run. "
            f"{UPDATED_HINT} {forms.SINGLE_RUN_ONLY}",
        ),
        "reset_checkpoint": forms.flag(
            "Reset the checkpoint",
            "Forget the checkpoint and start again with an initial scan of the tables, recording the "
            "cluster and tables anew: the way on after the cluster's garbage collection removed changes "
            "past the checkpoint, or the cluster or tables changed.",
        ),
        "adopt_targets": forms.adopt_targets("the topic tables under the configured target_root"),
    }


SPEC = FeedSpec(
    key=KEY,
    dag_id=DAG_ID,
    description="CockroachDB changefeeds pulled over SQL (bounded core changefeeds) → one Delta table per table",
    tags=("cockroachdb", "changefeed", "sql", "delta"),
    hooks=pipeline.HOOKS,
    config_type=CrdbSqlConfig,
    config_variable="lakefeed_crdb_sql_config",
    job_script=JOB_SCRIPT,
    sensor_task="wait_for_cluster",
    plan_task="plan_ranges",
    apply_task="apply_ranges",
    commit_task="commit_checkpoint",
    alias="lakefeed_crdb_sql_targets",
    range_params=("after_resolved", "through_resolved"),
    reset_param="reset_checkpoint",
    reset_control="Reset the checkpoint",
    form=form,
    watched=monitoring.watched,
    lineage_outcome=summary.lineage_outcome,
    stage_task="pull_ranges",
    paused_at_creation=True,  # until its sql_conn_id connection points at a cluster
)
