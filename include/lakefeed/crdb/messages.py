"""Changefeed messages of one sink data file, parsed in Spark's Python workers (one task per file).

An ``envelope=wrapped`` JSON line (the sink's default) holds ``after`` (the row, ``null`` for a
delete), ``key`` (the primary key values, always present on this sink), ``updated`` (with the
``updated`` option) and, with ``diff``, ``before``. Each message becomes one row of
:data:`MESSAGE_SCHEMA`: its key as compact JSON, ``updated`` as text and as the exact pair (wall,
logical), and each column of ``after`` as its JSON literal text with its kind (``i`` integer, ``I``
integer of more than 18 characters, ``f`` other number, ``s`` string, ``b`` boolean, ``j`` object or
array), so numbers keep every digit until the driver types the columns, which it does from the shapes of
the rows (:func:`row_shapes`) gathered as the files are decoded. Parquet files go through the same rows (see :func:`parquet_messages`).
JSON lines are decoded a block at a time by msgspec (a C decoder; :func:`ndjson_messages`), and a block it
cannot take exactly as :func:`parse_line` would goes through that line-by-line parser.

Bad input raises :class:`~lakefeed.errors.FeedCorruptError` naming the file and the line: malformed
JSON, a line without ``key``, ``after`` or ``updated`` (a feed created without ``updated`` cannot be
deduplicated: recreate it ``WITH updated, resolved``), another envelope.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from decimal import Decimal
from typing import TYPE_CHECKING, Any, BinaryIO, Self, cast

import msgspec
import pyarrow as pa
from pyspark.accumulators import Accumulator, AccumulatorParam

from lakefeed.crdb.hlc import Hlc
from lakefeed.errors import FeedCorruptError, UnreadableLine
from lakefeed.jsonio import parse_json
from lakefeed.storage import Store

if TYPE_CHECKING:
    pass

BATCH_ROWS = 8192
_INT64_MAX = (1 << 63) - 1  # the wall of an updated past this fits no int64 column
_STRING_MAP = pa.map_(pa.string(), pa.string())
MESSAGE_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("schemaId", pa.int64()),
        ("file", pa.string()),
        ("line", pa.int64()),  # 1-based line (ndjson) or row (parquet) in its file
        ("key", pa.string()),  # the key array as compact JSON: the merge key
        ("updated", pa.string()),  # "<wall>.<logical>"
        ("wall", pa.int64()),
        ("logical", pa.int64()),
        ("deleted", pa.bool_()),
        ("values", _STRING_MAP),  # column -> JSON literal text (strings unquoted); null for a delete
        ("kinds", _STRING_MAP),  # column -> i | I | f | s | b | j (only non-null values; I: a long integer)
    ]
)
# The columns of the decode input: one row per data file.
FILE_INPUT_SCHEMA = pa.schema(
    [
        ("root", pa.string()),
        ("key", pa.string()),
        ("topic", pa.string()),
        ("schemaId", pa.int64()),
        ("format", pa.string()),
        ("compression", pa.string()),
        ("keyColumns", pa.string()),
    ]
)  # parquet: the topic's primary key columns, comma-separated
RECREATE = "recreate the changefeed WITH updated, resolved (envelope=wrapped, the default)"


# A quarantined line: (file URL, 1-based line) -> (topic, the line's text, why it was set aside).
Quarantined = dict[tuple[str, int], tuple[str | None, str, str]]
RAW_LIMIT = 1 << 20  # characters of a quarantined line kept


def quarantined_line(topic: str | None, line: bytes, where: str, error: UnreadableLine) -> tuple[str | None, str, str]:
    """What a quarantine table keeps of a line: its topic, its text (the first :data:`RAW_LIMIT` characters,
    bytes that are not UTF-8 replaced) and the reason, without the file and line the row names already."""
    raw = line.decode("utf-8", errors="replace")
    reason = str(error).removeprefix(f"{where}: ")
    if len(raw) > RAW_LIMIT:
        reason += f" (raw: the first {RAW_LIMIT} of {len(raw)} characters)"
        raw = raw[:RAW_LIMIT]
    return topic, raw, reason


class LinesQuarantined(AccumulatorParam[Quarantined]):
    """The lines a job's decode tasks set aside, gathered on the driver (keyed by file and line: a task run
    twice adds nothing more)."""

    def zero(self, value: Quarantined) -> Quarantined:
        return {}

    def addInPlace(self, value1: Quarantined, value2: Quarantined) -> Quarantined:
        value1.update(value2)
        return value1


class _Raw(Decimal):
    """A JSON number kept as written (json.loads hands its literal to parse_float/parse_int)."""

    text: str

    def __new__(cls, text: str) -> Self:
        value = super().__new__(cls, text)
        value.text = text
        return value


def _number(text: str) -> _Raw:
    return _Raw(text)


LONG_INTEGER = 18  # an integer written with more characters than this (its sign included) may not fit a bigint


def _number_kind(text: str) -> str:
    """``i`` for an integer as written, ``I`` for one too long to be sure it fits a bigint, ``f`` for any
    other number.

    >>> _number_kind("-12"), _number_kind("1234567890123456789"), _number_kind("1.50"), _number_kind("1e5")
    ('i', 'I', 'f', 'f')
    """
    if text.lstrip("-").isdigit():
        return "I" if len(text) > LONG_INTEGER else "i"
    return "f"


def _literal(value: Any) -> tuple[str, str]:
    """(text, kind) of a column value: as JSON gave it, or as parquet's reader did."""
    if isinstance(value, bool):
        return ("true" if value else "false"), "b"
    if isinstance(value, _Raw):
        return value.text, _number_kind(value.text)
    if isinstance(value, int):
        return str(value), _number_kind(str(value))
    if isinstance(value, (float, Decimal)):
        return str(value), "f"
    if isinstance(value, str):
        return value, "s"
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode(), "s"
    if hasattr(value, "isoformat"):
        return value.isoformat(), "s"
    return _json(value), "j"


