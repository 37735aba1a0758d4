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
from itertools import accumulate, chain
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple, Self, cast

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
# A message as the file readers give it, before its columns are read: its key array as JSON text (as
# written), the pair (wall, logical) of its updated, its 1-based line (or parquet row), and its after as the
# JSON text of an object (None: a delete).
RawMessage = tuple[bytes, int, int, int, bytes | None]


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
    """The messages of one ndjson (optionally gzip or zstd) file, in batches of :data:`MESSAGE_SCHEMA`
    (:func:`ndjson_raw_messages`, each message's columns read by :func:`message_batch`)."""
    url = store.url(key)
    for block in ndjson_raw_messages(store, key, compression, quarantine, topic):
        yield message_batch(block, topic, schema_id, key, url)


def ndjson_raw_messages(
    store: Store,
    key: str,
    compression: str | None,
    quarantine: Quarantined | None = None,
    topic: str | None = None,
) -> Iterator[list[RawMessage]]:
    """The messages of one ndjson (optionally gzip or zstd) file as :data:`RawMessage`, a block at a time.

    The file is read in blocks of whole lines; each block is decoded at once by msgspec's C decoder
    (:func:`_fast_messages`), ``key`` and ``after`` kept as their JSON text. A block holding any line that
    decoder does not take exactly as :func:`parse_line` would (a malformed or unusual line, a blank one) is
    parsed line by line instead, which names the line at fault: the messages are the same either way.
    Unreadable lines go to ``quarantine`` (under ``topic``) when it is given, else they are refused."""
    url = store.url(key)
    number = 0  # lines before the current block
    try:
        with _open_text(store, key, compression) as handle:
            for block in _line_blocks(handle):
                messages = _fast_messages(block, number)
                if messages is None:
                    messages = _exact_messages(block, number, url, topic, quarantine)
                if messages:
                    yield messages
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


def _exact_messages(
    block: bytes,
    before: int,
    url: str,
    topic: str | None = None,
    quarantine: Quarantined | None = None,
) -> list[RawMessage]:
    """The block's messages parsed line by line by :func:`parse_line` (errors name the line); unreadable
    lines go to ``quarantine`` when given."""
    messages: list[RawMessage] = []
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
        after = message["after"]
        messages.append(
            (
                message["key"].encode(),
                message["wall"],
                message["logical"],
                number,
                None if after is None else _json(after).encode(),
            )
        )
    return messages


def _exact_batches(
    block: bytes,
    before: int,
    url: str,
    topic: str,
    schema_id: int,
    key: str,
    quarantine: Quarantined | None = None,
) -> Iterator[pa.RecordBatch]:
    """The block's messages parsed line by line, as :data:`MESSAGE_SCHEMA` rows."""
    messages = _exact_messages(block, before, url, topic, quarantine)
    if messages:
        yield message_batch(messages, topic, schema_id, key, url)


class _Envelope(msgspec.Struct):
    """The fields :func:`parse_line` looks at, each value kept as its JSON text."""

    after: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    key: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    updated: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    crdb: msgspec.Raw | msgspec.UnsetType = msgspec.field(default=msgspec.UNSET, name="__crdb__")
    op: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    ts_ns: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_ENVELOPES = msgspec.json.Decoder(_Envelope)
_AFTER = msgspec.json.Decoder(dict[str, msgspec.Raw])
# A JSON value re-written compact, numbers as written (floats through the hook; integers exact), strings
# escaped as json.dumps(ensure_ascii=False) does: what _json gives for the same value.
_VALUES = msgspec.json.Decoder(float_hook=msgspec.Raw)
_COMPACT = msgspec.json.Encoder()
_QUOTE, _BACKSLASH, _OPEN_OBJECT, _OPEN_ARRAY, _TRUE, _FALSE, _NULL = 34, 92, 123, 91, 116, 102, 110
_MINUS_ZERO = re.compile(rb"-0(?![0-9.eE])")
_STAMP = re.compile(rb'"(\d{1,20})\.(\d{10})\??"')  # Hlc.parse's form, quoted, without surrounding blanks


