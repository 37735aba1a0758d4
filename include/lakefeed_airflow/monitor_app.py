"""The monitor's web app, mounted by the ``lakefeed_monitor`` plugin under ``/lakefeed`` in the Airflow
api-server: ``GET /lakefeed/api/pipelines`` (JSON, :func:`lakefeed_airflow.monitor.overview`) and
``GET /lakefeed/`` (the page, shown inside Airflow's UI through the plugin's external view).

Plugin apps are not authenticated by default: every route here depends on Airflow's own
``requires_access_dag`` (a logged-in user allowed to read DAG runs), the check the core API uses, so the
session cookie of the Airflow UI or a bearer token from ``/auth/token`` is required. Each pipeline is then
shown only to a user the auth manager lets read its DAG's runs (per-DAG grants, as FAB or Keycloak give).
"""

from __future__ import annotations

from pathlib import Path

from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from fastapi import Depends, FastAPI
from fastapi.responses import HTMLResponse

PAGE = Path(__file__).with_name("static") / "monitor.html"

app = FastAPI(
    title="lakefeed pipeline monitor", dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))]
)


@app.get("/api/pipelines")
def pipelines(user: GetUserDep) -> dict:
    """Every configured pipeline whose DAG's runs the user may read: checkpoint, source position, lag,
    recent runs with their summaries."""
    from lakefeed_airflow.monitor import overview

    return overview(readable=lambda dag_id: may_read_runs(user, dag_id))


def may_read_runs(user, dag_id: str) -> bool:
    """Whether the auth manager lets ``user`` read the runs of ``dag_id`` (the check of the core API's
    ``/dags/{dag_id}/dagRuns``)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.models.dag import DagModel

    return get_auth_manager().is_authorized_dag(
        method="GET",
        access_entity=DagAccessEntity.RUN,
        details=DagDetails(id=dag_id, team_name=DagModel.get_team_name(dag_id)),
        user=user,
    )


@app.get("/", response_class=HTMLResponse)
def page() -> HTMLResponse:
    return HTMLResponse(PAGE.read_text(encoding="utf-8"), headers={"Cache-Control": "no-store"})
