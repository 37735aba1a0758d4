"""Airflow plugin: the lakefeed pipeline monitor in the Airflow UI (Browse → Lakefeed pipelines).

Its FastAPI app (``/lakefeed``, :mod:`lakefeed_airflow.monitor_app`) serves a JSON API and the page; the
external view embeds the page in the UI's navigation at ``/plugin/lakefeed``. Its root middleware
(:mod:`lakefeed_airflow.trigger_check`) refuses a trigger of a lakefeed DAG whose params make no request the
plan could serve, in a sentence, before the run exists. When the scheduler, the api-server, the
dag-processor or the triggerer loads it, it creates the pipelines' pools if they are missing
(:mod:`lakefeed_airflow.pools`), so no deployment stalls on a task whose pool does not exist.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin


class _MonitorApps:
    """``fastapi_apps``, importing the app (FastAPI, the api-server's security module) only when Airflow
    reads it, in the api-server: every other process that loads plugins (each task, the scheduler, the
    dag-processor) is spared the import (0.8 s)."""

    def __get__(self, instance, owner) -> list[dict]:
        from lakefeed_airflow.monitor_app import app

        return [{"app": app, "url_prefix": "/lakefeed", "name": "lakefeed pipeline monitor"}]


class _TriggerCheck:
    """``fastapi_root_middlewares``, imported only when the api-server reads it (as :class:`_MonitorApps`)."""

    def __get__(self, instance, owner) -> list[dict]:
        from lakefeed_airflow.trigger_check import TriggerParamsCheck

        return [{"middleware": TriggerParamsCheck, "name": "lakefeed trigger params check"}]


class LakefeedMonitorPlugin(AirflowPlugin):
    name = "lakefeed_monitor"
    fastapi_apps = _MonitorApps()
    fastapi_root_middlewares = _TriggerCheck()
    external_views = [  # noqa: RUF012 (AirflowPlugin reads it as a class attribute)
        {
            "name": "Lakefeed pipelines",
            "href": "/lakefeed/",
            "destination": "nav",
            "category": "browse",
            "url_route": "lakefeed",
        }
    ]

    @classmethod
    def on_load(cls, *args, **kwargs) -> None:
        from lakefeed_airflow.pools import ensure_pools_at_start

        ensure_pools_at_start()
