"""What the pipeline monitor shows, computed from what a pipeline leaves behind: its checkpoint, its
source's position, and the run summaries its commit task keeps in XCom.

Pure functions (no Airflow, no I/O) so the figures are unit-tested; the plugin
(:mod:`lakefeed_airflow.monitor`) gathers the inputs from Airflow's metadata and JVM-free source reads.
Every row is one DAG run; figures a run did not report are ``None`` (the page shows a dash).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from lakefeed.azure import REDACTION_REGEX

REDACTED = "***"
_SECRET_VALUE = re.compile(r"(?i)((?:sig|accountkey|sharedaccesssignature|password|secret)=)[^&;\s'\"]+")
_SECRET_NAME = re.compile(REDACTION_REGEX)


@dataclass
class RunRow:
    """One DAG run of a pipeline, with the figures of its run summary."""

    runId: str
    runType: str
    state: str
    start: str | None
    end: str | None
    wallSeconds: float | None
    kind: str | None = None             # scheduled | backfill | reset (the summary's position rule)
    applied: str | None = None          # windows, versions or resolved span, for people
    read: int | None = None             # records / change rows / messages read
    claimed: int | None = None          # blob: events of the run's windows
    strays: int | None = None           # blob: events of other hours met while reading neighbours
    duplicates: int | None = None
    inserted: int | None = None
    updated: int | None = None
    deleted: int | None = None
    sparkSeconds: float | None = None
    lag: float | None = None
    failedBatches: list = field(default_factory=list)
    targetsChanged: list = field(default_factory=list)
    refused: str | None = None          # why the run's plan refused it (no job ran): a data loss, a moved target

    @property
    def throughput(self) -> float | None:
        if self.read is None or not self.sparkSeconds:
            return None
        return round(self.read / self.sparkSeconds, 1)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "throughput": self.throughput}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def run_base(run_id: str, run_type: str, state: str, start: datetime | None, end: datetime | None) -> dict[str, Any]:
    wall = round((end - start).total_seconds(), 1) if start and end else None
    return {"runId": run_id, "runType": run_type, "state": state, "start": _iso(start), "end": _iso(end),
            "wallSeconds": wall}


def _span(values: list[str]) -> str | None:
    if not values:
        return None
    return values[0] if len(values) == 1 else f"{values[0]} … {values[-1]} ({len(values)})"


def blob_row(base: dict[str, Any], report: dict[str, Any] | None) -> RunRow:
    """A blob change feed run: windows applied, records read, events claimed, strays, duplicates,
    events inserted and state rows inserted/updated."""
    if not report:
        return RunRow(**base)
    windows = report.get("windowsApplied")  # reports written before it: the windows of the changes announced
    if windows is None:
        windows = sorted({w for change in report.get("targetsChanged", []) for w in change["extra"].get("windows", [])})
    batches = report.get("batches")
    applied = _span(windows) or (f"{report.get('windowsPlanned', 0)} window(s) in {batches} batch(es)"
                                 if batches is not None else None)
    return RunRow(**base, kind=report.get("kind"), applied=applied, read=report.get("recordsRead"),
                  claimed=report.get("eventsClaimed"), strays=report.get("strays"),
                  duplicates=report.get("duplicatesRemoved"),
                  inserted=_sum(report, "eventsInserted", "stateInserted"), updated=report.get("stateUpdated"),
                  deleted=0 if "eventsInserted" in report else None, sparkSeconds=report.get("sparkSeconds"),
                  lag=report.get("lagHours"), failedBatches=report.get("batchesFailed", []),
                  targetsChanged=report.get("targetsChanged", []))


def cdf_row(base: dict[str, Any], report: dict[str, Any] | None, pipeline: str) -> RunRow:
    """One CDF pipeline's part of a run: version ranges, change rows read, rows inserted/updated/deleted."""
    mine = (report or {}).get("pipelines", {}).get(pipeline)
    if not mine:
        return RunRow(**base)
    applied = _span([f"{a}..{b}" if a != b else f"{a}" for a, b in mine.get("versions", [])])
    return RunRow(**base, kind=mine.get("kind"), applied=applied, read=mine.get("rowsRead"),
                  inserted=mine.get("inserted"), updated=mine.get("updated"), deleted=mine.get("deleted"),
                  sparkSeconds=mine.get("sparkSeconds"), lag=mine.get("lagVersions"),
                  failedBatches=mine.get("jobsFailed", []),
                  targetsChanged=[c for c in report.get("targetsChanged", [])
                                  if c["extra"].get("pipeline") == f"cdf:{pipeline}"])


def crdb_row(base: dict[str, Any], report: dict[str, Any] | None) -> RunRow:
    """A CockroachDB run: resolved span, messages read, duplicates dropped, rows inserted/updated/deleted."""
    if not report:
        return RunRow(**base)
    before, after = report.get("resolvedBefore"), report.get("resolved")
    applied = f"{before or 'first file'} → {after}" if after and after != before else None
    return RunRow(**base, kind=report.get("kind"), applied=applied, read=report.get("messagesRead"),
                  duplicates=report.get("duplicatesDropped"), inserted=report.get("inserted"),
                  updated=report.get("updated"), deleted=report.get("deleted"),
                  sparkSeconds=report.get("sparkSeconds"), lag=report.get("lagSeconds"),
                  failedBatches=report.get("batchesFailed", []), targetsChanged=report.get("targetsChanged", []))


def _sum(report: dict[str, Any], *keys: str) -> int | None:
    present = [report[k] for k in keys if report.get(k) is not None]
    return sum(present) if present else None


def lag_of(unit: str, source_position: Any, checkpoint_position: Any, measure) -> dict[str, Any]:
    """The pipeline's lag now: ``measure(source, checkpoint)`` in ``unit``, or None when either is unknown."""
    value = measure(source_position, checkpoint_position) if source_position is not None \
        and checkpoint_position is not None else None
    return {"value": value, "unit": unit}


def redact(text: Any) -> Any:
    """A value safe to show: secret-looking values in it (``sig=…``, ``AccountKey=…``) masked."""
    if not isinstance(text, str):
        return text
    return _SECRET_VALUE.sub(lambda m: m.group(1) + REDACTED, text)


def safe_config(config: dict[str, Any]) -> dict[str, Any]:
    """A pipeline config for display: keys that name secrets dropped, values with secrets masked."""
    shown = {}
    for key, value in config.items():
        if _SECRET_NAME.search(key):
            continue
        if isinstance(value, dict):
            value = safe_config(value)
        shown[key] = redact(value)
    return shown
