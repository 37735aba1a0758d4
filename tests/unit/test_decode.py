"""Decoding real Avro files written by fastavro, one schema version at a time."""

import io
import json
from datetime import UTC, datetime

import fastavro
import pyarrow as pa
import pytest
from lakefeed_testing.blob_generator import avro_schema

from lakefeed.blob.decode import ChunkRef, columnar_readable, decode_chunk
from lakefeed.blob.schema import RECORD_SCHEMA
from lakefeed.errors import FeedCorruptError
from lakefeed.storage import Store

SEGMENT = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
CHUNK = "log/00/2026/01/01/0010/00000.avro"


def record(version, writer="legacy", **data_overrides):
    """A record of ``version`` as ``writer`` writes it (the service: no nulls in its plain strings)."""
    data = {
        "api": "PutBlob",
        "clientRequestId": "c",
        "requestId": "r",
        "etag": "0x1",
        "contentType": "text/plain",
        "contentLength": 128,
        "blobType": "BlockBlob",
        "url": "",
        "sequencer": "00000000000000010000000000000002",
        "storageDiagnostics": {"bid": "b"},
    }
    if version >= 3:
        data.update(
            previousInfo=None,
            snapshot=None,
            blobPropertiesUpdated={"ContentType": {"current": "a/b", "previous": "" if writer == "service" else None}},
        )
    if version >= 4:
        data.update(blobVersion="v", containerVersion="1", blobTier="Hot", asyncOperationInfo={"CopyId": "x"})
    if version >= 5:
        data.update(
            blobTagsUpdated={"previous": {"t": "1"}, "current": {"t": "2"}}, restorePointMarker={"rpl": "label"}
        )
    if writer == "service":
        for name in (
            "blobVersion",
            "containerVersion",
            "blobTier",
            "previousInfo",
            "snapshot",
            "blobPropertiesUpdated",
            "asyncOperationInfo",
        ):
            data.setdefault(name, None)
    data.update(data_overrides)
    return {
        "schemaVersion": version,
        "topic": "/subscriptions/s",
        "subject": "/blobServices/default/containers/c/blobs/b",
        "eventType": "BlobCreated",
        "eventTime": "2026-01-01T00:30:00.1234567Z",
        "id": f"id-{version}",
        "data": data,
    }


def write_chunk(root, records, schema=None, version=1, writer="legacy"):
    path = root / CHUNK
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        fastavro.writer(handle, fastavro.parse_schema(schema or avro_schema(version, writer)), records)
    return path


def decode(root, columnar=True):
    chunk = ChunkRef(str(root), CHUNK, "00", SEGMENT, columnar=columnar)
    batches = list(decode_chunk(Store(str(root)), chunk, batch_size=2))
    return pa.Table.from_batches(batches, schema=RECORD_SCHEMA).to_pylist()


@pytest.mark.parametrize("writer", ["service", "legacy"])
@pytest.mark.parametrize("version", [1, 3, 4, 5, 6])
def test_each_schema_version_normalises_into_the_superset(tmp_path, version, writer):
    write_chunk(tmp_path, [record(version, writer)], version=version, writer=writer)
    [row] = decode(tmp_path)
    assert row["schemaVersion"] == version
    assert row["id"] == f"id-{version}"
    assert row["eventTime"] == "2026-01-01T00:30:00.1234567Z"
    assert row["eventTimeTicks"] % 10_000_000 == 1234567
    assert row["data"]["sequencer"] == "00000000000000010000000000000002"
    assert row["data"]["contentLength"] == 128
    assert row["data"]["storageDiagnostics"] == [("bid", "b")]
    assert row["shard"] == "00" and row["chunkFile"] == CHUNK and row["chunkRecordIndex"] == 0
    assert row["data"]["extra"] is None and row["extra"] is None
    if version == 1:
        assert row["data"]["blobTier"] is None and row["data"]["blobPropertiesUpdated"] is None
    if version >= 3:
        assert row["data"]["blobPropertiesUpdated"] == [
            ("ContentType", {"current": "a/b", "previous": "" if writer == "service" else None})
        ]
    if version >= 4:
        assert row["data"]["blobTier"] == "Hot"
        assert row["data"]["asyncOperationInfo"] == [("CopyId", "x")]
    if version >= 5:
        assert row["data"]["blobTagsUpdated"] == {"previous": [("t", "1")], "current": [("t", "2")]}
        assert row["data"]["restorePointMarker"] == [("rpl", "label")]


