"""HLC order, sink file names, partition folders, listing from a cursor, resolved ranges."""

import gzip
import json

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.sink import DATA, RESOLVED, list_sink, parse_file, plan_range, resolved_value
from lakefeed.errors import FeedConfigError, FeedCorruptError, WindowNotReadyError
from lakefeed.storage import Store


def test_hlc_compares_as_integer_pairs_never_as_text_or_floats():
    # A wall time with fewer digits sorts first, unlike the strings; logical breaks ties exactly.
    short, long_ = Hlc.parse("999999999999999999.0000000000"), Hlc.parse("1000000000000000000.0000000000")
    assert short < long_ and "999999999999999999.0000000000" > "1000000000000000000.0000000000"
    a, b = Hlc.parse("1714751617108996000.0000000001"), Hlc.parse("1714751617108996000.0000000002")
    assert a < b and float("1714751617108996000.0000000001") == float("1714751617108996000.0000000002")
    assert Hlc.parse("1714751617108996000.0000000003?") == Hlc(1714751617108996000, 3)  # old synthetic marker
    assert str(Hlc(5, 7)) == "5.0000000007"
    for bad in ("1.2", "abc", "1714751617108996000", "-1.0000000000", None):
        with pytest.raises(ValueError):
            Hlc.parse(bad)


def test_file_timestamps_and_hlc_are_the_same_instant():
    stamp = Hlc.from_file_timestamp("202405031553360274740000000000000")
    assert stamp == Hlc.parse("1714751616027474000.0000000000")
    assert stamp.file_timestamp() == "202405031553360274740000000000000"
    assert Hlc(1714751616027474000, 12).file_timestamp().endswith("0000000012")
    with pytest.raises(ValueError):
        Hlc.from_file_timestamp("202413031553360274740000000000000")  # month 13


@pytest.mark.parametrize(
    "key, topic, schema, fmt, compression",
    [
        (
            "2025-03-14/202503140959581234567890000000000-3f2a9c0d8e7b6a51-1-3-00000000-orders-1.ndjson",
            "orders",
            1,
            "ndjson",
            None,
        ),
        (
            "202503141000285000000000000000001-3f2a9c0d8e7b6a51-12-3-1000000000-order-lines-14a.ndjson.gz",
            "order-lines",
            0x14A,
            "ndjson",
            "gzip",
        ),
        (
            "2025-03-14/10/202503141000285000000000000000001-b70e19c4d2a85f36-2-3-00000001-db.public.t+fam-a.ndjson.zst",
            "db.public.t+fam",
            0xA,
            "ndjson",
            "zstd",
        ),
        ("202503141000285000000000000000001-$001-b70e19c4d2a85f36-2-3-00000001-t-2.parquet", "t", 2, "parquet", None),
    ],
)
def test_data_file_names(key, topic, schema, fmt, compression):
    parsed = parse_file(key, 10, key)
    assert (parsed.kind, parsed.topic, parsed.schema_id, parsed.format, parsed.compression) == (
        DATA,
        topic,
        schema,
        fmt,
        compression,
    )


def test_resolved_and_unrelated_names():
    resolved = parse_file("2025-03-14/202503141000285000000000000000000.RESOLVED", 0, "x")
    assert resolved.kind == RESOLVED and resolved.timestamp == Hlc.from_file_timestamp(
        "202503141000285000000000000000000"
    )
    assert parse_file("2025-03-14/_SUCCESS", 0, "x") is None and parse_file("notes.txt", 0, "x") is None
    with pytest.raises(FeedCorruptError, match="not a changefeed file name"):
        parse_file("2025-03-14/20250314100028500-orders.ndjson", 0, "sink/x")
    with pytest.raises(FeedConfigError, match="CSV feeds carry no key"):
        parse_file("202503141000285000000000000000001-3f2a9c0d8e7b6a51-1-3-00000000-orders-1.csv", 0, "x")
    # '-' sorts before '.': a data file named at a resolved timestamp sorts before its RESOLVED file
    assert "202503141000285000000000000000000-a" < "202503141000285000000000000000000.RESOLVED"


