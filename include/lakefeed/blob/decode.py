"""Streaming decode of Avro chunk files into Arrow batches of the superset schema.

Runs in Spark's Python workers (one task per chunk file) and in plain Python
(benchmarks, tests). Memory is bounded by ``batch_size`` records, whatever
the file's size: fastavro reads the file block by block.

A 0-byte chunk file is an empty chunk (the feed appends to it later or never);
a non-empty file that is not valid Avro, a truncated block, an unknown
``schemaVersion`` or an unreadable ``eventTime`` raise :class:`FeedCorruptError`
naming the file and, where known, the record.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, BinaryIO

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from lakefeed.blob.avro_container import Header, block_groups, read_header
from lakefeed.blob.schema import (
    BLOB_PROPERTIES_UPDATED,
    BLOB_TAGS_UPDATED,
    DATA_BOOL_FIELDS,
    DATA_FIELDS,
    DATA_LONG_FIELDS,
    DATA_MAP_FIELDS,
    DATA_STRING_FIELDS,
    DATA_TYPE,
    EVENT_FIELDS,
    EVENT_STRING_FIELDS,
    RECORD_SCHEMA,
    SUPPORTED_SCHEMA_VERSIONS,
)
from lakefeed.blob.timegrid import TICKS_PER_SECOND, parse_event_time
from lakefeed.errors import FeedCorruptError, StorageUnavailableError
from lakefeed.storage import Store

if TYPE_CHECKING:
    from fastavro.types import AvroMessage

    from lakefeed.blob.avro_container import _Stream

DEFAULT_BATCH_SIZE = 8192
_MAP = pa.map_(pa.string(), pa.string())
_KNOWN_DATA_FIELDS = frozenset(DATA_FIELDS) - {"extra"}
_KNOWN_EVENT_FIELDS = frozenset(EVENT_FIELDS)

# The columns of the decode input: one row per chunk file (see spark_decode_input).
CHUNK_INPUT_SCHEMA = pa.schema(
    [
        ("root", pa.string()),
        ("path", pa.string()),
        ("shard", pa.string()),
        ("segmentStart", pa.timestamp("us", tz="UTC")),
        ("columnar", pa.bool_()),  # the columnar reader where lossless (false: fastavro for every file)
    ]
)


@dataclass(frozen=True)
class ChunkRef:
    """What a task needs to decode one chunk file; no secrets (they come from the environment)."""

    root: str
    path: str
    shard: str
    segment_start: datetime
    columnar: bool = True


def decode_chunk(store: Store, chunk: ChunkRef, batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    """Decoded records of one chunk file, in ``batch_size`` batches of :data:`RECORD_SCHEMA`.

    A file whose writer schema the superset represents exactly (:func:`columnar_readable`, the
    service's own schema included) is decoded column by column by a Rust Avro reader, a group of
    whole blocks at a time; any other file (unknown fields, odd types), or every file when
    ``chunk.columnar`` is false, record by record with fastavro, which keeps unknown fields in ``extra``.
    """
    url = store.url(chunk.path)
    with store.open(chunk.path) as handle:
        if not handle.read(1):
            return  # 0-byte chunk file: empty, not corrupt
        handle.seek(0)
        header, stream = read_header(handle, url)
        if chunk.columnar and columnar_readable(header.schema):
            yield from _decode_columnar(header, stream, chunk, url, batch_size)
            return
        handle.seek(0)
        yield from _decode_records(handle, chunk, url, batch_size)


def _decode_records(handle: BinaryIO, chunk: ChunkRef, url: str, batch_size: int) -> Iterator[pa.RecordBatch]:
    reader = _avro_reader(handle, url)
    builder = _BatchBuilder(chunk, url)
    index = 0
    try:
        for record in reader:  # iterating in fastavro's C loop, not next() per record
            builder.add(record, index)
            index += 1
            if builder.rows == batch_size:
                yield builder.flush()
    except (FeedCorruptError, StorageUnavailableError):
        raise
    except Exception as exc:
        raise FeedCorruptError(
            f"{url}: corrupt or truncated Avro after record {index} ({type(exc).__name__}: {exc})"
        ) from None
    if builder.rows:
        yield builder.flush()


def _decode_columnar(
    header: Header, stream: _Stream, chunk: ChunkRef, url: str, batch_size: int
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


def _avro_reader(handle: BinaryIO, url: str) -> Iterator[AvroMessage]:
    try:
        return fastavro.reader(handle)
    except StorageUnavailableError:
        raise
    except Exception as exc:  # fastavro raises several types for a bad header
        raise FeedCorruptError(f"{url}: not a valid Avro file ({type(exc).__name__}: {exc})") from None


_SUPPORTED = pa.array(sorted(SUPPORTED_SCHEMA_VERSIONS), pa.int64())
_SERVICE_TIME = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{7}Z$"
_TEXT_KINDS = ("string", "enum")  # the service writes eventType, api, blobType and blobTier as Avro enums
_TAG_SIDES = ("previous", "current")


def columnar_readable(writer_schema: Any) -> bool:
    """Whether the superset represents every field of this writer schema exactly, nested ones included,
    so the columnar reader can lose nothing: the superset's fields only; text as ``string`` or ``enum``;
    counts as ``int`` or ``long``; maps of strings; ``blobPropertiesUpdated`` a map of records of
    ``current``/``previous`` strings; ``blobTagsUpdated`` a record or a map (the service's) of
    ``previous``/``current`` string maps; no logical types. Anything else takes the record path."""
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record" or _has_logical_type(writer_schema):
        return False
    top = {f["name"]: f["type"] for f in writer_schema.get("fields", [])}
    if set(top) - _KNOWN_EVENT_FIELDS or "data" not in top:
        return False
    if not all(_kind(top[name]) in _TEXT_KINDS for name in EVENT_STRING_FIELDS if name in top):
        return False
    if "schemaVersion" in top and _kind(top["schemaVersion"]) not in ("int", "long"):
        return False
    data = non_null(top["data"])
    if not isinstance(data, dict) or data.get("type") != "record":
        return False
    for field in data.get("fields", []):
        name, kind = field["name"], non_null(field["type"])
        if name in DATA_STRING_FIELDS:
            ok = _kind(kind) in _TEXT_KINDS
        elif name in DATA_LONG_FIELDS:
            ok = _kind(kind) in ("int", "long")
        elif name in DATA_BOOL_FIELDS:
            ok = _kind(kind) == "boolean"
        elif name in DATA_MAP_FIELDS:
            ok = _is_string_map(kind)
        elif name == "blobPropertiesUpdated":
            ok = _kind(kind) == "map" and _is_record_of(kind.get("values"), ["current", "previous"], _is_string)
        elif name == "blobTagsUpdated":
            ok = _is_record_of(kind, list(_TAG_SIDES), _is_string_map) or (
                _kind(kind) == "map" and _is_string_map(kind.get("values"))
            )
        else:
            ok = False
        if not ok:
            return False
    return True


def _is_string(avro_type: Any) -> bool:
    return _kind(avro_type) == "string"


def _is_string_map(avro_type: Any) -> bool:
    avro_type = non_null(avro_type)
    return isinstance(avro_type, dict) and avro_type.get("type") == "map" and _is_string(avro_type.get("values"))


def _is_record_of(avro_type: Any, names: list[str], is_field_type: Callable[[Any], bool]) -> bool:
    """A record of exactly these fields, in this order (the superset's own), each of the given kind."""
    avro_type = non_null(avro_type)
    if not isinstance(avro_type, dict) or avro_type.get("type") != "record":
        return False
    fields = avro_type.get("fields", [])
    return [f["name"] for f in fields] == names and all(is_field_type(f["type"]) for f in fields)


def _has_logical_type(avro_type: Any) -> bool:
    if isinstance(avro_type, dict):
        return "logicalType" in avro_type or any(_has_logical_type(v) for v in avro_type.values())
    if isinstance(avro_type, list):
        return any(_has_logical_type(v) for v in avro_type)
    return False


def non_null(avro_type: Any) -> Any:
    """``X`` of ``X`` or ``["null", X]``; None for a union of several types."""
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        return rest[0] if len(rest) == 1 else None
    return avro_type


def _kind(avro_type: Any) -> object:
    """The type's name (a string, or None for a union of several types, in a valid schema)."""
    avro_type = non_null(avro_type)
    if isinstance(avro_type, dict):
        return avro_type.get("type")
    return avro_type


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
            _BatchBuilder(chunk, url).add(row, first + index)  # raises, naming the file and the record

    versions = columns["schemaVersion"].cast(pa.int64()) if "schemaVersion" in columns else pa.nulls(n, pa.int64())
    reject(pc.invert(pc.fill_null(pc.is_in(versions, value_set=_SUPPORTED), False)))
    reject(pc.fill_null(pc.equal(pc.utf8_length(text["id"]), 0), True))
    ticks = _ticks(text["eventTime"], reject)
    data = _data_struct(columns["data"], n)
    if data is None:  # a value the superset cannot hold (a tag map with other keys): the record path keeps it
        builder = _BatchBuilder(chunk, url)
        for offset, record in enumerate(_records(batch)):
            builder.add(record, first + offset)
        return builder.flush()
    start = chunk.segment_start if chunk.segment_start.tzinfo else chunk.segment_start.replace(tzinfo=UTC)
    arrays = [text[name] for name in EVENT_STRING_FIELDS] + [
        versions.cast(pa.int32()),
        data,
        pa.nulls(n, _MAP),
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
        if len(keys) and not pc.all(pc.is_in(keys.cast(pa.string()), value_set=pa.array(_TAG_SIDES))).as_py():
            return None
        sides = [pc.map_lookup(child, pa.scalar(side, child.type.key_type), "first").cast(_MAP) for side in _TAG_SIDES]
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


def decode_chunks(chunks: Iterable[ChunkRef], batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    stores: dict[str, Store] = {}
    for chunk in chunks:
        store = stores.get(chunk.root)
        if store is None:
            store = stores[chunk.root] = Store(chunk.root)
        yield from decode_chunk(store, chunk, batch_size)


def decode_arrow_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows of :data:`CHUNK_INPUT_SCHEMA` in, decoded records out."""

    def refs() -> Iterator[ChunkRef]:
        for batch in batches:
            for row in batch.to_pylist():
                yield ChunkRef(
                    root=row["root"],
                    path=row["path"],
                    shard=row["shard"],
                    segment_start=row["segmentStart"],
                    columnar=row["columnar"],
                )

    yield from decode_chunks(refs())


class _BatchBuilder:
    """Column lists for one Arrow batch; a record is checked and spread across them."""

    def __init__(self, chunk: ChunkRef, url: str):
        self.chunk = chunk
        self.url = url
        start = chunk.segment_start
        self.segment_start = start if start.tzinfo else start.replace(tzinfo=UTC)
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.events: dict[str, list[str | None]] = {name: [] for name in EVENT_STRING_FIELDS}
        self.schema_versions: list[int] = []
        self.data: dict[str, list[Any]] = {name: [] for name in DATA_FIELDS}
        self.data_valid: list[bool] = []
        self.extra: list[dict[str, str] | None] = []
        self.ticks: list[int] = []
        self.indexes: list[int] = []

    def add(self, record: Any, index: int) -> None:
        where = f"{self.url}: record {index}"
        if not isinstance(record, dict):
            raise FeedCorruptError(f"{where}: not an Avro record")
        version = record.get("schemaVersion")
        if version not in SUPPORTED_SCHEMA_VERSIONS or isinstance(version, bool):
            raise FeedCorruptError(
                f"{where}: unknown schemaVersion {version!r} (supported: "
                f"{', '.join(map(str, sorted(SUPPORTED_SCHEMA_VERSIONS)))})"
            )
        event_id = record.get("id")
        if not isinstance(event_id, str) or not event_id:
            raise FeedCorruptError(f"{where}: missing event id")
        event_time = record.get("eventTime")
        try:
            ticks = parse_event_time(event_time if isinstance(event_time, str) else "")
        except ValueError:
            raise FeedCorruptError(f"{where} (id {event_id}): unreadable eventTime {event_time!r}") from None
        extra: dict[str, str] = {}
        for name in EVENT_STRING_FIELDS:
            self.events[name].append(_as_string(record.get(name), name, extra))
        self.schema_versions.append(version)
        self._add_data(record.get("data"), extra)
        for name, value in record.items():
            if name not in _KNOWN_EVENT_FIELDS:
                extra[name] = _json(value)
        self.extra.append(extra or None)
        self.ticks.append(ticks)
        self.indexes.append(index)
        self.rows += 1

    def _add_data(self, data: Any, top_extra: dict[str, str]) -> None:
        columns = self.data
        if data is None or not isinstance(data, dict):
            if data is not None:
                top_extra["data"] = _json(data)
            self.data_valid.append(False)
            for column in columns.values():
                column.append(None)
            return
        self.data_valid.append(True)
        extra: dict[str, str] = {}
        get = data.get
        for name in DATA_STRING_FIELDS:
            columns[name].append(_as_string(get(name), name, extra))
        for name in DATA_LONG_FIELDS:
            columns[name].append(_as_long(get(name), name, extra))
        for name in DATA_BOOL_FIELDS:
            columns[name].append(_as_bool(get(name), name, extra))
        for name in DATA_MAP_FIELDS:
            columns[name].append(_as_string_map(get(name), name, extra))
        columns["blobPropertiesUpdated"].append(_as_property_changes(get("blobPropertiesUpdated"), extra))
        columns["blobTagsUpdated"].append(_as_tag_changes(get("blobTagsUpdated"), extra))
        for name, value in data.items():
            if name not in _KNOWN_DATA_FIELDS:
                extra[name] = _json(value)
        columns["extra"].append(extra or None)

    def flush(self) -> pa.RecordBatch:
        n = self.rows
        data_children = [pa.array(self.data[field.name], type=field.type) for field in DATA_TYPE]
        data = pa.StructArray.from_arrays(
            data_children,
            fields=list(DATA_TYPE),
            mask=pa.array([not valid for valid in self.data_valid], type=pa.bool_()),
        )
        columns = [pa.array(self.events[name], type=pa.string()) for name in EVENT_STRING_FIELDS] + [
            pa.array(self.schema_versions, type=pa.int32()),
            data,
            pa.array(self.extra, type=_MAP),
            pa.array(self.ticks, type=pa.int64()),
            pa.array([self.segment_start] * n, type=pa.timestamp("us", tz="UTC")),
            pa.array([self.chunk.shard] * n, type=pa.string()),
            pa.array([self.chunk.path] * n, type=pa.string()),
            pa.array(self.indexes, type=pa.int64()),
        ]
        batch = pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)
        self._reset()
        return batch


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def _as_string(value: Any, name: str, extra: dict[str, str]) -> str | None:
    if value is None or isinstance(value, str):
        return value
    extra[name] = _json(value)
    return None


def _as_long(value: Any, name: str, extra: dict[str, str]) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    extra[name] = _json(value)
    return None


def _as_bool(value: Any, name: str, extra: dict[str, str]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    extra[name] = _json(value)
    return None


def _as_string_map(value: Any, name: str, extra: dict[str, str]) -> dict[str, str | None] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) or v is None else _json(v) for k, v in value.items()}
    extra[name] = _json(value)
    return None


def _as_property_changes(value: Any, extra: dict[str, str]) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, dict) and all(
        isinstance(change, dict)
        and set(change) <= {"current", "previous"}
        and all(v is None or isinstance(v, str) for v in change.values())
        for change in value.values()
    ):
        return value
    extra["blobPropertiesUpdated"] = _json(value)
    return None


def _as_tag_changes(value: Any, extra: dict[str, str]) -> dict[str, Any] | None:
    if value is None:
        return None
    if (
        isinstance(value, dict)
        and set(value) <= {"current", "previous"}
        and all(
            side is None or (isinstance(side, dict) and all(isinstance(v, str) for v in side.values()))
            for side in value.values()
        )
    ):
        return value
    extra["blobTagsUpdated"] = _json(value)
    return None
