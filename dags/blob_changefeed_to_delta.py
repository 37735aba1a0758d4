"""
### Azure Blob Storage change feed → Delta

Every hour: wait (deferred, no worker slot) until a window past the checkpoint
is ready in the feed (`lastConsumable >= T + 1h`), plan the ready windows in
batches, run one `spark_jobs/blob_changefeed_job.py` per batch
(SparkSubmitOperator, pool `lakefeed_spark`), then advance the checkpoint
Variable `lakefeed_blob_checkpoint` over the contiguous prefix of finished
batches. The run summary lands in the `commit_checkpoint` XCom and log.

**Backfill:** trigger with `window_start` and `window_end` (ISO, on the
feed's hourly grid) to re-process exactly that range. Idempotent; the
checkpoint never moves backwards.

**Configuration:** the `lakefeed_blob_config` Variable (JSON; keys in
`include/lakefeed/config.py`), defaulting to the demo feed under `data/demo`.
"""

from __future__ import annotations

from airflow.sdk import Param, dag, task

from lakefeed.spark import delta_package
from lakefeed_airflow.dag_defaults import DEFAULT_ARGS, SPARK_CONN_ID, SPARK_POOL, START_DATE, planned_or_skip
from lakefeed_airflow.blob_tasks import JOB_SCRIPT
from lakefeed_airflow.operators import FeedSparkSubmitOperator
from lakefeed_airflow.watcher import fail_run_if_a_task_failed
from lakefeed_airflow.sensors import ChangeFeedReadySensor

ISO_HINT = "ISO-8601 UTC on the feed's hourly grid, e.g. 2026-01-01T00:10:00Z"


@dag(
    dag_id="blob_changefeed_to_delta",
    schedule="@hourly",
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    tags=["lakefeed", "azure-blob", "changefeed", "delta"],
    default_args=DEFAULT_ARGS,
    params={
        "window_start": Param(None, type=["null", "string"], title="Backfill from (window start)",
                              description=f"Leave empty for a normal run. {ISO_HINT}."),
        "window_end": Param(None, type=["null", "string"], title="Backfill until (exclusive)",
                            description=f"Leave empty for a normal run. {ISO_HINT}."),
    },
    doc_md=__doc__,
)
def blob_changefeed_to_delta():
    wait_for_ready_window = ChangeFeedReadySensor(
        task_id="wait_for_ready_window",
        backfill="{{ (params.window_start or '') ~ (params.window_end or '') }}",
        deferrable=True,
        retries=0,
    )

    @task
    def plan_windows(params=None, run_id=None) -> dict:
        from lakefeed_airflow import blob_tasks
        from lakefeed_airflow.settings import CheckpointStore, blob_config

        config = blob_config()
        return blob_tasks.plan(config, CheckpointStore(config.checkpoint_variable).load(), params or {}, run_id)

    @task
    def spark_arguments(planned: dict) -> list[list[str]]:
        from lakefeed_airflow import blob_tasks
        from lakefeed_airflow.settings import blob_config

        return blob_tasks.job_arguments(blob_config(), planned)

    @task(trigger_rule="all_done", retries=0)
    def commit_checkpoint(ti=None, run_id=None) -> dict:
        from lakefeed_airflow import blob_tasks
        from lakefeed_airflow.settings import CheckpointStore, blob_config

        planned = planned_or_skip(ti, "plan_windows")
        return blob_tasks.commit(CheckpointStore(blob_config().checkpoint_variable), planned, run_id)

    planned = plan_windows()
    ingest_windows = FeedSparkSubmitOperator.partial(
        task_id="ingest_windows",
        application=JOB_SCRIPT,
        conn_id=SPARK_CONN_ID,
        pool=SPARK_POOL,
        packages=delta_package(),
        name="blob_changefeed_to_delta",
        retries=1,
    ).expand(application_args=spark_arguments(planned))
    commit = commit_checkpoint()
    wait_for_ready_window >> planned
    ingest_windows >> commit
    [wait_for_ready_window, planned, ingest_windows, commit] >> fail_run_if_a_task_failed()


blob_changefeed_to_delta()
