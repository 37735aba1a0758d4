"""The watcher: a leaf task that fails the DAG run when any task failed.

The commit tasks run with ``trigger_rule="all_done"`` (they must advance the
checkpoint over finished batches even when a later batch failed), so they are
leaves that can end in success or skip after an upstream failure; the run's
state follows its leaves. This task makes a failure anywhere fail the run
(the pattern Airflow's own system tests use).
"""

from __future__ import annotations

from airflow.sdk import task


@task(trigger_rule="one_failed", retries=0, on_failure_callback=None)  # a consequence, not a reason
def fail_run_if_a_task_failed() -> None:
    raise RuntimeError("a task of this DAG run failed; see its log (the checkpoint only covers finished work)")
