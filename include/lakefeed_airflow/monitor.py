"""The pipeline monitor's data, gathered in the api-server: configuration and checkpoints from Airflow
Variables, runs and their summaries from the metadata database (DagRun, the commit task's XCom), and each
source's position from JVM-free reads (``Segments.json``, ``_delta_log``, the sink's RESOLVED files).
Never starts Spark; never returns a secret (configs are shown through :func:`lakefeed.monitor.safe_config`,
errors through :func:`lakefeed.monitor.redact`). The figures themselves come from :mod:`lakefeed.monitor`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lakefeed.feeds import FeedSpec, spec_of, specs
from lakefeed.monitor import (
    card,
    explain,
    guarded,
    health,
    outcome_of,
    run_base,
    run_purpose,
)
from lakefeed_airflow.runs import FAILURE_KEY, NOT_READY_KEY, REFUSAL_KEY

log = logging.getLogger(__name__)

RUNS_SHOWN = 20


def wired(dag_id: str) -> FeedSpec:
    """The spec of the lakefeed DAG ``dag_id``."""
    spec = spec_of(dag_id)
    if spec is None:
        raise KeyError(f"{dag_id} is not a lakefeed DAG")
    return spec


def recent_runs(dag_id: str, limit: int = RUNS_SHOWN) -> list[tuple[dict[str, Any], dict | None]]:
    """The DAG's latest runs, newest first, each with its run summary (the commit task's XCom) or None.
    A failed run carries the reason its first failing task recorded (:data:`FAILURE_KEY`; for runs older
    than that record, the refusal a plan or a job kept), explained for people."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import and_, or_, select

    facts = wired(dag_id)
    with create_session() as session:
        runs = session.scalars(
            select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.id.desc()).limit(limit)
        ).all()
        if not runs:
            return []
        run_ids = [r.run_id for r in runs]
        xcoms = session.scalars(
            select(XComModel)
            .where(
                XComModel.dag_id == dag_id,
                XComModel.run_id.in_(run_ids),
                or_(
                    XComModel.key.in_([FAILURE_KEY, REFUSAL_KEY, NOT_READY_KEY]),
                    and_(
                        XComModel.key == "return_value",
                        XComModel.task_id == facts.commit_task,
                        XComModel.map_index == -1,
                    ),
                ),
            )
            .order_by(XComModel.timestamp)
        ).all()
        skipped = {
            run_id
            for (run_id,) in session.execute(
                select(TaskInstance.run_id).where(
                    TaskInstance.dag_id == dag_id, TaskInstance.run_id.in_(run_ids), TaskInstance.state == "skipped"
                )
            ).all()
        }
        reports: dict[str, dict | None] = {}
        recorded: dict[str, dict[str, list[tuple[str, str]]]] = {}  # run → key → [(task, error)], oldest first
        for row in xcoms:
            value = XComModel.deserialize_value(row)
            if row.key == "return_value":
                reports[row.run_id] = _as_report(value)
                continue
            task = f"{row.task_id}[{row.map_index}]" if row.map_index >= 0 else row.task_id
            text = value.get("error") if isinstance(value, dict) else value
            recorded.setdefault(row.run_id, {}).setdefault(row.key, []).append((task, str(text)))
        rows = []
        for r in runs:
            state = _text(r.state)
            reason = None
            found = recorded.get(r.run_id, {})
            if state == "failed":
                task, text = (found.get(FAILURE_KEY) or found.get(REFUSAL_KEY) or [("", UNRECORDED)])[0]
                reason = explain(task, text, facts.reset_control)
            elif state == "success" and found.get(NOT_READY_KEY):
                task, text = found[NOT_READY_KEY][0]  # skipped: its range is not in the source yet
                reason = explain(task, text, facts.reset_control)
            base = run_base(
                r.run_id,
                _text(r.run_type),
                state,
                r.start_date,
                r.end_date,
                purpose=run_purpose(_text(r.run_type), r.conf, facts.range_params),
                outcome=outcome_of(state, reports.get(r.run_id) is not None, r.run_id in skipped, reason),
                reason=reason,
            )
            rows.append((base, reports.get(r.run_id)))
        return rows


# A failed run without a recorded reason: marked failed by hand, or stopped by dagrun_timeout.
UNRECORDED = (
    "DagRunTimeout: the run failed without a task error on record: it ran past the DAG's "
    "dagrun_timeout, or a task was marked failed by hand"
)


def _text(value: Any) -> str:
    return str(getattr(value, "value", value))


def _as_report(value: Any) -> dict | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _cards(dag_id: str) -> list[dict[str, Any]]:
    from lakefeed_airflow.feeds import watched as watched_now

    watched = watched_now(dag_id)
    runs = recent_runs(dag_id)
    return [card(one, dag_id, runs) for one in watched]


def overview(readable: Callable[[str], bool] = lambda dag_id: True) -> dict[str, Any]:
    """The card of every configured pipeline whose DAG's runs ``readable(dag_id)`` allows (a config that
    cannot be read is shown as that card's error); nothing is read for a pipeline that is not shown."""
    cards: list[dict[str, Any]] = []
    for key, dag_id in ((spec.key, spec.dag_id) for spec in specs()):
        if not readable(dag_id):
            continue
        built, error = guarded(lambda: _cards(dag_id))  # noqa: B023
        cards.extend(
            built
            or [
                {
                    "key": key,
                    "dagId": dag_id,
                    "title": key,
                    "error": error,
                    "runs": [],
                    "failedBatches": [],
                    "health": health([]),
                }
            ]
        )
    return {"generatedAt": datetime.now(UTC).isoformat().replace("+00:00", "Z"), "pipelines": cards}