def _json(value: Any) -> str:
    """Compact JSON, numbers as written."""
    marks: dict[str, str] = {}

    def default(item: Any) -> str:
        mark = f"\u0000{len(marks)}\u0000"
        marks[mark] = item.text if isinstance(item, _Raw) else str(item)
        return mark

    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=lambda item: _mark(item, default))
    for mark, literal in marks.items():
        text = text.replace(json.dumps(mark, ensure_ascii=False), literal)
    return text


def _mark(item: Any, default: Callable[[Any], str]) -> Any:
    if isinstance(item, (_Raw, Decimal)):
        return default(item)
    if hasattr(item, "isoformat"):
        return item.isoformat()
    if isinstance(item, bytes):
        import base64

        return base64.b64encode(item).decode()
    raise TypeError(f"cannot write {type(item).__name__} as JSON")


def parse_line(line: bytes | str, where: str) -> dict[str, Any]:
    """One wrapped-envelope message, checked; ``where`` names its file and line in errors. A line that is not
    a message raises :class:`UnreadableLine`; one of another envelope, or without ``updated`` (how the
    changefeed was created, so every line is so), :class:`~lakefeed.errors.FeedCorruptError`."""
    message = parse_json(line, where, UnreadableLine, parse_float=_number, parse_int=_number)
    if not isinstance(message, dict):
        raise UnreadableLine(f"{where}: a changefeed message must be a JSON object")
    if "__crdb__" in message:
        raise FeedCorruptError(f"{where}: a message of envelope=bare; this reader takes envelope=wrapped: {RECREATE}")
    if "op" in message and "ts_ns" in message:
        raise FeedCorruptError(
            f"{where}: a message of envelope=enriched; this reader takes envelope=wrapped: {RECREATE}"
        )
    if "resolved" in message and "after" not in message:
        raise UnreadableLine(f"{where}: a resolved message in a data file")
    if "key" not in message:
        raise UnreadableLine(f"{where}: a message without key (is key_in_value off?)")
    if not isinstance(message["key"], list):
        raise UnreadableLine(f"{where}: key must be a JSON array of the primary key's values")
    if "updated" not in message:
        raise FeedCorruptError(
            f"{where}: a message without updated: the changefeed was created without the "
            f"updated option, so duplicates cannot be told from changes; {RECREATE}"
        )
    if "after" not in message:
        raise UnreadableLine(f"{where}: a message without after")
    after = message["after"]
    if after is not None and not isinstance(after, dict):
        raise UnreadableLine(f"{where}: after must be an object or null")
    if not isinstance(message["updated"], str):
        raise UnreadableLine(f'{where}: updated must be a string "<wall>.<logical>", got {message["updated"]}')
    try:
        stamp = Hlc.parse(message["updated"])
    except ValueError as exc:
        raise UnreadableLine(f"{where}: {exc}") from None
    if stamp.wall > _INT64_MAX:
        raise UnreadableLine(f"{where}: updated {message['updated']!r} is past any HLC time (its wall time overflows)")
    return {
        "key": _json(message["key"]),
        "updated": str(stamp),
        "wall": stamp.wall,
        "logical": stamp.logical,
        "after": after,
    }


