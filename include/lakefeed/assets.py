"""Which Delta targets changed, as the Airflow asset events a commit task emits.

Pure functions over ledger entries (:mod:`lakefeed.ledger`: the pipeline's commits that changed a
target's rows, read from the target's log): one change per target table with entries (a MERGE that
changed nothing, or a replay, commits nothing and so announces nothing), with the table's asset URI and
what was applied to it (windows, versions or RESOLVED spans, row counts from Delta's commit metrics, the
commits and the table's newest version among them). A user's DAG schedules on ``Asset("<uri>")``; the
URI is the table's location as configured, local paths as ``file://`` URIs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote, urlsplit

from lakefeed.delta import REFRESH_MARKER
from lakefeed.ledger import LedgerEntry

FULL_REFRESH_MODE = "full-refresh"  # a CDF job summary's mode when it replaced its target


def table_uri(location: str) -> str:
    """The asset URI of a Delta table: a local path as ``file:///abs/path``, a URI as written (``abfss://…``)."""
    if urlsplit(location).scheme and not os.path.isabs(location):
        return location.rstrip("/")
    return "file://" + quote(os.path.abspath(location).rstrip("/") or "/")


def _change(table: str, entries: list[LedgerEntry], extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "table": table,
        "uri": table_uri(table),
        "extra": {
            **extra,
            "rowsInserted": sum(e.inserted for e in entries),
            "rowsUpdated": sum(e.updated for e in entries),
            "rowsDeleted": sum(e.deleted for e in entries),
            "commits": [e.version for e in entries],
            "commitIds": [e.commit_id for e in entries],
            "targetVersion": max(e.version for e in entries),
        },
    }


def announced_in(events: Iterable[tuple[str, dict[str, Any]]]) -> Callable[[LedgerEntry], bool]:
    """Whether an asset event among ``events`` (``(asset uri, extra)``, as Airflow recorded them) names a
    ledger entry: by Delta's commit id (``commitIds``, unique to the commit), or, for an event that names
    none (older events, commits without an id), by the table and version (``commits``)."""
    ids: set[str] = set()
    versions: set[tuple[str, int]] = set()
    for uri, extra in events:
        if not isinstance(extra, dict):
            continue
        commits = extra.get("commits") or []
        commit_ids = extra.get("commitIds") or [None] * len(commits)
        for version, commit_id in zip(commits, commit_ids, strict=False):
            if commit_id:
                ids.add(str(commit_id))
            elif isinstance(version, int):
                versions.add((uri, version))

    def named(entry: LedgerEntry) -> bool:
        return bool(entry.commit_id and entry.commit_id in ids) or (table_uri(entry.table), entry.version) in versions

    return named


def _unique(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    for value in values:
        if value not in seen:
            seen.append(value)
    return seen


def blob_changes(entries: dict[str, list[LedgerEntry]], events_table: str, state_table: str) -> list[dict[str, Any]]:
    """The events and state tables, each when it has entries: the windows the entries applied."""
    changes = []
    for table in (events_table, state_table):
        mine = entries.get(table) or []
        if mine:
            windows = sorted({w for e in mine for w in e.tags.get("windows") or []})
            changes.append(_change(table, mine, {"pipeline": "blob", "windows": windows}))
    return changes


def cdf_changes(name: str, target_table: str, entries: dict[str, list[LedgerEntry]]) -> list[dict[str, Any]]:
    """The pipeline's target, when it has entries: the source version ranges they applied (a full refresh
    as ``[v, v]``, the version it copied) and whether one of them replaced the table."""
    mine = entries.get(target_table) or []
    if not mine:
        return []
    refreshes = [e for e in mine if REFRESH_MARKER in e.tags]
    versions = _unique(
        [
            [e.tags[REFRESH_MARKER]] * 2
            if REFRESH_MARKER in e.tags
            else [e.tags.get("startingVersion"), e.tags.get("endingVersion")]
            for e in mine
        ]
    )
    return [
        _change(target_table, mine, {"pipeline": f"cdf:{name}", "versions": versions, "fullRefresh": bool(refreshes)})
    ]


def crdb_changes(entries: dict[str, list[LedgerEntry]]) -> list[dict[str, Any]]:
    """One change per topic table with entries: the RESOLVED spans they applied."""
    changes = []
    for table in sorted(entries):
        mine = entries[table]
        if not mine:
            continue
        topic = mine[0].tags.get("topic") or table.rstrip("/").rsplit("/", 1)[-1]
        spans = _unique([[e.tags.get("afterResolved"), e.tags.get("throughResolved")] for e in mine])
        changes.append(_change(table, mine, {"pipeline": "cockroach", "topic": topic, "resolvedSpans": spans}))
    return changes
