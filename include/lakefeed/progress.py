"""How far a checkpoint may advance: over the contiguous prefix of finished spans, never backwards.

Spans are half-open ``[start, end)`` of anything ordered: hourly windows
(datetimes) for the blob feed, source versions (ints) for Delta CDF.

>>> advance(0, [(0, 5), (5, 9), (9, 12)], succeeded={0, 2})
5
"""

from __future__ import annotations

from typing import Sequence, TypeVar

T = TypeVar("T")


def advance(position: T | None, spans: Sequence[tuple[T, T]], succeeded: set[int]) -> T | None:
    """The position after a run. ``succeeded`` holds the indexes of finished spans.

    Without a position yet, the prefix starts at the earliest span; with none
    finished there, the result stays None.
    """
    if not spans:
        return position
    current = position if position is not None else min(start for start, _ in spans)
    moved = False
    for index, (start, end) in sorted(enumerate(spans), key=lambda item: item[1][0]):
        if end <= current:
            continue  # wholly behind the position (a backfill): nothing to advance
        if start > current or index not in succeeded:
            break
        current, moved = end, True
    if position is None:
        return current if moved else None
    return max(current, position)