def _stream_errors() -> tuple[type[BaseException], ...]:
    """What a truncated or corrupt file raises while it is decompressed and split into lines (zlib's and
    zstandard's own error types are not OSErrors; the fuzz test found the first)."""
    errors: tuple[type[BaseException], ...] = (OSError, EOFError, ValueError, zlib.error)
    try:
        import zstandard

        errors += (zstandard.ZstdError,)
    except ImportError:
        pass
    return errors


_STREAM_ERRORS = _stream_errors()


@contextmanager
def _open_text(store: Store, key: str, compression: str | None) -> Iterator[BinaryIO]:
    """The file's bytes, decompressed; the file is closed on leaving, whatever the compression (a
    ``GzipFile`` alone would leave the handle it reads open)."""
    with store.open(key) as handle:
        if compression == "gzip":
            with gzip.GzipFile(fileobj=handle) as text:
                yield cast(BinaryIO, io.BufferedReader(text, 1 << 20))
        elif compression == "zstd":
            import zstandard

            with zstandard.ZstdDecompressor().stream_reader(handle, read_across_frames=True) as text:
                yield cast(BinaryIO, io.BufferedReader(text, 1 << 20))
        else:
            yield handle


def ndjson_messages(
    store: Store,
    key: str,
    topic: str,
    schema_id: int,
    compression: str | None,
    quarantine: Quarantined | None = None,
) -> Iterator[pa.RecordBatch]:
    """The messages of one ndjson (optionally gzip or zstd) file, in batches of :data:`MESSAGE_SCHEMA`.

    The file is read in blocks of whole lines; each block is decoded at once by msgspec's C decoder
    (:func:`_fast_batch`), values kept as their JSON text. A block holding any line that decoder does not
    take exactly as :func:`parse_line` would (a malformed or unusual line, a blank one) is parsed line by
    line instead, which names the line at fault: the rows are the same either way."""
    url = store.url(key)
    number = 0  # lines before the current block
    try:
        with _open_text(store, key, compression) as handle:
            for block in _line_blocks(handle):
                batch = _fast_batch(block, number, topic, schema_id, key)
                if batch is not None:
                    yield batch
                else:
                    yield from _exact_batches(block, number, url, topic, schema_id, key, quarantine)
                number += block.count(b"\n")
    except FeedCorruptError:
        raise
    except _STREAM_ERRORS as exc:  # a truncated or corrupt gzip / zstd stream
        raise FeedCorruptError(
            f"{url}: corrupt or truncated {compression or 'ndjson'} file after line {number} "
            f"({type(exc).__name__}: {exc})"
        ) from None


BLOCK_BYTES = 4 << 20


def _line_blocks(handle: BinaryIO, size: int = BLOCK_BYTES) -> Iterator[bytes]:
    """The stream in blocks of about ``size`` bytes, each ending at a line end (the last as the file ends)."""
    rest = b""
    while True:
        chunk = handle.read(size)
        if not chunk:
            if rest:
                yield rest
            return
        chunk = rest + chunk
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            rest = chunk
            continue
        yield chunk[:end]
        rest = chunk[end:]


def _exact_batches(
    block: bytes,
    before: int,
    url: str,
    topic: str,
    schema_id: int,
    key: str,
    quarantine: Quarantined | None = None,
) -> Iterator[pa.RecordBatch]:
    """The block's messages parsed line by line by :func:`parse_line` (errors name the line); unreadable
    lines go to ``quarantine`` when given."""
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(block.split(b"\n"), start=before + 1):
        if not line.strip():
            continue
        where = f"{url}: line {number}"
        try:
            message = parse_line(line, where)
        except UnreadableLine as error:
            if quarantine is None:
                raise
            quarantine[(url, number)] = quarantined_line(topic, line, where, error)
            continue
        rows.append(_row(message, topic, schema_id, key, number))
        if len(rows) == BATCH_ROWS:
            yield pa.RecordBatch.from_pylist(rows, schema=MESSAGE_SCHEMA)
            rows = []
    if rows:
        yield pa.RecordBatch.from_pylist(rows, schema=MESSAGE_SCHEMA)


