"""A shard folder a segment manifest names that holds no chunk file: an empty shard, or retention's work?

Azure's change feed clients read a shard by listing the blobs under the folder the manifest names; a
folder holding none yields no events, silently (the issue's closing note cites the SDK lines). A shard can
be empty for the plainest reason, an hour without events on that shard of a quiet account; it can also have
lost its chunk files to the change feed's retention, which deletes by age, so the oldest segments first.
Absence alone cannot tell the two apart, so the plan decides from evidence, in this order:

1. **The account's retention** (``change_feed_retention_days``: an account-management setting, which no
   data-plane credential reads): ``"unlimited"`` means nothing was ever deleted; ``N`` days means only a
   segment that ended more than ``N`` days ago can have lost files.
2. **The order retention deletes in**: a segment older than this one that still holds all its chunk files
   proves retention has not reached this one (the nearest older segments are looked at, then the feed's
   oldest).
3. **No evidence** (it is the feed's oldest segment, or the older ones lost files too): data loss, refused
   until a run acknowledges it, as before.

Each verdict carries its reason; the plan logs it and the run's summary lists it (``shardVerdicts``), and
counts the shards read as empty (``emptyShards``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from lakefeed.blob.feed import SegmentChunks
from lakefeed.blob.timegrid import HOUR
from lakefeed.times import format_time

UNLIMITED = "unlimited"
# How many older segments the plan lists, nearest first, looking for one that holds all its chunk files
# (then the feed's oldest): a quiet account may have a few hours in a row with an empty shard.
LOOKBACK_SEGMENTS = 6

RetentionDays = int | str | None  # days, UNLIMITED, or None: not configured


@dataclass(frozen=True)
class ShardVerdict:
    """What the plan decided of one shard folder holding no chunk file, and why."""

    segment_start: datetime
    shard_path: str  # relative to the container root, ending in '/'
    deleted: bool  # True: data loss (refused unless acknowledged); False: an empty shard, read as empty
    reason: str

    def describe(self) -> dict[str, str]:
        return {
            "segment": format_time(self.segment_start),
            "shard": self.shard_path,
            "verdict": "deleted" if self.deleted else "empty",
            "reason": self.reason,
        }


def judge_empty_shards(
    listings: Iterable[SegmentChunks],
    older_listings: Callable[[datetime], Iterable[SegmentChunks]],
    retention_days: RetentionDays,
    now: datetime,
) -> list[ShardVerdict]:
    """A verdict for every shard folder holding no chunk file among ``listings``. ``older_listings(start)``
    yields the listings of segments older than ``start``, nearest first, then the feed's oldest (read only
    as far as the first one that holds all its chunk files)."""
    verdicts: list[ShardVerdict] = []
    for listing in listings:
        if not listing.empty_shards:
            continue
        deleted, reason = _evidence(listing, older_listings, retention_days, now)
        verdicts.extend(
            ShardVerdict(listing.segment.start, shard_path, deleted, reason) for shard_path in listing.empty_shards
        )
    return verdicts


def _evidence(
    listing: SegmentChunks,
    older_listings: Callable[[datetime], Iterable[SegmentChunks]],
    retention_days: RetentionDays,
    now: datetime,
) -> tuple[bool, str]:
    start = listing.segment.start
    if retention_days == UNLIMITED:
        return False, "the account keeps its change feed without limit (change_feed_retention_days: unlimited)"
    if isinstance(retention_days, int):
        age = now - (start + HOUR)
        days = age / timedelta(days=1)
        if age > timedelta(days=retention_days):
            return True, (
                f"the segment ended {days:.1f} days ago, past the account's change feed retention of "
                f"{retention_days} days (change_feed_retention_days): retention may have deleted its chunk files"
            )
        return False, (
            f"the segment ended {days:.1f} days ago, within the account's change feed retention of "
            f"{retention_days} days (change_feed_retention_days): retention cannot have deleted its chunk files"
        )
    looked = 0
    for older in older_listings(start):
        looked += 1
        if not older.empty_shards:
            return False, (
                f"an older segment, {format_time(older.segment.start)}, still holds all its chunk files, and "
                f"retention deletes the oldest first"
            )
    what = (
        "it is the feed's oldest segment"
        if looked == 0
        else f"none of the {looked} older segment(s) looked at holds all its chunk files"
    )
    return True, (
        f"no evidence that retention has not reached it ({what}; set change_feed_retention_days to the "
        f"account's change feed retention to decide by age)"
    )
