import json
from datetime import UTC, datetime

import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.blob.feed import ChangeFeed, segment_manifest_path
from lakefeed.blob.reading import grid_of, plan_reading, segments_to_read
from lakefeed.blob.schedule import first_window, pending_windows
from lakefeed.blob.timegrid import WindowGrid, is_ready, windows_in_range
from lakefeed.errors import DataLossError, FeedConfigError, FeedCorruptError, WindowNotReadyError
from lakefeed.storage import Store


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


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
    windows = pending_windows(utc(2025, 12, 31, 23, 10), utc(2026, 1, 1, 3, 10), cap=100)
    assert windows == [
        utc(2025, 12, 31, 23, 10),
        utc(2026, 1, 1, 0, 10),
        utc(2026, 1, 1, 1, 10),
        utc(2026, 1, 1, 2, 10),
    ]


def test_ready_windows_after_a_checkpoint():
    windows = pending_windows(utc(2026, 1, 1, 2, 10), utc(2026, 1, 1, 3, 10), cap=100)  # 01:10 applied
    assert windows == [utc(2026, 1, 1, 2, 10)]
    assert pending_windows(utc(2026, 1, 1, 3, 10), utc(2026, 1, 1, 3, 10), cap=100) == []


def test_windows_in_range_requires_grid_aligned_bounds():
    assert windows_in_range(GRID, utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 2, 10)) == [
        utc(2026, 1, 1, 0, 10),
        utc(2026, 1, 1, 1, 10),
    ]
    with pytest.raises(FeedConfigError, match="window-start 2026-01-01T00:00:00Z is not on the feed's hourly grid"):
        windows_in_range(GRID, utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 2, 10))
    with pytest.raises(FeedConfigError, match="must be after"):
        windows_in_range(GRID, utc(2026, 1, 1, 2, 10), utc(2026, 1, 1, 2, 10))


def test_segments_to_read_are_the_neighbours_and_never_past_last_consumable():
    starts = [utc(2026, 1, 1, h, 10) for h in (0, 1, 3, 4, 5)]
    assert segments_to_read([utc(2026, 1, 1, 2, 10)], starts, utc(2026, 1, 1, 5, 10)) == [
        utc(2026, 1, 1, 1, 10),
        utc(2026, 1, 1, 3, 10),
    ]
    assert segments_to_read([utc(2026, 1, 1, 4, 10)], starts, utc(2026, 1, 1, 4, 10)) == [
        utc(2026, 1, 1, 3, 10),
        utc(2026, 1, 1, 4, 10),
    ]


def _feed(tmp_path, last_consumable, segments):
    (tmp_path / "meta").mkdir(parents=True, exist_ok=True)
    (tmp_path / "meta/Segments.json").write_text(json.dumps({"lastConsumable": last_consumable}))
    for start, status in segments:
        path = tmp_path / segment_manifest_path(start)
        path.parent.mkdir(parents=True, exist_ok=True)
        shard = f"log/00/{start:%Y/%m/%d/%H%M}/"
        path.write_text(json.dumps({"status": status, "chunkFilePaths": [f"$blobchangefeed/{shard}"]}))
        (tmp_path / shard).mkdir(parents=True, exist_ok=True)
        (tmp_path / shard / "00000.avro").write_bytes(b"")  # a shard folder holds at least one chunk file
    return ChangeFeed(Store(str(tmp_path)))


def test_plan_refuses_windows_that_are_not_ready(tmp_path):
    feed = _feed(tmp_path, "2026-01-01T02:10:00Z", [(utc(2026, 1, 1, h, 10), "Finalized") for h in range(3)])
    with pytest.raises(WindowNotReadyError, match="2026-01-01T02:10:00Z"):
        plan_reading(feed, utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 3, 10))


def test_plan_never_reads_a_publishing_segment(tmp_path):
    feed = _feed(
        tmp_path,
        "2026-01-01T02:10:00Z",
        [
            (utc(2026, 1, 1, 0, 10), "Finalized"),
            (utc(2026, 1, 1, 1, 10), "Finalized"),
            (utc(2026, 1, 1, 2, 10), "Publishing"),
        ],
    )
    with pytest.raises(WindowNotReadyError, match=r"Publishing.*idx/segments/2026/01/01/0210/meta.json"):
        plan_reading(feed, utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 10))


