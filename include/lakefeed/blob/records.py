"""The record path of the chunk-file decode: fastavro reads record by record, each record checked and spread
into the superset's columns (:class:`BatchBuilder`); fields the superset does not know are kept in ``extra``
as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC
from typing import TYPE_CHECKING, Any, BinaryIO

import fastavro
import pyarrow as pa

from lakefeed.blob.feed import ChunkRef
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
from lakefeed.blob.timegrid import parse_event_time
from lakefeed.errors import FeedCorruptError, StorageUnavailableError

if TYPE_CHECKING:
    from fastavro.types import AvroMessage

from lakefeed.blob.schema import STRING_MAP

_KNOWN_DATA_FIELDS = frozenset(DATA_FIELDS) - {"extra"}


_KNOWN_EVENT_FIELDS = frozenset(EVENT_FIELDS)


def decode_records(handle: BinaryIO, chunk: ChunkRef, url: str, batch_size: int) -> Iterator[pa.RecordBatch]:
    reader = _avro_reader(handle, url)
    builder = BatchBuilder(chunk, url)
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


def _avro_reader(handle: BinaryIO, url: str) -> Iterator[AvroMessage]:
    try:
        return fastavro.reader(handle)
    except StorageUnavailableError:
        raise
    except Exception as exc:  # fastavro raises several types for a bad header
        raise FeedCorruptError(f"{url}: not a valid Avro file ({type(exc).__name__}: {exc})") from None


class BatchBuilder:
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
            pa.array(self.extra, type=STRING_MAP),
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
