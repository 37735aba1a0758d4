"""What one job reads (the job side; the DAG side chooses its windows in :mod:`lakefeed.blob.schedule`):
its windows, and which segments and chunk files they read.

The window arithmetic is pure (unit-tested without Spark or storage);
:func:`plan_reading` adds the cheap driver-side I/O: Segments.json, day listings,
the manifests of the segments read, and the chunk files of their shards.
A shard folder of a segment read that holds no chunk file is an empty shard, read
as empty, or data loss, refused unless the run acknowledges it (then skipped), as
the evidence says (:mod:`lakefeed.blob.shards`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from lakefeed.blob.feed import ChangeFeed, ChunkFile, Segment, SegmentChunks, segment_manifest_path
from lakefeed.blob.shards import LOOKBACK_SEGMENTS, RetentionDays, ShardVerdict, judge_empty_shards
from lakefeed.blob.timegrid import HOUR, WindowGrid, is_ready, windows_in_range
from lakefeed.errors import DataLossError, FeedCorruptError, WindowNotReadyError
from lakefeed.times import format_time

log = logging.getLogger(__name__)
ACKNOWLEDGE_DATA_LOSS = (
    "re-run with --acknowledge-data-loss (the DAG param acknowledge_data_loss=true) to apply what remains"
)


def grid_of(segment_starts: list[datetime], last_consumable: datetime) -> WindowGrid:
    """The hourly grid the feed's segments sit on (e.g. minute 10); from lastConsumable if none."""
    minutes = {start.minute for start in segment_starts}
    if len(minutes) > 1:
        raise FeedCorruptError(f"segments start at different minutes past the hour ({sorted(minutes)}): no hourly grid")
    return WindowGrid(minutes.pop() if minutes else last_consumable.minute)


def segments_to_read(
    windows: list[datetime], segment_starts: list[datetime], last_consumable: datetime
) -> list[datetime]:
    """Segments starting at T-1h, T or T+1h of any window; never one dated after lastConsumable."""
    wanted = {window + delta for window in windows for delta in (-HOUR, HOUR * 0, HOUR)}
    return sorted(start for start in segment_starts if start in wanted and start <= last_consumable)


def windows_fed_by(segment_starts: list[datetime], windows: list[datetime]) -> list[datetime]:
    """Those of ``windows`` that read a segment of ``segment_starts`` (one starting at S feeds S-1h, S, S+1h)."""
    fed = {start + delta for start in segment_starts for delta in (-HOUR, HOUR * 0, HOUR)}
    return [window for window in windows if window in fed]


@dataclass(frozen=True)
class MissingShard:
    """A shard folder named by a segment the run reads that holds no chunk file, skipped as acknowledged."""

    segment_start: datetime
    shard_path: str  # relative to the container root, ending in '/'

    def describe(self) -> dict[str, str]:
        return {"segment": format_time(self.segment_start), "shard": self.shard_path}


@dataclass(frozen=True)
class Reading:
    """What one job run reads and which windows it claims events for."""

    windows: list[datetime]
    grid: WindowGrid
    last_consumable: datetime
    segments: list[Segment]
    chunk_files: list[ChunkFile] = field(repr=False)
    missing_shards: list[MissingShard] = field(default_factory=list)  # data loss the run acknowledged
    # Every shard folder holding no chunk file, with what the plan decided of it and why.
    shard_verdicts: list[ShardVerdict] = field(default_factory=list)

    @property
    def bytes(self) -> int:
        return sum(chunk.size for chunk in self.chunk_files)

    def describe(self) -> dict[str, Any]:
        return {
            "windows": [format_time(w) for w in self.windows],
            "lastConsumable": format_time(self.last_consumable),
            "segments": [format_time(s.start) for s in self.segments],
            "chunkFiles": len(self.chunk_files),
            "bytes": self.bytes,
            "missingShards": [missing.describe() for missing in self.missing_shards],
            "emptyShards": sum(1 for verdict in self.shard_verdicts if not verdict.deleted),
            "shardVerdicts": [verdict.describe() for verdict in self.shard_verdicts],
        }


