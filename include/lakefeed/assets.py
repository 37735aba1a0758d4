"""Which Delta targets a run changed, as the Airflow asset events its commit task emits.

Pure functions over the job summaries a run's commit step credited: one entry per target table that
got new data (a MERGE that changed nothing, or a replay, emits nothing), with the table's asset URI and
what was applied to it (windows, versions or resolved timestamps, row counts, the table's version
afterwards). A user's DAG schedules on ``Asset("<uri>")``; the URI is the table's location as
configured, local paths as ``file://`` URIs.
"""

from __future__ import annotations

import os
from typing import Any, Iterable
from urllib.parse import quote, urlsplit

FULL_REFRESH_MODE = "full-refresh"  # a CDF job summary's mode when it replaced its target

ALIASES = {
    "blob_changefeed_to_delta": "lakefeed_blob_targets",
    "delta_cdf_to_delta": "lakefeed_cdf_targets",
    "cockroach_changefeed_to_delta": "lakefeed_crdb_targets",
}


def table_uri(location: str) -> str:
    """The asset URI of a Delta table: a local path as ``file:///abs/path``, a URI as written (``abfss://…``)."""
    if urlsplit(location).scheme and not os.path.isabs(location):
        return location.rstrip("/")
    return "file://" + quote(os.path.abspath(location).rstrip("/") or "/")


def _change(table: str, extra: dict[str, Any]) -> dict[str, Any]:
    return {"table": table, "uri": table_uri(table), "extra": extra}


def _max(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def blob_changes(summaries: list[dict[str, Any]], events_table: str, state_table: str) -> list[dict[str, Any]]:
    """The events table changed when events were inserted; the state table when rows were inserted or updated."""
    windows = sorted({w for s in summaries for w in s.get("windows", [])})

    def total(key: str) -> int:
        return sum(s.get(key, 0) or 0 for s in summaries)

    changes = []
    if total("eventsInserted"):
        changes.append(_change(events_table, {
            "pipeline": "blob", "windows": windows, "rowsInserted": total("eventsInserted"),
            "rowsUpdated": 0, "rowsDeleted": 0,
            "targetVersion": _max(s.get("eventsTableVersion") for s in summaries)}))
    if total("stateInserted") or total("stateUpdated"):
        changes.append(_change(state_table, {
            "pipeline": "blob", "windows": windows, "rowsInserted": total("stateInserted"),
            "rowsUpdated": total("stateUpdated"), "rowsDeleted": 0,
            "targetVersion": _max(s.get("stateTableVersion") for s in summaries)}))
    return changes


def cdf_changes(name: str, target_table: str, summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summaries in plan order. A CDF target changed when a job inserted, updated or deleted rows, or replaced it (full refresh)."""
    refreshed = [s for s in summaries if s.get("mode") == FULL_REFRESH_MODE]
    inserted, updated, deleted = (sum(s.get(k, 0) or 0 for s in summaries) for k in ("inserted", "updated", "deleted"))
    if not (refreshed or inserted or updated or deleted):
        return []
    return [_change(target_table, {
        "pipeline": f"cdf:{name}",
        "versions": [[s.get("startingVersion"), s.get("endingVersion")] for s in summaries],
        "fullRefresh": bool(refreshed),
        "rowsInserted": inserted, "rowsUpdated": updated, "rowsDeleted": deleted,
        "targetVersion": _max(s.get("targetVersion") for s in summaries)})]


def crdb_changes(target_root: str, summaries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Summaries in plan order. One entry per topic table that had rows inserted, updated or deleted."""
    spans = [[s.get("afterResolved"), s.get("throughResolved")] for s in summaries]
    changes = []
    for topic in sorted({t for s in summaries for t in s.get("topics", {})}):
        figures = [s["topics"][topic] for s in summaries if topic in s.get("topics", {})]
        inserted, updated, deleted = (sum(f.get(k, 0) or 0 for f in figures) for k in ("inserted", "updated", "deleted"))
        if inserted or updated or deleted:
            changes.append(_change(f"{target_root.rstrip('/')}/{topic}", {
                "pipeline": "cockroach", "topic": topic, "resolvedSpans": spans,
                "rowsInserted": inserted, "rowsUpdated": updated, "rowsDeleted": deleted,
                "targetVersion": _max(f.get("targetVersion") for f in figures)}))
    return changes
