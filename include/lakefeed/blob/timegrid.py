"""Time on the change feed: 100 ns ticks, the hourly window grid, the coverage rule.

``eventTime`` carries 7 fractional digits. Windows are assigned on integer
ticks (100 ns since the Unix epoch) so that ``…:09:59.9999999Z`` stays before a
``…:10`` boundary; nothing here rounds to microseconds.

>>> grid = WindowGrid(offset_minutes=10)
>>> format_ticks(grid.window_of(parse_event_time("2026-01-01T05:09:59.9999999Z")))
'2026-01-01T04:10:00Z'
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from lakefeed.errors import FeedConfigError
from lakefeed.times import format_time, utc

TICKS_PER_SECOND = 10_000_000
TICKS_PER_MICROSECOND = 10
HOUR = timedelta(hours=1)
HOUR_TICKS = 3600 * TICKS_PER_SECOND

# ASCII digits only (``\d`` would take any script's digits). Second 00-59, offsets up to ±14:00 as .NET's
# DateTimeOffset (the service's own SDK type for eventTime) reads them; no zone means UTC.
_EVENT_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-5][0-9])(?:\.([0-9]{1,9}))?"
    r"(Z|[+-](?:(?:0[0-9]|1[0-3]):[0-5][0-9]|14:00))?\Z"
)
# Minute-level prefixes repeat across thousands of events; caching their epoch
# seconds takes calendar arithmetic off the per-record path.
_minute_cache: dict[str, int] = {}


def parse_event_time(text: str) -> int:
    """Parse an ISO-8601 UTC timestamp into 100 ns ticks since the epoch (truncating)."""
    m = _EVENT_TIME.match(text)
    if m is None:
        raise ValueError(f"not an ISO-8601 timestamp: {text!r}")
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    key = text[:16]
    base = _minute_cache.get(key)
    if base is None:
        try:
            base = calendar.timegm(datetime(int(year), int(month), int(day), int(hour), int(minute)).timetuple())
        except ValueError as exc:
            raise ValueError(f"not a valid timestamp: {text!r} ({exc})") from None
        if len(_minute_cache) > 100_000:
            _minute_cache.clear()
        _minute_cache[key] = base
    seconds = base + int(second)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    ticks = seconds * TICKS_PER_SECOND
    if fraction:
        ticks += int((fraction + "000000")[:7])
    return ticks


def to_ticks(moment: datetime) -> int:
    """Ticks of an aware datetime (microsecond precision is all a datetime has)."""
    moment = utc(moment)
    return calendar.timegm(moment.timetuple()) * TICKS_PER_SECOND + moment.microsecond * 10


def from_ticks(ticks: int) -> datetime:
    seconds, rest = divmod(ticks, TICKS_PER_SECOND)
    return datetime.fromtimestamp(seconds, tz=UTC) + timedelta(microseconds=rest // TICKS_PER_MICROSECOND)


def format_ticks(ticks: int) -> str:
    return format_time(from_ticks(ticks))


@dataclass(frozen=True)
class WindowGrid:
    """Hourly windows ``[T, T+1h)`` whose starts fall on ``offset_minutes`` past the hour."""

    offset_minutes: int

    def __post_init__(self) -> None:
        if not 0 <= self.offset_minutes < 60:
            raise ValueError(f"grid offset must be 0..59 minutes, got {self.offset_minutes}")

    @property
    def offset_ticks(self) -> int:
        return self.offset_minutes * 60 * TICKS_PER_SECOND

    def window_of(self, ticks: int) -> int:
        """Start (ticks) of the window containing ``ticks``."""
        return ticks - (ticks - self.offset_ticks) % HOUR_TICKS

    def claim(self, ticks: int, segment_ticks: int) -> tuple[int, bool]:
        """The coverage rule for one record of time ``ticks`` read from the segment starting at
        ``segment_ticks``: the start of the window that claims it, and whether it is a stray (claimed by
        its segment's window, its own window being more than an hour from the segment). The decoding
        tasks apply it to whole batches (:func:`lakefeed.blob.claim.claim`)."""
        window = self.window_of(ticks)
        stray = abs(window - segment_ticks) > HOUR_TICKS
        return (segment_ticks if stray else window), stray

    def contains_start(self, moment: datetime) -> bool:
        moment = utc(moment)
        return moment.minute == self.offset_minutes and moment.second == 0 and moment.microsecond == 0

    def floor(self, moment: datetime) -> datetime:
        return from_ticks(self.window_of(to_ticks(moment)))

    def windows(self, start: datetime, end: datetime) -> list[datetime]:
        """Every grid window starting in ``[start, end)``."""
        first = self.floor(start)
        if first < utc(start):
            first += HOUR
        out = []
        current = first
        while current < utc(end):
            out.append(current)
            current += HOUR
        return out


def is_ready(window: datetime, last_consumable: datetime) -> bool:
    """Window T is ready once ``lastConsumable >= T + 1h`` (its next-hour segment is consumable)."""
    return last_consumable >= window + HOUR


def windows_in_range(grid: WindowGrid, window_start: datetime, window_end: datetime) -> list[datetime]:
    """The grid windows of ``[window_start, window_end)``; both ends must be on the grid."""
    for name, moment in (("window-start", window_start), ("window-end", window_end)):
        if not grid.contains_start(moment):
            raise FeedConfigError(
                f"{name} {format_time(moment)} is not on the feed's hourly grid "
                f"(windows start at minute {grid.offset_minutes:02d})"
            )
    if window_end <= window_start:
        raise FeedConfigError(
            f"window-end {format_time(window_end)} must be after window-start {format_time(window_start)}"
        )
    return grid.windows(window_start, window_end)
