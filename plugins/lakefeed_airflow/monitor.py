"""The pipeline monitor's data, gathered in the api-server: configuration and checkpoints from Airflow
Variables, runs and their summaries from the metadata database (DagRun, the commit task's XCom), and each
source's position from JVM-free reads (``Segments.json``, ``_delta_log``, the sink's RESOLVED files).
Never starts Spark; never returns a secret (configs are shown through :func:`lakefeed.monitor.safe_config`,
errors through :func:`lakefeed.monitor.redact`). The figures themselves come from :mod:`lakefeed.monitor`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from lakefeed.monitor import (
    RunRow,
    blob_row,
    cdf_row,
    crdb_row,
    explain,
    health,
    lag_of,
    outcome_of,
    redact,
    run_base,
    run_purpose,
    safe_config,
)
from lakefeed_airflow.runs import FAILURE_KEY, REFUSAL_KEY

log = logging.getLogger(__name__)

RUNS_SHOWN = 20
BLOB_DAG, CDF_DAG, CRDB_DAG = "blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"


@dataclass(frozen=True)
class DagFacts:
    """What the monitor must know of a lakefeed DAG: the task whose XCom is the run summary, the params
    that name a range (a run with them is a backfill) and the control that re-initialises the pipeline."""

    commit_task: str
    range_params: tuple[str, ...]
    reset: str


def dag_facts(dag_id: str) -> DagFacts:
    from lakefeed_airflow import feeds

    return {
        BLOB_DAG: DagFacts(feeds.BLOB_COMMIT_TASK_ID, ("window_start", "window_end"), "Reset the checkpoint"),
        CDF_DAG: DagFacts(feeds.CDF_COMMIT_TASK_ID, ("starting_version", "ending_version"), "Full refresh"),
        CRDB_DAG: DagFacts(feeds.CRDB_COMMIT_TASK_ID, ("after_resolved", "through_resolved"), "Reset the checkpoint"),
    }[dag_id]


def recent_runs(dag_id: str, limit: int = RUNS_SHOWN) -> list[tuple[dict[str, Any], dict | None]]:
    """The DAG's latest runs, newest first, each with its run summary (the commit task's XCom) or None.
    A failed run carries the reason its first failing task recorded (:data:`FAILURE_KEY`; for runs older
    than that record, the refusal a plan or a job kept), explained for people."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import and_, or_, select

    facts = dag_facts(dag_id)
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
                    XComModel.key.in_([FAILURE_KEY, REFUSAL_KEY]),
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
            if state == "failed":
                found = recorded.get(r.run_id, {})
                task, text = (found.get(FAILURE_KEY) or found.get(REFUSAL_KEY) or [("", UNRECORDED)])[0]
                reason = explain(task, text, facts.reset)
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


