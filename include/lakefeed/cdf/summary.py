"""What a Delta CDF job reports of a version range or full refresh (its summary file and XCom, read by the commit
step): counts, the source and target and the commits it made. Serialised by :mod:`lakefeed.documents`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakefeed.assets import FULL_REFRESH_MODE
from lakefeed.cdf.planner import REBUILD, RangePlan
from lakefeed.documents import counted, optional, to_document, totals
from lakefeed.lineage import Figures, JobLineage, JobOutcome, Written, counts_of, integer, total
from lakefeed.pipeline import RunReport


@dataclass
class CdfSummary:
    source: str
    target: str
    starting_version: int
    ending_version: int
    latest_version: int
    mode: str = "changes"
    scd_type: int = 1  # 2: a history target (lakefeed.cdf.scd2), where the counts are of history rows
    source_table_id: str | None = None
    # How a range was applied, and why (lakefeed.cdf.planner): a MERGE of its changes, or a rebuild of the
    # target from the snapshot at its end (counted as a full refresh is: the rows written, as inserted).
    plan: RangePlan | None = optional()  # noqa: RUF009 (a field of None, as every optional())
    rows_read: int = counted()
    keys_changed: int = counted()
    # Type 1: keys inserted, updated, deleted, and left as they were (the version guard). Type 2: history rows
    # started for new or re-inserted keys, started over a current row, rows ended by a delete, and changes
    # that added nothing (updates that changed no selected column, changes applied before).
    inserted: int = counted()
    updated: int = counted()
    deleted: int = counted()
    unchanged: int = counted()
    tombstones_removed: int = counted()  # by tombstone retention (lakefeed.tombstones)
    added_columns: list[str] = field(default_factory=list)
    target_version: int | None = None
    # What the MERGE wrote, from Delta's commit metrics: a replay of applied versions commits nothing.
    committed: bool = False
    bytes_written: int = counted()
    files_rewritten: int = counted()
    rows_copied: int = counted()
    commits: list[dict[str, Any]] = field(default_factory=list)  # the commits made: [{"table", "version", "token"}]
    lag_versions: int = 0
    seconds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return to_document(self)


@dataclass(kw_only=True)
class CdfPipelineReport:
    """One pipeline's part of a CDF run's report."""

    kind: str
    jobs: int
    refused: str | None = optional()  # why its commit step kept its checkpoint (its targets changed under it)
    jobs_failed: list[dict[str, Any]] = field(default_factory=list)  # the plan's jobs, each with its refusal
    jobs_voided: list[dict[str, Any]] = field(default_factory=list)  # applied, then rebuilt by a full refresh
    versions: list[list[int]] = field(default_factory=list)  # [first, last] of each job
    totals: dict[str, int] = field(default_factory=dict, metadata=totals(CdfSummary))  # its jobs' counts, added up
    applied_before: int | None
    applied_version: int | None
    checkpoint_reset: dict[str, int | None] | None = None  # {"from", "to"} when a reset moved the checkpoint
    latest_version: int
    lag_versions: int | None = None
    spark_seconds: float | None = optional()


@dataclass(kw_only=True)
class CdfRunReport(RunReport):
    """What a Delta CDF run's commit step reports (its XCom, the monitor's rows), per pipeline."""

    pipelines: dict[str, CdfPipelineReport] = field(default_factory=dict)


def lineage_outcome(lineage: JobLineage, summary: dict[str, Any]) -> JobOutcome:
    """What a job applied, for lineage (:mod:`lakefeed.lineage`): its source versions (read up to the last),
    the target written (replaced by a full refresh or a planned rebuild)."""
    mode = str(summary.get("mode") or "changes")
    applied = {
        "unit": "source version",
        "from": summary.get("startingVersion"),
        "through": summary.get("endingVersion"),
        "mode": mode,
        "scdType": summary.get("scdType", 1),
    }
    read = Figures(lineage.inputs[0], integer(summary.get("endingVersion")), rows=integer(summary.get("rowsRead")))
    written = Written(summary, lineage.account)(
        lineage.outputs[0],
        total(summary.get("inserted"), summary.get("updated"), summary.get("deleted")),
        integer(summary.get("bytesWritten")),
        replaced=mode == FULL_REFRESH_MODE or (summary.get("plan") or {}).get("chosen") == REBUILD,
    )
    return JobOutcome(applied, counts_of(summary, CdfSummary), [read], [written])
