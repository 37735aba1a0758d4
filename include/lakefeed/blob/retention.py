"""Change feed retention: which segments the next windows need, and whether retention removed them.

Azure deletes change feed segments older than the account's retention period,
oldest first; an hour without events has no segment at all. So a segment that
is missing is not by itself a loss, and the feed cannot say what it deleted.
The blob checkpoint therefore records what it knew when it moved:

- ``next_segment``: the oldest segment the windows from the watermark on read (a
  window T reads the segments starting at T-1h, T and T+1h, so: the oldest
  segment starting at or after ``watermark - 1h``), among the segments listed up to
  ``listed_through``; None when that listing found none;
- ``listed_through``: how far that listing reached (None: never listed, a
  checkpoint written before these fields).

At the next plan, with ``earliest`` the oldest segment the feed still holds:

- every segment the next windows need is still there when ``earliest`` is at or
  before ``watermark - 1h`` (retention deletes oldest first);
- a recorded ``next_segment`` that is gone (``earliest`` after it) is a certain
  loss: the segments from it up to ``earliest`` were deleted unread;
- with no ``next_segment``, segments after ``listed_through`` (or after
  ``watermark - 1h`` when nothing was listed) were never seen. One of them could
  have been deleted only once older than the retention period, at least one day
  (the shortest Azure allows), so a loss is possible only when such a segment
  would be older than a day before ``lastConsumable``. An idle feed cannot be
  told from a deleted one there, so that case is reported as a possible loss.

Azure's Python change feed client resumes a continuation token by walking the
segments until it meets the one the token names; when retention removed it, the
walk runs out and the client returns no events, without an error (and a shard
whose chunk files are gone yields nothing). Here the gap stops the pipeline,
naming the windows that may be incomplete, until a run acknowledges the loss.

>>> from lakefeed.times import parse_time as t
>>> gap = retention_gap(t("2026-01-05T10:10Z"), t("2026-01-05T10:10Z"), t("2026-01-05T12:10Z"),
...                     t("2026-01-09T00:10Z"), t("2026-01-12T00:10Z"))
>>> gap.certain, format_time(gap.first_window), format_time(gap.end_window)
(True, '2026-01-05T10:10:00Z', '2026-01-09T01:10:00Z')
>>> retention_gap(t("2026-01-05T10:10Z"), None, t("2026-01-05T12:10Z"), t("2026-01-05T13:10Z"),
...               t("2026-01-05T15:10Z")) is None
True
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from lakefeed.blob import DAG_ID
from lakefeed.blob.timegrid import HOUR
from lakefeed.times import format_time

MIN_RETENTION = timedelta(days=1)  # the shortest change feed retention Azure allows


@dataclass(frozen=True)
class RetentionGap:
    """Windows ``[first_window, end_window)`` may miss events: segments they read were (``certain``) or may
    have been removed by retention before this pipeline read them."""

    first_window: datetime
    end_window: datetime
    earliest_segment: datetime
    certain: bool
    gone_from: datetime  # the oldest segment start that was, or may have been, deleted unread

    @property
    def resume_window(self) -> datetime:
        """The first window whose segments all remain: the one before the feed's earliest segment (it reads
        that segment for its spill-over events)."""
        return max(self.first_window, self.earliest_segment - HOUR)

    def describe(self) -> dict[str, object]:
        return {
            "windows": [format_time(self.first_window), format_time(self.end_window)],
            "earliestSegment": format_time(self.earliest_segment),
            "segmentsGoneFrom": format_time(self.gone_from),
            "certain": self.certain,
            "resumeWindow": format_time(self.resume_window),
        }

    def message(self, feed: str, checkpoint_variable: str) -> str:
        what = (
            "were deleted by the change feed's retention before this pipeline read them"
            if self.certain
            else "may have been deleted by the change feed's retention before this pipeline read them (this "
            "pipeline last listed the feed before them; a feed idle for that long looks the same)"
        )
        return (
            f"{feed}: the segments from {format_time(self.gone_from)} up to the earliest segment the feed still "
            f"holds, {format_time(self.earliest_segment)}, {what}. The windows {format_time(self.first_window)} .. "
            f"{format_time(self.end_window)} (end exclusive) may be missing events; checkpoint {checkpoint_variable} "
            f"stays at {format_time(self.first_window)}. To accept the loss and go on from "
            f"{format_time(self.resume_window)}, trigger {DAG_ID} with the param "
            f"acknowledge_data_loss=true (the run summary records the windows given up); to keep the data, "
            f"restore the deleted segments first."
        )


def next_segment(position: datetime, segment_starts: list[datetime]) -> datetime | None:
    """The oldest of ``segment_starts`` the windows from ``position`` on read (starting at or after
    ``position - 1h``), or None."""
    return min((start for start in segment_starts if start >= position - HOUR), default=None)


def retention_gap(
    watermark: datetime,
    recorded_next: datetime | None,
    listed_through: datetime | None,
    earliest: datetime,
    last_consumable: datetime,
) -> RetentionGap | None:
    """The windows from ``watermark`` on that retention may have emptied (module docstring), or None."""
    needed_from = watermark - HOUR
    if earliest <= needed_from:
        return None
    if recorded_next is not None:
        if earliest <= recorded_next:
            return None
        return _gap(watermark, recorded_next, earliest, certain=True)
    unseen_from = max(needed_from, listed_through) if listed_through is not None else needed_from
    deletable_before = last_consumable - MIN_RETENTION
    if unseen_from >= min(earliest, deletable_before):
        return None
    return _gap(watermark, max(unseen_from, needed_from), earliest, certain=False)


def _gap(watermark: datetime, gone_from: datetime, earliest: datetime, certain: bool) -> RetentionGap:
    # A segment S feeds windows S-1h, S and S+1h; the youngest segment that can be gone starts at
    # earliest - 1h, so windows up to ``earliest`` (inclusive) may be incomplete.
    return RetentionGap(
        first_window=watermark,
        end_window=max(watermark, earliest) + HOUR,
        earliest_segment=earliest,
        certain=certain,
        gone_from=gone_from,
    )
