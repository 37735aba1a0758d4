from datetime import UTC, datetime

import pytest

from lakefeed.blob.timegrid import HOUR, WindowGrid, format_ticks, parse_event_time
from lakefeed.times import parse_time

GRID = WindowGrid(offset_minutes=10)


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def test_parse_event_time_keeps_100ns_ticks():
    ticks = parse_event_time("2022-02-17T12:59:41.4003102Z")
    assert ticks % 10_000_000 == 4003102
    assert ticks // 10_000_000 == int(utc(2022, 2, 17, 12, 59, 41).timestamp())


@pytest.mark.parametrize(
    "text, fraction",
    [
        ("2022-02-17T12:59:41Z", 0),
        ("2022-02-17T12:59:41.5Z", 5_000_000),
        ("2022-02-17T12:59:41.123456789Z", 1234567),  # digits past 100 ns are truncated
    ],
)
def test_parse_event_time_fraction_lengths(text, fraction):
    assert parse_event_time(text) % 10_000_000 == fraction


def test_parse_event_time_offset_is_converted_to_utc():
    assert parse_event_time("2022-02-17T14:59:41+02:00") == parse_event_time("2022-02-17T12:59:41Z")


@pytest.mark.parametrize("bad", ["", "yesterday", "2022-13-01T00:00:00Z", "2022-02-17 12:59"])
def test_parse_event_time_rejects_garbage(bad):
    with pytest.raises(ValueError):
        parse_event_time(bad)


def test_last_tick_before_boundary_stays_in_previous_window():
    before = parse_event_time("2026-01-01T05:09:59.9999999Z")
    at = parse_event_time("2026-01-01T05:10:00.0000000Z")
    assert format_ticks(GRID.window_of(before)) == "2026-01-01T04:10:00Z"
    assert format_ticks(GRID.window_of(at)) == "2026-01-01T05:10:00Z"


def test_windows_lists_grid_starts_in_range():
    windows = GRID.windows(utc(2026, 1, 1, 0, 0), utc(2026, 1, 1, 3, 10))
    assert windows == [utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 1, 10), utc(2026, 1, 1, 2, 10)]


def test_contains_start():
    assert GRID.contains_start(utc(2026, 1, 1, 7, 10))
    assert not GRID.contains_start(utc(2026, 1, 1, 7, 0))


def test_parse_time_accepts_user_forms():
    assert parse_time("2026-01-01T00:10Z") == utc(2026, 1, 1, 0, 10)
    assert parse_time("2026-01-01T00:10") == utc(2026, 1, 1, 0, 10)
    assert parse_time("2026-01-01T02:10+02:00") == utc(2026, 1, 1, 0, 10)
    assert HOUR.total_seconds() == 3600
