"""The retention rule of the blob checkpoint (:mod:`lakefeed.blob.retention`): which segments the next windows
need, and when their absence is a certain loss, a possible one, or no loss at all."""

from lakefeed.blob.retention import next_segment, retention_gap
from lakefeed.blob.timegrid import HOUR
from lakefeed.times import parse_time

W = parse_time("2026-03-10T05:10Z")  # watermark: windows before it are applied
NOW = parse_time("2026-03-10T07:10Z")  # lastConsumable now


def t(text: str):
    return parse_time(text)


def test_next_segment_is_the_oldest_the_windows_from_a_position_read():
    starts = [t("2026-03-10T02:10Z"), t("2026-03-10T04:10Z"), t("2026-03-10T06:10Z")]
    assert next_segment(W, starts) == t("2026-03-10T04:10Z")  # window 05:10 reads 04:10 for spill-over
    assert next_segment(W + HOUR * 2, starts) == t("2026-03-10T06:10Z") and next_segment(W + HOUR * 3, starts) is None


def test_nothing_needed_is_gone_while_the_earliest_segment_is_at_or_before_watermark_minus_an_hour():
    assert retention_gap(W, t("2026-03-10T04:10Z"), NOW, W - HOUR, NOW) is None
    assert retention_gap(W, None, None, t("2026-03-01T00:10Z"), NOW) is None


def test_a_recorded_next_segment_that_is_gone_is_a_certain_loss_naming_the_windows():
    gap = retention_gap(W, t("2026-03-10T04:10Z"), NOW, t("2026-03-10T07:10Z"), NOW)
    assert gap.certain and gap.gone_from == t("2026-03-10T04:10Z")
    assert (gap.first_window, gap.end_window) == (W, t("2026-03-10T08:10Z"))
    assert gap.resume_window == t("2026-03-10T06:10Z")
    assert "were deleted" in gap.message("file:///feed", "cp") and "acknowledge_data_loss=true" in gap.message("f", "c")
    # Still there (the feed was idle between the watermark and it): no loss.
    assert retention_gap(W, t("2026-03-10T06:10Z"), NOW, t("2026-03-10T06:10Z"), NOW) is None


def test_without_a_next_segment_only_segments_old_enough_to_be_deleted_count_and_the_loss_is_possible():
    listed = t("2026-03-10T06:10Z")
    # A new segment after an idle stretch, within a day: retention (at least a day) cannot have deleted any.
    assert retention_gap(W, None, listed, t("2026-03-10T07:10Z"), NOW) is None
    # The pipeline was paused for days: segments created after its last listing may have been deleted.
    later = t("2026-03-20T00:10Z")
    gap = retention_gap(W, None, listed, t("2026-03-15T00:10Z"), later)
    assert (
        gap is not None
        and not gap.certain
        and gap.gone_from == listed
        and "may have been deleted" in gap.message("f", "c")
    )
    # A checkpoint written before these fields (never listed): from watermark - 1h on.
    gap = retention_gap(W, None, None, t("2026-03-15T00:10Z"), later)
    assert gap.gone_from == W - HOUR and gap.end_window == t("2026-03-15T01:10Z")
