"""Orchestration decisions for Delta CDF pipelines, pure: which version ranges a run applies
(how far a checkpoint moves: :mod:`lakefeed.progress`)."""

from __future__ import annotations

from dataclasses import dataclass

from lakefeed.errors import FeedConfigError


@dataclass(frozen=True)
class VersionRange:
    """Source versions ``start..end``, inclusive, applied by one spark-submit."""

    start: int
    end: int


def pending_ranges(applied: int | None, latest: int | None, versions_per_job: int, cap: int) -> list[VersionRange]:
    """Ranges after ``applied`` up to ``latest`` (at most ``cap`` versions), ``versions_per_job`` each."""
    if latest is None:
        return []
    first = 0 if applied is None else applied + 1
    last = min(latest, first + cap - 1)
    return split_range(first, last, versions_per_job) if first <= last else []


def split_range(start: int, end: int, versions_per_job: int) -> list[VersionRange]:
    if versions_per_job < 1:
        raise FeedConfigError(f"versions_per_job must be at least 1, got {versions_per_job}")
    if start < 0 or end < start:
        raise FeedConfigError(f"invalid version range {start}..{end}")
    return [VersionRange(s, min(s + versions_per_job - 1, end)) for s in range(start, end + 1, versions_per_job)]
