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

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Iterable, Iterator

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from lakefeed.blob.schema import (
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
from lakefeed.errors import FeedCorruptError
from lakefeed.storage import Store

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
    ]
)


@dataclass(frozen=True)
class ChunkRef:
    """What a task needs to decode one chunk file; no secrets (they come from the environment)."""

    root: str
    path: str
    shard: str
    segment_start: datetime


def decode_chunk(store: Store, chunk: ChunkRef, batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    url = store.url(chunk.path)
    with store.open(chunk.path) as handle:
        if not handle.read(1):
            return  # 0-byte chunk file: empty, not corrupt
        handle.seek(0)
        reader = _avro_reader(handle, url)
        # Files whose writer schema holds only fields of the superset take the columnar
        # path (Arrow converts whole batches in C++); anything else keeps every
        # unknown field through the record-by-record path.
        columnar = fits_superset(reader.writer_schema)
        records: list = []
        first = 0
        try:
            for record in reader:  # iterating in fastavro's C loop, not next() per record
                records.append(record)
                if len(records) == batch_size:
                    yield _to_batch(records, first, chunk, url, columnar)
                    first += len(records)
                    records = []
        except FeedCorruptError:
            raise
        except Exception as exc:
            raise FeedCorruptError(
                f"{url}: corrupt or truncated Avro after record {first + len(records)} "
                f"({type(exc).__name__}: {exc})"
            ) from None
        if records:
            yield _to_batch(records, first, chunk, url, columnar)


def _avro_reader(handle, url: str) -> fastavro.reader:
    try:
        return fastavro.reader(handle)
    except Exception as exc:  # fastavro raises several types for a bad header
        raise FeedCorruptError(f"{url}: not a valid Avro file ({type(exc).__name__}: {exc})") from None


def writer_schema(store: Store, path: str) -> Any:
    """The writer schema in a chunk file's header (only the header is read); None for a 0-byte file."""
    with store.open(path) as handle:
        if not handle.read(1):
            return None
        handle.seek(0)
        return _avro_reader(handle, store.url(path)).writer_schema


def _to_batch(records: list, first: int, chunk: ChunkRef, url: str, columnar: bool) -> pa.RecordBatch:
    if columnar:
        try:
            return _columnar_batch(records, first, chunk, url)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
            pass  # a value Arrow would not convert: the record path keeps it in `extra` or names it
    builder = _BatchBuilder(chunk, url)
    for offset, record in enumerate(records):
        builder.add(record, first + offset)
    return builder.flush()


_RAW_SCHEMA = pa.schema([RECORD_SCHEMA.field(name) for name in EVENT_FIELDS])
_SUPPORTED = pa.array(sorted(SUPPORTED_SCHEMA_VERSIONS), pa.int32())
_SERVICE_TIME = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{7}Z$"
_AVRO_TYPES = {"string": pa.string(), "long": pa.int64(), "int": pa.int64(), "boolean": pa.bool_()}


def fits_superset(writer_schema: Any) -> bool:
    """Whether every field of the file's writer schema is a superset field of a compatible kind."""
    if not isinstance(writer_schema, dict) or writer_schema.get("type") != "record":
        return False
    top = {f["name"]: f["type"] for f in writer_schema.get("fields", [])}
    if set(top) - _KNOWN_EVENT_FIELDS:
        return False
    for name in EVENT_STRING_FIELDS:
        if name in top and _kind(top[name]) != "string":
            return False
    if "schemaVersion" in top and _kind(top["schemaVersion"]) not in ("int", "long"):
        return False
    data = non_null(top.get("data"))
    if not isinstance(data, dict) or data.get("type") != "record":
        return False
    for field in data.get("fields", []):
        name, kind = field["name"], _kind(field["type"])
        if name not in _KNOWN_DATA_FIELDS:
            return False
        expected = DATA_TYPE.field(name).type
        if pa.types.is_map(expected) or pa.types.is_struct(expected):
            if kind not in ("map", "record"):
                return False
        elif _AVRO_TYPES.get(kind) != expected and not (kind == "int" and expected == pa.int64()):
            return False
    return True


def non_null(avro_type: Any) -> Any:
    """``X`` of ``X`` or ``["null", X]``; None for a union of several types."""
    if isinstance(avro_type, list):
        rest = [t for t in avro_type if t != "null"]
        return rest[0] if len(rest) == 1 else None
    return avro_type


def _kind(avro_type: Any) -> str | None:
    avro_type = non_null(avro_type)
    if isinstance(avro_type, dict):
        return avro_type.get("type")
    return avro_type


def _columnar_batch(records: list, first: int, chunk: ChunkRef, url: str) -> pa.RecordBatch:
    raw = pa.RecordBatch.from_pylist(records, schema=_RAW_SCHEMA)
    n = raw.num_rows
    versions = raw.column("schemaVersion")
    bad = pc.invert(pc.fill_null(pc.is_in(versions, value_set=_SUPPORTED), False))
    if pc.any(bad).as_py():
        index = pc.index(bad, True).as_py()
        _BatchBuilder(chunk, url).add(records[index], first + index)  # raises, naming file and record
    ids = raw.column("id")
    if pc.any(pc.fill_null(pc.equal(pc.utf8_length(ids), 0), True)).as_py():
        index = pc.index(pc.fill_null(pc.equal(pc.utf8_length(ids), 0), True), True).as_py()
        _BatchBuilder(chunk, url).add(records[index], first + index)
    ticks = _ticks(raw.column("eventTime"), records, first, chunk, url)
    start = chunk.segment_start if chunk.segment_start.tzinfo else chunk.segment_start.replace(tzinfo=timezone.utc)
    columns = [raw.column(name) for name in EVENT_FIELDS] + [
        pa.nulls(n, _MAP),
        ticks,
        pa.array([start] * n, type=pa.timestamp("us", tz="UTC")),
        pa.array([chunk.shard] * n, type=pa.string()),
        pa.array([chunk.path] * n, type=pa.string()),
        pa.array(range(first, first + n), type=pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)


def _ticks(times: pa.Array, records: list, first: int, chunk: ChunkRef, url: str) -> pa.Array:
    """100 ns ticks; vectorised for the service's own format (7 digits, Z), per record otherwise."""
    if times.null_count == 0 and pc.all(pc.match_substring_regex(times, _SERVICE_TIME)).as_py():
        seconds = pc.cast(pc.strptime(pc.utf8_slice_codeunits(times, 0, 19), format="%Y-%m-%dT%H:%M:%S",
                                      unit="s"), pa.int64())
        fraction = pc.cast(pc.utf8_slice_codeunits(times, 20, 27), pa.int64())
        return pc.add(pc.multiply(seconds, TICKS_PER_SECOND), fraction)
    out = []
    for offset, text in enumerate(times.to_pylist()):
        try:
            out.append(parse_event_time(text if isinstance(text, str) else ""))
        except ValueError:
            _BatchBuilder(chunk, url).add(records[offset], first + offset)  # raises, naming the record
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
                yield ChunkRef(root=row["root"], path=row["path"], shard=row["shard"],
                               segment_start=row["segmentStart"])
    yield from decode_chunks(refs())


class _BatchBuilder:
    """Column lists for one Arrow batch; a record is checked and spread across them."""

    def __init__(self, chunk: ChunkRef, url: str):
        self.chunk = chunk
        self.url = url
        start = chunk.segment_start
        self.segment_start = start if start.tzinfo else start.replace(tzinfo=timezone.utc)
        self._reset()

    def _reset(self) -> None:
        self.rows = 0
        self.events = {name: [] for name in EVENT_STRING_FIELDS}
        self.schema_versions: list[int] = []
        self.data = {name: [] for name in DATA_FIELDS}
        self.data_valid: list[bool] = []
        self.extra: list[dict | None] = []
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


def _as_string_map(value: Any, name: str, extra: dict[str, str]) -> dict[str, str] | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return {str(k): v if isinstance(v, str) or v is None else _json(v) for k, v in value.items()}
    extra[name] = _json(value)
    return None


def _as_property_changes(value: Any, extra: dict[str, str]) -> dict | None:
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


def _as_tag_changes(value: Any, extra: dict[str, str]) -> dict | None:
    if value is None:
        return None
    if isinstance(value, dict) and set(value) <= {"current", "previous"} and all(
        side is None
        or (isinstance(side, dict) and all(isinstance(v, str) for v in side.values()))
        for side in value.values()
    ):
        return value
    extra["blobTagsUpdated"] = _json(value)
    return None

