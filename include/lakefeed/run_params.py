"""The params a person gives a run (the DAGs' trigger forms), checked as one request, refused in sentences.

One function per pipeline turns the params into the request the plan serves and
raises a :class:`~lakefeed.errors.ConfigError` that says what is wrong in words
(a date that is not in the calendar, a time off the feed's hourly grid, a range
given backwards, a negative version), never a regular expression. The plan calls
them first thing; the api-server calls the same functions when a run is
triggered (:mod:`lakefeed_airflow.trigger_check`), so a bad form is refused
before a run exists, with the same sentence.

Pure: no Airflow, no I/O. What the api-server knows besides the params (the
feed's grid minute from the checkpoint, the configured CDF pipelines) comes in
as arguments, ``None`` when unknown.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lakefeed.errors import ConfigError

_ISO = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")
_HLC = re.compile(r"^\d{1,20}\.\d{10}$")
HLC_EXAMPLE = "1714751617108996000.0000000000"


def _given(params: dict[str, Any], name: str) -> Any:
    value = params.get(name)
    return None if value is None or (isinstance(value, str) and not value.strip()) else value


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
    start, end = _given(params, "window_start"), _given(params, "window_end")
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


def version(name: str, value: Any) -> int | None:
    """A Delta table version param: a whole number, 0 or more."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
        raise ConfigError(f"{name} {value!r} is not a version: Delta versions are whole numbers from 0.")
    try:
        number = int(str(value).strip()) if isinstance(value, str) else int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} {value!r} is not a version: Delta versions are whole numbers from 0.") from None
    if number < 0:
        raise ConfigError(f"{name} {number} is negative: Delta versions start at 0.")
    return number


@dataclass(frozen=True)
class CdfRequest:
    """What a CDF run was asked for: a version range (inclusive), a full refresh (at ``end``, default the
    latest), and which pipeline."""

    start: int | None
    end: int | None
    full_refresh: bool
    pipeline: str | None

    @property
    def names_a_range(self) -> bool:
        return self.start is not None or (self.end is not None and not self.full_refresh)


def cdf_request(params: dict[str, Any], pipelines: list[str] | None = None) -> CdfRequest:
    """The CDF params as a request; ``pipelines`` (the configured names, when known) checks the choice."""
    start, end = (
        version("starting_version", params.get("starting_version")),
        version("ending_version", params.get("ending_version")),
    )
    full_refresh = bool(params.get("full_refresh"))
    name = _given(params, "pipeline")
    if full_refresh and start is not None:
        raise ConfigError("A full refresh takes ending_version (the snapshot version) only, not starting_version.")
    if not full_refresh and (start is None) != (end is None):
        raise ConfigError(
            "A version backfill needs both starting_version and ending_version (both inclusive); "
            "leave both empty for a normal run."
        )
    if start is not None and end is not None and end < start:
        raise ConfigError(
            f"ending_version {end} is before starting_version {start}: the range is inclusive, "
            f"give the smaller version first."
        )
    if name is not None and pipelines is not None and name not in pipelines:
        raise ConfigError(f"pipeline {name!r} is not configured: choose one of {', '.join(pipelines)}.")
    if name is None and pipelines is not None and len(pipelines) > 1 and (full_refresh or start is not None):
        raise ConfigError(f"A backfill or full refresh names its pipeline: choose one of {', '.join(pipelines)}.")
    return CdfRequest(start, end, full_refresh, str(name) if name is not None else None)


def resolved(name: str, value: Any) -> str | None:
    """A RESOLVED timestamp param as the sink writes it (``<wall ns>.<10-digit logical>``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    text = str(value).strip()
    if not _HLC.match(text):
        raise ConfigError(
            f"{name} {text!r} is not a RESOLVED timestamp: write it as the sink names its RESOLVED "
            f"files, <wall-clock nanoseconds>.<10-digit logical>, for example {HLC_EXAMPLE}."
        )
    return text


def crdb_request(params: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(after_resolved, through_resolved)``: a backfill re-applies the files after the first through
    the second (after empty: from the sink's first file); ``(None, None)`` follows the checkpoint."""
    after, through = (
        resolved("after_resolved", params.get("after_resolved")),
        resolved("through_resolved", params.get("through_resolved")),
    )
    if after is not None and through is None:
        raise ConfigError(
            "A backfill needs through_resolved (after_resolved alone names no range); leave both "
            "empty for a normal run."
        )
    if after is not None and through is not None and _hlc_key(after) >= _hlc_key(through):
        raise ConfigError(
            f"after_resolved {after} must be before through_resolved {through}: the backfill applies "
            f"the files after the first up to the second."
        )
    if through is not None and params.get("reset_checkpoint"):
        raise ConfigError("Choose one: a backfill (through_resolved) or 'Reset the checkpoint', not both.")
    return after, through


def _hlc_key(text: str) -> tuple[int, int]:
    wall, logical = text.split(".")
    return int(wall), int(logical)