class _Envelope(msgspec.Struct):
    """The fields :func:`parse_line` looks at, each value kept as its JSON text."""

    after: dict[str, msgspec.Raw] | msgspec.UnsetType | None = msgspec.UNSET
    key: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    updated: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    crdb: msgspec.Raw | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET, name="__crdb__")
    op: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    ts_ns: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_ENVELOPES = msgspec.json.Decoder(_Envelope)
# A JSON value re-written compact, numbers as written (floats through the hook; integers exact), strings
# escaped as json.dumps(ensure_ascii=False) does: what _json gives for the same value.
_VALUES = msgspec.json.Decoder(float_hook=msgspec.Raw)
_COMPACT = msgspec.json.Encoder()
_QUOTE, _BACKSLASH, _OPEN_OBJECT, _OPEN_ARRAY, _TRUE, _FALSE, _NULL = 34, 92, 123, 91, 116, 102, 110
_MINUS_ZERO = re.compile(rb"-0(?![0-9.eE])")


def _compact(raw: bytes) -> str | None:
    """``_json`` of the value ``raw`` holds, or None where msgspec could write it differently (the integer
    ``-0``, which it writes ``0``; dates such as ``"2024-01-05"`` are not mistaken for it)."""
    if _MINUS_ZERO.search(raw):
        return None
    try:
        return _COMPACT.encode(_VALUES.decode(raw)).decode()
    except (msgspec.DecodeError, RecursionError):
        return None


def _fast_batch(block: bytes, before: int, topic: str, schema_id: int, key: str) -> pa.RecordBatch | None:
    """The block's messages decoded at once, or None when a line must go through :func:`parse_line`."""
    try:
        envelopes = _ENVELOPES.decode_lines(block)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # deep nesting: a RecursionError
        return None
    if len(envelopes) != block.count(b"\n") + (0 if block.endswith(b"\n") else 1):
        return None  # blank lines (skipped by the decoder): line numbers need the exact path
    keys: list[str] = []
    updated: list[str] = []
    walls: list[int] = []
    logicals: list[int] = []
    deleted: list[bool] = []
    offsets: list[int] = [0]
    names: list[str] = []
    texts: list[str | None] = []
    kind_offsets: list[int] = [0]
    kind_names: list[str] = []
    kinds: list[str] = []
    for envelope in envelopes:
        after, message_key, stamp_raw = envelope.after, envelope.key, envelope.updated
        if (
            after is msgspec.UNSET
            or message_key is msgspec.UNSET
            or stamp_raw is msgspec.UNSET
            or envelope.crdb is not msgspec.UNSET
            or (envelope.op is not msgspec.UNSET and envelope.ts_ns is not msgspec.UNSET)
        ):
            return None
        key_raw, stamp_text = bytes(message_key), bytes(stamp_raw)
        if key_raw[0] != _OPEN_ARRAY or stamp_text[0] != _QUOTE or _BACKSLASH in stamp_text:
            return None
        key_text = _compact(key_raw)
        try:
            stamp = Hlc.parse(stamp_text[1:-1].decode())
        except ValueError:
            return None
        if key_text is None or stamp.wall > _INT64_MAX:
            return None
        keys.append(key_text)
        updated.append(str(stamp))
        walls.append(stamp.wall)
        logicals.append(stamp.logical)
        deleted.append(after is None)
        if after is not None:
            for column, value in after.items():
                raw = bytes(value)
                first = raw[0]
                names.append(column)
                if first == _NULL:
                    texts.append(None)
                    continue
                if first == _QUOTE:
                    text = raw[1:-1].decode() if _BACKSLASH not in raw else json.loads(raw)
                    kind = "s"
                elif first in (_TRUE, _FALSE):
                    text, kind = ("true", "b") if first == _TRUE else ("false", "b")
                elif first in (_OPEN_OBJECT, _OPEN_ARRAY):
                    compact = _compact(raw)
                    if compact is None:
                        return None
                    text, kind = compact, "j"
                else:
                    text = raw.decode()
                    kind = _number_kind(text)
                texts.append(text)
                kind_names.append(column)
                kinds.append(kind)
        offsets.append(len(names))
        kind_offsets.append(len(kind_names))
    rows = len(envelopes)
    missing = pa.array(deleted)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * rows, pa.string()),
            pa.array([schema_id] * rows, pa.int64()),
            pa.array([key] * rows, pa.string()),
            pa.array(range(before + 1, before + rows + 1), pa.int64()),
            pa.array(keys, pa.string()),
            pa.array(updated, pa.string()),
            pa.array(walls, pa.int64()),
            pa.array(logicals, pa.int64()),
            missing,
            _string_map(offsets, names, texts, missing),
            _string_map(kind_offsets, kind_names, kinds, missing),
        ],
        schema=MESSAGE_SCHEMA,
    )


