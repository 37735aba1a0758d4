"""The columnar path of the chunk-file decode: a Rust Avro reader (polars-avro) over groups of whole blocks,
then the Arrow columns checked and shaped into the superset schema (:data:`lakefeed.blob.schema.RECORD_SCHEMA`)
in bulk; a value the checks refuse is re-read record by record to name it."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from datetime import UTC
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefeed.blob.avro_container import Header, Stream, block_groups
from lakefeed.blob.feed import ChunkRef
from lakefeed.blob.records import BatchBuilder
from lakefeed.blob.schema import (
    BLOB_PROPERTIES_UPDATED,
    BLOB_TAGS_UPDATED,
    DATA_STRING_FIELDS,
    DATA_TYPE,
    EVENT_STRING_FIELDS,
    RECORD_SCHEMA,
    STRING_MAP,
    SUPPORTED_SCHEMA_VERSIONS,
)
from lakefeed.blob.timegrid import TICKS_PER_SECOND, parse_event_time
from lakefeed.blob.writer_schema import TAG_SIDES
from lakefeed.errors import FeedCorruptError

_SUPPORTED = pa.array(sorted(SUPPORTED_SCHEMA_VERSIONS), pa.int64())


_SERVICE_TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{7}Z$"


def decode_columnar(
    header: Header, stream: Stream, chunk: ChunkRef, url: str, batch_size: int
) -> Iterator[pa.RecordBatch]:
    from polars_avro import read_avro

    for group in block_groups(header, stream):
        if not group.records:
            continue
        try:
            table = read_avro(io.BytesIO(group.data), batch_size=batch_size).to_arrow()
        except Exception as exc:  # the Rust reader's errors come as several types
            raise FeedCorruptError(
                f"{url}: corrupt Avro in the records from {group.first_record} on ({type(exc).__name__}: {exc})"
            ) from None
        if table.num_rows != group.records:
            raise FeedCorruptError(
                f"{url}: corrupt Avro: the blocks from record {group.first_record} on claim "
                f"{group.records} records but hold {table.num_rows}"
            )
        first = group.first_record
        for batch in table.to_batches(max_chunksize=batch_size):
            yield _normalize(batch, first, chunk, url)
            first += batch.num_rows


def _text(column: pa.Array | None, n: int) -> pa.Array:
    """A text column as ``string``: enums arrive as dictionaries, strings as large strings."""
    if column is None:
        return pa.nulls(n, pa.string())
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return column.cast(pa.string())


def _normalize(batch: pa.RecordBatch, first: int, chunk: ChunkRef, url: str) -> pa.RecordBatch:
    """A batch as the columnar reader decoded it, checked and shaped into :data:`RECORD_SCHEMA`.

    A record with an unknown ``schemaVersion``, no ``id`` or an unreadable ``eventTime`` raises,
    naming the file and the record, exactly as the record path does.
    """
    n = batch.num_rows
    columns = dict(zip(batch.schema.names, batch.columns, strict=False))
    text = {name: _text(columns.get(name), n) for name in EVENT_STRING_FIELDS}

    def reject(mask: pa.Array) -> None:
        if pc.any(mask).as_py():
            index = pc.index(mask, True).as_py()
            row = {name: text[name][index].as_py() for name in ("id", "eventTime")}
            row["schemaVersion"] = versions[index].as_py()
            BatchBuilder(chunk, url).add(row, first + index)  # raises, naming the file and the record

    versions = columns["schemaVersion"].cast(pa.int64()) if "schemaVersion" in columns else pa.nulls(n, pa.int64())
    reject(pc.invert(pc.fill_null(pc.is_in(versions, value_set=_SUPPORTED), False)))
    reject(pc.fill_null(pc.equal(pc.utf8_length(text["id"]), 0), True))
    ticks = _ticks(text["eventTime"], reject)
    data = _data_struct(columns["data"], n)
    if data is None:  # a value the superset cannot hold (a tag map with other keys): the record path keeps it
        builder = BatchBuilder(chunk, url)
        for offset, record in enumerate(_records(batch)):
            builder.add(record, first + offset)
        return builder.flush()
    start = chunk.segment_start if chunk.segment_start.tzinfo else chunk.segment_start.replace(tzinfo=UTC)
    arrays = [text[name] for name in EVENT_STRING_FIELDS] + [
        versions.cast(pa.int32()),
        data,
        pa.nulls(n, STRING_MAP),
        ticks,
        pa.array([start] * n, type=pa.timestamp("us", tz="UTC")),
        pa.array([chunk.shard] * n, type=pa.string()),
        pa.array([chunk.path] * n, type=pa.string()),
        pa.array(range(first, first + n), type=pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)


def _data_struct(data: pa.StructArray, n: int) -> pa.StructArray | None:
    """``data`` in the superset's shape, or None when a value does not fit it (see :func:`_normalize`)."""
    present = {data.type.field(i).name: data.field(i) for i in range(data.type.num_fields)}
    children = []
    for field in DATA_TYPE:
        child = present.get(field.name)
        if field.name == "extra" or child is None:
            children.append(pa.nulls(n, field.type))
        elif field.name in DATA_STRING_FIELDS:
            children.append(_text(child, n))
        elif field.name == "blobPropertiesUpdated":
            children.append(child.cast(BLOB_PROPERTIES_UPDATED))
        elif field.name == "blobTagsUpdated":
            tags = _tag_changes(child)
            if tags is None:
                return None
            children.append(tags)
        else:
            children.append(child.cast(field.type))
    return pa.StructArray.from_arrays(children, fields=list(DATA_TYPE), mask=data.is_null())


