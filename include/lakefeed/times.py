"""Moments as every pipeline names them in logs, XCom, checkpoints and commits: ISO-8601 in UTC, ``Z``.

>>> format_time(parse_time("2026-01-01T04:10"))
'2026-01-01T04:10:00Z'
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["format_time", "parse_time", "utc"]


def format_time(moment: datetime) -> str:
    """``2026-01-01T04:10:00Z``: the form windows are named by in logs, XCom and commits."""
    return utc(moment).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """Parse a user-given ISO time (``2026-01-01T04:10``, ``...Z``, ``...+00:00``) as UTC."""
    cleaned = text.strip().replace(" ", "T")
    if cleaned.endswith("Z"):
        cleaned = cleaned[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        raise ValueError(f"not an ISO-8601 time: {text!r}") from None
    return utc(moment)


def utc(moment: datetime) -> datetime:
    """An aware moment in UTC (a naive one is taken to be UTC)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)
