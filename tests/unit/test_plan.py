import json
from datetime import datetime, timezone

import pytest

from lakefeed.blob.feed import ChangeFeed, segment_manifest_path
from lakefeed.blob.plan import (
    grid_of,
    is_ready,
    plan_ready_windows,
    plan_run,
    ready_windows,
    segments_to_read,
    windows_in_range,
)
from lakefeed.blob.timegrid import WindowGrid
from lakefeed.errors import FeedConfigError, FeedCorruptError, WindowNotReadyError
from lakefeed.storage import Store


def utc(*parts):
    return datetime(*parts, tzinfo=timezone.utc)


GRID = WindowGrid(10)


def test_grid_comes_from_segment_minutes():
    assert grid_of([utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 3, 10)], utc(2026, 1, 1, 3, 10)) == GRID
    assert grid_of([], utc(2026, 1, 1, 3, 25)) == WindowGrid(25)


def test_segments_on_different_minutes_have_no_grid():
    with pytest.raises(FeedCorruptError, match="different minutes"):
        grid_of([utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 1, 20)], utc(2026, 1, 1, 3, 10))


def test_window_is_ready_once_last_consumable_reaches_its_end():
    assert is_ready(utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 10))
    assert not is_ready(utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 9))


def test_ready_windows_start_an_hour_before_the_first_segment_and_cover_gaps():
    windows = ready_windows(GRID, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 3, 10))
    assert windows == [utc(2025, 12, 31, 23, 10), utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 1, 10),
                       utc(2026, 1, 1, 2, 10)]


def test_ready_windows_after_a_checkpoint():
    windows = ready_windows(GRID, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 3, 10), after=utc(2026, 1, 1, 1, 10))
    assert windows == [utc(2026, 1, 1, 2, 10)]
    assert ready_windows(GRID, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 3, 10), after=utc(2026, 1, 1, 2, 10)) == []


def test_windows_in_range_requires_grid_aligned_bounds():
    assert windows_in_range(GRID, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 2, 10)) == [
        utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 1, 10)]
    with pytest.raises(FeedConfigError, match="window-start 2026-01-01T00:00:00Z is not on the feed's hourly grid"):
        windows_in_range(GRID, utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 2, 10))
    with pytest.raises(FeedConfigError, match="must be after"):
        windows_in_range(GRID, utc(2026, 1, 1, 2, 10), utc(2026, 1, 1, 2, 10))


def test_segments_to_read_are_the_neighbours_and_never_past_last_consumable():
    starts = [utc(2026, 1, 1, h, 10) for h in (0, 1, 3, 4, 5)]
    assert segments_to_read([utc(2026, 1, 1, 2, 10)], starts, utc(2026, 1, 1, 5, 10)) == [
        utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 3, 10)]
    assert segments_to_read([utc(2026, 1, 1, 4, 10)], starts, utc(2026, 1, 1, 4, 10)) == [
        utc(2026, 1, 1, 3, 10), utc(2026, 1, 1, 4, 10)]


def _feed(tmp_path, last_consumable, segments):
    (tmp_path / "meta").mkdir(parents=True, exist_ok=True)
    (tmp_path / "meta/Segments.json").write_text(json.dumps({"lastConsumable": last_consumable}))
    for start, status in segments:
        path = tmp_path / segment_manifest_path(start)
        path.parent.mkdir(parents=True, exist_ok=True)
        shard = f"$blobchangefeed/log/00/{start:%Y/%m/%d/%H%M}/"
        path.write_text(json.dumps({"status": status, "chunkFilePaths": [shard]}))
    return ChangeFeed(Store(str(tmp_path)))


def test_plan_refuses_windows_that_are_not_ready(tmp_path):
    feed = _feed(tmp_path, "2026-01-01T02:10:00Z", [(utc(2026, 1, 1, h, 10), "Finalized") for h in range(3)])
    with pytest.raises(WindowNotReadyError, match="2026-01-01T02:10:00Z"):
        plan_run(feed, utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 3, 10))


def test_plan_never_reads_a_publishing_segment(tmp_path):
    feed = _feed(tmp_path, "2026-01-01T02:10:00Z",
                 [(utc(2026, 1, 1, 0, 10), "Finalized"), (utc(2026, 1, 1, 1, 10), "Finalized"),
                  (utc(2026, 1, 1, 2, 10), "Publishing")])
    with pytest.raises(WindowNotReadyError, match=r"Publishing.*idx/segments/2026/01/01/0210/meta.json"):
        plan_run(feed, utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 10))


def test_plan_reads_previous_and_next_segments(tmp_path):
    feed = _feed(tmp_path, "2026-01-01T03:10:00Z",
                 [(utc(2026, 1, 1, h, 10), "Finalized") for h in range(4)] + [(utc(2026, 1, 1, 4, 10), "Publishing")])
    plan = plan_run(feed, utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 10))
    assert [s.start for s in plan.segments] == [utc(2026, 1, 1, h, 10) for h in (0, 1, 2)]
    assert plan.describe()["windows"] == ["2026-01-01T01:10:00Z"]


def test_plan_ready_windows_covers_the_whole_feed(tmp_path):
    feed = _feed(tmp_path, "2026-01-01T03:10:00Z",
                 [(utc(2026, 1, 1, h, 10), "Finalized") for h in (0, 1, 3)] + [(utc(2026, 1, 1, 4, 10), "Publishing")])
    assert plan_ready_windows(feed) == (utc(2025, 12, 31, 23, 10), utc(2026, 1, 1, 3, 10))
    assert plan_ready_windows(feed, after=utc(2026, 1, 1, 2, 10)) is None
