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
from datetime import datetime, timezone
from typing import Any, Callable

from lakefeed.monitor import RunRow, blob_row, cdf_row, crdb_row, lag_of, redact, run_base, safe_config
from lakefeed_airflow.runs import REFUSAL_KEY

log = logging.getLogger(__name__)

RUNS_SHOWN = 20
BLOB_DAG, CDF_DAG, CRDB_DAG = "blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"


def recent_runs(dag_id: str, limit: int = RUNS_SHOWN) -> list[tuple[dict[str, Any], dict | None]]:
    """The DAG's latest runs, newest first, each with its run summary (the commit task's XCom) or None."""
    from sqlalchemy import select

    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)
                               .order_by(DagRun.id.desc()).limit(limit)).all()
        reports = {}
        if runs:
            rows = session.scalars(select(XComModel).where(
                XComModel.dag_id == dag_id, XComModel.task_id == _commit_task(dag_id),
                XComModel.key == "return_value", XComModel.map_index == -1,
                XComModel.run_id.in_([r.run_id for r in runs]))).all()
            reports = {row.run_id: XComModel.deserialize_value(row) for row in rows}
            refusals = {row.run_id: XComModel.deserialize_value(row) for row in session.scalars(select(XComModel).where(
                XComModel.dag_id == dag_id, XComModel.key == REFUSAL_KEY,
                XComModel.run_id.in_([r.run_id for r in runs]))).all()}
        return [({**run_base(r.run_id, _text(r.run_type), _text(r.state), r.start_date, r.end_date),
                  "refused": redact(refusals[r.run_id]) if r.run_id in refusals else None},
                 _as_report(reports.get(r.run_id))) for r in runs]


def _commit_task(dag_id: str) -> str:
    from lakefeed_airflow import blob_tasks, cdf_tasks, crdb_tasks

    return {BLOB_DAG: blob_tasks, CDF_DAG: cdf_tasks, CRDB_DAG: crdb_tasks}[dag_id].COMMIT_TASK_ID


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
    except Exception as exc:  # noqa: BLE001 - the page shows what went wrong instead of failing
        log.warning("monitor: %s", redact(f"{type(exc).__name__}: {exc}"))
        return None, redact(f"{type(exc).__name__}: {exc}")


def _card(*, key: str, dag_id: str, title: str, config: dict, checkpoint: dict, position: dict, lag: dict,
          rows: list[RunRow], error: str | None) -> dict[str, Any]:
    runs = [row.to_dict() for row in rows]
    return {
        "key": key, "dagId": dag_id, "title": title, "config": safe_config(config), "checkpoint": checkpoint,
        "source": position, "lag": lag, "error": error, "runs": runs,
        "failedBatches": [{"runId": r["runId"], **b} for r in runs for b in r["failedBatches"]],
        "refusedRuns": [{"runId": r["runId"], "refused": r["refused"]} for r in runs if r.get("refused")],
        "lastRun": runs[0] if runs else None,
    }


def _hours_between(later: str, earlier: str) -> float:
    from lakefeed.blob.timegrid import HOUR, parse_time

    return round((parse_time(later) - parse_time(earlier)) / HOUR, 2)


def blob_card() -> dict[str, Any]:
    from lakefeed.blob.feed import ChangeFeed
    from lakefeed.blob.timegrid import format_time
    from lakefeed_airflow.settings import blob_checkpoint_store, blob_config
    from lakefeed_airflow.wasb_feed import feed_store

    config = blob_config(orm=True)
    checkpoint, error = _guarded(lambda: blob_checkpoint_store(config, orm=True).load())
    last_consumable, source_error = _guarded(
        lambda: ChangeFeed(feed_store(config.feed_root, config.wasb_conn_id)).last_consumable())
    watermark = format_time(checkpoint.watermark) if checkpoint and checkpoint.watermark else None
    consumable = format_time(last_consumable) if last_consumable else None
    return _card(key="blob", dag_id=BLOB_DAG, title="Azure Blob change feed → Delta",
                 config=dataclasses.asdict(config),
                 checkpoint={"label": "watermark", "value": watermark,
                             "document": json.loads(checkpoint.to_json()) if checkpoint else None},
                 position={"label": "lastConsumable", "value": consumable, "error": source_error},
                 lag=lag_of("hours", consumable, watermark, _hours_between),
                 rows=[blob_row(base, report) for base, report in recent_runs(BLOB_DAG)], error=error)


def cdf_cards() -> list[dict[str, Any]]:
    from lakefeed.deltalog import DeltaLog
    from lakefeed_airflow.wasb_feed import location_store
    from lakefeed_airflow.settings import cdf_checkpoint_store, cdf_config

    config = cdf_config(orm=True)
    runs = recent_runs(CDF_DAG)
    cards = []
    for pipeline in config.pipelines:
        checkpoint, error = _guarded(lambda: cdf_checkpoint_store(pipeline, config, orm=True).load())
        latest, source_error = _guarded(
            lambda: DeltaLog(location_store(pipeline.source_table, pipeline.wasb_conn_id)).latest_version())
        applied = checkpoint.applied_version if checkpoint else None
        cards.append(_card(
            key=f"cdf:{pipeline.name}", dag_id=CDF_DAG, title=f"Delta CDF {pipeline.name} → Delta",
            config=dataclasses.asdict(pipeline),
            checkpoint={"label": "applied version", "value": applied,
                        "document": json.loads(checkpoint.to_json()) if checkpoint else None},
            position={"label": "latest version", "value": latest, "error": source_error},
            lag=lag_of("versions", latest, applied, lambda a, b: a - b),
            rows=[cdf_row(base, report, pipeline.name) for base, report in runs], error=error))
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
        found = [f.timestamp for f in list_sink(feed_store(config.sink_root, config.wasb_conn_id), since)
                 if f.kind == RESOLVED]
        return str(max(found)) if found else None

    newest, source_error = _guarded(newest_resolved)
    return _card(key="cockroach", dag_id=CRDB_DAG, title="CockroachDB changefeed → Delta",
                 config=dataclasses.asdict(config),
                 checkpoint={"label": "resolved", "value": resolved,
                             "document": json.loads(checkpoint.to_json()) if checkpoint else None},
                 position={"label": "newest RESOLVED", "value": newest, "error": source_error},
                 lag=lag_of("seconds", newest, resolved,
                            lambda a, b: round((Hlc.parse(a).wall - Hlc.parse(b).wall) / 1e9, 3)),
                 rows=[crdb_row(base, report) for base, report in recent_runs(CRDB_DAG)], error=error)


def overview(readable: Callable[[str], bool] = lambda dag_id: True) -> dict[str, Any]:
    """The card of every configured pipeline whose DAG's runs ``readable(dag_id)`` allows (a config that
    cannot be read is shown as that card's error); nothing is read for a pipeline that is not shown."""
    cards = []
    for key, dag_id, build in (("blob", BLOB_DAG, lambda: [blob_card()]), ("cdf", CDF_DAG, cdf_cards),
                               ("cockroach", CRDB_DAG, lambda: [crdb_card()])):
        if not readable(dag_id):
            continue
        built, error = _guarded(build)
        cards.extend(built or [{"key": key, "dagId": dag_id, "title": key, "error": error, "runs": [],
                                "failedBatches": []}])
    return {"generatedAt": datetime.now(timezone.utc).isoformat().replace("+00:00", "Z"), "pipelines": cards}
