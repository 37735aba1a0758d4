"""Walking Avro container files block by block: the service's padded varints, and every truncation or
splice caught before a record is decoded (the columnar reader alone would stop short silently)."""

import io

import fastavro
import pyarrow as pa
import pytest
from lakefeed_testing.blob_generator import avro_schema

from lakefeed.blob.avro_container import Stream, _long_bytes, block_groups, read_header
from lakefeed.blob.decode import ChunkRef, decode_chunk
from lakefeed.errors import FeedCorruptError
from lakefeed.storage import Store
from tests.unit.test_decode import CHUNK, SEGMENT, record

SCHEMA = fastavro.parse_schema(avro_schema(6, "service"))


def container(records, block_records=4) -> bytes:
    buffer = io.BytesIO()
    writer = fastavro.write.Writer(buffer, SCHEMA, sync_interval=1 << 30)  # a block per flush()
    for i, rec in enumerate(records, start=1):
        writer.write(rec)
        if i % block_records == 0:
            writer.flush()
    writer.flush()
    return buffer.getvalue()


def records(n):
    return [dict(record(6, "service"), id=f"e{i}") for i in range(n)]


def walk(data: bytes, target_bytes=1 << 20):
    header, stream = read_header(io.BytesIO(data), "x.avro")
    return header, list(block_groups(header, stream, target_bytes))


def decode(tmp_path, data: bytes):
    path = tmp_path / CHUNK
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    batches = list(decode_chunk(Store(str(tmp_path)), ChunkRef(str(tmp_path), CHUNK, "00", SEGMENT)))
    return pa.Table.from_batches(batches).to_pylist() if batches else []


def test_groups_of_whole_blocks_are_containers_of_their_own():
    data = container(records(10), block_records=3)
    header, groups = walk(data, target_bytes=1)  # one block per group
    assert [g.records for g in groups] == [3, 3, 3, 1] and [g.first_record for g in groups] == [0, 3, 6, 9]
    assert header.codec == "null" and header.schema["name"].endswith("BlobChangeEvent")
    ids = [r["id"] for g in groups for r in fastavro.reader(io.BytesIO(g.data))]
    assert ids == [f"e{i}" for i in range(10)]


def _blocks(data: bytes) -> tuple[bytes, bytes, list[tuple[int, bytes]]]:
    """(header, sync, [(record count, block body)]) of a container file."""
    header, groups = walk(data, target_bytes=1)
    blocks = []
    for group in groups:
        stream = Stream(io.BytesIO(group.data[len(header.raw) :]), "x")
        count, size = stream.long("count"), stream.long("size")
        blocks.append((count, stream.read(size, "body")))
    return header.raw, header.sync, blocks


def _padded(value: int) -> bytes:
    zig = (value << 1) ^ (value >> 63)
    return bytes([((zig >> (7 * i)) & 0x7F) | (0x80 if i < 9 else 0) for i in range(10)])


def test_the_services_padded_ten_byte_varints_are_read(tmp_path):
    """The service writes each block's count and size as 10-byte varints; both paths must accept them."""
    header, sync, blocks = _blocks(container(records(5), block_records=2))
    padded = header + b"".join(_padded(count) + _padded(len(body)) + body + sync for count, body in blocks)
    assert len(padded) > len(container(records(5), block_records=2))
    assert [r["id"] for r in decode(tmp_path, padded)] == [f"e{i}" for i in range(5)]
    assert decode(tmp_path, padded) == decode(tmp_path, container(records(5), block_records=2))


def test_every_truncation_is_refused_naming_the_file(tmp_path):
    data = container(records(6), block_records=2)
    header_end = walk(data)[0].raw.__len__()
    for cut in range(header_end, len(data) - 1, 7):
        if cut in _block_boundaries(data):
            continue  # a file cut exactly between blocks is a shorter valid file
        with pytest.raises(FeedCorruptError, match=f"{CHUNK}: corrupt"):
            decode(tmp_path, data[:cut])


def _block_boundaries(data: bytes) -> set[int]:
    header, groups = walk(data, target_bytes=1)
    ends, position = {len(header.raw)}, len(header.raw)
    for group in groups:
        position += len(group.data) - len(header.raw)
        ends.add(position)
    return ends


def test_a_block_that_does_not_end_with_the_sync_marker_is_refused():
    data = bytearray(container(records(4), block_records=2))
    data[-1] ^= 0xFF
    with pytest.raises(FeedCorruptError, match="does not end with the file's sync marker"):
        walk(bytes(data))


def test_a_block_claiming_more_records_than_it_holds_is_refused(tmp_path):
    data = container(records(3), block_records=3)
    header, [group] = walk(data)
    body = group.data[len(header.raw) :]
    assert body[:1] == _long_bytes(3)
    with pytest.raises(FeedCorruptError, match=f"{CHUNK}: corrupt Avro"):
        decode(tmp_path, header.raw + _long_bytes(4) + body[1:])


def test_a_header_that_is_not_avro_is_refused():
    for data in (b"Obj", b"PAR1xxxx", b"Obj\x01\x02\x16avro.schema\x06{x}"):
        with pytest.raises(FeedCorruptError, match="x.avro: (not a valid Avro file|corrupt)"):
            walk(data)