def _compact(raw: bytes) -> str | None:
    """``_json`` of the value ``raw`` holds, or None where msgspec could write it differently (the integer
    ``-0``, which it writes ``0``; dates such as ``"2024-01-05"`` are not mistaken for it)."""
    if _MINUS_ZERO.search(raw):
        return None
    try:
        return _COMPACT.encode(_VALUES.decode(raw)).decode()
    except (ValueError, RecursionError):  # msgspec's DecodeError, or bytes that are not UTF-8
        return None


def _fast_messages(block: bytes, before: int) -> list[RawMessage] | None:
    """The block's messages decoded at once, or None when a line must go through :func:`parse_line`. Only the
    envelope is read here: ``after``'s columns are read by :func:`message_batch`, for the messages kept."""
    try:
        envelopes = _ENVELOPES.decode_lines(block)
        block.decode()  # msgspec.Raw leaves key and after unchecked: bytes that are not UTF-8 go line by line
    except (ValueError, RecursionError):  # msgspec's DecodeError, bytes that are not UTF-8, deep nesting
        return None
    if len(envelopes) != block.count(b"\n") + (0 if block.endswith(b"\n") else 1):
        return None  # blank lines (skipped by the decoder): line numbers need the exact path
    unset, stamp_form, limit = msgspec.UNSET, _STAMP.fullmatch, _INT64_MAX
    messages: list[RawMessage] = []
    append = messages.append
    line = before
    for envelope in envelopes:
        line += 1
        after, message_key, stamp_raw = envelope.after, envelope.key, envelope.updated
        if (
            after is unset
            or message_key is unset
            or stamp_raw is unset
            or envelope.crdb is not unset
            or (envelope.op is not unset and envelope.ts_ns is not unset)
        ):
            return None
        key_raw = bytes(message_key)
        stamp = stamp_form(bytes(stamp_raw))
        if stamp is None or key_raw[0] != _OPEN_ARRAY:
            return None
        wall = int(stamp[1])
        if wall > limit:
            return None
        after_raw = bytes(after)
        first = after_raw[0]
        if first == _NULL:
            append((key_raw, wall, int(stamp[2]), line, None))
        elif first == _OPEN_OBJECT:
            append((key_raw, wall, int(stamp[2]), line, after_raw))
        else:
            return None
    return messages


def _fast_batch(block: bytes, before: int, topic: str, schema_id: int, key: str) -> pa.RecordBatch | None:
    """The block's messages decoded at once as :data:`MESSAGE_SCHEMA` rows, or None when a line must go
    through :func:`parse_line`."""
    messages = _fast_messages(block, before)
    return None if messages is None else message_batch(messages, topic, schema_id, key, key)


class _Columns:
    """The flat entries of a batch's ``values`` and ``kinds`` maps, filled a message at a time."""

    def __init__(self) -> None:
        self.offsets: list[int] = [0]
        self.names: list[str] = []
        self.texts: list[str | None] = []
        self.kind_offsets: list[int] = [0]
        self.kind_names: list[str] = []
        self.kinds: list[str] = []

    def add(self, after: bytes | None, where: str) -> None:
        """The columns of one message's ``after`` (JSON text; None: a delete, no entries)."""
        if after is not None:
            try:
                read = self._fast(after)
            except ValueError:  # bytes that are not UTF-8 in a name or a string (msgspec.Raw does not check)
                read = False
            if not read:
                self._exact(after, where)
        self.offsets.append(len(self.names))
        self.kind_offsets.append(len(self.kind_names))

    def _fast(self, after: bytes) -> bool:
        """Read by msgspec; False (nothing added) where a value may not come out exactly as _literal gives it."""
        try:
            columns = _AFTER.decode(after)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return False
        names: list[str] = []
        texts: list[str | None] = []
        kind_names: list[str] = []
        kinds: list[str] = []
        for column, value in columns.items():
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
                    return False
                text, kind = compact, "j"
            else:
                text = raw.decode()
                kind = _number_kind(text)
            texts.append(text)
            kind_names.append(column)
            kinds.append(kind)
        self.names += names
        self.texts += texts
        self.kind_names += kind_names
        self.kinds += kinds
        return True

    def _exact(self, after: bytes, where: str) -> None:
        columns = parse_json(after, where, UnreadableLine, parse_float=_number, parse_int=_number)
        if not isinstance(columns, dict):
            raise UnreadableLine(f"{where}: after must be an object or null")
        for column, value in columns.items():
            self.names.append(column)
            if value is None:
                self.texts.append(None)
                continue
            text, kind = _literal(value)
            self.texts.append(text)
            self.kind_names.append(column)
            self.kinds.append(kind)

    def maps(self, missing: pa.Array) -> tuple[pa.Array, pa.Array]:
        """The ``values`` and ``kinds`` columns (null where ``missing``: the deletes)."""
        return (
            _string_map(self.offsets, self.names, self.texts, missing),
            _string_map(self.kind_offsets, self.kind_names, self.kinds, missing),
        )


