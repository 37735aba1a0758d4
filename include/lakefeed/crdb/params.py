"""The CockroachDB DAG's params as the request its plan serves (:mod:`lakefeed.run_params`)."""

from __future__ import annotations

import re
from typing import Any

from lakefeed.errors import ConfigError

_HLC = re.compile(r"^\d{1,20}\.\d{10}$")
HLC_EXAMPLE = "1714751617108996000.0000000000"


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
