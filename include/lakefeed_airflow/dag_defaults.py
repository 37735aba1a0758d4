"""What every lakefeed DAG shares: owner, retries with backoff, timeouts, the Spark connection and pool,
and how task logic turns a refusal into a failure that is not retried.

``dagrun_timeout``, ``max_active_runs`` and the retry delay shape the DAG
itself, so they are read when the DAG file is parsed, from the environment
(never from Variables): ``LAKEFEED_DAGRUN_TIMEOUT_MINUTES`` (default 360),
``LAKEFEED_MAX_ACTIVE_RUNS`` (default 4) and ``LAKEFEED_RETRY_DELAY_SECONDS``
(default 60, doubled on each retry up to 15 minutes). The Spark jobs' own timeout is ``spark_job_timeout_minutes`` in each
pipeline's config Variable, applied when the task starts.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from airflow.sdk import CronDataIntervalTimetable

# Hourly runs over data intervals [H, H+1h): each of Airflow's Backfill runs then names the hour it
# re-processes (with Airflow 3's default trigger timetable, a run's interval is a single point).
HOURLY = CronDataIntervalTimetable("0 * * * *", timezone="UTC")
SPARK_CONN_ID = "spark_default"
SPARK_POOL = "lakefeed_spark"
# One slot: the commit steps (the checkpoint writers) of every lakefeed DAG run one at a time, on any worker.
CHECKPOINT_POOL = "lakefeed_checkpoints"
START_DATE = datetime(2026, 1, 1, tzinfo=UTC)
# More than one: a scheduled run waiting (deferred) for the hour's data holds one of the DAG's run slots,
# and a backfill or a manual run triggered meanwhile must not queue behind that wait. Runs that overlap
# converge (idempotent MERGEs, the checkpoint moved by compare-and-set, commit steps taking turns).
MAX_ACTIVE_RUNS = int(os.environ.get("LAKEFEED_MAX_ACTIVE_RUNS", "4"))
DAGRUN_TIMEOUT = timedelta(minutes=float(os.environ.get("LAKEFEED_DAGRUN_TIMEOUT_MINUTES", "360")))


def record_failure(context) -> None:
    """``on_failure_callback`` of every lakefeed task: the error that failed it, secrets masked, as the
    task's XCom ``failure`` (the monitor shows the first one of a run, with what to do). A retry clears it
    with the task's other XComs."""
    from airflow.sdk.log import redact as airflow_redact

    from lakefeed.monitor import redact
    from lakefeed_airflow.runs import FAILURE_KEY

    error = context.get("exception")
    text = f"{type(error).__name__}: {error}" if error is not None else "the task failed without an error"
    try:
        context["ti"].xcom_push(key=FAILURE_KEY, value={"error": redact(airflow_redact(text))[:4000]})
    except Exception:
        logging.getLogger(__name__).warning("could not record the failure for the monitor", exc_info=True)


DEFAULT_ARGS = {
    "owner": "data-platform",
    "on_failure_callback": record_failure,
    "retries": 2,
    "retry_delay": timedelta(seconds=float(os.environ.get("LAKEFEED_RETRY_DELAY_SECONDS", "60"))),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=15),
}


@contextmanager
def refusals_fail_the_task() -> Iterator[None]:
    """A :class:`~lakefeed.errors.Refusal` (bad params, a checkpoint of another table, bad input) fails
    the task at once: a retry would meet the same refusal. Anything else is retried as configured."""
    from airflow.sdk.exceptions import AirflowFailException

    from lakefeed.errors import Refusal

    try:
        yield
    except Refusal as exc:
        raise AirflowFailException(f"{type(exc).__name__}: {exc}") from exc


@contextmanager
def summary_kept_on_failure(ti) -> Iterator[None]:
    """A commit step that fails because jobs failed still leaves its run summary in XCom."""
    from lakefeed.pipeline import BatchesFailed, RefusedWithReport

    try:
        yield
    except (BatchesFailed, RefusedWithReport) as exc:
        ti.xcom_push(key="return_value", value=exc.report)
        raise


def planned_or_skip(ti, plan_task_id: str) -> dict:
    """The plan a run made, for its commit task; skip the commit when nothing was planned."""
    from airflow.sdk.exceptions import AirflowSkipException

    planned = ti.xcom_pull(task_ids=plan_task_id)
    if not planned:
        raise AirflowSkipException("nothing was planned")
    return planned