_LOOSE = re.compile(rb"[\s\\]|-0(?![0-9.eE])")  # what compacting could change: blanks, escapes, an integer -0


def compact_key(raw: bytes, where: str) -> str:
    """A key array's text as the merge key: compact JSON, numbers as written (most keys already are)."""
    quick = _quick_key(raw)
    if quick is not None:
        return quick
    return _json(parse_json(raw, where, UnreadableLine, parse_float=_number, parse_int=_number))


def _quick_key(raw: bytes) -> str | None:
    """:func:`compact_key` of ``raw`` without naming its line: None when it needs the full path (or is not JSON)."""
    if _LOOSE.search(raw) is None:
        try:
            return raw.decode()
        except UnicodeDecodeError:
            return None
    return _compact(raw)


def message_batch(messages: Sequence[RawMessage], topic: str, schema_id: int, key: str, url: str) -> pa.RecordBatch:
    """Messages of one file as :data:`MESSAGE_SCHEMA` rows, each ``after`` read into ``values`` and ``kinds``
    (``url`` names the file in errors)."""
    columns = _Columns()
    keys: list[str] = []
    for message_key, _, _, line, after in messages:
        where = f"{url}: line {line}"
        keys.append(compact_key(message_key, where))
        columns.add(after, where)
    walls = [m[1] for m in messages]
    logicals = [m[2] for m in messages]
    rows = len(messages)
    missing = pa.array([m[4] is None for m in messages], pa.bool_())
    values, kinds = columns.maps(missing)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * rows, pa.string()),
            pa.array([schema_id] * rows, pa.int64()),
            pa.array([key] * rows, pa.string()),
            pa.array([m[3] for m in messages], pa.int64()),
            pa.array(keys, pa.string()),
            pa.array([f"{wall}.{logical:010d}" for wall, logical in zip(walls, logicals, strict=True)], pa.string()),
            pa.array(walls, pa.int64()),
            pa.array(logicals, pa.int64()),
            missing,
            values,
            kinds,
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


def parquet_messages(
    store: Store,
    key: str,
    topic: str,
    schema_id: int,
    key_columns: list[str],
    quarantine: Quarantined | None = None,
) -> Iterator[pa.RecordBatch]:
    """The messages of one parquet file in batches of :data:`MESSAGE_SCHEMA` (:func:`parquet_raw_messages`)."""
    url = store.url(key)
    for rows in parquet_raw_messages(store, key, topic, key_columns, quarantine):
        yield message_batch(rows, topic, schema_id, key, url)


