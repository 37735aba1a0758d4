"""Has the cluster's clock, less the safety lag, passed the checkpoint? What the SQL-pulled CockroachDB DAG's
sensor checks (:meth:`lakefeed.crdbsql.pipeline.CrdbSqlHooks.watch`), and its trigger polls: one
``cluster_logical_timestamp()`` on a short connection, never a JVM. Time always moves, so a scheduled run
waits only while the cluster cannot be reached (the error is the sensor's) or the lag is longer than an hour."""

from __future__ import annotations

from typing import Any

from lakefeed import pipeline as skeleton
from lakefeed.crdb.hlc import NANOS, Hlc
from lakefeed.crdbsql.pull import cluster_time


def ready(
    storage: skeleton.Storage,
    *,
    sql_conn_id: str,
    resolved: str | None,
    safety_lag_seconds: float = 30.0,
) -> tuple[bool, dict[str, Any]]:
    """Is there time past ``resolved`` (the checkpoint) that a range may pull now?"""
    now, _ = cluster_time(storage.sql(sql_conn_id))
    horizon = Hlc(now.wall - int(safety_lag_seconds * NANOS), 0)
    return resolved is None or horizon > Hlc.parse(resolved), {"resolved": resolved, "horizon": str(horizon)}
