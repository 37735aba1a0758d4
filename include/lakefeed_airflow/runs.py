"""Where a DAG run meets the pipeline skeleton (:mod:`lakefeed.pipeline`): the run as the library sees it,
and what its jobs left in XCom.

Each spark-submit task returns its job's summary (written by its driver after the MERGEs committed) as
its XCom, or, when the job refused its input, pushes the reason under ``refusal``; the commit step pulls
them by map index (:func:`job_outputs`). Nothing passes between tasks through a local folder, so every
task may run on another worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakefeed.pipeline import JobOutputs, RunContext

REFUSAL_KEY = "refusal"  # XCom of a job task that refused: the reason (read by the commit step)
FAILURE_KEY = "failure"  # XCom of any task that failed: {"error": "<ErrorClass>: message"} (shown by the monitor)
# XCom of a plan that skipped its run because the range is not in the source yet: {"error": "<ErrorClass>: message"}
# (the monitor shows the run as "not ready", with the reason, not as "up to date").
NOT_READY_KEY = "not_ready"


def run_context(context: Mapping[str, Any]) -> RunContext:
    """The DAG run of a task's Airflow context."""
    dag_run = context["dag_run"]
    run_type = getattr(dag_run.run_type, "value", dag_run.run_type)
    return RunContext(
        dag_id=dag_run.dag_id,
        run_id=dag_run.run_id,
        run_type=str(run_type),
        interval_start=context.get("data_interval_start"),
        interval_end=context.get("data_interval_end"),
    )


def job_outputs(ti: Any, task_id: str, count: int) -> JobOutputs:
    """From the XComs of the ``count`` mapped instances of ``task_id`` (their latest tries)."""
    indexes = list(range(count))
    if not indexes:
        return JobOutputs()
    pulled = ti.xcom_pull(task_ids=task_id, map_indexes=indexes)
    summaries = {i: s for i, s in zip(indexes, pulled, strict=False) if isinstance(s, dict)}
    unfinished = [i for i in indexes if i not in summaries]  # only those can have refused
    reasons = ti.xcom_pull(task_ids=task_id, map_indexes=unfinished, key=REFUSAL_KEY) if unfinished else []
    return JobOutputs(summaries, {i: str(r) for i, r in zip(unfinished, reasons, strict=False) if r})
