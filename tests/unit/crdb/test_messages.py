"""Parsing changefeed messages as the workers do: wrapped JSON lines (plain, gzip, zstd) and parquet,
numbers kept as written, and every bad input refused naming the file and the line."""

import gzip
import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from lakefeed.crdb.messages import MESSAGE_SCHEMA, ndjson_messages, parquet_messages, parse_line
from lakefeed.errors import FeedCorruptError
from lakefeed.storage import Store

LINES = [
    '{"after": {"id": 1, "total": 10.50, "big": 123456789012345678901234567890, "meta": {"a": [1, 2.50]}, '
    '"ok": true, "name": "x", "gone": null}, "before": null, "key": [1, "eu"], "updated": "1741946431734000000.0000000000"}',
    '{"after": null, "key": [2, "us"], "updated": "1741946433001000000.0000000001"}',
]


def rows(batches):
    return pa.Table.from_batches(list(batches), schema=MESSAGE_SCHEMA).to_pylist()


def write(tmp_path, name, data: bytes):
    (tmp_path / name).write_bytes(data)
    return Store(str(tmp_path)), name


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_wrapped_lines_become_message_rows_with_numbers_as_written(tmp_path, compression):
    raw = ("\n".join(LINES) + "\n").encode()
    data = {None: raw, "gzip": gzip.compress(raw), "zstd": zstandard.ZstdCompressor().compress(raw)}[compression]
    store, key = write(tmp_path, "f.ndjson", data)
    upsert, delete = rows(ndjson_messages(store, key, "orders", 2, compression))
    assert (upsert["key"], upsert["wall"], upsert["logical"], upsert["deleted"]) == (
        '[1,"eu"]',
        1741946431734000000,
        0,
        False,
    )
    values, kinds = dict(upsert["values"]), dict(upsert["kinds"])
    assert values["total"] == "10.50" and kinds["total"] == "f"
    assert values["big"] == "123456789012345678901234567890" and kinds["big"] == "i"
    assert values["meta"] == '{"a":[1,2.50]}' and kinds["meta"] == "j"
    assert (values["ok"], values["name"], values["gone"]) == ("true", "x", None) and "gone" not in kinds
    assert delete["deleted"] and delete["values"] is None and delete["updated"] == "1741946433001000000.0000000001"
    assert (upsert["topic"], upsert["schemaId"], upsert["file"], upsert["line"], delete["line"]) == (
        "orders",
        2,
        key,
        1,
        2,
    )


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"after": {"id": 1}, "key": [1], "updated": "17419464317', "malformed JSON"),
        (
            '{"after": {"id": 1}, "key": [1]}',
            "a message without updated: the changefeed was created without the updated option.*WITH updated, resolved",
        ),
        ('{"after": {"id": 1}, "updated": "1741946431734000000.0000000000"}', "a message without key"),
        ('{"key": [1], "updated": "1741946431734000000.0000000000"}', "a message without after"),
        ('{"id": 1, "__crdb__": {"updated": "1.0000000000"}}', "a message of envelope=bare"),
        ('{"after": {"id": 1}, "op": "c", "ts_ns": 1, "key": [1], "updated": "1.0000000000"}', "envelope=enriched"),
        ('{"after": {"id": 1}, "key": 1, "updated": "1741946431734000000.0000000000"}', "key must be a JSON array"),
        ('{"after": {"id": 1}, "key": [1], "updated": 17.5}', "updated must be a string"),
        ("[1, 2]", "must be a JSON object"),
    ],
)
def test_bad_lines_are_refused_naming_file_and_line(tmp_path, line, message):
    store, key = write(tmp_path, "f.ndjson", (LINES[0] + "\n" + line + "\n").encode())
    with pytest.raises(FeedCorruptError, match=f"f.ndjson: line 2: .*{message}"):
        rows(ndjson_messages(store, key, "t", 1, None))


def test_a_truncated_gzip_file_is_refused(tmp_path):
    data = gzip.compress(("\n".join(LINES * 50) + "\n").encode())
    store, key = write(tmp_path, "f.ndjson.gz", data[: len(data) // 2])
    with pytest.raises(FeedCorruptError, match="f.ndjson.gz: corrupt or truncated gzip"):
        rows(ndjson_messages(store, key, "t", 1, "gzip"))


def test_parquet_files_give_the_same_rows_with_their_key_columns(tmp_path):
    table = pa.table(
        {
            "id": [1, 2],
            "region": ["eu", "us"],
            "total": [10.5, None],
            "meta": ['{"a":1}', None],
            "__crdb__event_type": ["c", "d"],
            "__crdb__updated": ["1741946431734000000.0000000000", "1741946433001000000.0000000001"],
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    store, key = write(tmp_path, "f.parquet", buffer.getvalue())
    upsert, delete = rows(parquet_messages(store, key, "orders", 1, ["id", "region"]))
    assert upsert["key"] == '[1,"eu"]' and dict(upsert["values"])["total"] == "10.5" and not upsert["deleted"]
    assert delete["deleted"] and delete["key"] == '[2,"us"]'
    with pytest.raises(FeedCorruptError, match="give them with --parquet-keys orders=COL"):
        rows(parquet_messages(store, key, "orders", 1, []))
    without = table.drop_columns(["__crdb__updated"])
    buffer = io.BytesIO()
    pq.write_table(without, buffer)
    store, key = write(tmp_path, "g.parquet", buffer.getvalue())
    with pytest.raises(FeedCorruptError, match="no __crdb__updated column"):
        rows(parquet_messages(store, key, "orders", 1, ["id"]))


def test_parse_line_alone():
    message = parse_line(LINES[1], "f: line 1")
    assert message["after"] is None and message["key"] == '[2,"us"]'


def test_a_deeply_nested_line_is_named_not_a_crash():
    from lakefeed.crdb.messages import parse_line
    from lakefeed.errors import FeedCorruptError

    line = '{"after": {"id": ' + "[" * 200_000 + "]" * 200_000 + '}, "key": [1], "updated": "1.0000000000"}'
    with pytest.raises(FeedCorruptError, match=r"f.ndjson: line 3: malformed JSON \(nested too deeply\)"):
        parse_line(line, "f.ndjson: line 3")


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_the_file_is_closed_after_reading_whatever_the_compression(tmp_path, compression, monkeypatch):
    raw = ("\n".join(LINES) + "\n").encode()
    data = {None: raw, "gzip": gzip.compress(raw), "zstd": zstandard.ZstdCompressor().compress(raw)}[compression]
    store, key = write(tmp_path, "f.ndjson", data)
    opened = []
    original = Store.open

    def tracked(self, relative):
        opened.append(original(self, relative))
        return opened[-1]

    monkeypatch.setattr(Store, "open", tracked)
    assert len(rows(ndjson_messages(store, key, "orders", 2, compression))) == 2
    assert len(opened) == 1 and opened[0].closed
