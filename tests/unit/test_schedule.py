from datetime import UTC, datetime

import pytest

from lakefeed.blob.schedule import (
    Batch,
    backfill_windows,
    batches_of,
    check_last_consumable,
    interval_windows,
    pending_windows,
)
from lakefeed.errors import FeedConfigError, FeedCorruptError, WindowNotReadyError


def utc(h, m=10, d=1):
    return datetime(2026, 1, d, h, m, tzinfo=UTC)


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


def test_backfill_windows_are_exact_and_ready():
    assert backfill_windows(10, utc(1), utc(3), utc(5)) == [utc(1), utc(2)]
    with pytest.raises(FeedConfigError, match="not on the feed's hourly grid"):
        backfill_windows(10, utc(1, 0), utc(3), utc(5))
    with pytest.raises(WindowNotReadyError, match="not ready"):
        backfill_windows(10, utc(1), utc(6), utc(5))
    with pytest.raises(FeedConfigError, match="must be after"):
        backfill_windows(10, utc(3), utc(1), utc(5))


def test_an_airflow_backfill_interval_maps_to_the_grid_windows_that_start_in_it():
    # An @hourly run's interval [01:00, 02:00) holds the hh:10 window 01:10; a `10 * * * *` run's
    # interval [01:10, 02:10) holds the same window.
    assert interval_windows(10, utc(1, 0), utc(2, 0), utc(5)) == [utc(1)]
    assert interval_windows(10, utc(1), utc(2), utc(5)) == [utc(1)]
    assert interval_windows(10, utc(1, 20), utc(1, 50), utc(5)) == []
    assert interval_windows(0, utc(1, 0), utc(3, 0), utc(5, 0)) == [utc(1, 0), utc(2, 0)]
    with pytest.raises(
        WindowNotReadyError,
        match="backfill run for 2026-01-01T04:00:00Z .. 2026-01-01T05:00:00Z asks for 1 window.*2026-01-01T04:10:00Z",
    ):
        interval_windows(10, utc(4, 0), utc(5, 0), utc(4))


def test_last_consumable_never_moves_backwards():
    check_last_consumable(utc(5), utc(5), "x")
    check_last_consumable(utc(6), None, "x")
    with pytest.raises(FeedCorruptError, match="moved backwards from 2026-01-01T05:10:00Z to 2026-01-01T04:10:00Z"):
        check_last_consumable(utc(4), utc(5), "meta/Segments.json")
