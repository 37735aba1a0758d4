"""The one rule for moving a checkpoint, checked exhaustively on small cases: a checkpoint never moves
past a span that did not finish, never backwards except by a reset, and a backfill never moves it."""

import itertools

import pytest

from lakefeed.progress import BACKFILL, RESET, SCHEDULED, advance, position_after

SPANS = [(0, 5), (5, 9), (9, 12)]


@pytest.mark.parametrize(
    "stored, succeeded, expected",
    [
        (0, {0, 1, 2}, 12),
        (0, {0, 2}, 5),  # a gap: stop at the first unfinished span
        (0, {1, 2}, 0),  # the first span failed: nothing moves
        (None, {0, 1}, 9),  # first scheduled run: from the origin
        (None, {1}, 0),  # ... which is recorded even when nothing finished
        (20, {0, 1, 2}, 20),  # spans behind the position never move it back
        (7, {1, 2}, 12),  # a span straddling the position counts
    ],
)
def test_scheduled_runs_move_over_the_contiguous_prefix_from_the_position_or_origin(stored, succeeded, expected):
    assert position_after(SCHEDULED, stored, SPANS, succeeded, origin=0) == expected


def test_span_order_does_not_matter():
    assert position_after(SCHEDULED, 0, list(reversed(SPANS)), {0, 1, 2}, origin=0) == 12


@pytest.mark.parametrize("stored", [None, 0, 5, 12, 40])
def test_a_backfill_never_creates_nor_moves_a_position(stored):
    # Before the first scheduled run (no position), a backfill of a middle range must not start the
    # checkpoint at its end: every span before it would never be applied.
    assert position_after(BACKFILL, stored, SPANS[1:2], {0}, origin=0) == stored
    assert position_after(BACKFILL, stored, SPANS, {0, 1, 2}, origin=0) == stored


def test_a_reset_replaces_the_position_then_advances_from_the_reset_point():
    assert position_after(RESET, 40, [], set(), origin=10) == 10  # full refresh at version 9
    assert position_after(RESET, 40, SPANS, {0, 1}, origin=0) == 9  # re-initialised blob checkpoint
    assert position_after(RESET, 40, SPANS, {1}, origin=0) == 0


def test_an_unknown_kind_is_an_error():
    with pytest.raises(ValueError, match="unknown run kind"):
        position_after("catchup", 0, SPANS, set(), origin=0)


def test_exhaustively_a_position_never_passes_unfinished_work_nor_moves_back():
    spans = [(0, 2), (2, 3), (3, 6), (6, 7)]
    for stored in (None, 0, 1, 2, 3, 5, 7, 9):
        for size in range(len(spans) + 1):
            for succeeded in map(set, itertools.combinations(range(len(spans)), size)):
                after = position_after(SCHEDULED, stored, spans, succeeded, origin=0)
                start = 0 if stored is None else stored
                assert after >= start
                # every unit of work between the old and the new position belongs to a finished span
                for unit in range(start, after):
                    assert any(s <= unit < e and i in succeeded for i, (s, e) in enumerate(spans)), (
                        stored,
                        succeeded,
                        after,
                    )


def test_advance_alone():
    assert advance(5, [(9, 12)], {0}) == 5
    assert advance(9, [(9, 12)], {0}) == 12
