"""The shape every lakefeed DAG shares, wired once:

    <sensor> → <plan> → spark_arguments → [<stage>[one per job, mapped] →] <apply>[one spark-submit per
                                          job, mapped] → <commit>;  (every task) → fail_run_if_a_task_failed

Each DAG is made from its feed's spec (:func:`feed_dag`): the sensor, and the feed
(:class:`lakefeed.pipeline.Feed`: ``plan(params, run)``, ``job_arguments(plan)``, ``job_connections(plan)``,
``job_lineage(plan)``, ``commit(plan, outputs, run_id, announced_since)``; the plan crosses to the later
tasks as its document, read back with ``read_plan``). Besides the sensor's own check, only the plan reads
the configuration (and the checkpoint) when it runs, and carries the configuration in its XCom (``config``): the job
arguments, the Spark settings and timeout, the ``wasb`` connection and the commit step all come from
the plan, so an edit of the Variable in the middle of a run cannot make a commit step vouch for work
the jobs did not do. This module turns them into tasks with the retry, trigger-rule and
failure behaviour the pipelines promise: a refusal fails a task without retry, the commit step runs
even when jobs failed and keeps its run summary in XCom, and any failed task fails the run. The commit
step emits an asset event per Delta target the run changed.

Every task may run on another worker: the jobs' summaries reach the commit step as the XComs of the
spark-submit tasks (:class:`~lakefeed_airflow.runs.JobOutputs`); the commit steps of every lakefeed
DAG share the one-slot pool ``lakefeed_checkpoints``, so the scheduler never runs two checkpoint writers
at once, whichever workers they land on, and those of one DAG also take turns through XCom
(:mod:`lakefeed_airflow.turns`) for what ignores pools (``airflow dags test``). The commit step reads
the asset events its alias already recorded (its inlet), so it announces exactly the ledger entries no
event names yet (:mod:`lakefeed.ledger`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

from airflow.sdk import Asset, AssetAlias, BaseOperator, Param, dag, get_current_context, task

from lakefeed.assets import announced_in
from lakefeed.documents import to_document
from lakefeed.feeds import FeedSpec
from lakefeed.ledger import AnnouncedSince, IsAnnounced
from lakefeed.spark import delta_package
from lakefeed_airflow import feeds
from lakefeed_airflow.dag_defaults import (
    CHECKPOINT_POOL,
    DAGRUN_TIMEOUT,
    DEFAULT_ARGS,
    HOURLY,
    MAX_ACTIVE_RUNS,
    SPARK_CONN_ID,
    SPARK_POOL,
    START_DATE,
    planned_or_skip,
    refusals_fail_the_task,
    summary_kept_on_failure,
)
from lakefeed_airflow.operators import LakefeedSparkSubmitOperator
from lakefeed_airflow.runs import job_outputs
from lakefeed_airflow.sensors import FeedReadySensor
from lakefeed_airflow.watcher import fail_run_if_a_task_failed

ARGUMENTS_TASK_ID = "spark_arguments"


def emit_asset_events(alias_events, report: dict) -> None:
    """One asset event per Delta target the run changed (``report["targetsChanged"]``,
    :mod:`lakefeed.assets`), through the pipeline's asset alias: downstream DAGs schedule on
    ``Asset("<table uri>")``. Events of a failed commit task are dropped by Airflow."""
    for change in report.get("targetsChanged", []):
        alias_events.add(Asset(change["uri"]), extra=change["extra"])


def recorded_events(alias_events: Callable[[], Any]) -> AnnouncedSince:
    """What the asset events Airflow recorded through the pipeline's alias announced
    (:func:`lakefeed.assets.announced_in`), read from a given commit time on. ``alias_events`` gives a
    fresh accessor each time (``after`` changes an accessor in place and caches what it read)."""

    def announced_since(since_ms: int | None) -> IsAnnounced:
        events = alias_events()
        if since_ms is not None:
            events = events.after(datetime.fromtimestamp(since_ms / 1000, tz=UTC).isoformat())
        return announced_in((event.asset.uri, event.extra) for event in events)

    return announced_since


def _lineage() -> ModuleType | None:
    """:mod:`lakefeed_airflow.lineage`, or None where Airflow's OpenLineage provider is not installed (no lineage)."""
    try:
        from lakefeed_airflow import lineage
    except ImportError:
        return None
    return lineage


def feed_dag(spec: FeedSpec, doc_md: str | None = None) -> Any:
    """The DAG of the feed ``spec`` declares (``dags/<dag_id>.py`` calls it): hourly over data intervals,
    its trigger form, its sensor (:class:`~lakefeed_airflow.sensors.FeedReadySensor`) and the tasks every
    lakefeed DAG shares (:func:`wire_pipeline`). Reads no Variable: the DAG is the same whatever they hold."""
    form = spec.form()
    ranged = " or ".join(f"(params.{name} is not none and params.{name} != '')" for name in spec.range_params)
    skip_reason = (
        f"{{{{ 'backfill run' if dag_run.run_type == 'backfill' or {ranged} "
        f"else ('{spec.reset_control.lower()}' if params.{spec.reset_param} else '') }}}}"
    )

    @dag(
        dag_id=spec.dag_id,
        description=spec.description,
        schedule=HOURLY,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=MAX_ACTIVE_RUNS,
        is_paused_upon_creation=spec.paused_at_creation or None,  # None: Airflow's setting decides
        dagrun_timeout=DAGRUN_TIMEOUT,
        tags=["lakefeed", *spec.tags],
        default_args=DEFAULT_ARGS,
        params={
            name: Param(fields["default"], **{k: v for k, v in fields.items() if k != "default"})
            for name, fields in form.items()
        },
        doc_md=doc_md,
    )
    def pipeline() -> None:
        sensor = FeedReadySensor(
            task_id=spec.sensor_task,
            feed=spec.dag_id,
            pipeline="{{ params.pipeline or '' }}" if "pipeline" in form else "",
            skip_reason=skip_reason,
            deferrable=True,
            retries=0,
        )
        wire_pipeline(sensor=sensor, spec=spec)

    return pipeline()


