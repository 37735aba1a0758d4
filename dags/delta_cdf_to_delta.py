"""
### Delta change data feed → Delta

Every hour: wait (deferred, no worker slot; a manual run ends up to date at
once instead) until a configured source table
has versions past its pipeline's checkpoint (read from `_delta_log`, no JVM),
plan version ranges of `versions_per_job`, run one
`spark_jobs/delta_cdf_job.py` per range (pool `lakefeed_spark`), then advance
each pipeline's checkpoint Variable `lakefeed_cdf_checkpoint__<name>` over the
contiguous prefix of finished ranges. A pipeline's first run reads the change
feed from version 0 when it was on from the start, and otherwise rebuilds the
target from a snapshot.

**Backfill** re-applies versions idempotently (version-guarded) and never
creates nor moves a checkpoint:
- *Single Run* with `pipeline`, `starting_version` and `ending_version`
  re-applies exactly that range;
- Airflow's *Backfill* (UI, or `airflow backfill create`) makes one run per
  hourly interval; each re-applies, for every pipeline (or the `pipeline`
  param's), the versions its source committed within the run's data interval
  (commit timestamps, as `DESCRIBE HISTORY` shows them).

**Full refresh** (`full_refresh`, optionally `ending_version` as the snapshot
version) rebuilds the target from a snapshot and sets the checkpoint to exactly
that version, even when it was ahead (the next run applies the versions after
it again): the way on after change data was vacuumed, CDF was enabled late, or
a run refused a source or target that was recreated behind the checkpoint.

A missing source, versions cleaned from the source's log, or keys/columns
other than the checkpoint's stop the run naming them; with an empty checkpoint
a first run refuses a target holding rows it did not write unless
`adopt_targets` is set.

**Configuration:** the `lakefeed_cdf_config` Variable (JSON; keys in
`include/lakefeed/config.py`), defaulting to the demo source `data/demo/cdf/source`.
"""

from __future__ import annotations

from airflow.sdk import dag

from lakefeed.cdf.pipeline import JOB_SCRIPT
from lakefeed_airflow import feeds
from lakefeed_airflow.dag_defaults import DAGRUN_TIMEOUT, DEFAULT_ARGS, HOURLY, MAX_ACTIVE_RUNS, START_DATE
from lakefeed_airflow.forms import cdf_params, cdf_pipeline_names
from lakefeed_airflow.pipeline_dag import wire_pipeline
from lakefeed_airflow.sensors import DeltaVersionSensor
from lakefeed_airflow.settings import TEMPLATE_MACROS


@dag(
    dag_id="delta_cdf_to_delta",
    description="Delta change data feeds → Delta mirror tables with tombstones, hourly, exactly once",
    schedule=HOURLY,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=MAX_ACTIVE_RUNS,
    dagrun_timeout=DAGRUN_TIMEOUT,
    tags=["lakefeed", "delta", "cdf"],
    default_args=DEFAULT_ARGS,
    params=cdf_params(cdf_pipeline_names()),
    user_defined_macros=TEMPLATE_MACROS,
    doc_md=__doc__,
)
def delta_cdf_to_delta():
    wait_for_new_versions = DeltaVersionSensor(
        task_id="wait_for_new_versions",
        sources="{{ lakefeed.cdf_sources(params.pipeline) }}",
        poke_seconds="{{ lakefeed.cdf.sensor_poke_seconds }}",
        timeout_seconds="{{ lakefeed.cdf.sensor_timeout_seconds }}",
        skip_reason="{{ 'backfill run' if dag_run.run_type == 'backfill' or params.starting_version is not none "
        "or params.ending_version is not none else ('full refresh' if params.full_refresh else '') }}",
        deferrable=True,
        retries=0,
    )

    wire_pipeline(
        sensor=wait_for_new_versions,
        feed=feeds.CDF,
        plan_task_id="plan_ranges",
        apply_task_id="apply_ranges",
        commit_task_id=feeds.CDF_COMMIT_TASK_ID,
        job_script=JOB_SCRIPT,
        job_name="delta_cdf_to_delta",
    )


delta_cdf_to_delta()
