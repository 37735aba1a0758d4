"""The one rule for how a run moves a checkpoint. Every pipeline's commit step calls :func:`position_after`.

A position is where unapplied work begins: every span before it is in the
targets. Spans are half-open ``[start, end)`` of anything ordered: hourly
windows (datetimes) for the blob feed, source versions (ints) for Delta CDF.

- A **scheduled** run starts from the stored position, or, when there is none,
  from the pipeline's origin (the feed's first window, version 0), and moves
  it over the contiguous prefix of finished spans; never backwards, never past
  a gap.
- A **backfill** (a range from params, or one of Airflow's Backfill runs) may
  start anywhere, so it never creates nor moves a position: work before its
  range would be skipped. Scheduled runs apply that range again (idempotently).
- A **reset** (a full refresh at version V, or an explicit re-initialisation)
  replaces the position with the reset point, then advances from there like a
  scheduled run: the only way a position moves back, and only when asked for.

>>> position_after(SCHEDULED, None, [(0, 5), (5, 9), (9, 12)], {0, 2}, origin=0)
5
>>> position_after(BACKFILL, None, [(5, 9)], {0}, origin=0) is None
True
>>> position_after(RESET, 40, [(10, 11)], {0}, origin=10)
11
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar


class Ordered(Protocol):
    """What a position is: anything ordered (datetimes, ints)."""

    def __lt__(self, other: Any, /) -> bool: ...
    def __le__(self, other: Any, /) -> bool: ...
    def __gt__(self, other: Any, /) -> bool: ...
    def __ge__(self, other: Any, /) -> bool: ...


T = TypeVar("T", bound=Ordered)

SCHEDULED, BACKFILL, RESET = "scheduled", "backfill", "reset"
RUN_KINDS = (SCHEDULED, BACKFILL, RESET)


def position_after(
    kind: str, stored: T | None, spans: Sequence[tuple[T, T]], succeeded: set[int], origin: T | None = None
) -> T | None:
    """The position after a run of ``kind``. ``succeeded`` holds the indexes of finished spans;
    ``origin`` is where a scheduled run starts without a stored position, and where a reset starts."""
    if kind == BACKFILL:
        return stored
    if kind == RESET:
        return None if origin is None else advance(origin, spans, succeeded)
    if kind != SCHEDULED:
        raise ValueError(f"unknown run kind {kind!r} (one of {', '.join(RUN_KINDS)})")
    start = stored if stored is not None else origin
    if start is None:
        return None
    moved = advance(start, spans, succeeded)
    return moved if stored is None else max(moved, stored)


def advance(position: T, spans: Sequence[tuple[T, T]], succeeded: set[int]) -> T:
    """``position`` moved over the contiguous prefix of finished spans.

    >>> advance(5, [(9, 12)], {0})   # a gap before the span: no move
    5
    """
    current = position
    for index, (start, end) in sorted(enumerate(spans), key=lambda item: item[1][0]):
        if end <= current:
            continue  # wholly behind the position: applied again, nothing to advance
        if start > current or index not in succeeded:
            break
        current = end
    return current