@pytest.mark.parametrize("partition_format", ["daily", "hourly", "flat"])
def test_listing_sorts_full_keys_and_skips_folders_before_the_cursor(tmp_path, partition_format):
    truth = generate_sink(
        tmp_path, SinkSpec(steps=12, changes_per_step=5, partition_format=partition_format, schema_change_at_step=None)
    )
    listed: list[str] = []

    class Recording(Store):
        def list(self, relative):
            listed.append(relative)
            return super().list(relative)

    everything = list_sink(Recording(str(tmp_path)))
    assert [f.key for f in everything] == sorted(f.key for f in everything)
    assert [str(f.timestamp) for f in everything if f.kind == RESOLVED] == truth.resolved
    listed.clear()
    cursor = Hlc.parse(truth.resolved[-1])
    later = list_sink(Recording(str(tmp_path)), since=cursor)
    assert all(f.timestamp >= cursor for f in later) and later[-1].kind == RESOLVED
    if partition_format == "hourly":
        assert not any(folder.endswith("/09") for folder in listed)  # the 09:xx hour folder was not listed


def test_a_range_is_the_files_between_two_resolved_files_and_late_ones(tmp_path):
    truth = generate_sink(tmp_path, SinkSpec(steps=30, changes_per_step=4))
    files = list_sink(Store(str(tmp_path)))
    first, last = Hlc.parse(truth.resolved[0]), Hlc.parse(truth.resolved[-1])
    whole = plan_range(files, None, last, "sink")
    part = plan_range(files, first, last, "sink", applied={f.key for f in files})
    assert whole.through.timestamp == last and part.after.timestamp == first
    assert all(f.order < whole.through.order for f in whole.files)
    assert part.files and all(part.after.order < f.order for f in part.files) and not part.late
    # with no ledger, every file listed before --after-resolved counts as not applied (re-applied, harmless)
    assert plan_range(files, first, last, "sink").late
    late = Hlc.parse(truth.resolved[2])  # the late file is named before the 3rd RESOLVED
    held = plan_range(files, late, last, "sink", applied={f.key for f in whole.files} - set(truth.late_files))
    assert [f.key for f in held.late] == truth.late_files and truth.late_files[0] in [f.key for f in held.files]
    with pytest.raises(WindowNotReadyError, match="no RESOLVED file at --through-resolved"):
        plan_range(files, None, Hlc(last.wall + 1, 0), "sink")
    with pytest.raises(FeedConfigError, match="must be before"):
        plan_range(files, last, first, "sink")


def test_resolved_files_are_checked(tmp_path):
    good = tmp_path / "202503141000285000000000000000000.RESOLVED"
    good.write_text('{"resolved":"1741946428500000000.0000000000"}')
    store = Store(str(tmp_path))
    file = parse_file(good.name, 10, "x")
    assert resolved_value(store, file) == file.timestamp
    good.write_text('{"__crdb__": {"resolved": "1741946428500000000.0000000000"}}')  # other envelopes
    assert resolved_value(store, file) == file.timestamp
    for content, message in (
        ('{"resolved":"1741946428500000001.0000000000"}', "but its name says"),
        ("{nope", "not a valid RESOLVED file"),
        ('{"resolved": 17}', "not a valid RESOLVED"),
    ):
        good.write_text(content)
        with pytest.raises(FeedCorruptError, match=message):
            resolved_value(store, file)


def test_the_generator_is_deterministic_and_shaped_like_the_sink(tmp_path):
    spec = SinkSpec(steps=10, changes_per_step=6, compression="gzip", partition_format="hourly")
    first, second = generate_sink(tmp_path / "a", spec), generate_sink(tmp_path / "b", spec)
    assert first.rows == second.rows and first.resolved == second.resolved
    keys = sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert keys == sorted(p.relative_to(tmp_path / "b").as_posix() for p in (tmp_path / "b").rglob("*") if p.is_file())
    data = next(p for p in (tmp_path / "a").rglob("*.ndjson.gz"))
    line = json.loads(gzip.decompress(data.read_bytes()).splitlines()[0])
    assert set(line) == {"after", "key", "updated"} and isinstance(line["key"], list)
    assert first.duplicates > 0 and any(v is None for v in first.rows["orders"].values())