def _string_map(offsets: list[int], keys: list[str], items: Sequence[str | None], missing: pa.Array) -> pa.Array:
    """A map<string, string> column from flat entries: row i holds entries offsets[i]..offsets[i+1]."""
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()),
        pa.array(keys, pa.string()),
        pa.array(items, pa.string()),
        type=_STRING_MAP,
        mask=missing,
    )


def _row(message: dict[str, Any], topic: str, schema_id: int, key: str, line: int) -> dict[str, Any]:
    after = message.pop("after")
    values: dict[str, str | None] | None = None
    kinds: dict[str, str] | None = None
    if after is not None:
        values, kinds = {}, {}
        for column, value in after.items():
            if value is None:
                values[column] = None
            else:
                values[column], kinds[column] = _literal(value)
    return {
        "topic": topic,
        "schemaId": schema_id,
        "file": key,
        "line": line,
        "deleted": after is None,
        "values": values,
        "kinds": kinds,
        **message,
    }


def parquet_messages(
    store: Store,
    key: str,
    topic: str,
    schema_id: int,
    key_columns: list[str],
    quarantine: Quarantined | None = None,
) -> Iterator[pa.RecordBatch]:
    """The messages of one parquet file (read natively by pyarrow): its table columns, then
    ``__crdb__event_type`` (c, u or d) and ``__crdb__updated``. Parquet rows carry no key array, so the
    topic's primary key columns come from the job's ``--parquet-keys``."""
    import pyarrow.parquet as pq

    url = store.url(key)
    if not key_columns:
        raise FeedCorruptError(
            f"{url}: a parquet file does not say which columns form the primary key; give "
            f"them with --parquet-keys {topic}=COL[,COL]"
        )
    with store.open(key) as handle:
        try:
            parquet = pq.ParquetFile(handle)
        except Exception as exc:
            raise FeedCorruptError(f"{url}: not a valid parquet file ({type(exc).__name__}: {exc})") from None
        names = parquet.schema_arrow.names
        if "__crdb__updated" not in names:
            raise FeedCorruptError(
                f"{url}: no __crdb__updated column: the changefeed was created without the updated option; {RECREATE}"
            )
        missing = [c for c in key_columns + ["__crdb__event_type"] if c not in names]
        if missing:
            raise FeedCorruptError(f"{url}: no column(s) {', '.join(missing)}")
        columns = [n for n in names if not n.startswith("__crdb__")]
        line = 0
        rows: list[dict[str, Any]] = []
        try:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                for record in batch.to_pylist():
                    line += 1
                    where = f"{url}: row {line}"
                    try:
                        stamp = Hlc.parse(str(record["__crdb__updated"]))
                    except ValueError as exc:
                        unreadable = UnreadableLine(f"{where}: {exc}")
                        if quarantine is None:
                            raise unreadable from None
                        raw = _json(record).encode()
                        quarantine[(url, line)] = quarantined_line(topic, raw, where, unreadable)
                        continue
                    message = {
                        "key": _json([record[c] for c in key_columns]),
                        "updated": str(stamp),
                        "wall": stamp.wall,
                        "logical": stamp.logical,
                        "after": None if record["__crdb__event_type"] == "d" else {c: record[c] for c in columns},
                    }
                    rows.append(_row(message, topic, schema_id, key, line))
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=MESSAGE_SCHEMA)
                    rows = []
        except FeedCorruptError:
            raise
        except (OSError, ValueError) as exc:
            raise FeedCorruptError(f"{url}: corrupt parquet after row {line} ({type(exc).__name__}: {exc})") from None


