"""The Avro object container format, just enough to walk a chunk file block by block.

A container file is a header (magic ``Obj\\x01``, a metadata map holding
``avro.schema`` and ``avro.codec``, a 16-byte sync marker) followed by blocks:
a record count, a byte size, that many bytes of (possibly compressed) records,
and the sync marker again. Walking the blocks checks every sync marker and
every size against the bytes present, so a truncated or spliced file is
caught here, before any record is decoded; each group of whole blocks,
prefixed with the header, is itself a valid container that a columnar reader
can decode, so memory follows the group size, never the file size.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from lakefeed.errors import FeedCorruptError
from lakefeed.jsonio import parse_json

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
_MAX_BLOCK = 1 << 31  # a block header claiming more than 2 GiB is corruption, not data


@dataclass(frozen=True)
class Header:
    raw: bytes  # the header's bytes, which prefix every group of blocks
    metadata: dict[str, bytes]
    sync: bytes

    @property
    def codec(self) -> str:
        return self.metadata.get("avro.codec", b"null").decode()

    @property
    def schema(self) -> Any:
        """The writer schema: any Avro schema's JSON (a record's is an object)."""
        return json.loads(self.metadata["avro.schema"])


@dataclass(frozen=True)
class BlockGroup:
    """Whole consecutive blocks as a container of their own: ``data`` starts with the file's header."""

    first_record: int  # index in the file of the group's first record
    records: int
    data: bytes


class Stream:
    """Reads a binary stream forward, counting bytes and optionally keeping what it read."""

    def __init__(self, handle: BinaryIO, url: str):
        self.handle = handle
        self.url = url
        self.position = 0
        self.kept: bytearray | None = None
        self._pending = b""

    def read(self, size: int, what: str) -> bytes:
        data, self._pending = self._pending[:size], self._pending[size:]
        if len(data) < size:
            data += self.handle.read(size - len(data))
        if len(data) != size:
            raise FeedCorruptError(
                f"{self.url}: corrupt or truncated Avro: the file ends inside {what} "
                f"(at byte {self.position + len(data)})"
            )
        self.position += size
        if self.kept is not None:
            self.kept += data
        return data

    def at_end(self) -> bool:
        if not self._pending:
            self._pending = self.handle.read(1)
        return not self._pending

    def long(self, what: str) -> int:
        """A zig-zag varint (the service pads them to 10 bytes; any length up to 10 is read)."""
        if len(self._pending) < 10:
            self._pending += self.handle.read(4096)  # parse from memory: one read per block header, not per byte
        value, shift = 0, 0
        for index, byte in enumerate(self._pending[:10]):
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                consumed, self._pending = self._pending[: index + 1], self._pending[index + 1 :]
                self.position += index + 1
                if self.kept is not None:
                    self.kept += consumed
                return (value >> 1) ^ -(value & 1)
            shift += 7
        if len(self._pending) < 10:
            raise FeedCorruptError(
                f"{self.url}: corrupt or truncated Avro: the file ends inside {what} "
                f"(at byte {self.position + len(self._pending)})"
            )
        raise FeedCorruptError(
            f"{self.url}: corrupt Avro: a varint of {what} runs past 10 bytes (byte {self.position})"
        )


def read_header(handle: BinaryIO, url: str) -> tuple[Header, Stream]:
    """The container header; a stream that is not one raises :class:`FeedCorruptError` naming ``url``."""
    stream = Stream(handle, url)
    stream.kept = bytearray()
    if stream.read(len(MAGIC), "the magic bytes") != MAGIC:
        raise FeedCorruptError(f"{url}: not a valid Avro file (no Obj\\x01 magic)")
    metadata: dict[str, bytes] = {}
    while True:
        count = stream.long("the header's metadata")
        if count == 0:
            break
        if count < 0:
            count = -count
            stream.long("the header's metadata")
        for _ in range(count):
            key = stream.read(_length(stream, "a metadata key"), "a metadata key")
            value = stream.read(_length(stream, "a metadata value"), "a metadata value")
            metadata[key.decode("utf-8", "replace")] = value
    sync = stream.read(SYNC_SIZE, "the sync marker")
    raw = bytes(stream.kept)
    stream.kept = None
    if "avro.schema" not in metadata:
        raise FeedCorruptError(f"{url}: not a valid Avro file (no avro.schema in its header)")
    parse_json(metadata["avro.schema"], f"{url}: not a valid Avro file: its schema", FeedCorruptError)
    return Header(raw=raw, metadata=metadata, sync=sync), stream


def _length(stream: Stream, what: str) -> int:
    length = stream.long(what)
    if length < 0 or length > _MAX_BLOCK:
        raise FeedCorruptError(f"{stream.url}: corrupt Avro: {what} of {length} bytes (byte {stream.position})")
    return length


def block_groups(header: Header, stream: Stream, target_bytes: int = 4 << 20) -> Iterator[BlockGroup]:
    """Consecutive whole blocks, about ``target_bytes`` at a time, each group checked (sizes, sync markers)."""
    records = 0
    group = bytearray(header.raw)
    in_group = 0
    first = 0
    while not stream.at_end():
        start = stream.position
        count = stream.long("a block header")
        size = stream.long("a block header")
        if count < 0 or size < 0 or size > _MAX_BLOCK:
            raise FeedCorruptError(
                f"{stream.url}: corrupt Avro block at byte {start} (claims {count} records in {size} bytes)"
            )
        body = stream.read(size, f"the block at byte {start}")
        if stream.read(SYNC_SIZE, f"the sync marker of the block at byte {start}") != header.sync:
            raise FeedCorruptError(
                f"{stream.url}: corrupt Avro: the block at byte {start} (after record "
                f"{records}) does not end with the file's sync marker"
            )
        group += _long_bytes(count) + _long_bytes(size) + body + header.sync
        in_group += count
        records += count
        if len(group) >= target_bytes:
            yield BlockGroup(first_record=first, records=in_group, data=bytes(group))
            group, in_group, first = bytearray(header.raw), 0, records
    if in_group or len(group) > len(header.raw):
        yield BlockGroup(first_record=first, records=in_group, data=bytes(group))


def _long_bytes(value: int) -> bytes:
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        if value > 0x7F:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        else:
            out.append(value)
            return bytes(out)