def parquet_raw_messages(
    store: Store,
    key: str,
    topic: str,
    key_columns: list[str],
    quarantine: Quarantined | None = None,
) -> Iterator[list[RawMessage]]:
    """The messages of one parquet file (read natively by pyarrow): its table columns, then
    ``__crdb__event_type`` (c, u or d) and ``__crdb__updated``. Parquet rows carry no key array, so the
    topic's primary key columns come from the job's ``--parquet-keys``. Each row's columns become the JSON
    text of ``after`` as :func:`_json` writes them (numbers as pyarrow read them)."""
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
        try:
            for batch in parquet.iter_batches(batch_size=BATCH_ROWS):
                rows: list[RawMessage] = []
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
                    after = None if record["__crdb__event_type"] == "d" else {c: record[c] for c in columns}
                    rows.append(
                        (
                            _json([record[c] for c in key_columns]).encode(),
                            stamp.wall,
                            stamp.logical,
                            line,
                            None if after is None else _json(after).encode(),
                        )
                    )
                if rows:
                    yield rows
        except FeedCorruptError:
            raise
        except (OSError, ValueError) as exc:
            raise FeedCorruptError(f"{url}: corrupt parquet after row {line} ({type(exc).__name__}: {exc})") from None


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


# -- the job's two decode steps -----------------------------------------------------------------------------
# On each latest row: how many messages of its key the batch held, and how many distinct changes (updated).
MESSAGES_OF_KEY, CHANGES_OF_KEY = "_messages_of_key", "_changes_of_key"
# What a read task gives for each (topic, key) of its files: the message with the greatest order (updated,
# then schema id, file and line), its after as JSON text, and the key's messages and distinct updated there.
_STAMP_PAIR = pa.struct([("wall", pa.int64()), ("logical", pa.int64())])
CHANGE_SCHEMA = pa.schema(
    [
        *(
            MESSAGE_SCHEMA.field(name)
            for name in MESSAGE_SCHEMA.names
            if name not in ("updated", "values", "kinds")  # updated: written for the kept rows only
        ),
        ("after", pa.binary()),  # the JSON object as written; null for a delete
        ("messages", pa.int64()),
        ("stamps", pa.list_(_STAMP_PAIR)),  # the key's distinct updated in the task as (wall, logical); [] if one
    ]
)
# A latest change per key with its columns read: the message row and the key's counts over the whole batch.
# Without ``kinds``: the final pick gathers the kinds in Python (the shapes accumulator), and each map
# column costs the JVM ~1 us an entry to take in from Arrow and to cache.
LATEST_SCHEMA = pa.schema(
    [
        *(field for field in MESSAGE_SCHEMA if field.name != "kinds"),
        (MESSAGES_OF_KEY, pa.int64()),
        (CHANGES_OF_KEY, pa.int64()),
    ]
)
# Input bytes a read task takes at most: its greatest-per-key table grows with the distinct keys it sees.
TASK_BYTES = 256 << 20


class LatestPerKey:
    """The greatest message per (topic, key) of the files a task reads (a partial aggregation: only these
    rows cross the shuffle), the key's messages counted and its distinct ``updated`` kept. Messages are
    ordered by ``(wall, logical, schema id, file, line)``, the order the job's final pick uses, so picking
    per task first and then among the tasks' picks gives the same row."""

    def __init__(self) -> None:
        # topic -> key as written -> [order, after, messages, its distinct stamps (None: only the order's)]
        self._topics: dict[str, dict[bytes, list[Any]]] = {}

    def add(self, messages: Iterable[RawMessage], topic: str, schema_id: int, file: str) -> None:
        per_key = self._topics.setdefault(topic, {})
        get = per_key.get
        for key, wall, logical, line, after in messages:
            order = (wall, logical, schema_id, file, line)
            held = get(key)
            if held is None:
                per_key[key] = [order, after, 1, None]
                continue
            held[2] += 1
            kept = held[0]
            if held[3] is not None:
                held[3].add((wall, logical))
            elif wall != kept[0] or logical != kept[1]:
                held[3] = {(kept[0], kept[1]), (wall, logical)}
            if order > kept:
                held[0], held[1] = order, after

    def batches(self, url: Callable[[str], str]) -> Iterator[pa.RecordBatch]:
        """The picks as :data:`CHANGE_SCHEMA` rows (``url`` names a file in errors)."""
        for topic, per_key in self._topics.items():
            items = list(per_key.items())
            per_key.clear()
            for start in range(0, len(items), BATCH_ROWS):
                yield _change_batch(topic, items[start : start + BATCH_ROWS], url)
        self._topics.clear()


