from datetime import datetime, timezone

import pytest

from lakefeed.blob.schedule import (
    Batch,
    advance_watermark,
    backfill_windows,
    batches_of,
    check_last_consumable,
    pending_windows,
)
from lakefeed.errors import FeedConfigError, FeedCorruptError


def utc(h, m=10, d=1):
    return datetime(2026, 1, d, h, m, tzinfo=timezone.utc)


def test_pending_windows_stop_at_the_last_ready_one_and_at_the_cap():
    assert pending_windows(utc(0), utc(3), cap=10) == [utc(0), utc(1), utc(2)]
    assert pending_windows(utc(0), utc(3), cap=2) == [utc(0), utc(1)]
    assert pending_windows(utc(3), utc(3), cap=10) == []
    assert pending_windows(None, utc(3), cap=10) == []


def test_batches_group_consecutive_windows():
    batches = batches_of([utc(h) for h in range(5)], 2)
    assert batches == [Batch(utc(0), utc(2)), Batch(utc(2), utc(4)), Batch(utc(4), utc(5))]
    assert [b.windows for b in batches] == [2, 2, 1]
    assert batches_of([], 3) == []
    with pytest.raises(FeedConfigError, match="consecutive"):
        batches_of([utc(0), utc(2)], 3)


B = [Batch(utc(0), utc(2)), Batch(utc(2), utc(4)), Batch(utc(4), utc(6))]


@pytest.mark.parametrize("watermark, succeeded, expected", [
    (utc(0), {0, 1, 2}, utc(6)),
    (utc(0), {0, 2}, utc(2)),          # a gap: stop at the first unfinished batch
    (utc(0), {1, 2}, utc(0)),          # the first batch failed: nothing moves
    (None, {0, 1}, utc(4)),            # first run: the prefix starts at the first batch
    (None, {1}, None),
    (utc(8), {0, 1, 2}, utc(8)),       # a backfill behind the watermark never moves it back
    (utc(3), {1, 2}, utc(6)),          # a batch straddling the watermark counts
])
def test_advance_watermark_over_the_contiguous_prefix_only(watermark, succeeded, expected):
    assert advance_watermark(watermark, B, succeeded) == expected


def test_advance_watermark_ignores_batch_order():
    assert advance_watermark(utc(0), list(reversed(B)), {0, 1, 2}) == utc(6)


def test_backfill_windows_are_exact_and_ready():
    assert backfill_windows(10, utc(1), utc(3), utc(5)) == [utc(1), utc(2)]
    with pytest.raises(FeedConfigError, match="not on the feed's grid"):
        backfill_windows(10, utc(1, 0), utc(3), utc(5))
    with pytest.raises(FeedConfigError, match="not ready"):
        backfill_windows(10, utc(1), utc(6), utc(5))
    with pytest.raises(FeedConfigError, match="must be after"):
        backfill_windows(10, utc(3), utc(1), utc(5))


def test_last_consumable_never_moves_backwards():
    check_last_consumable(utc(5), utc(5), "x")
    check_last_consumable(utc(6), None, "x")
    with pytest.raises(FeedCorruptError, match="moved backwards from 2026-01-01T05:10:00Z to 2026-01-01T04:10:00Z"):
        check_last_consumable(utc(4), utc(5), "meta/Segments.json")