def plan_reading(
    feed: ChangeFeed,
    window_start: datetime,
    window_end: datetime,
    *,
    acknowledge_data_loss: bool = False,
    retention_days: RetentionDays = None,
    now: datetime | None = None,
) -> Reading:
    """Plan ``[window_start, window_end)``; refuse (no writes) any window that is not ready. A shard folder of
    a segment read that holds no chunk file is judged from the evidence (:mod:`lakefeed.blob.shards`:
    ``retention_days`` is the account's change feed retention, ``now`` the time to age segments by): an
    empty shard is read as empty; one retention may have emptied is refused unless ``acknowledge_data_loss``
    (then it is skipped and listed in :attr:`Reading.missing_shards`)."""
    last_consumable = feed.last_consumable()
    # Segments of the day before the range up to the day after: enough to find
    # the grid and every T-1h / T+1h segment, without listing the whole feed.
    starts = feed.segment_starts_between((window_start - HOUR).date(), (window_end + HOUR).date())
    grid = grid_of(starts, last_consumable)
    windows = windows_in_range(grid, window_start, window_end)
    not_ready = [w for w in windows if not is_ready(w, last_consumable)]
    if not_ready:
        raise WindowNotReadyError(
            f"{len(not_ready)} window(s) not ready: {', '.join(format_time(w) for w in not_ready[:5])}"
            f"{' …' if len(not_ready) > 5 else ''}; lastConsumable is {format_time(last_consumable)} "
            f"and window T needs lastConsumable >= T + 1h"
        )
    segments = [feed.read_segment(start) for start in segments_to_read(windows, starts, last_consumable)]
    publishing = [s for s in segments if not s.is_finalized]
    if publishing:
        raise WindowNotReadyError(
            "segment(s) still Publishing although dated at or before lastConsumable "
            f"{format_time(last_consumable)}: " + ", ".join(feed.store.url(s.manifest_path) for s in publishing)
        )
    listings = [feed.segment_chunks(segment) for segment in segments]
    known = {listing.segment.start: listing for listing in listings}

    def listing_of(start: datetime) -> SegmentChunks:
        if start not in known:
            known[start] = feed.segment_chunks(feed.read_segment(start))
        return known[start]

    def older_listings(start: datetime) -> Iterator[SegmentChunks]:
        nearest = sorted((s for s in starts if s < start), reverse=True)[:LOOKBACK_SEGMENTS]
        for older in nearest:
            yield listing_of(older)
        oldest = feed.first_segment_start()  # reached only when none of the nearest holds all its files
        if oldest is not None and oldest < start and oldest not in nearest:
            yield listing_of(oldest)

    verdicts = judge_empty_shards(listings, older_listings, retention_days, now or datetime.now(UTC))
    lost = [verdict for verdict in verdicts if verdict.deleted]
    for verdict in verdicts:
        if not verdict.deleted:
            log.info("read as an empty shard: %s (%s)", feed.store.url(verdict.shard_path), verdict.reason)
    if lost and not acknowledge_data_loss:
        raise DataLossError(f"{describe_data_loss(feed, lost, windows)}. Nothing was written; {ACKNOWLEDGE_DATA_LOSS}.")
    if lost:
        log.warning("data loss acknowledged, skipping: %s", describe_data_loss(feed, lost, windows))
    return Reading(
        windows=windows,
        grid=grid,
        last_consumable=last_consumable,
        segments=segments,
        chunk_files=[chunk for listing in listings for chunk in listing.chunk_files],
        missing_shards=[MissingShard(verdict.segment_start, verdict.shard_path) for verdict in lost],
        shard_verdicts=verdicts,
    )


def describe_data_loss(feed: ChangeFeed, lost: list[ShardVerdict], windows: list[datetime]) -> str:
    """Each segment manifest naming shard folders that hold no chunk file and may have lost them, those
    folders, why the plan takes it for a loss, and the windows of this run that may be incomplete."""
    by_segment: dict[datetime, list[ShardVerdict]] = {}
    for verdict in lost:
        by_segment.setdefault(verdict.segment_start, []).append(verdict)
    segments = "; ".join(
        f"segment manifest {feed.store.url(segment_manifest_path(start))} names shard folder(s) holding no "
        f"chunk file: {', '.join(feed.store.url(v.shard_path) for v in verdicts)} (their chunk files may have "
        f"been deleted by the change feed's retention: {verdicts[0].reason})"
        for start, verdicts in sorted(by_segment.items())
    )
    incomplete = windows_fed_by(sorted(by_segment), windows)
    return (
        f"{segments}. Windows of this run that may be missing events: {', '.join(format_time(w) for w in incomplete)}"
    )