def _tag_changes(child: pa.Array) -> pa.StructArray | None:
    """``blobTagsUpdated`` as the superset's record: from the service's map of ``previous``/``current``
    maps (None if a map holds another key), or from an older writer's record."""
    if isinstance(child, pa.MapArray):
        keys = child.keys
        if len(keys) and not pc.all(pc.is_in(keys.cast(pa.string()), value_set=pa.array(TAG_SIDES))).as_py():
            return None
        sides = [
            pc.map_lookup(child, pa.scalar(side, child.type.key_type), "first").cast(STRING_MAP) for side in TAG_SIDES
        ]
    else:
        return child.cast(BLOB_TAGS_UPDATED)  # an older writer's record of exactly the superset's fields
    return pa.StructArray.from_arrays(sides, fields=list(BLOB_TAGS_UPDATED), mask=child.is_null())


def _records(batch: pa.RecordBatch) -> list[dict[str, Any]]:
    """The batch as the record path sees records: maps as dicts, enums as their symbols."""

    def plain(value: Any, kind: pa.DataType) -> Any:
        if value is None:
            return None
        if pa.types.is_map(kind):
            return {k: plain(v, kind.item_type) for k, v in value}
        if pa.types.is_struct(kind):
            return {f.name: plain(value[f.name], f.type) for f in kind}
        return value

    rows = pa.Table.from_batches([batch]).to_pylist()
    return [{name: plain(row[name], batch.schema.field(name).type) for name in batch.schema.names} for row in rows]


def _ticks(times: pa.Array, reject: Callable[[pa.Array], None]) -> pa.Array:
    """100 ns ticks; vectorised for the service's own format (7 digits, Z), per record otherwise, and
    always by the rules of :func:`parse_event_time` (a date the vectorised parser refuses, such as
    February 30, goes through it to be named)."""
    if times.null_count == 0 and pc.all(pc.match_substring_regex(times, _SERVICE_TIME)).as_py():
        try:
            moments = pc.strptime(pc.utf8_slice_codeunits(times, 0, 19), format="%Y-%m-%dT%H:%M:%S", unit="s")
        except pa.ArrowInvalid:
            moments = None
        # Arrow rolls February 30 over into March: a day that changed was not a date.
        if (
            moments is not None
            and pc.all(pc.equal(pc.day(moments), pc.cast(pc.utf8_slice_codeunits(times, 8, 10), pa.int64()))).as_py()
        ):
            seconds = pc.cast(moments, pa.int64())
            fraction = pc.cast(pc.utf8_slice_codeunits(times, 20, 27), pa.int64())
            return pc.add(pc.multiply(seconds, TICKS_PER_SECOND), fraction)
    out = []
    for offset, text in enumerate(times.to_pylist()):
        try:
            out.append(parse_event_time(text if isinstance(text, str) else ""))
        except ValueError:
            reject(pa.array([i == offset for i in range(len(times))]))
    return pa.array(out, type=pa.int64())
