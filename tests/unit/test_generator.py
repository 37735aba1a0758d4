"""The generator's feed has every feature it promises, deterministically."""

import hashlib
from pathlib import Path

import fastavro

from lakefeed.blob.feed import ChangeFeed
from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.storage import Store

SPEC = FeedSpec(hours=4, events_per_hour=600, shards=3, records_per_chunk=150, seed=11)


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path):
    generate_feed(tmp_path / "a", SPEC)
    generate_feed(tmp_path / "b", SPEC)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")


def test_feed_layout_and_features(tmp_path):
    truth = generate_feed(tmp_path, SPEC)
    feed = ChangeFeed(Store(str(tmp_path)))
    starts = feed.all_segment_starts()
    assert [s.hour for s in starts] == [0, 1, 3, 4]  # hour 2 is a gap; 04:10 is past lastConsumable
    assert (tmp_path / "idx/segments/1601/01/01/0000/meta.json").exists()
    assert feed.last_consumable() == SPEC.last_consumable
    assert not feed.read_segment(starts[-1]).is_finalized
    assert truth.control_records > 0 and truth.duplicate_records > 0
    assert any(e.stray for e in truth.events)
    assert any(e.eventTime.endswith(":09:59.9999999Z") for e in truth.events)
    assert {e.window for e in truth.events} >= {"2025-12-31T23:10:00Z", "2026-01-01T02:10:00Z"}
    chunks = feed.chunk_files(feed.read_segment(starts[1]))
    assert any(c.size == 0 for c in chunks)
    versions = set()
    for chunk in (c for s in starts for c in feed.chunk_files(feed.read_segment(s)) if c.size):
        with (tmp_path / chunk.path).open("rb") as handle:
            versions.update(r["schemaVersion"] for r in fastavro.reader(handle))
    assert versions == {1, 3, 4, 5, 6}


def test_sequencers_increase_per_blob_in_feed_order(tmp_path):
    truth = generate_feed(tmp_path, SPEC)
    last: dict[str, str] = {}
    for event in truth.events:
        assert event.sequencer > last.get(event.subject, "")
        last[event.subject] = event.sequencer


def test_adding_hours_keeps_earlier_hours_identical(tmp_path):
    small = generate_feed(tmp_path / "a", SPEC)
    bigger = generate_feed(tmp_path / "b", FeedSpec(**{**SPEC.__dict__, "hours": 6}))
    assert [e.id for e in bigger.events[: len(small.events) - 600]] == [e.id for e in small.events[:-600]]
