"""The Delta CDF DAG's params as the request its plan serves (:mod:`lakefeed.run_params`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lakefeed.errors import ConfigError
from lakefeed.run_params import given


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
    name = given(params, "pipeline")
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