def test_unknown_fields_are_kept_not_dropped(tmp_path):
    schema = avro_schema(1, "legacy")
    schema["fields"].append({"name": "newTopLevel", "type": "string"})
    schema["fields"][6]["type"]["fields"].append({"name": "futureField", "type": {"type": "array", "items": "int"}})
    rec = record(1, futureField=[1, 2])
    rec["newTopLevel"] = "x"
    write_chunk(tmp_path, [rec], schema=schema)
    [row] = decode(tmp_path)
    assert dict(row["data"]["extra"]) == {"futureField": "[1, 2]"}
    assert dict(row["extra"]) == {"newTopLevel": '"x"'}


def test_batches_are_bounded_and_records_in_file_order(tmp_path):
    write_chunk(tmp_path, [dict(record(1), id=f"e{i}") for i in range(5)])
    batches = list(decode_chunk(Store(str(tmp_path)), ChunkRef(str(tmp_path), CHUNK, "00", SEGMENT), batch_size=2))
    assert [b.num_rows for b in batches] == [2, 2, 1]
    rows = pa.Table.from_batches(batches).to_pylist()
    assert [r["id"] for r in rows] == [f"e{i}" for i in range(5)]
    assert [r["chunkRecordIndex"] for r in rows] == list(range(5))


def test_zero_byte_chunk_is_empty_not_corrupt(tmp_path):
    (tmp_path / CHUNK).parent.mkdir(parents=True)
    (tmp_path / CHUNK).write_bytes(b"")
    assert decode(tmp_path) == []


def test_avro_file_without_records_is_empty(tmp_path):
    write_chunk(tmp_path, [])
    assert decode(tmp_path) == []


def test_non_avro_file_is_corruption_naming_the_file(tmp_path):
    (tmp_path / CHUNK).parent.mkdir(parents=True)
    (tmp_path / CHUNK).write_bytes(b"this is not avro at all")
    with pytest.raises(FeedCorruptError, match=rf"{CHUNK}: not a valid Avro file"):
        decode(tmp_path)


def test_truncated_avro_is_corruption_naming_the_file(tmp_path):
    path = write_chunk(tmp_path, [dict(record(1), id=f"e{i}") for i in range(200)])
    content = path.read_bytes()
    path.write_bytes(content[: len(content) - 300])
    with pytest.raises(FeedCorruptError, match=rf"{CHUNK}: corrupt or truncated Avro"):
        decode(tmp_path)


@pytest.mark.parametrize("version", [0, 2, 7])
def test_unknown_schema_version_names_file_and_record(tmp_path, version):
    write_chunk(tmp_path, [record(1), dict(record(1), schemaVersion=version)])
    with pytest.raises(FeedCorruptError, match=rf"{CHUNK}: record 1: unknown schemaVersion {version}"):
        decode(tmp_path)


def test_unreadable_event_time_names_the_record(tmp_path):
    write_chunk(tmp_path, [dict(record(1), eventTime="tomorrow")])
    with pytest.raises(FeedCorruptError, match=r"record 0 \(id id-1\): unreadable eventTime 'tomorrow'"):
        decode(tmp_path)


@pytest.mark.parametrize("columnar", [True, False])
def test_deflate_codec(tmp_path, columnar):
    path = tmp_path / CHUNK
    path.parent.mkdir(parents=True)
    buffer = io.BytesIO()
    fastavro.writer(
        buffer, fastavro.parse_schema(avro_schema(6, "service")), [record(6, "service")] * 3, codec="deflate"
    )
    path.write_bytes(buffer.getvalue())
    assert [row["id"] for row in decode(tmp_path, columnar)] == ["id-6"] * 3


@pytest.mark.parametrize("writer", ["service", "legacy"])
@pytest.mark.parametrize("version", [1, 3, 4, 5, 6])
def test_columnar_and_record_paths_agree(tmp_path, version, writer):
    records = [
        dict(record(version, writer), id=f"e{i}", eventTime=f"2026-01-01T00:{i:02d}:00.00000{i % 10}Z")
        for i in range(7)
    ]
    write_chunk(tmp_path, records, version=version, writer=writer)
    assert columnar_readable(avro_schema(version, writer))
    assert decode(tmp_path, columnar=False) == decode(tmp_path, columnar=True)


def test_the_service_schema_is_on_the_columnar_path_with_its_enums(tmp_path):
    schema = avro_schema(6, "service")
    kinds = {f["name"]: f["type"] for f in schema["fields"]}
    assert kinds["eventType"]["type"] == "enum" and columnar_readable(schema)
    write_chunk(tmp_path, [record(6, "service", blobTier="Cold")], version=6, writer="service")
    [row] = decode(tmp_path)
    assert (row["eventType"], row["data"]["api"], row["data"]["blobType"], row["data"]["blobTier"]) == (
        "BlobCreated",
        "PutBlob",
        "BlockBlob",
        "Cold",
    )


