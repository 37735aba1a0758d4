"""The blob change feed pipeline's checkpoint: the watermark window, the feed and targets it was made on.

>>> from lakefeed.times import parse_time
>>> cp = BlobCheckpoint(watermark=parse_time("2026-01-01T02:10Z"), feed="file:///feed")
>>> BlobCheckpoint.from_json(cp.to_json(), "v") == cp
True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from lakefeed.checkpoint import (
    Moves,
    TableMark,
    dump_document,
    is_count,
    marks_json,
    parse_document,
    string_or_none,
    targets_from,
    time_or_none,
)
from lakefeed.errors import CheckpointError
from lakefeed.times import format_time


@dataclass(frozen=True)
class BlobCheckpoint(Moves):
    """Every window before ``watermark`` of the feed ``feed`` has been merged into ``targets``.

    ``last_consumable`` is the feed's lastConsumable last seen; it must never
    move backwards. ``grid_minute`` is the minute past the hour the feed's
    windows start at (shown in the backfill form).

    Retention (:mod:`lakefeed.blob.retention`): ``next_segment`` is the oldest
    segment the windows from ``watermark`` on read (a segment starting at or after
    ``watermark - 1h``) among those listed up to ``segments_listed_through``; None
    when that listing found none. ``segments_listed_through`` None: never listed
    (a checkpoint written before these fields).
    """

    watermark: datetime | None = None
    last_consumable: datetime | None = None
    feed: str | None = None
    grid_minute: int | None = None
    targets: dict[str, TableMark] = field(default_factory=dict)
    next_segment: datetime | None = None
    segments_listed_through: datetime | None = None
    announced: dict[str, TableMark] = field(default_factory=dict)
    generation: int = 0
    updated_by: str | None = None

    @property
    def identity(self) -> str | None:
        """The feed it was made on (its storage identity)."""
        return self.feed

    def to_json(self) -> str:
        return dump_document(
            "blob_changefeed",
            {
                "watermark": format_time(self.watermark) if self.watermark else None,
                "lastConsumable": format_time(self.last_consumable) if self.last_consumable else None,
                "feed": self.feed,
                "gridMinute": self.grid_minute,
                "targets": marks_json(self.targets),
                "announced": marks_json(self.announced),
                "nextSegment": format_time(self.next_segment) if self.next_segment else None,
                "segmentsListedThrough": format_time(self.segments_listed_through)
                if self.segments_listed_through
                else None,
                "generation": self.generation,
                "updatedBy": self.updated_by,
            },
        )

    @classmethod
    def from_json(cls, text: str | None, where: str) -> BlobCheckpoint:
        document = parse_document(text, where, "blob_changefeed")
        if document is None:
            return cls()
        grid_minute = document.get("gridMinute")
        if grid_minute is not None and not (is_count(grid_minute) and grid_minute < 60):
            raise CheckpointError(f"checkpoint {where}: gridMinute must be 0..59, got {grid_minute!r}")
        return cls(
            watermark=time_or_none(document.get("watermark"), where, "watermark"),
            last_consumable=time_or_none(document.get("lastConsumable"), where, "lastConsumable"),
            feed=string_or_none(document, "feed", where),
            grid_minute=grid_minute,
            targets=targets_from(document, where),
            announced=targets_from(document, where, "announced"),
            next_segment=time_or_none(document.get("nextSegment"), where, "nextSegment"),
            segments_listed_through=time_or_none(document.get("segmentsListedThrough"), where, "segmentsListedThrough"),
            generation=document.get("generation", 0),
            updated_by=document.get("updatedBy"),
        )