def _change_batch(topic: str, items: list[tuple[bytes, list[Any]]], url: Callable[[str], str]) -> pa.RecordBatch:
    import pyarrow.compute as pc

    # The line is named (its file's URL built) only for a key that needs the full path.
    keys = [_quick_key(key) or compact_key(key, f"{url(held[0][3])}: line {held[0][4]}") for key, held in items]
    helds = [held for _, held in items]
    walls, logicals, schema_ids, files, lines = zip(*map(itemgetter(0), helds), strict=True)
    # Each key's distinct stamps, its pick's own among them (the final pick counts them distinct), in C loops.
    stamp_sets = [held[3] or () for held in helds]
    stamp_offsets = [0, *accumulate(map(len, stamp_sets))]
    other_walls, other_logicals = zip(*chain.from_iterable(stamp_sets), strict=True) if stamp_offsets[-1] else ((), ())
    afters = pa.array(list(map(itemgetter(1), helds)), pa.binary())
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * len(items), pa.string()),
            pa.array(schema_ids, pa.int64()),
            pa.array(files, pa.string()),
            pa.array(lines, pa.int64()),
            pa.array(keys, pa.string()),
            pa.array(walls, pa.int64()),
            pa.array(logicals, pa.int64()),
            pc.is_null(afters),
            afters,
            pa.array(list(map(itemgetter(2), helds)), pa.int64()),
            pa.ListArray.from_arrays(
                pa.array(stamp_offsets, pa.int32()),
                pa.StructArray.from_arrays(
                    [pa.array(other_walls, pa.int64()), pa.array(other_logicals, pa.int64())], fields=list(_STAMP_PAIR)
                ),
            ),
        ],
        schema=CHANGE_SCHEMA,
    )