def test_a_field_of_another_type_takes_the_record_path_and_is_kept(tmp_path):
    schema = avro_schema(1, "legacy")
    data_fields = schema["fields"][6]["type"]["fields"]
    next(f for f in data_fields if f["name"] == "contentLength")["type"] = "string"
    assert not columnar_readable(schema)
    write_chunk(tmp_path, [record(1, contentLength="128 bytes")], schema=schema)
    [row] = decode(tmp_path)
    assert row["data"]["contentLength"] is None and dict(row["data"]["extra"]) == {"contentLength": '"128 bytes"'}


def test_an_unknown_nested_field_takes_the_record_path_and_is_kept(tmp_path):
    """A nested record with a field the superset lacks must not lose it on the columnar path."""
    schema = avro_schema(6, "service")
    data_fields = schema["fields"][6]["type"]["fields"]
    changes = next(f for f in data_fields if f["name"] == "blobPropertiesUpdated")["type"][1]["values"]
    changes["fields"].append({"name": "reason", "type": "string", "default": ""})
    assert not columnar_readable(schema)
    rec = record(6, "service", blobPropertiesUpdated={"ContentType": {"current": "a", "previous": "b", "reason": "x"}})
    write_chunk(tmp_path, [rec], schema=schema)
    [row] = decode(tmp_path)
    assert row["data"]["blobPropertiesUpdated"] is None
    assert json.loads(dict(row["data"]["extra"])["blobPropertiesUpdated"]) == {
        "ContentType": {"current": "a", "previous": "b", "reason": "x"}
    }


def test_a_tag_map_with_another_key_is_kept_in_extra(tmp_path):
    records = [
        record(6, "service", blobTagsUpdated={"previous": {"t": "1"}, "current": {"t": "2"}}),
        dict(record(6, "service", blobTagsUpdated={"previous": {}, "current": {}, "source": {"by": "x"}}), id="e1"),
    ]
    write_chunk(tmp_path, records, version=6, writer="service")
    rows = decode(tmp_path)
    assert rows == decode(tmp_path, columnar=False)
    assert rows[0]["data"]["blobTagsUpdated"] == {"previous": [("t", "1")], "current": [("t", "2")]}
    assert rows[1]["data"]["blobTagsUpdated"] is None
    assert json.loads(dict(rows[1]["data"]["extra"])["blobTagsUpdated"])["source"] == {"by": "x"}


def test_columnar_path_still_names_a_bad_record(tmp_path):
    write_chunk(tmp_path, [record(1), record(1), dict(record(1), eventTime="2026-01-01 00:00")])
    with pytest.raises(FeedCorruptError, match=r"record 2 \(id id-1\): unreadable eventTime"):
        decode(tmp_path)


EDGE_TIMES = [
    "2026-01-01T00:09:75.0000000Z",  # second 75: was read as 00:10:15, across a window boundary
    "2026-01-01T00:09:60.0000000Z",
    "2026-01-01T00:61:00.0000000Z",
    "2026-01-01T24:00:00.0000000Z",
    "2026-02-30T00:00:00.0000000Z",
    "2026-01-01T00:30:00+99:99",
    "2026-01-01T00:30:00+14:01",
    "2026-01-01T00:30:00.1234567+14:00",
    "2026-01-01T00:30:00-03:30",
    "2026-01-01T00:\u0663\u0660:00.0000000Z",  # Arabic-Indic digits
    "2026-01-01T00:30:00.1234567",
    "2026-01-01T00:30:00.123456789Z",
    "2026-01-01T00:30:00.1234567z",
]


@pytest.mark.parametrize("event_time", EDGE_TIMES)
def test_both_decoders_read_or_refuse_each_event_time_alike(tmp_path, event_time):
    """One strict rule for eventTime in both decoders: ASCII digits, second < 60, offsets up to ±14:00."""
    from lakefeed.blob.timegrid import parse_event_time

    write_chunk(
        tmp_path, [record(6, "service"), dict(record(6, "service"), eventTime=event_time)], version=6, writer="service"
    )
    outcomes = []
    for columnar in (True, False):
        try:
            outcomes.append([row["eventTimeTicks"] for row in decode(tmp_path, columnar)])
        except FeedCorruptError as exc:
            assert "record 1 (id id-6): unreadable eventTime" in str(exc)
            outcomes.append("refused")
    assert outcomes[0] == outcomes[1]
    try:
        expected = parse_event_time(event_time)
    except ValueError:
        assert outcomes[0] == "refused"
    else:
        assert outcomes[0][1] == expected
    valid = {
        "2026-01-01T00:30:00.1234567+14:00",
        "2026-01-01T00:30:00-03:30",
        "2026-01-01T00:30:00.1234567",
        "2026-01-01T00:30:00.123456789Z",
    }
    assert (outcomes[0] != "refused") == (event_time in valid)