def test_plan_reads_previous_and_next_segments(tmp_path):
    feed = _feed(
        tmp_path,
        "2026-01-01T03:10:00Z",
        [(utc(2026, 1, 1, h, 10), "Finalized") for h in range(4)] + [(utc(2026, 1, 1, 4, 10), "Publishing")],
    )
    plan = plan_reading(feed, utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 10))
    assert [s.start for s in plan.segments] == [utc(2026, 1, 1, h, 10) for h in (0, 1, 2)]
    assert plan.describe()["windows"] == ["2026-01-01T01:10:00Z"]


def test_a_first_run_is_ready_for_the_whole_feed(tmp_path):
    feed = _feed(
        tmp_path,
        "2026-01-01T03:10:00Z",
        [(utc(2026, 1, 1, h, 10), "Finalized") for h in (0, 1, 3)] + [(utc(2026, 1, 1, 4, 10), "Publishing")],
    )
    first = first_window(feed, None, None)
    assert first == utc(2025, 12, 31, 23, 10)
    assert pending_windows(first, feed.last_consumable(), cap=100)[-1] == utc(2026, 1, 1, 2, 10)
    assert pending_windows(utc(2026, 1, 1, 3, 10), feed.last_consumable(), cap=100) == []


# A shard folder a manifest names can hold no chunk file: an hour without events on that shard (the Azure SDKs
# read it as empty), or chunk files retention deleted (oldest first, part by part). The plan tells them apart
# from evidence (lakefeed.blob.shards): an empty shard is read as empty and counted; a loss is refused unless
# acknowledged.
LOST_SPEC = FeedSpec(hours=4, events_per_hour=60, shards=2, records_per_chunk=20, seed=5)
OLDEST, YOUNGER = utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 1, 10)  # the feed's first two segments
RANGE = (utc(2025, 12, 31, 23, 10), utc(2026, 1, 1, 2, 10))  # windows 23:10, 00:10, 01:10
NOW = utc(2026, 11, 28, 12, 0)


def shard(segment: datetime, number: str = "01") -> str:
    return f"log/{number}/{segment:%Y/%m/%d/%H%M}/"


def _lose_shard(root, segment, folder_too=False):
    """Delete the chunk files of shard 01 of ``segment`` (and the folder itself, if ``folder_too``)."""
    folder = root / shard(segment)
    lost = sorted(folder.glob("*.avro"))
    assert lost
    for chunk in lost:
        chunk.unlink()
    if folder_too:
        folder.rmdir()


def test_an_empty_shard_in_a_segment_younger_than_a_whole_one_is_read_as_empty_and_counted(tmp_path):
    generate_feed(tmp_path, LOST_SPEC)
    feed = ChangeFeed(Store(str(tmp_path)))
    whole = plan_reading(feed, *RANGE, now=NOW)
    assert whole.describe()["emptyShards"] == 0 and whole.shard_verdicts == []
    _lose_shard(tmp_path, YOUNGER)
    plan = plan_reading(feed, *RANGE, now=NOW)  # not refused: retention would have emptied 00:10 first
    described = plan.describe()
    assert described["emptyShards"] == 1 and described["missingShards"] == [] and plan.missing_shards == []
    [verdict] = described["shardVerdicts"]
    assert verdict["segment"] == "2026-01-01T01:10:00Z" and verdict["shard"] == shard(YOUNGER)
    assert verdict["verdict"] == "empty"
    assert "an older segment, 2026-01-01T00:10:00Z, still holds all its chunk files" in verdict["reason"]
    assert plan.chunk_files == [c for c in whole.chunk_files if not c.path.startswith(shard(YOUNGER))]