def wire_pipeline(*, sensor: BaseOperator, spec: FeedSpec) -> None:
    """Create the tasks after ``sensor`` inside a ``@dag`` function. The Spark settings, timeout and the
    ``wasb`` connection (whose credential the job gets in its environment) come from the configuration
    the plan carries: each job's connection from ``feed.job_connections(plan)``."""
    feed = feeds.feed(spec)
    plan_task_id, apply_task_id, commit_task_id = spec.plan_task, spec.apply_task, spec.commit_task
    config = f"ti.xcom_pull(task_ids='{plan_task_id}')['config']"

    @task(task_id=plan_task_id, retries=1, multiple_outputs=False)
    def plan_task(params=None) -> dict:
        """A refusal fails it without retry (its reason recorded for the monitor by ``record_failure``);
        one of Airflow's Backfill runs whose hour the source has not reached ends skipped."""
        from airflow.sdk.exceptions import AirflowSkipException

        from lakefeed.errors import WindowNotReadyError
        from lakefeed.pipeline import backfill_not_ready
        from lakefeed_airflow.runs import NOT_READY_KEY, run_context

        context = get_current_context()
        run = run_context(context)
        with refusals_fail_the_task():
            try:
                return to_document(feed.plan(params or {}, run))
            except WindowNotReadyError as exc:
                if run.is_airflow_backfill:
                    # Nothing applied, and not "up to date": said in the log, and kept for the monitor's row.
                    reason = backfill_not_ready(run, exc)
                    logging.getLogger(__name__).warning("%s", reason)
                    context["ti"].xcom_push(key=NOT_READY_KEY, value={"error": f"{type(exc).__name__}: {reason}"})
                    raise AirflowSkipException(reason) from exc
                raise

    @task(task_id=ARGUMENTS_TASK_ID)
    def spark_arguments(planned: dict) -> list[dict]:
        """One submission per job: its ``application_args``, the ``wasb`` connection it runs with and the
        datasets it reads and writes (its lineage)."""
        plan = feed.read_plan(planned)
        arguments = feed.job_arguments(plan)
        connections = feed.job_connections(plan)
        lineage_module = _lineage()
        lineage = (
            lineage_module.planned_lineage(lambda: feed.job_lineage(plan), connections)
            if lineage_module
            else [None] * len(connections)
        )
        return [
            {"application_args": args, "wasb_conn_id": connection or "", "lineage": declared}
            for args, connection, declared in zip(arguments, connections, lineage, strict=True)
        ]

    alias = AssetAlias(spec.alias)

    @task(
        task_id=commit_task_id,
        trigger_rule="all_done",
        retries=0,
        multiple_outputs=False,
        outlets=[alias],
        inlets=[alias],
        pool=CHECKPOINT_POOL,
    )
    def commit_task(ti=None, run_id=None, outlet_events=None, inlet_events=None) -> dict:
        from lakefeed_airflow.turns import Registers, turn

        planned = planned_or_skip(ti, plan_task_id)
        submissions = ti.xcom_pull(task_ids=ARGUMENTS_TASK_ID) or []
        outputs = job_outputs(ti, apply_task_id, len(submissions))
        with (
            refusals_fail_the_task(),
            summary_kept_on_failure(ti),
            turn(Registers(ti, commit_task_id), run_id) as lease,
        ):
            fenced = feeds.feed(spec, fence=lease.check)
            report = to_document(
                fenced.commit(fenced.read_plan(planned), outputs, run_id, recorded_events(lambda: inlet_events[alias]))
            )
        emit_asset_events(outlet_events[alias], report)
        lineage_module = _lineage()
        if lineage_module:
            lineage_module.emit_run_lineage(ti, report, [s.get("lineage") for s in submissions])
        lease.check()  # its asset events are recorded as it ends: still inside the lease
        return report

    planned = plan_task()
    submissions = spark_arguments(planned)  # type: ignore[arg-type]  # the plan's XComArg
    apply = LakefeedSparkSubmitOperator.partial(
        task_id=apply_task_id,
        application=spec.job_script,
        conn_id=SPARK_CONN_ID,
        pool=SPARK_POOL,
        packages=delta_package(),
        name=spec.dag_id,
        extra_conf=f"{{{{ ({config}.spark_conf or {{}}) | tojson }}}}",
        timeout_minutes=f"{{{{ {config}.spark_job_timeout_minutes }}}}",
        summary_root=f"{{{{ {config}.job_summary_root or '' }}}}",
    ).expand_kwargs(submissions)
    committed = commit_task()
    sensor >> planned
    apply >> committed
    watched = [sensor, planned, apply, committed]
    if spec.stage_task:

        @task(task_id=spec.stage_task)  # the DAG's retries
        def stage_task(submission: dict, ti=None) -> dict:
            """Job ``map_index``'s work before Spark (``FeedHooks.stage``): a refusal fails it without retry;
            anything else (a dropped connection) is retried, and redoes the whole of the job's stage."""
            with refusals_fail_the_task():
                return feed.stage(feed.read_plan(ti.xcom_pull(task_ids=plan_task_id)), ti.map_index)

        staged = stage_task.expand(submission=submissions)
        staged >> apply
        watched.append(staged)
    watched >> fail_run_if_a_task_failed()
