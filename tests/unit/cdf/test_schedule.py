import pytest

from lakefeed.cdf.schedule import VersionRange, pending_ranges, split_range
from lakefeed.errors import FeedConfigError


def test_pending_ranges_after_the_checkpoint_in_chunks_up_to_the_cap():
    assert pending_ranges(4, 12, versions_per_job=3, cap=100) == [
        VersionRange(5, 7),
        VersionRange(8, 10),
        VersionRange(11, 12),
    ]
    assert pending_ranges(None, 2, versions_per_job=10, cap=100) == [VersionRange(0, 2)]
    assert pending_ranges(4, 12, versions_per_job=3, cap=4) == [VersionRange(5, 7), VersionRange(8, 8)]
    assert pending_ranges(12, 12, versions_per_job=3, cap=100) == []
    assert pending_ranges(None, None, versions_per_job=3, cap=100) == []


def test_split_range_rejects_nonsense():
    with pytest.raises(FeedConfigError):
        split_range(5, 4, 2)
    with pytest.raises(FeedConfigError):
        split_range(0, 4, 0)