def test_the_sinks_own_layout_from_the_format_notes(tmp_path):
    """File names and contents as the format notes give them (CockroachDB's source and the replicator's test
    data), not as our generator writes them: listing order, the range a RESOLVED file closes, messages."""
    from lakefeed.crdb.messages import ndjson_messages

    names = [
        "2025-03-14/202503140959581234567890000000000-3f2a9c0d8e7b6a51-1-3-00000000-orders-1.ndjson",
        "2025-03-14/202503140959581234567890000000000-3f2a9c0d8e7b6a51-1-3-00000001-orders-1.ndjson",
        "2025-03-14/202503140959581234567890000000000-b70e19c4d2a85f36-2-3-00000000-orders-1.ndjson",
        "2025-03-14/202503141000285000000000000000000.RESOLVED",
        "2025-03-14/202503141000285000000000000000001-3f2a9c0d8e7b6a51-1-3-00000002-orders-1.ndjson",
        "2025-03-14/202503141000285000000000000000001-3f2a9c0d8e7b6a51-1-3-00000003-orders-2.ndjson",
        "2025-03-14/202503141000285000000000000000001-b70e19c4d2a85f36-2-3-00000001-orders-1.ndjson",
        "2025-03-14/202503141000592500000000000000000.RESOLVED",
    ]
    lines = (
        '{"after": {"id": 1, "status": "paid", "total": 10.50}, "before": {"id": 1, "status": "new", "total": '
        '10.50}, "key": [1], "updated": "1741946431734000000.0000000000"}\n'
        '{"after": null, "before": {"id": 2, "status": "new", "total": 3.00}, "key": [2], "updated": '
        '"1741946433001000000.0000000000"}\n'
    )
    for name in reversed(names):  # written in any order; the listing orders them
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        stamp = name.split("/")[-1][:33]
        path.write_text(f'{{"resolved":"{Hlc.from_file_timestamp(stamp)}"}}' if name.endswith("RESOLVED") else lines)
    store = Store(str(tmp_path))
    files = list_sink(store)
    assert [f.key for f in files] == names
    assert [str(f.timestamp) for f in files if f.kind == RESOLVED] == [
        "1741946428500000000.0000000000",
        "1741946459250000000.0000000000",
    ]
    second = plan_range(
        files,
        Hlc.parse("1741946428500000000.0000000000"),
        Hlc.parse("1741946459250000000.0000000000"),
        "sink",
        applied=set(names[:3]),
    )
    assert [f.key for f in second.files] == names[4:7] and [f.schema_id for f in second.files] == [1, 2, 1]
    assert resolved_value(store, second.through) == Hlc.parse("1741946459250000000.0000000000")
    rows = [r for batch in ndjson_messages(store, names[4], "orders", 1, None) for r in batch.to_pylist()]
    assert [(r["key"], r["deleted"], dict(r["values"] or {}).get("total")) for r in rows] == [
        ("[1]", False, "10.50"),
        ("[2]", True, None),
    ]
    # The replicator's real test data: a file and RESOLVED file of CockroachDB itself.
    real = parse_file("202405031553360274740000000000000-08779498965a12e2-1-2-00000000-mytable-2.ndjson", 1, "x")
    assert (real.topic, real.schema_id, str(real.timestamp)) == ("mytable", 2, "1714751616027474000.0000000000")
    assert parse_file("202405031553371089960000000000000.RESOLVED", 1, "x").timestamp == Hlc.parse(
        "1714751617108996000.0000000000"
    )


def test_the_generator_cuts_files_at_file_size_as_the_sink_does(tmp_path):
    """Past ``file_size`` a flush goes on in the next file: the next file id, the same name timestamp, and no
    message lost or repeated (each file passes the size by at most its last line)."""
    spec = SinkSpec(steps=6, changes_per_step=40, schema_change_at_step=None)
    whole, cut = (
        generate_sink(tmp_path / "whole", spec),
        generate_sink(tmp_path / "cut", SinkSpec(**{**spec.__dict__, "file_size": 2000})),
    )
    assert cut.rows == whole.rows and cut.messages == whole.messages and cut.resolved == whole.resolved
    whole_files = [f for f in list_sink(Store(str(tmp_path / "whole"))) if f.kind == DATA]
    cut_files = [f for f in list_sink(Store(str(tmp_path / "cut"))) if f.kind == DATA]
    assert len(cut_files) > len(whole_files)
    for f in cut_files:
        lines = (tmp_path / "cut" / f.key).read_bytes().splitlines(keepends=True)
        assert sum(map(len, lines[:-1])) <= 2000

    def lines_of(root, files):
        return sorted(line for f in files for line in (root / f.key).read_bytes().splitlines())

    assert lines_of(tmp_path / "cut", cut_files) == lines_of(tmp_path / "whole", whole_files)
    stamps = {f.timestamp for f in cut_files}
    assert stamps == {f.timestamp for f in whole_files}
