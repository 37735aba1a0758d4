"""What every lakefeed DAG shares: owner, retries with backoff, the Spark connection and pool."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

SPARK_CONN_ID = "spark_default"
SPARK_POOL = "lakefeed_spark"
START_DATE = datetime(2026, 1, 1, tzinfo=timezone.utc)
DEFAULT_ARGS = {
    "owner": "data-platform",
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=15),
}


def planned_or_skip(ti, plan_task_id: str) -> dict:
    """The plan a run made, for its commit task; skip the commit when nothing was planned."""
    from airflow.sdk.exceptions import AirflowSkipException

    planned = ti.xcom_pull(task_ids=plan_task_id)
    if not planned:
        raise AirflowSkipException("nothing was planned")
    return planned
