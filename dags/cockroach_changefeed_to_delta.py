"""
### CockroachDB changefeed → Delta

Every hour: wait (deferred, no worker slot; a manual run ends up to date at once instead) until the
changefeed's cloud storage sink has a RESOLVED file newer than the checkpoint (listing the sink from the
checkpoint's partition on, no JVM), plan the resolved ranges after it, `resolved_per_batch` RESOLVED files
to a `spark_jobs/cockroach_changefeed_job.py` run (pool `lakefeed_spark`), then advance the checkpoint Variable `lakefeed_crdb_checkpoint` to the last
RESOLVED timestamp of the contiguous prefix of finished batches. One Delta table per topic; the greatest
`updated` per key wins, deletes stay as tombstones. The run summary lands in the `commit_checkpoint` XCom.

**Backfill** re-applies a range idempotently and never sets nor moves the checkpoint's RESOLVED:
- *Single Run* with `after_resolved` (optional) and `through_resolved`: exactly those files;
- Airflow's *Backfill*: each hourly run re-applies the resolved ranges of its data interval.

**Reset:** `reset_checkpoint` applies the sink again from its first file and records the sink and
tables anew: the way on when a run refuses a checkpoint of another sink or a replaced topic table.

A `target_root` other than the checkpoint's stops the run naming both (reset to
apply the sink into the new folder); with an empty checkpoint, topic tables that
hold rows this pipeline did not write are refused unless `adopt_targets` is set.

**Configuration:** the `lakefeed_crdb_config` Variable (JSON; keys in `include/lakefeed/config.py`),
defaulting to the demo sink under `data/demo`.
"""

from __future__ import annotations

from airflow.sdk import dag

from lakefeed.crdb.pipeline import JOB_SCRIPT
from lakefeed_airflow import feeds
from lakefeed_airflow.dag_defaults import DAGRUN_TIMEOUT, DEFAULT_ARGS, HOURLY, MAX_ACTIVE_RUNS, START_DATE
from lakefeed_airflow.forms import crdb_params
from lakefeed_airflow.pipeline_dag import wire_pipeline
from lakefeed_airflow.sensors import ResolvedTimestampSensor
from lakefeed_airflow.settings import TEMPLATE_MACROS


@dag(
    dag_id="cockroach_changefeed_to_delta",
    description="CockroachDB changefeed files (cloud storage sink) → one Delta table per topic, exactly once",
    schedule=HOURLY,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=MAX_ACTIVE_RUNS,
    dagrun_timeout=DAGRUN_TIMEOUT,
    tags=["lakefeed", "cockroachdb", "changefeed", "delta"],
    default_args=DEFAULT_ARGS,
    params=crdb_params(),
    user_defined_macros=TEMPLATE_MACROS,
    doc_md=__doc__,
)
def cockroach_changefeed_to_delta():
    wait_for_resolved = ResolvedTimestampSensor(
        task_id="wait_for_resolved",
        sink_root="{{ lakefeed.crdb.sink_root }}",
        checkpoint_variable="{{ lakefeed.crdb.checkpoint_variable }}",
        wasb_conn_id="{{ lakefeed.crdb.wasb_conn_id or '' }}",
        target_root="{{ lakefeed.crdb.target_root }}",
        poke_seconds="{{ lakefeed.crdb.sensor_poke_seconds }}",
        timeout_seconds="{{ lakefeed.crdb.sensor_timeout_seconds }}",
        # A range in the params (even half of one, which the plan then refuses at once) waits for nothing.
        skip_reason="{{ 'backfill run' if dag_run.run_type == 'backfill' or params.through_resolved "
        "or params.after_resolved "
        "else ('checkpoint reset' if params.reset_checkpoint else '') }}",
        deferrable=True,
        retries=0,
    )

    wire_pipeline(
        sensor=wait_for_resolved,
        feed=feeds.CRDB,
        plan_task_id="plan_ranges",
        apply_task_id="apply_ranges",
        commit_task_id=feeds.CRDB_COMMIT_TASK_ID,
        job_script=JOB_SCRIPT,
        job_name="cockroach_changefeed_to_delta",
    )


cockroach_changefeed_to_delta()
