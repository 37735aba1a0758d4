"""The sensors' readiness checks as the triggers run them, through the ``wasb`` connections
(:class:`lakefeed_airflow.wasb_feed.AirflowStorage`): for tests that call them outside a triggerer."""

from __future__ import annotations

from typing import Any


def feed_readiness(**watched: Any) -> tuple[bool, dict[str, Any]]:
    """:func:`lakefeed.blob.readiness.ready` through the ``wasb`` connections."""
    from lakefeed.blob.readiness import ready
    from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

    return ready(AIRFLOW_STORAGE, **watched)


def resolved_readiness(**watched: Any) -> tuple[bool, dict[str, Any]]:
    """:func:`lakefeed.crdb.readiness.ready` through the ``wasb`` connections."""
    from lakefeed.crdb.readiness import ready
    from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

    return ready(AIRFLOW_STORAGE, **watched)


def sources_behind(sources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """:func:`lakefeed.cdf.readiness.sources_behind` through the ``wasb`` connections."""
    from lakefeed.cdf.readiness import sources_behind as behind
    from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

    return behind(sources, AIRFLOW_STORAGE)
