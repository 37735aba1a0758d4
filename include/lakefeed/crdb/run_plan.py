"""A CockroachDB changefeed run's plan, as the plan task hands it to the jobs and the commit step (an XCom,
serialised by :mod:`lakefeed.documents`): the resolved ranges, what the plan saw of the sink and the topic
tables, and the configuration it read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lakefeed.checkpoint import TableMark
from lakefeed.crdb.config import CrdbConfig


@dataclass(frozen=True)
class ResolvedRange:
    """The data files between two RESOLVED files, ``(after, through]``: one spark-submit."""

    after: str | None  # a RESOLVED timestamp (lakefeed.crdb.hlc.Hlc); None: from the sink's first file
    through: str


@dataclass(frozen=True, kw_only=True)
class CrdbPlan:
    DOCUMENT_VERSION: ClassVar[int] = 1

    version: int = DOCUMENT_VERSION
    kind: str  # scheduled, backfill or reset (lakefeed.progress)
    batches: list[ResolvedRange]
    sink: str  # the sink's identity (the checkpoint records it)
    resolved_before: str | None  # the checkpoint's RESOLVED when the plan read it
    newest_resolved: str | None  # the sink's newest RESOLVED file then
    target_root: str  # as checkpoints record it (lakefeed.crdb.pipeline.root_of)
    # The topic tables' ids and versions when planned (lakefeed.pipeline.plan_marks); None from a plan made
    # before they were recorded.
    target_marks: dict[str, TableMark] | None = None
    config: CrdbConfig

    @property
    def identity(self) -> str:
        """The sink's identity, which the checkpoint records."""
        return self.sink