def raw_messages_of(store: Store, row: dict[str, Any], quarantine: Quarantined | None) -> Iterator[list[RawMessage]]:
    """The messages of the data file a row of :data:`FILE_INPUT_SCHEMA` names, a block at a time."""
    if row["format"] == "parquet":
        key_columns = [c for c in (row["keyColumns"] or "").split(",") if c]
        return parquet_raw_messages(store, row["key"], row["topic"], key_columns, quarantine)
    return ndjson_raw_messages(store, row["key"], row["compression"], quarantine, row["topic"])


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off inside (and back as it was after): a task's table of picks makes millions of
    tuples and lists, and each collection would walk them all again."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def latest_in_task(
    batches: Iterable[pa.RecordBatch], quarantine: Accumulator[Quarantined] | None = None
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of the read: rows of :data:`FILE_INPUT_SCHEMA` in (the files of one task), the
    greatest message per key of those files out (:class:`LatestPerKey`, :data:`CHANGE_SCHEMA`). Unreadable
    lines are added to ``quarantine`` when given; else they are refused."""
    set_aside: Quarantined | None = {} if quarantine is not None else None
    stores: dict[str, Store] = {}
    latest = LatestPerKey()
    with _no_cycle_collection():  # millions of small containers, none in a cycle: collecting costs ~40 %
        for row in (row for batch in batches for row in batch.to_pylist()):
            store = stores.setdefault(row["root"], Store(row["root"]))
            for messages in raw_messages_of(store, row, set_aside):
                latest.add(messages, row["topic"], row["schemaId"], row["key"])
        root = next(iter(stores.values()), None)
        picks = list(latest.batches(lambda file: root.url(file) if root is not None else file))
    yield from picks
    if quarantine is not None and set_aside:
        quarantine.add(set_aside)


_NEWEST_FIRST = [
    ("topic", "ascending"),
    ("key", "ascending"),
    ("wall", "descending"),
    ("logical", "descending"),
    ("schemaId", "descending"),
    ("file", "descending"),
    ("line", "descending"),
]


def final_picks(picks: pa.Table) -> pa.Table:
    """Per (topic, key) the greatest of the read tasks' picks (:data:`CHANGE_SCHEMA`, every pick of each key
    here), with ``MESSAGES_OF_KEY`` (the key's messages) and ``CHANGES_OF_KEY`` (its distinct ``updated``
    over all the tasks: a change repeated in two tasks counts once), all in Arrow's C++ kernels.

    >>> pair = lambda w: {"wall": w, "logical": 0}
    >>> picks = pa.Table.from_pylist([
    ...     {"topic": "t", "key": "[1]", "wall": 5, "logical": 0, "schemaId": 1, "file": "a", "line": 1,
    ...      "deleted": True, "messages": 2, "stamps": [pair(4)]},
    ...     {"topic": "t", "key": "[1]", "wall": 4, "logical": 0, "schemaId": 1, "file": "b", "line": 9,
    ...      "deleted": False, "after": b"{}", "messages": 1, "stamps": []}], schema=CHANGE_SCHEMA)
    >>> [(r["wall"], r["file"], r[MESSAGES_OF_KEY], r[CHANGES_OF_KEY]) for r in final_picks(picks).to_pylist()]
    [(5, 'a', 3, 2)]
    """
    import pyarrow.compute as pc

    rows = picks.num_rows
    if rows == 0:
        return (
            picks.drop_columns(["messages", "stamps"])
            .append_column(MESSAGES_OF_KEY, pa.array([], pa.int64()))
            .append_column(CHANGES_OF_KEY, pa.array([], pa.int64()))
        )
    ordered = picks.sort_by(_NEWEST_FIRST)
    topic, key = ordered.column("topic"), ordered.column("key")
    starts = pc.or_(
        pc.not_equal(topic.slice(1), topic.slice(0, rows - 1)), pc.not_equal(key.slice(1), key.slice(0, rows - 1))
    )
    firsts = pa.concat_arrays([pa.array([0], pa.int64()), pc.add(pc.indices_nonzero(starts), 1).cast(pa.int64())])
    greatest = ordered.take(firsts).drop_columns(["messages", "stamps"])
    messages = picks.group_by(["topic", "key"]).aggregate([("messages", "sum")])
    others = picks.column("stamps").combine_chunks()
    parents, flat = pc.list_parent_indices(others), pc.list_flatten(others)
    stamps = pa.concat_tables(
        [
            picks.select(["topic", "key", "wall", "logical"]),
            pa.table(
                {
                    "topic": picks.column("topic").take(parents),
                    "key": picks.column("key").take(parents),
                    "wall": flat.field("wall"),
                    "logical": flat.field("logical"),
                }
            ),
        ]
    )
    changes = (stamps.group_by(["topic", "key", "wall", "logical"]).aggregate([]).group_by(["topic", "key"])).aggregate(
        [([], "count_all")]
    )
    counts = messages.join(changes, ["topic", "key"])
    named = {"messages_sum": MESSAGES_OF_KEY, "count_all": CHANGES_OF_KEY}
    counts = counts.rename_columns([named.get(name, name) for name in counts.column_names])
    return greatest.join(counts, ["topic", "key"])


class TopicCounts(NamedTuple):
    """A topic's figures among the latest rows: its messages, their distinct changes, its keys, the keys not
    deleted, and its newest ``updated``."""

    messages: int
    changes: int
    keys: int
    live: int
    newest: Hlc | None

    def __add__(self, other: object) -> TopicCounts:  # the figures of two partitions together
        assert isinstance(other, TopicCounts)
        newest = max((h for h in (self.newest, other.newest) if h is not None), default=None)
        return TopicCounts(
            self.messages + other.messages,
            self.changes + other.changes,
            self.keys + other.keys,
            self.live + other.live,
            newest,
        )


def topic_counts(latest: pa.Table) -> dict[str, TopicCounts]:
    """Per topic, the figures of latest rows (``topic``, ``wall``, ``logical``, ``deleted``,
    ``MESSAGES_OF_KEY``, ``CHANGES_OF_KEY``).

    >>> rows = pa.Table.from_pylist([
    ...     {"topic": "t", "wall": 5, "logical": 1, "deleted": False, MESSAGES_OF_KEY: 3, CHANGES_OF_KEY: 2},
    ...     {"topic": "t", "wall": 5, "logical": 2, "deleted": True, MESSAGES_OF_KEY: 1, CHANGES_OF_KEY: 1}])
    >>> topic_counts(rows)["t"]
    TopicCounts(messages=4, changes=3, keys=2, live=1, newest=Hlc(wall=5, logical=2))
    """
    import pyarrow.compute as pc

    counts = {}
    for topic in pc.unique(latest.column("topic")).to_pylist():
        rows = latest.filter(pc.equal(latest.column("topic"), topic))
        wall = pc.max(rows.column("wall")).as_py()
        logical = pc.max(rows.filter(pc.equal(rows.column("wall"), wall)).column("logical")).as_py()
        counts[topic] = TopicCounts(
            pc.sum(rows.column(MESSAGES_OF_KEY)).as_py() or 0,
            pc.sum(rows.column(CHANGES_OF_KEY)).as_py() or 0,
            rows.num_rows,
            rows.num_rows - (pc.sum(rows.column("deleted").cast(pa.int64())).as_py() or 0),
            Hlc(wall, logical),
        )
    return counts


class CountsByPartition(AccumulatorParam[dict[int, dict[str, TopicCounts]]]):
    """Each final-pick partition's :func:`topic_counts`, by partition: a partition computed again (a retried
    task, a cache block recomputed) gives the same figures under the same number, so nothing counts twice."""

    def zero(self, value: dict[int, dict[str, TopicCounts]]) -> dict[int, dict[str, TopicCounts]]:
        return {}

    def addInPlace(
        self, value1: dict[int, dict[str, TopicCounts]], value2: dict[int, dict[str, TopicCounts]]
    ) -> dict[int, dict[str, TopicCounts]]:
        value1.update(value2)
        return value1


def counts_by_topic(partitions: dict[int, dict[str, TopicCounts]]) -> dict[str, TopicCounts]:
    """The partitions' figures summed per topic."""
    total: dict[str, TopicCounts] = {}
    for counts in partitions.values():
        for topic, figures in counts.items():
            total[topic] = total[topic] + figures if topic in total else figures
    return total


