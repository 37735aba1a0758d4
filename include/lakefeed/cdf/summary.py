"""What a Delta CDF job reports of a version range or full refresh (its summary file and XCom, read by the commit
step): counts, the source and target and the commits it made. Serialised by :mod:`lakefeed.documents`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lakefeed.documents import counted, to_document


@dataclass
class CdfSummary:
    source: str
    target: str
    starting_version: int
    ending_version: int
    latest_version: int
    mode: str = "changes"
    source_table_id: str | None = None
    rows_read: int = counted()
    keys_changed: int = counted()
    inserted: int = counted()
    updated: int = counted()
    deleted: int = counted()
    unchanged: int = counted()
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
