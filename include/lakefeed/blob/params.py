"""The blob change feed DAG's params as the request its plan serves (:mod:`lakefeed.run_params`)."""

from __future__ import annotations

import calendar
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from lakefeed.errors import ConfigError
from lakefeed.run_params import given

_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")


def _example(grid_minute: int | None) -> str:
    return f"2026-01-01T00:{10 if grid_minute is None else grid_minute:02d}:00Z"


def window_time(name: str, value: Any, grid_minute: int | None = None) -> datetime:
    """A window bound as UTC: an ISO-8601 time of a real calendar day, whole minutes, and on the feed's
    hourly grid (minute ``grid_minute``) when it is known."""
    text = str(value).strip()
    match = _ISO.match(text)
    if not match:
        raise ConfigError(
            f"{name} {text!r} is not a time: write it as ISO-8601 UTC, for example {_example(grid_minute)}."
        )
    year, month, day, hour, minute = (int(g) for g in match.groups()[:5])
    if not 1 <= month <= 12:
        raise ConfigError(f"{name} {text} is not a real date: there is no month {month}.")
    days = calendar.monthrange(year, month)[1]
    if not 1 <= day <= days:
        raise ConfigError(f"{name} {text} is not a real date: {calendar.month_name[month]} {year} has {days} days.")
    if hour > 23 or minute > 59:
        raise ConfigError(f"{name} {text} is not a time of day: hours go to 23 and minutes to 59.")
    cleaned = text.replace(" ", "T")
    moment = datetime.fromisoformat(cleaned[:-1] + "+00:00" if cleaned.endswith("Z") else cleaned)
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    if moment.second or moment.microsecond:
        raise ConfigError(
            f"{name} {text} is not on the feed's hourly grid: windows start on a whole minute, "
            f"for example {_example(grid_minute)}."
        )
    if grid_minute is not None and moment.minute != grid_minute:
        raise ConfigError(
            f"{name} {text} is not on the feed's hourly grid: its windows start at minute "
            f"{grid_minute:02d} of every hour, so the nearest are {_on_grid(moment, grid_minute)}."
        )
    return moment


def _on_grid(moment: datetime, grid_minute: int) -> str:
    before = moment.replace(minute=grid_minute)
    if before > moment:
        before -= timedelta(hours=1)
    after = before + timedelta(hours=1)
    return f"{before:%Y-%m-%dT%H:%M:00Z} and {after:%Y-%m-%dT%H:%M:00Z}"


def blob_request(params: dict[str, Any], grid_minute: int | None = None) -> tuple[datetime, datetime] | None:
    """The windows a blob run re-processes (``window_start`` inclusive, ``window_end`` exclusive), or None
    for a run that follows the checkpoint."""
    start, end = given(params, "window_start"), given(params, "window_end")
    if start is None and end is None:
        return None
    if start is None or end is None:
        raise ConfigError(
            "A backfill needs both window_start and window_end (window_end is exclusive); leave both "
            "empty for a normal run."
        )
    start_time, end_time = window_time("window_start", start, grid_minute), window_time("window_end", end, grid_minute)
    if end_time <= start_time:
        raise ConfigError(
            f"window_end {end_time:%Y-%m-%dT%H:%M:%SZ} must be after window_start "
            f"{start_time:%Y-%m-%dT%H:%M:%SZ}: window_end is exclusive, so one hour from "
            f"{start_time:%H:%M} ends at {start_time + timedelta(hours=1):%H:%M}."
        )
    if params.get("reset_checkpoint"):
        raise ConfigError("Choose one: a backfill (window_start and window_end) or 'Reset the checkpoint', not both.")
    return start_time, end_time
