"""The files a CockroachDB changefeed's cloud storage sink writes: names, RESOLVED files, listing.

Layout (``partition_format`` ``daily`` by default, ``hourly`` or ``flat``)::

    2025-03-14/202503140959581234567890000000000-3f2a9c0d8e7b6a51-1-3-00000000-orders-1.ndjson
    2025-03-14/202503141000285000000000000000000.RESOLVED
    2025-03-14/10/…  (hourly)        …  (flat: files directly under the sink root)

A data file's name is ``<33-digit timestamp>-<uniquer>-<topic>-<hex schema id>.<ndjson|parquet>``,
optionally ``.gz``/``.zst``; the uniquer (session, node, sink, file id) may change shape between
versions and is only used as part of the key. Keys sort in byte order, and a RESOLVED file promises
that every change up to its timestamp is in a file that sorts before it.

Everything here is driver-side and cheap: folder listings and tiny RESOLVED files.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Set
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lakefeed.crdb.hlc import Hlc
from lakefeed.errors import FeedConfigError, FeedCorruptError, FeedError, WindowNotReadyError
from lakefeed.storage import StoreBase

_DATA = re.compile(
    r"^(?P<ts>\d{33})-(?:\$[0-9A-Za-z]+-)?(?P<session>[0-9A-Za-z]+)-(?P<node>\d+)-(?P<sink>\d+)-(?P<file>[0-9a-f]{8,})"
    r"-(?P<topic>.+)-(?P<schema>[0-9a-f]+)\.(?P<format>ndjson|parquet|csv)(?P<compression>\.gz|\.zst)?$"
)
_RESOLVED = re.compile(r"^(?P<ts>\d{33})\.RESOLVED$")
_CHANGEFEED_FILE = re.compile(r"\.(ndjson|parquet|csv|RESOLVED)(\.gz|\.zst)?$")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")
_HOUR = re.compile(r"^\d{2}$")
DATA, RESOLVED = "data", "resolved"
SUPPORTED_FORMATS = ("ndjson", "parquet")


@dataclass(frozen=True)
class SinkFile:
    """One file of the sink: a data file of one topic and schema version, or a RESOLVED file."""

    key: str  # relative to the sink root, partition folders included
    kind: str  # DATA or RESOLVED
    timestamp: Hlc  # from the name: a lower bound of its rows' updated (data), or the resolved ts
    size: int
    topic: str | None = None
    schema_id: int | None = None
    format: str | None = None  # ndjson | parquet
    compression: str | None = None  # gzip | zstd | None

    @property
    def order(self) -> bytes:
        """Byte order of full keys: the sink's own order (``-`` sorts before ``.``)."""
        return self.key.encode()


def parse_file(key: str, size: int, where: str) -> SinkFile | None:
    """The sink file at ``key``, or None for a file that is not a changefeed's (ignored). A name that looks
    like a changefeed file but does not parse is refused, naming it."""
    name = key.rsplit("/", 1)[-1]
    resolved = _RESOLVED.match(name)
    if resolved:
        return SinkFile(key, RESOLVED, Hlc.from_file_timestamp(resolved["ts"]), size)
    data = _DATA.match(name)
    if data:
        if data["format"] == "csv":
            raise FeedConfigError(
                f"{where}: a CSV changefeed file; CSV feeds carry no key, updated or RESOLVED "
                f"files. Create the changefeed with format=json (the default) or parquet"
            )
        compression = {".gz": "gzip", ".zst": "zstd", None: None}[data["compression"]]
        if data["format"] == "parquet" and compression:
            raise FeedCorruptError(f"{where}: a parquet changefeed file compresses its pages, not the file")
        return SinkFile(
            key,
            DATA,
            Hlc.from_file_timestamp(data["ts"]),
            size,
            topic=data["topic"],
            schema_id=int(data["schema"], 16),
            format=data["format"],
            compression=compression,
        )
    if _CHANGEFEED_FILE.search(name):
        raise FeedCorruptError(
            f"{where}: not a changefeed file name this reader knows "
            f"(<33-digit timestamp>-<uniquer>-<topic>-<hex schema id>.<format>, or "
            f"<33-digit timestamp>.RESOLVED)"
        )
    return None


def require_sink(store: StoreBase) -> None:
    """Refuse a sink root with nothing at all under it (a wrong path, container or account, or a changefeed
    that never wrote there): waiting for a RESOLVED file there would only end, green, in an empty run."""
    if not store.list(""):
        raise FeedError(
            f"the changefeed sink {store.url('')} holds nothing at all (no date folder, no file): set "
            f"sink_root to the location the changefeed writes to (CREATE CHANGEFEED … INTO …, with the "
            f"container's root or its path), read through the storage account's connection"
        )


def list_sink(store: StoreBase, since: Hlc | None = None) -> list[SinkFile]:
    """Every changefeed file under the sink root whose name's timestamp is at or after ``since`` (all when
    None), sorted in key order. Partition folders older than ``since`` are not listed."""
    found = [f for f in _walk(store, "", since) if since is None or f.timestamp >= since]
    return sorted(found, key=lambda f: f.order)


