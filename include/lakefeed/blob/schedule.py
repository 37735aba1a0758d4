"""Orchestration decisions for the blob pipeline: what is ready, which windows a run asks for, how to
batch them. Used by the Airflow sensor and DAG tasks (how far a checkpoint moves: :mod:`lakefeed.progress`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.timegrid import HOUR, WindowGrid, is_ready, windows_in_range
from lakefeed.errors import FeedConfigError, FeedCorruptError, WindowNotReadyError
from lakefeed.times import format_time


@dataclass(frozen=True)
class Batch:
    """Consecutive windows ``[start, end)`` submitted as one Spark job."""

    start: datetime
    end: datetime

    @property
    def windows(self) -> int:
        return int((self.end - self.start) / HOUR)


def check_last_consumable(current: datetime, seen: datetime | None, where: str) -> None:
    """lastConsumable never moves backwards; if it does, the feed is not what we read before."""
    if seen is not None and current < seen:
        raise FeedCorruptError(
            f"{where}: lastConsumable moved backwards from {format_time(seen)} to {format_time(current)}; "
            "refusing to plan (was the feed restored, or is this another account?)"
        )


def first_window(feed: ChangeFeed, watermark: datetime | None, start_from: datetime | None) -> datetime | None:
    """The first window not yet applied: the watermark, else the hour before the first segment."""
    if watermark is not None:
        return watermark
    first_segment = feed.first_segment_start()
    if first_segment is None:
        return None
    window = first_segment - HOUR
    if start_from is not None:
        grid = WindowGrid(first_segment.minute)
        floor = grid.floor(start_from)
        window = max(window, floor if floor == start_from else floor + HOUR)
    return window


def pending_windows(first: datetime | None, last_consumable: datetime, cap: int) -> list[datetime]:
    """Ready windows from ``first`` on, at most ``cap`` of them."""
    if first is None:
        return []
    windows: list[datetime] = []
    window = first
    while is_ready(window, last_consumable) and len(windows) < cap:
        windows.append(window)
        window += HOUR
    return windows


def batches_of(windows: list[datetime], windows_per_batch: int) -> list[Batch]:
    """Split consecutive windows into batches of at most ``windows_per_batch``."""
    if windows_per_batch < 1:
        raise FeedConfigError(f"windows_per_batch must be at least 1, got {windows_per_batch}")
    for previous, current in itertools.pairwise(windows):
        if current - previous != HOUR:
            raise FeedConfigError(
                f"windows must be consecutive hours: {format_time(previous)} → {format_time(current)}"
            )
    return [
        Batch(windows[i], windows[min(i + windows_per_batch, len(windows)) - 1] + HOUR)
        for i in range(0, len(windows), windows_per_batch)
    ]


def backfill_windows(grid_minute: int, start: datetime, end: datetime, last_consumable: datetime) -> list[datetime]:
    """Exactly the windows of a backfill range ``[start, end)``, both on the grid, all ready."""
    return _all_ready(windows_in_range(WindowGrid(grid_minute), start, end), last_consumable, "backfill")


def interval_windows(grid_minute: int, start: datetime, end: datetime, last_consumable: datetime) -> list[datetime]:
    """The grid windows that start in an Airflow data interval ``[start, end)``: what one of Airflow's
    Backfill runs re-processes (with an hourly schedule, exactly one). All must be ready."""
    return _all_ready(
        WindowGrid(grid_minute).windows(start, end),
        last_consumable,
        f"backfill run for {format_time(start)} .. {format_time(end)}",
    )


def _all_ready(windows: list[datetime], last_consumable: datetime, what: str) -> list[datetime]:
    late = [w for w in windows if not is_ready(w, last_consumable)]
    if late:
        raise WindowNotReadyError(
            f"the {what} asks for {len(late)} window(s) not ready yet (first {format_time(late[0])}); "
            f"lastConsumable is {format_time(last_consumable)} and window T needs lastConsumable >= T + 1h"
        )
    return windows


@dataclass(frozen=True)
class Readiness:
    """What a sensor poke learned: is a window past the watermark ready?"""

    ready: bool
    last_consumable: datetime
    next_window: datetime | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "lastConsumable": format_time(self.last_consumable),
            "nextWindow": format_time(self.next_window) if self.next_window else None,
        }


def check_readiness(
    feed: ChangeFeed, watermark: datetime | None, last_seen: datetime | None, start_from: datetime | None
) -> Readiness:
    """Reads Segments.json (and, before the first run, the lowest segment folders): JVM-free and cheap."""
    last_consumable = feed.last_consumable()
    check_last_consumable(last_consumable, last_seen, feed.store.url("meta/Segments.json"))
    window = first_window(feed, watermark, start_from)
    return Readiness(
        ready=window is not None and is_ready(window, last_consumable),
        last_consumable=last_consumable,
        next_window=window,
    )
