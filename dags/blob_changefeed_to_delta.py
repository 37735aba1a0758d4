"""
### Azure Blob Storage change feed → Delta

Every hour: wait (deferred, no worker slot; a manual run does not wait, it ends
up to date at once when nothing is ready) until a window past the checkpoint
is ready in the feed (`lastConsumable >= T + 1h`), plan the ready windows in
batches, run one `spark_jobs/blob_changefeed_job.py` per batch
(pool `lakefeed_spark`), then advance the checkpoint Variable
`lakefeed_blob_checkpoint` over the contiguous prefix of finished batches.
The run summary lands in the `commit_checkpoint` XCom and log.

**Backfill** re-processes a range idempotently and never sets nor moves the
checkpoint's watermark (the next scheduled run still starts where the
checkpoint, or the feed, starts):
- *Single Run* with `window_start` and `window_end` (ISO, on the feed's
  hourly grid, end exclusive) re-processes exactly that range;
- Airflow's *Backfill* (UI, or `airflow backfill create`) makes one run per
  hourly interval; each re-processes the grid window that starts in its data
  interval.

**Reset:** `reset_checkpoint` ingests from the feed's first window again and
records the feed and targets anew: the way on when a run refuses a checkpoint
made on another feed, or a target that was dropped, recreated or restored.

**Retention:** a run stops, naming the windows that may be missing events,
when the change feed's retention deleted segments or chunk files before they
were read; `acknowledge_data_loss` goes on from what remains and records the
windows given up in the run summary.

**Adopting tables:** with an empty checkpoint a run refuses targets holding
rows this pipeline did not write; `adopt_targets` merges into them anyway.

A job that refuses its input (exit code 2: corrupt Avro, bad manifest, a shard
lost to retention) fails without retry; transient failures retry with backoff.

**Configuration:** the `lakefeed_blob_config` Variable (JSON; keys in
`include/lakefeed/config.py`), defaulting to the demo feed under `data/demo`.
"""

from __future__ import annotations

from airflow.sdk import dag

from lakefeed.blob.pipeline import JOB_SCRIPT
from lakefeed_airflow import feeds
from lakefeed_airflow.dag_defaults import DAGRUN_TIMEOUT, DEFAULT_ARGS, HOURLY, MAX_ACTIVE_RUNS, START_DATE
from lakefeed_airflow.forms import blob_grid_minute, blob_params
from lakefeed_airflow.pipeline_dag import wire_pipeline
from lakefeed_airflow.sensors import ChangeFeedReadySensor
from lakefeed_airflow.settings import TEMPLATE_MACROS


@dag(
    dag_id="blob_changefeed_to_delta",
    description="Azure Blob Storage change feed → Delta events and state tables, hourly, exactly once",
    schedule=HOURLY,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=MAX_ACTIVE_RUNS,
    dagrun_timeout=DAGRUN_TIMEOUT,
    tags=["lakefeed", "azure-blob", "changefeed", "delta"],
    default_args=DEFAULT_ARGS,
    params=blob_params(blob_grid_minute()),
    user_defined_macros=TEMPLATE_MACROS,
    doc_md=__doc__,
)
def blob_changefeed_to_delta():
    wait_for_ready_window = ChangeFeedReadySensor(
        task_id="wait_for_ready_window",
        feed_root="{{ lakefeed.blob.feed_root }}",
        checkpoint_variable="{{ lakefeed.blob.checkpoint_variable }}",
        wasb_conn_id="{{ lakefeed.blob.wasb_conn_id or '' }}",
        start_from="{{ lakefeed.blob.start_from or '' }}",
        targets='{{ {"events": lakefeed.blob.events_table, "state": lakefeed.blob.state_table} | tojson }}',
        poke_seconds="{{ lakefeed.blob.sensor_poke_seconds }}",
        timeout_seconds="{{ lakefeed.blob.sensor_timeout_seconds }}",
        skip_reason="{{ 'backfill run' if dag_run.run_type == 'backfill' or params.window_start or params.window_end "
        "else ('checkpoint reset' if params.reset_checkpoint else '') }}",
        deferrable=True,
        retries=0,
    )

    wire_pipeline(
        sensor=wait_for_ready_window,
        feed=feeds.BLOB,
        plan_task_id="plan_windows",
        apply_task_id="ingest_windows",
        commit_task_id=feeds.BLOB_COMMIT_TASK_ID,
        job_script=JOB_SCRIPT,
        job_name="blob_changefeed_to_delta",
    )


blob_changefeed_to_delta()
