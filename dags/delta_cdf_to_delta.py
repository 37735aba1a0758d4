"""
### Delta change data feed → Delta

Every hour: wait (deferred, no worker slot) until a configured source table
has versions past its pipeline's checkpoint (read from `_delta_log`, no JVM),
plan version ranges of `versions_per_job`, run one
`spark_jobs/delta_cdf_job.py` per range (SparkSubmitOperator, pool
`lakefeed_spark`), then advance each pipeline's checkpoint Variable
`lakefeed_cdf_checkpoint__<name>` over the contiguous prefix of finished ranges.
A pipeline's first run reads the change feed from version 0 when it was on
from the start, and otherwise rebuilds the target from a snapshot.

**Backfill:** trigger with `pipeline`, `starting_version`, `ending_version`
to re-apply exactly that range (idempotent, version-guarded; the checkpoint
never moves backwards), or with `full_refresh` (and optionally
`ending_version` as the snapshot version) to rebuild the target — the path
when change data was vacuumed or CDF was enabled late.

**Configuration:** the `lakefeed_cdf_config` Variable (JSON; keys in
`include/lakefeed/config.py`), defaulting to the demo source `data/demo/cdf/source`.
"""

from __future__ import annotations

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, dag, task

from lakefeed.spark import delta_package
from lakefeed_airflow.dag_defaults import DEFAULT_ARGS, SPARK_CONN_ID, SPARK_POOL, START_DATE, planned_or_skip
from lakefeed_airflow.cdf_tasks import JOB_SCRIPT
from lakefeed_airflow.watcher import fail_run_if_a_task_failed
from lakefeed_airflow.sensors import DeltaVersionSensor



@dag(
    dag_id="delta_cdf_to_delta",
    schedule="@hourly",
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    tags=["lakefeed", "delta", "cdf"],
    default_args=DEFAULT_ARGS,
    params={
        "pipeline": Param(None, type=["null", "string"], title="Pipeline (backfill)",
                          description="Name of the configured pipeline to backfill; empty for a normal run."),
        "starting_version": Param(None, type=["null", "integer"], minimum=0, title="Starting version (inclusive)"),
        "ending_version": Param(None, type=["null", "integer"], minimum=0, title="Ending version (inclusive)"),
        "full_refresh": Param(False, type="boolean", title="Full refresh",
                              description="Rebuild the target from a source snapshot (at ending_version, "
                                          "default latest) and set the checkpoint there."),
    },
    doc_md=__doc__,
)
def delta_cdf_to_delta():
    wait_for_new_versions = DeltaVersionSensor(
        task_id="wait_for_new_versions",
        backfill="{{ 'backfill' if (params.full_refresh or params.starting_version is not none "
                 "or params.ending_version is not none) else '' }}",
        deferrable=True,
        retries=0,
    )

    @task
    def plan_ranges(params=None, run_id=None) -> dict:
        from lakefeed_airflow import cdf_tasks
        from lakefeed_airflow.settings import cdf_checkpoint_store, cdf_config

        config = cdf_config()
        applied = {p.name: cdf_checkpoint_store(p).load().applied_version for p in config.pipelines}
        return cdf_tasks.plan(config, applied, params or {}, run_id)

    @task
    def spark_arguments(planned: dict) -> list[list[str]]:
        from lakefeed_airflow import cdf_tasks
        from lakefeed_airflow.settings import cdf_config

        return cdf_tasks.job_arguments(cdf_config(), planned)

    @task(trigger_rule="all_done", retries=0)
    def commit_checkpoints(ti=None, run_id=None) -> dict:
        from lakefeed_airflow import cdf_tasks
        from lakefeed_airflow.settings import cdf_checkpoint_store, cdf_config

        planned = planned_or_skip(ti, "plan_ranges")
        config = cdf_config()
        stores = {p.name: cdf_checkpoint_store(p) for p in config.pipelines}
        return cdf_tasks.commit(config, stores, planned, run_id)

    planned = plan_ranges()
    apply_ranges = SparkSubmitOperator.partial(
        task_id="apply_ranges",
        application=JOB_SCRIPT,
        conn_id=SPARK_CONN_ID,
        pool=SPARK_POOL,
        packages=delta_package(),
        name="delta_cdf_to_delta",
        retries=1,
    ).expand(application_args=spark_arguments(planned))
    commit = commit_checkpoints()
    wait_for_new_versions >> planned
    apply_ranges >> commit
    [wait_for_new_versions, planned, apply_ranges, commit] >> fail_run_if_a_task_failed()


delta_cdf_to_delta()