def decode_files(rows: Iterable[dict[str, Any]], quarantine: Quarantined | None = None) -> Iterator[pa.RecordBatch]:
    stores: dict[str, Store] = {}
    for row in rows:
        store = stores.setdefault(row["root"], Store(row["root"]))
        if row["format"] == "parquet":
            key_columns = [c for c in (row["keyColumns"] or "").split(",") if c]
            yield from parquet_messages(store, row["key"], row["topic"], row["schemaId"], key_columns, quarantine)
        else:
            yield from ndjson_messages(store, row["key"], row["topic"], row["schemaId"], row["compression"], quarantine)


# A row's shape: its topic, the names of its columns, and the kind of each non-null value, in order.
Shape = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]
_SEPARATOR = "\x1f"


def row_shapes(batch: pa.RecordBatch) -> set[Shape]:
    """The distinct shapes of a batch of messages (deletes have none): a few per batch, found by Arrow
    without a Python step per row, then read exactly for one row of each.

    >>> batch = pa.RecordBatch.from_pylist([
    ...     {"topic": "t", "deleted": False, "values": {"a": "1", "b": None}, "kinds": {"a": "i"}},
    ...     {"topic": "t", "deleted": False, "values": {"a": "2", "b": None}, "kinds": {"a": "i"}},
    ...     {"topic": "t", "deleted": True, "values": None, "kinds": None}], schema=MESSAGE_SCHEMA)
    >>> row_shapes(batch)
    {('t', ('a', 'b'), (('a', 'i'),))}
    """
    import pyarrow.compute as pc

    live = batch.filter(pc.invert(batch.column("deleted")))
    if live.num_rows == 0:
        return set()
    values, kinds = live.column("values"), live.column("kinds")
    names = pa.ListArray.from_arrays(values.offsets, values.keys)
    if pc.any(pc.match_substring_regex(values.keys, "[\x1e\x1f]")).as_py():  # a name that would blur the text
        firsts = list(range(live.num_rows))
    else:
        text = pc.binary_join_element_wise(
            pc.binary_join(names, _SEPARATOR),
            pc.binary_join(pa.ListArray.from_arrays(kinds.offsets, kinds.keys), _SEPARATOR),
            pc.binary_join(pa.ListArray.from_arrays(kinds.offsets, kinds.items), _SEPARATOR),
            live.column("topic"),
            "\x1e",
        )
        unique = pc.unique(text)
        firsts = pc.index_in(unique, text).to_pylist()
    shapes: set[Shape] = set()
    for row in live.take(pa.array(firsts, pa.int64())).select(["topic", "values", "kinds"]).to_pylist():
        shapes.add((row["topic"], tuple(name for name, _ in row["values"]), tuple(row["kinds"] or ())))
    return shapes


class ShapesSeen(AccumulatorParam[set[Shape]]):
    """The shapes a job's decode tasks saw, gathered on the driver (a set union: a task run twice adds
    nothing more)."""

    def zero(self, value: set[Shape]) -> set[Shape]:
        return set()

    def addInPlace(self, value1: set[Shape], value2: set[Shape]) -> set[Shape]:
        value1 |= value2
        return value1


def decode_arrow_partition(
    batches: Iterable[pa.RecordBatch],
    shapes: Accumulator[set[Shape]] | None = None,
    quarantine: Accumulator[Quarantined] | None = None,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows of :data:`FILE_INPUT_SCHEMA` in, messages out; the shapes of the
    messages are added to ``shapes`` when given, and unreadable lines to ``quarantine`` (when given; else
    they are refused)."""
    seen: set[Shape] = set()
    set_aside: Quarantined | None = {} if quarantine is not None else None
    for messages in decode_files((row for batch in batches for row in batch.to_pylist()), set_aside):
        if shapes is not None:
            seen |= row_shapes(messages)
        yield messages
    if shapes is not None:
        shapes.add(seen)
    if quarantine is not None and set_aside:
        quarantine.add(set_aside)