def _guarded(read: Callable[[], Any]) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, message)`` when the source cannot be read now (shown, redacted)."""
    try:
        return read(), None
    except Exception as exc:
        log.warning("monitor: %s", redact(f"{type(exc).__name__}: {exc}"))
        return None, redact(f"{type(exc).__name__}: {exc}")


def _card(
    *,
    key: str,
    dag_id: str,
    title: str,
    config: dict,
    checkpoint: dict,
    position: dict,
    lag: dict,
    rows: list[RunRow],
    error: str | None,
) -> dict[str, Any]:
    runs = [row.to_dict() for row in rows]
    return {
        "key": key,
        "dagId": dag_id,
        "title": title,
        "config": safe_config(config),
        "checkpoint": checkpoint,
        "source": position,
        "lag": lag,
        "error": error,
        "runs": runs,
        "health": health(rows),
        "failedBatches": [{"runId": r["runId"], **b} for r in runs for b in r["failedBatches"]],
    }


def _hours_between(later: str, earlier: str) -> float:
    from lakefeed.blob.timegrid import HOUR
    from lakefeed.times import parse_time

    return round((parse_time(later) - parse_time(earlier)) / HOUR, 2)


def blob_card() -> dict[str, Any]:
    from lakefeed.blob.feed import ChangeFeed
    from lakefeed.times import format_time
    from lakefeed_airflow.settings import blob_checkpoint_store, blob_config
    from lakefeed_airflow.wasb_feed import feed_store

    config = blob_config(orm=True)
    checkpoint, error = _guarded(lambda: blob_checkpoint_store(config, orm=True).load())
    last_consumable, source_error = _guarded(
        lambda: ChangeFeed(feed_store(config.feed_root, config.wasb_conn_id)).last_consumable()
    )
    watermark = format_time(checkpoint.watermark) if checkpoint and checkpoint.watermark else None
    consumable = format_time(last_consumable) if last_consumable else None
    return _card(
        key="blob",
        dag_id=BLOB_DAG,
        title="Azure Blob change feed → Delta",
        config=dataclasses.asdict(config),
        checkpoint={
            "label": "watermark",
            "value": watermark,
            "document": json.loads(checkpoint.to_json()) if checkpoint else None,
        },
        position={"label": "lastConsumable", "value": consumable, "error": source_error},
        lag=lag_of("hours", consumable, watermark, _hours_between),
        rows=[blob_row(base, report) for base, report in recent_runs(BLOB_DAG)],
        error=error,
    )


def cdf_cards() -> list[dict[str, Any]]:
    from lakefeed.deltalog import DeltaLog
    from lakefeed_airflow.settings import cdf_checkpoint_store, cdf_config
    from lakefeed_airflow.wasb_feed import location_store

    config = cdf_config(orm=True)
    runs = recent_runs(CDF_DAG)
    cards = []
    for pipeline in config.pipelines:
        checkpoint, error = _guarded(lambda: cdf_checkpoint_store(pipeline, config, orm=True).load())  # noqa: B023
        latest, source_error = _guarded(
            lambda: DeltaLog(location_store(pipeline.source_table, pipeline.wasb_conn_id)).latest_version()  # noqa: B023
        )
        applied = checkpoint.applied_version if checkpoint else None
        cards.append(
            _card(
                key=f"cdf:{pipeline.name}",
                dag_id=CDF_DAG,
                title=f"Delta CDF {pipeline.name} → Delta",
                config=dataclasses.asdict(pipeline),
                checkpoint={
                    "label": "applied version",
                    "value": applied,
                    "document": json.loads(checkpoint.to_json()) if checkpoint else None,
                },
                position={"label": "latest version", "value": latest, "error": source_error},
                lag=lag_of("versions", latest, applied, lambda a, b: a - b),
                rows=[cdf_row(base, report, pipeline.name) for base, report in runs],
                error=error,
            )
        )
    return cards


def crdb_card() -> dict[str, Any]:
    from lakefeed.crdb.hlc import Hlc
    from lakefeed.crdb.sink import RESOLVED, list_sink
    from lakefeed_airflow.settings import crdb_checkpoint_store, crdb_config
    from lakefeed_airflow.wasb_feed import feed_store

    config = crdb_config(orm=True)
    checkpoint, error = _guarded(lambda: crdb_checkpoint_store(config, orm=True).load())
    resolved = checkpoint.resolved if checkpoint else None

    def newest_resolved() -> str | None:
        since = Hlc.parse(resolved) if resolved else None
        found = [
            f.timestamp
            for f in list_sink(feed_store(config.sink_root, config.wasb_conn_id), since)
            if f.kind == RESOLVED
        ]
        return str(max(found)) if found else None

    newest, source_error = _guarded(newest_resolved)
    return _card(
        key="cockroach",
        dag_id=CRDB_DAG,
        title="CockroachDB changefeed → Delta",
        config=dataclasses.asdict(config),
        checkpoint={
            "label": "resolved",
            "value": resolved,
            "document": json.loads(checkpoint.to_json()) if checkpoint else None,
        },
        position={"label": "newest RESOLVED", "value": newest, "error": source_error},
        lag=lag_of("seconds", newest, resolved, lambda a, b: round((Hlc.parse(a).wall - Hlc.parse(b).wall) / 1e9, 3)),
        rows=[crdb_row(base, report) for base, report in recent_runs(CRDB_DAG)],
        error=error,
    )


def overview(readable: Callable[[str], bool] = lambda dag_id: True) -> dict[str, Any]:
    """The card of every configured pipeline whose DAG's runs ``readable(dag_id)`` allows (a config that
    cannot be read is shown as that card's error); nothing is read for a pipeline that is not shown."""
    cards: list[dict[str, Any]] = []
    for key, dag_id, build in (
        ("blob", BLOB_DAG, lambda: [blob_card()]),
        ("cdf", CDF_DAG, cdf_cards),
        ("cockroach", CRDB_DAG, lambda: [crdb_card()]),
    ):
        if not readable(dag_id):
            continue
        built, error = _guarded(build)
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
