"""A blob change feed run's plan, as the plan task hands it to the jobs and the commit step (an XCom,
serialised by :mod:`lakefeed.documents`): the batches of windows, what the plan saw of the feed and the
targets, and the configuration it read."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.blob.schedule import Batch
from lakefeed.checkpoint import TableMark


@dataclass(frozen=True, kw_only=True)
class BlobPlan:
    DOCUMENT_VERSION: ClassVar[int] = 1

    version: int = DOCUMENT_VERSION
    kind: str  # scheduled, backfill or reset (lakefeed.progress)
    batches: list[Batch]  # one spark-submit each
    windows: int
    last_consumable: datetime
    feed: str  # the feed's identity (the checkpoint records it)
    grid_minute: int
    origin: datetime | None  # the feed's first window (or start_from's): where a reset or first run starts
    watermark: datetime | None  # the checkpoint's when the plan read it
    targets: list[str]
    target_tables: dict[str, str]  # {"events": …, "state": …}
    # Retention removed segments before they were read and the run acknowledged it
    # (lakefeed.blob.retention.RetentionGap.describe, with "acknowledgedBy").
    data_loss: dict[str, Any] | None = None
    acknowledge_data_loss: bool = False
    # The targets' ids and versions when planned (lakefeed.pipeline.plan_marks); None from a plan made before
    # they were recorded.
    target_marks: dict[str, TableMark] | None = None
    # For each watermark the commit step may set, the oldest segment the windows from there read, and how
    # far the listing went (lakefeed.blob.pipeline._segment_marks); none for a backfill.
    segment_marks: dict[str, str | None] = field(default_factory=dict)
    segments_listed_through: datetime | None = None
    config: BlobPipelineConfig

    @property
    def identity(self) -> str:
        """The feed's identity, which the checkpoint records."""
        return self.feed
