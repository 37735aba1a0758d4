"""What a blob change feed job reports of a batch of windows (its summary file and XCom, read by the commit
step): counts, the targets and the commits it made. Serialised by :mod:`lakefeed.documents`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lakefeed.blob.timegrid import HOUR
from lakefeed.documents import counted, to_document, totals
from lakefeed.lineage import Figures, JobLineage, JobOutcome, Written, counts_of, integer, total
from lakefeed.pipeline import RunReport
from lakefeed.times import format_time, parse_time


@dataclass
class RunSummary:
    windows: list[str]
    last_consumable: str
    segments: list[str]
    chunk_files: int = counted()
    empty_chunk_files: int = counted()
    bytes_read: int = counted()
    # Shard folders of segments read that held no chunk file, skipped as the run acknowledged:
    # [{"segment": ISO start, "shard": "log/<shard>/YYYY/MM/DD/hhmm/"}]; empty unless --acknowledge-data-loss.
    missing_shards: list[dict[str, str]] = field(default_factory=list)
    # Shard folders holding no chunk file that the evidence says are empty, read as empty (lakefeed.blob.shards),
    # and every such folder's verdict: [{"segment", "shard", "verdict": "empty" | "deleted", "reason"}].
    empty_shards: int = counted()
    shard_verdicts: list[dict[str, str]] = field(default_factory=list)
    events_table: str | None = None  # where the MERGEs went: the commit step checks them against its plan
    state_table: str | None = None
    records_read: int = counted()
    records_claimed: int = counted()
    control_dropped: int = counted()
    events_claimed: int = counted()
    strays: int = counted()
    duplicates_removed: int = counted()
    events_unique: int = counted()
    events_inserted: int = counted()
    state_inserted: int = counted()
    state_updated: int = counted()
    # What the MERGEs wrote, from Delta's commit metrics: a replay of applied windows commits nothing.
    commits_made: int = counted()
    events_bytes_written: int = counted()
    state_bytes_written: int = counted()
    state_files_rewritten: int = counted()
    state_rows_copied: int = counted()
    events_table_version: int | None = None
    state_table_version: int | None = None
    commits: list[dict[str, Any]] = field(default_factory=list)  # the commits made: [{"table", "version", "token"}]
    lag_hours: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_document(self)


@dataclass(kw_only=True)
class BlobRunReport(RunReport):
    """What a blob change feed run's commit step reports (its XCom, the monitor's row)."""

    windows_planned: int
    batches: int
    batches_failed: list[dict[str, Any]] = field(default_factory=list)  # the plan's batches, each with its refusal
    totals: dict[str, int] = field(default_factory=dict, metadata=totals(RunSummary))  # the jobs' counts, added up
    last_consumable: datetime
    grid_minute: int
    watermark_before: datetime | None
    watermark: datetime | None
    checkpoint_moved: bool
    windows_applied: list[str] = field(default_factory=list)
    data_loss_acknowledged: dict[str, Any] | None = None
    missing_shards: list[dict[str, str]] = field(default_factory=list)
    lag_hours: float | None = None


def lineage_outcome(lineage: JobLineage, summary: dict[str, Any]) -> JobOutcome:
    """What a batch applied, for lineage (:mod:`lakefeed.lineage`): its windows, the feed's chunk files read,
    the events and state tables written."""
    windows = [str(w) for w in summary.get("windows") or []]
    applied: dict[str, Any] = {"unit": "hour window", "windows": windows}
    if windows:
        applied.update({"from": windows[0], "until": format_time(parse_time(windows[-1]) + HOUR)})
    written = Written(summary, lineage.account)
    events, state = lineage.outputs[:2]
    read = Figures(
        lineage.inputs[0],
        rows=integer(summary.get("recordsRead")),
        size=integer(summary.get("bytesRead")),
        files=integer(summary.get("chunkFiles")),
    )
    return JobOutcome(
        applied,
        counts_of(summary, RunSummary),
        [read],
        [
            written(events, integer(summary.get("eventsInserted")), integer(summary.get("eventsBytesWritten"))),
            written(
                state,
                total(summary.get("stateInserted"), summary.get("stateUpdated")),
                integer(summary.get("stateBytesWritten")),
            ),
        ],
    )
