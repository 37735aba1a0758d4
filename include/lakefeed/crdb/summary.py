"""What a CockroachDB changefeed job reports of a resolved range (its summary file and XCom, read by the commit
step): counts per run and per topic, the target root and the commits it made. Serialised by
:mod:`lakefeed.documents`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakefeed.crdb import APPLIED_FILES_TABLE
from lakefeed.documents import counted, to_document, totals
from lakefeed.lineage import Figures, JobLineage, JobOutcome, Written, counts_of, dataset_ref, integer, total
from lakefeed.pipeline import RunReport


@dataclass
class TopicSummary:
    messages: int = 0
    keys_changed: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    stale_skipped: int = 0
    added_columns: list[str] = field(default_factory=list)
    target_version: int | None = None
    bytes_written: int = 0
    rows_copied: int = 0

    @property
    def committed(self) -> bool:
        """The job committed to the topic's table (a MERGE whose every key was stale changes nothing)."""
        return self.target_version is not None and self.keys_changed > self.stale_skipped


@dataclass
class CrdbSummary:
    after_resolved: str | None
    through_resolved: str
    files: int = counted()
    late_files: list[str] = field(default_factory=list)
    bytes_read: int = counted()
    messages_read: int = counted()
    duplicates_dropped: int = counted()
    superseded_in_batch: int = counted()
    stale_skipped: int = counted()
    inserted: int = counted()
    updated: int = counted()
    deleted: int = counted()
    quarantined: int = counted()  # lines set aside in the quarantine table (--quarantine-table)
    tombstones_removed: int = counted()  # by tombstone retention (lakefeed.tombstones)
    topics: dict[str, TopicSummary] = field(default_factory=dict)
    newest_updated: str | None = None
    resolved_lag_seconds: float = 0.0
    commits_made: int = counted()
    commits: list[dict[str, Any]] = field(default_factory=list)  # the commits made: [{"table", "version", "token"}]
    seconds: dict[str, float] = field(default_factory=dict)
    target_root: str | None = None  # where the topic tables are: the commit step checks it against its plan

    def to_dict(self) -> dict[str, Any]:
        return to_document(self)


@dataclass(kw_only=True)
class CrdbRunReport(RunReport):
    """What a CockroachDB changefeed run's commit step reports (its XCom, the monitor's row)."""

    batches: int
    batches_failed: list[dict[str, Any]] = field(default_factory=list)  # the plan's ranges, each with its refusal
    totals: dict[str, int] = field(default_factory=dict, metadata=totals(CrdbSummary))  # the jobs' counts, added up
    late_files: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    resolved_before: str | None
    resolved: str | None
    newest_resolved: str | None
    checkpoint_moved: bool
    lag_seconds: float | None = None


def lineage_outcome(lineage: JobLineage, summary: dict[str, Any]) -> JobOutcome:
    """What a batch applied, for lineage (:mod:`lakefeed.lineage`): its RESOLVED span, the sink files read,
    a table per topic under the target root and the quarantine table written."""
    applied = {
        "unit": "resolved timestamp",
        "after": summary.get("afterResolved"),
        "through": summary.get("throughResolved"),
    }
    read = Figures(
        lineage.inputs[0],
        rows=integer(summary.get("messagesRead")),
        size=integer(summary.get("bytesRead")),
        files=integer(summary.get("files")),
    )
    written = Written(summary, lineage.account)
    root = str(summary.get("targetRoot") or lineage.target_root or "").rstrip("/")
    topics = summary.get("topics") or {}
    outputs = [
        written(
            f"{root}/{topic}",
            total(figures.get("inserted"), figures.get("updated"), figures.get("deleted")),
            integer(figures.get("bytesWritten")),
        )
        for topic, figures in sorted(topics.items())
        if isinstance(figures, dict)
    ]
    outputs += [written(o) for o in lineage.outputs]  # the quarantine table
    # Topic tables only tombstone retention changed (no message of theirs in this range): from its commits.
    named = {dataset_ref(o.location, lineage.account) for o in outputs}
    under = dataset_ref(root, lineage.account)
    for ref in written.versions:
        folder, _, table = ref.name.rpartition("/")
        under_root = ref.namespace == under.namespace and folder == under.name.rstrip("/")
        if under_root and ref not in named and table != APPLIED_FILES_TABLE:
            outputs.append(written(f"{root}/{table}"))
    return JobOutcome(applied, counts_of(summary, CrdbSummary), [read], outputs)
