import json
from datetime import UTC, date, datetime

import pytest

from lakefeed.blob.feed import ChangeFeed, parse_manifest, segment_manifest_path
from lakefeed.errors import FeedCorruptError, FeedError
from lakefeed.storage import Store


def utc(*parts):
    return datetime(*parts, tzinfo=UTC)


def write_json(root, relative, document):
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(document if isinstance(document, str) else json.dumps(document))


def manifest(status="Finalized", paths=("$blobchangefeed/log/00/2026/01/01/0010/",)):
    return {"version": 0, "status": status, "chunkFilePaths": list(paths)}


@pytest.fixture
def feed(tmp_path):
    write_json(tmp_path, "meta/Segments.json", {"version": 0, "lastConsumable": "2026-01-01T02:10:00.000Z"})
    write_json(tmp_path, "idx/segments/1601/01/01/0000/meta.json", manifest(paths=()))
    for start in (utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 2, 10), utc(2026, 1, 2, 0, 10)):
        write_json(tmp_path, segment_manifest_path(start), manifest())
    return ChangeFeed(Store(str(tmp_path)))


def test_last_consumable(feed):
    assert feed.last_consumable() == utc(2026, 1, 1, 2, 10)


def test_all_segment_starts_ignores_the_1601_init_segment(feed):
    assert feed.all_segment_starts() == [utc(2026, 1, 1, 0, 10), utc(2026, 1, 1, 2, 10), utc(2026, 1, 2, 0, 10)]


def test_segment_starts_between_lists_only_those_days(feed):
    assert feed.segment_starts_between(date(2026, 1, 2), date(2026, 1, 3)) == [utc(2026, 1, 2, 0, 10)]


def test_missing_segments_json_names_the_file(tmp_path):
    with pytest.raises(FeedError, match="meta/Segments.json does not exist"):
        ChangeFeed(Store(str(tmp_path))).last_consumable()


def test_malformed_segments_json_names_the_file(tmp_path):
    write_json(tmp_path, "meta/Segments.json", "{not json")
    with pytest.raises(FeedCorruptError, match=r"meta/Segments.json: malformed JSON"):
        ChangeFeed(Store(str(tmp_path))).last_consumable()


def test_unparseable_last_consumable(tmp_path):
    write_json(tmp_path, "meta/Segments.json", {"lastConsumable": "soon"})
    with pytest.raises(FeedCorruptError, match="lastConsumable"):
        ChangeFeed(Store(str(tmp_path))).last_consumable()


def test_malformed_manifest_names_the_file(feed, tmp_path):
    write_json(tmp_path, segment_manifest_path(utc(2026, 1, 1, 0, 10)), '{"status": ')
    with pytest.raises(FeedCorruptError, match=r"idx/segments/2026/01/01/0010/meta.json: malformed JSON"):
        feed.read_segment(utc(2026, 1, 1, 0, 10))


@pytest.mark.parametrize(
    "bad_path",
    [
        "$blobchangefeed/log/../meta/",
        "$blobchangefeed/idx/segments/",
        "otherContainer/log/00/2026/01/01/0010/",
        "/etc/",
        "$blobchangefeed/log/00/../../secrets/",
    ],
)
def test_manifest_pointing_outside_log_is_refused(bad_path):
    with pytest.raises(FeedCorruptError, match="points outside"):
        parse_manifest(manifest(paths=(bad_path,)), "x/meta.json", utc(2026, 1, 1))


def test_manifest_status_must_be_known():
    with pytest.raises(FeedCorruptError, match="unknown segment status"):
        parse_manifest(manifest(status="Weird"), "x/meta.json", utc(2026, 1, 1))


def test_manifest_shard_paths_are_relative():
    segment = parse_manifest(manifest(status="Publishing"), "x/meta.json", utc(2026, 1, 1, 0, 10))
    assert segment.shard_paths == ("log/00/2026/01/01/0010/",)
    assert not segment.is_finalized


def test_chunk_files_in_name_order_including_empty_ones(feed, tmp_path):
    shard = tmp_path / "log/00/2026/01/01/0010"
    shard.mkdir(parents=True)
    for name, content in (("00002.avro", b"x"), ("00000.avro", b"xy"), ("00001.avro", b""), ("notes.txt", b"")):
        (shard / name).write_bytes(content)
    chunks = feed.chunk_files(feed.read_segment(utc(2026, 1, 1, 0, 10)))
    assert [(c.name, c.size, c.shard) for c in chunks] == [
        ("00000.avro", 2, "00"),
        ("00001.avro", 0, "00"),
        ("00002.avro", 1, "00"),
    ]


DEEP = "[" * 200_000 + "]" * 200_000


def test_deeply_nested_segments_json_and_manifest_are_named_not_a_crash(feed, tmp_path):
    """Before: Python's parser raised RecursionError (exit 1, no file named; the trigger crashed)."""
    write_json(tmp_path, segment_manifest_path(utc(2026, 1, 1, 0, 10)), '{"status": ' + DEEP + "}")
    with pytest.raises(
        FeedCorruptError,
        match=r"idx/segments/2026/01/01/0010/meta.json: malformed JSON "
        r"\(nested too deeply\)",
    ):
        feed.read_segment(utc(2026, 1, 1, 0, 10))
    write_json(tmp_path, "meta/Segments.json", '{"lastConsumable": ' + DEEP + "}")
    with pytest.raises(FeedCorruptError, match=r"meta/Segments.json: malformed JSON \(nested too deeply\)"):
        ChangeFeed(Store(str(tmp_path))).last_consumable()


def test_segment_chunks_names_shard_folders_without_a_chunk_file(feed, tmp_path):
    """A 0-byte chunk file is a chunk; a missing folder, or one holding no ``.avro`` file, is not."""
    shards = (
        "$blobchangefeed/log/00/2026/01/01/0010/",
        "$blobchangefeed/log/01/2026/01/01/0010/",
        "$blobchangefeed/log/02/2026/01/01/0010/",
    )
    write_json(tmp_path, segment_manifest_path(utc(2026, 1, 1, 0, 10)), manifest(paths=shards))
    (tmp_path / "log/00/2026/01/01/0010").mkdir(parents=True)
    (tmp_path / "log/00/2026/01/01/0010/00000.avro").write_bytes(b"")
    (tmp_path / "log/01/2026/01/01/0010").mkdir(parents=True)
    (tmp_path / "log/01/2026/01/01/0010/notes.txt").write_bytes(b"x")
    segment = feed.read_segment(utc(2026, 1, 1, 0, 10))
    listing = feed.segment_chunks(segment)
    assert listing.segment == segment
    assert listing.empty_shards == ("log/01/2026/01/01/0010/", "log/02/2026/01/01/0010/")
    assert [(c.path, c.size) for c in listing.chunk_files] == [("log/00/2026/01/01/0010/00000.avro", 0)]
    assert feed.chunk_files(segment) == listing.chunk_files