@pytest.mark.parametrize("folder_too", [False, True], ids=["chunk files deleted", "shard folder deleted"])
def test_plan_refuses_a_shard_of_the_feeds_oldest_segment_naming_it_why_and_the_windows(tmp_path, folder_too):
    generate_feed(tmp_path, LOST_SPEC)
    _lose_shard(tmp_path, OLDEST, folder_too)
    feed = ChangeFeed(Store(str(tmp_path)))
    with pytest.raises(DataLossError) as refused:
        plan_reading(feed, *RANGE, now=NOW)
    message = str(refused.value)
    assert f"{tmp_path}/idx/segments/2026/01/01/0010/meta.json" in message
    assert f"{tmp_path}/{shard(OLDEST)}" in message
    assert shard(OLDEST, "00") not in message  # its other shard is intact (a 0-byte chunk file is a chunk)
    assert "it is the feed's oldest segment" in message
    # The 00:10 segment feeds windows 23:10, 00:10 and 01:10, all of this run.
    assert "may be missing events: 2025-12-31T23:10:00Z, 2026-01-01T00:10:00Z, 2026-01-01T01:10:00Z" in message
    assert message.endswith(
        "Nothing was written; re-run with --acknowledge-data-loss "
        "(the DAG param acknowledge_data_loss=true) to apply what remains."
    )


def test_a_shard_is_lost_where_every_older_segment_looked_at_lost_files_too(tmp_path):
    generate_feed(tmp_path, LOST_SPEC)
    _lose_shard(tmp_path, OLDEST)
    _lose_shard(tmp_path, YOUNGER)
    plan = plan_reading(ChangeFeed(Store(str(tmp_path))), *RANGE, acknowledge_data_loss=True, now=NOW)
    reasons = {v.segment_start: v.reason for v in plan.shard_verdicts if v.deleted}
    assert sorted(reasons) == [OLDEST, YOUNGER] and plan.describe()["emptyShards"] == 0
    assert "none of the 1 older segment(s) looked at holds all its chunk files" in reasons[YOUNGER]


def test_the_accounts_retention_decides_by_the_segments_age(tmp_path):
    generate_feed(tmp_path, LOST_SPEC)
    _lose_shard(tmp_path, YOUNGER)
    feed = ChangeFeed(Store(str(tmp_path)))
    # 7 days: the segment ended 331 days ago, so retention may have emptied it, older segments or not.
    with pytest.raises(DataLossError, match=r"past the account's change feed retention of 7 days"):
        plan_reading(feed, *RANGE, retention_days=7, now=NOW)
    # 400 days: within it, nothing of it can have been deleted.
    within = plan_reading(feed, *RANGE, retention_days=400, now=NOW)
    assert within.describe()["emptyShards"] == 1 and "within the account's change feed retention of 400 days" in (
        within.shard_verdicts[0].reason
    )
    # Unlimited: never a loss, even in the feed's oldest segment.
    _lose_shard(tmp_path, OLDEST)
    unlimited = plan_reading(feed, *RANGE, retention_days="unlimited", now=NOW)
    assert [v.deleted for v in unlimited.shard_verdicts] == [False, False]
    assert all("without limit" in v.reason for v in unlimited.shard_verdicts)


def test_plan_acknowledging_data_loss_skips_the_missing_shard_and_reports_it(tmp_path):
    generate_feed(tmp_path, LOST_SPEC)
    feed = ChangeFeed(Store(str(tmp_path)))
    whole = plan_reading(feed, *RANGE)
    assert whole.missing_shards == [] and whole.describe()["missingShards"] == []
    _lose_shard(tmp_path, OLDEST)
    plan = plan_reading(feed, *RANGE, acknowledge_data_loss=True, now=NOW)
    assert plan.describe()["missingShards"] == [{"segment": "2026-01-01T00:10:00Z", "shard": shard(OLDEST)}]
    assert [v.describe()["verdict"] for v in plan.shard_verdicts] == ["deleted"]
    assert [s.start for s in plan.segments] == [s.start for s in whole.segments]
    assert plan.chunk_files == [c for c in whole.chunk_files if not c.path.startswith(shard(OLDEST))]
    assert any(c.segment_start == OLDEST and c.shard == "00" for c in plan.chunk_files)


def test_plan_without_the_lost_segment_is_not_refused(tmp_path):
    generate_feed(tmp_path, LOST_SPEC)
    _lose_shard(tmp_path, YOUNGER, folder_too=True)
    _lose_shard(tmp_path, utc(2026, 1, 1, 3, 10), folder_too=True)
    # Window 23:10 reads the segments of 22:10, 23:10 (none) and 00:10, not the others.
    plan = plan_reading(ChangeFeed(Store(str(tmp_path))), utc(2025, 12, 31, 23, 10), utc(2026, 1, 1, 0, 10))
    assert [s.start for s in plan.segments] == [OLDEST] and plan.missing_shards == []
