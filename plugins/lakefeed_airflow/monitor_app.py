"""The monitor's web app, mounted by the ``lakefeed_monitor`` plugin under ``/lakefeed`` in the Airflow
api-server: ``GET /lakefeed/api/pipelines`` (JSON, :func:`lakefeed_airflow.monitor.overview`) and
``GET /lakefeed/`` (the page, shown inside Airflow's UI through the plugin's external view).

Plugin apps are not authenticated by default: every route here depends on Airflow's own
``requires_access_dag`` (a logged-in user allowed to read DAG runs), the check the core API uses, so the
session cookie of the Airflow UI or a bearer token from ``/auth/token`` is required.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import requires_access_dag

PAGE = Path(__file__).with_name("static") / "monitor.html"

app = FastAPI(title="lakefeed pipeline monitor",
              dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))])


@app.get("/api/pipelines")
def pipelines() -> dict:
    """Every configured pipeline: checkpoint, source position, lag, recent runs with their summaries."""
    from lakefeed_airflow.monitor import overview

    return overview()


@app.get("/", response_class=HTMLResponse)
def page() -> HTMLResponse:
    return HTMLResponse(PAGE.read_text(encoding="utf-8"), headers={"Cache-Control": "no-store"})
