"""Airflow plugin: the lakefeed pipeline monitor in the Airflow UI (Browse → Lakefeed pipelines).

Its FastAPI app (``/lakefeed``, :mod:`lakefeed_airflow.monitor_app`) serves a JSON API and the page; the
external view embeds the page in the UI's navigation at ``/plugin/lakefeed``.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


def _app():
    from lakefeed_airflow.monitor_app import app

    return app


class LakefeedMonitorPlugin(AirflowPlugin):
    name = "lakefeed_monitor"
    fastapi_apps = [{"app": _app(), "url_prefix": "/lakefeed", "name": "lakefeed pipeline monitor"}]
    external_views = [{
        "name": "Lakefeed pipelines",
        "href": "/lakefeed/",
        "destination": "nav",
        "category": "browse",
        "url_route": "lakefeed",
    }]