def latest_rows(
    batches: Iterable[pa.RecordBatch],
    root: str,
    shapes: Accumulator[set[Shape]] | None = None,
    counts: Accumulator[dict[int, dict[str, TopicCounts]]] | None = None,
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body of the final pick: the read tasks' picks in (:data:`CHANGE_SCHEMA`, every pick of
    a key in one partition), the greatest per key (:func:`final_picks`) out, its ``after`` read into its
    columns (:data:`LATEST_SCHEMA`); the shapes of the rows are added to ``shapes`` when given, the
    partition's :func:`topic_counts` to ``counts``. Only the
    changes kept are read so: a superseded message's columns are never looked at."""
    store = Store(root)
    seen: set[Shape] = set()
    kept = [name for name in LATEST_SCHEMA.names if name not in ("values", "updated")]
    picked = final_picks(pa.Table.from_batches(list(batches), schema=CHANGE_SCHEMA))
    if counts is not None:
        from pyspark import TaskContext

        context = TaskContext.get()
        counts.add({context.partitionId() if context is not None else 0: topic_counts(picked)})
    for batch in picked.to_batches(BATCH_ROWS):
        columns = _Columns()
        files, lines = batch.column("file").to_pylist(), batch.column("line").to_pylist()
        walls, logicals = batch.column("wall").to_pylist(), batch.column("logical").to_pylist()
        for after, file, line in zip(batch.column("after").to_pylist(), files, lines, strict=True):
            columns.add(after, f"{store.url(file)}: line {line}")
        values, kinds = columns.maps(batch.column("deleted"))
        arrays = {name: batch.column(name) for name in kept}
        arrays["updated"] = pa.array([f"{w}.{lg:010d}" for w, lg in zip(walls, logicals, strict=True)], pa.string())
        arrays["values"] = values
        out = pa.RecordBatch.from_arrays([arrays[n] for n in LATEST_SCHEMA.names], schema=LATEST_SCHEMA)
        if shapes is not None:
            seen |= row_shapes(out.append_column("kinds", kinds))
        yield out
    if shapes is not None:
        shapes.add(seen)