def resolved_stamps(store: StoreBase, since: Hlc | None = None, after: Hlc | None = None) -> list[Hlc]:
    """The timestamps of the sink's RESOLVED files, in order: those listed from ``since``'s partition on
    (:func:`list_sink`), strictly after ``after`` when given (the files after a cursor)."""
    return [
        f.timestamp for f in list_sink(store, since) if f.kind == RESOLVED and (after is None or f.timestamp > after)
    ]


def _walk(store: StoreBase, folder: str, since: Hlc | None) -> Iterator[SinkFile]:
    floor = since.datetime() if since is not None else None
    for entry in store.list(folder):
        key = f"{folder}/{entry.name}" if folder else entry.name
        if entry.is_dir:
            day = _DAY.match(entry.name)
            if day and not folder:  # a daily folder (hourly: a day folder of hour folders)
                if floor is not None and entry.name < f"{floor:%Y-%m-%d}":
                    continue
                yield from _walk(store, key, since)
            elif _HOUR.match(entry.name) and _DAY.match(folder):
                if floor is not None and f"{folder}/{entry.name}" < f"{floor:%Y-%m-%d/%H}":
                    continue
                yield from _walk(store, key, since)
            continue
        parsed = parse_file(key, entry.size, store.url(key))
        if parsed is not None:
            yield parsed


def resolved_value(store: StoreBase, file: SinkFile) -> Hlc:
    """The timestamp a RESOLVED file holds, checked against its name; a file that is not one is refused."""
    url = store.url(file.key)
    raw = store.read_bytes(file.key)
    try:
        if raw[:4] == b"PAR1":  # a parquet feed's RESOLVED file: one DECIMAL column __crdb__resolved
            import io

            import pyarrow.parquet as pq

            value = f"{pq.read_table(io.BytesIO(raw)).column('__crdb__resolved')[0].as_py():.10f}"
        else:
            document = json.loads(raw)
            value = document["resolved"] if "resolved" in document else document["__crdb__"]["resolved"]
        stamp = Hlc.parse(value)
    except Exception as exc:  # JSON, parquet and HLC errors alike: the file is not a RESOLVED file
        raise FeedCorruptError(
            f'{url}: not a valid RESOLVED file (expected {{"resolved": "<wall>.<logical>"}}: '
            f"{type(exc).__name__}: {exc})"
        ) from None
    if stamp != file.timestamp:
        raise FeedCorruptError(f"{url}: holds resolved {stamp} but its name says {file.timestamp}")
    return stamp


@dataclass(frozen=True)
class SinkRange:
    """What one run applies: the data files between two RESOLVED files (and late ones found before)."""

    after: SinkFile | None
    through: SinkFile
    files: list[SinkFile]  # in key order
    late: list[SinkFile]  # named before ``after`` but not applied yet (the known naming bugs)

    @property
    def bytes(self) -> int:
        return sum(f.size for f in self.files)

    def describe(self) -> dict[str, Any]:
        return {
            "afterResolved": str(self.after.timestamp) if self.after else None,
            "throughResolved": str(self.through.timestamp),
            "files": len(self.files),
            "lateFiles": [f.key for f in self.late],
            "bytes": self.bytes,
            "topics": sorted({f.topic for f in self.files}),
        }


def _resolved_at(files: list[SinkFile], stamp: Hlc, what: str, root: str) -> SinkFile:
    for file in files:
        if file.kind == RESOLVED and file.timestamp == stamp:
            return file
    newest = max((f.timestamp for f in files if f.kind == RESOLVED), default=None)
    raise WindowNotReadyError(
        f"{root} has no RESOLVED file at {what} {stamp} (newest resolved: {newest}); the "
        f"changefeed has not resolved it, or it is not this changefeed's"
    )


def plan_range(
    files: list[SinkFile], after: Hlc | None, through: Hlc, root: str, applied: Set[str] = frozenset()
) -> SinkRange:
    """The data files after the RESOLVED file at ``after`` (from the first file when None) and before the
    one at ``through``; plus files named before ``after`` that ``applied`` does not hold (late files)."""
    if after is not None and after >= through:
        raise FeedConfigError(f"--after-resolved {after} must be before --through-resolved {through}")
    end = _resolved_at(files, through, "--through-resolved", root)
    start = _resolved_at(files, after, "--after-resolved", root) if after is not None else None
    data = [f for f in files if f.kind == DATA and f.order < end.order]
    late = [f for f in data if start is not None and f.order < start.order and f.key not in applied]
    in_range = [f for f in data if start is None or f.order > start.order]
    unsupported = sorted({f.format for f in in_range + late if f.format is not None} - set(SUPPORTED_FORMATS))
    if unsupported:
        raise FeedConfigError(f"{root}: {', '.join(unsupported)} files are not supported")
    return SinkRange(after=start, through=end, files=sorted(in_range + late, key=lambda f: f.order), late=late)


def listing_floor(after: Hlc | None, late_file_lookback: timedelta) -> Hlc | None:
    """From when a run lists: ``late_file_lookback`` before its ``after`` RESOLVED, to find late files."""
    if after is None:
        return None
    return Hlc(max(0, after.wall - int(late_file_lookback.total_seconds() * 1e9)), 0)
