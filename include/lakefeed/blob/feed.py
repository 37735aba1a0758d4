"""Reading the layout of a ``$blobchangefeed`` container: Segments.json, segments, shards, chunk files.

Layout (see the change feed specification)::

    meta/Segments.json                         {"lastConsumable": "...", ...}
    idx/segments/YYYY/MM/DD/hhmm/meta.json     segment manifest: status, chunkFilePaths
    log/<shard>/YYYY/MM/DD/hhmm/00000.avro     chunk files, in name order per shard

Retention deletes old segments, oldest first and not atomically, so a segment
manifest can still name shard folders whose chunk files are gone
(:class:`SegmentChunks` names them).

Everything here is driver-side and cheap: small JSON files and folder listings.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from lakefeed.errors import FeedCorruptError, FeedError
from lakefeed.storage import StoreBase
from lakefeed.times import parse_time

CONTAINER = "$blobchangefeed"
SEGMENTS_JSON = "meta/Segments.json"
SEGMENTS_ROOT = "idx/segments"
LOG_ROOT = "log"
INIT_SEGMENT_YEAR = "1601"
FINALIZED = "Finalized"
PUBLISHING = "Publishing"

_SEGMENT_PATH = re.compile(r"idx/segments/(\d{4})/(\d{2})/(\d{2})/(\d{2})(\d{2})/meta\.json\Z")


def segment_manifest_path(start: datetime) -> str:
    """``idx/segments/YYYY/MM/DD/hhmm/meta.json`` of the segment starting at ``start``."""
    return f"{SEGMENTS_ROOT}/{start:%Y/%m/%d/%H%M}/meta.json"


def parse_segment_manifest_path(path: str) -> datetime:
    m = _SEGMENT_PATH.search(path)
    if m is None:
        raise ValueError(f"not a segment manifest path: {path!r}")
    year, month, day, hour, minute = (int(part) for part in m.groups())
    return datetime(year, month, day, hour, minute, tzinfo=UTC)


@dataclass(frozen=True)
class ChunkRef:
    """A chunk file as a decoding task names it (:mod:`lakefeed.blob.decode`): what it needs to decode the
    file; no secrets (they come from the environment)."""

    root: str
    path: str
    shard: str
    segment_start: datetime
    columnar: bool = True


@dataclass(frozen=True)
class ChunkFile:
    """One Avro chunk file of one shard of one segment."""

    segment_start: datetime
    shard: str
    path: str  # relative to the container root, e.g. log/00/2026/01/01/0510/00000.avro
    size: int

    @property
    def name(self) -> str:
        return posixpath.basename(self.path)


@dataclass(frozen=True)
class Segment:
    """A segment manifest, validated."""

    start: datetime
    manifest_path: str
    status: str
    shard_paths: tuple[str, ...]  # relative to the container root, each ending in '/'

    @property
    def is_finalized(self) -> bool:
        return self.status == FINALIZED


@dataclass(frozen=True)
class SegmentChunks:
    """The chunk files of a segment's shards, and the shard folders its manifest names that hold none.

    A shard folder holding none is an empty shard (no events on it that hour: Azure's clients read it as
    empty) or lost its chunk files to retention; :mod:`lakefeed.blob.shards` tells which from evidence.
    """

    segment: Segment
    chunk_files: list[ChunkFile]  # in shard order then chunk-name order
    empty_shards: tuple[str, ...]  # shard folders (relative, ending in '/') holding no chunk file


def parse_manifest(manifest: object, manifest_url: str, start: datetime) -> Segment:
    """Validate a decoded ``meta.json``: a known status and chunk paths inside ``log/``."""
    if not isinstance(manifest, dict):
        raise FeedCorruptError(f"{manifest_url}: manifest is not a JSON object")
    status = manifest.get("status")
    if status not in (FINALIZED, PUBLISHING):
        raise FeedCorruptError(f"{manifest_url}: unknown segment status {status!r}")
    raw_paths = manifest.get("chunkFilePaths")
    if not isinstance(raw_paths, list) or not all(isinstance(p, str) for p in raw_paths):
        raise FeedCorruptError(f"{manifest_url}: chunkFilePaths must be a list of strings")
    shard_paths = tuple(_shard_path(raw, manifest_url) for raw in raw_paths)
    if len(set(shard_paths)) != len(shard_paths):
        raise FeedCorruptError(f"{manifest_url}: chunkFilePaths lists a shard twice")
    return Segment(
        start=start,
        manifest_path=segment_manifest_path(start),
        status=status,
        shard_paths=shard_paths,
    )


def _shard_path(raw: str, manifest_url: str) -> str:
    """``$blobchangefeed/log/00/…/`` → ``log/00/…/``; anything outside ``log/`` is refused."""
    prefix = f"{CONTAINER}/"
    relative = raw[len(prefix) :] if raw.startswith(prefix) else None
    normalized = posixpath.normpath(relative) if relative else ""
    parts = normalized.split("/")
    if (
        relative is None
        or relative.startswith("/")
        or ".." in relative.split("/")
        or len(parts) < 2
        or parts[0] != LOG_ROOT
    ):
        raise FeedCorruptError(f"{manifest_url}: chunk file path {raw!r} points outside {CONTAINER}/{LOG_ROOT}/")
    return normalized + "/"


def shard_name(shard_path: str) -> str:
    """``log/03/2026/01/01/0510/`` → ``03``."""
    return shard_path.split("/")[1]


def parse_last_consumable(document: object, url: str) -> datetime:
    if not isinstance(document, dict) or not isinstance(document.get("lastConsumable"), str):
        raise FeedCorruptError(f"{url}: no lastConsumable timestamp")
    try:
        return parse_time(document["lastConsumable"])
    except ValueError as exc:
        raise FeedCorruptError(f"{url}: lastConsumable is {exc}") from None


class ChangeFeed:
    """The ``$blobchangefeed`` container behind a :class:`Store`."""

    def __init__(self, store: StoreBase):
        self.store = store

    def last_consumable(self) -> datetime:
        if not self.store.exists(SEGMENTS_JSON):
            raise FeedError(
                f"{self.store.url(SEGMENTS_JSON)} does not exist: is {self.store.root} a {CONTAINER} container?"
            )
        return parse_last_consumable(self.store.read_json(SEGMENTS_JSON), self.store.url(SEGMENTS_JSON))

    def segment_starts_between(self, first: date, last: date) -> list[datetime]:
        """Starts of the segments dated on days ``first``..``last``, listing only those days."""
        starts = []
        day = first
        while day <= last:
            starts.extend(self._segment_starts_on(day))
            day += timedelta(days=1)
        return starts

    def all_segment_starts(self) -> list[datetime]:
        """Every segment start (the 1601 init segment excluded), walking year/month/day folders."""
        starts = []
        for year in self._numbered(SEGMENTS_ROOT):
            if year == INIT_SEGMENT_YEAR:
                continue
            for month in self._numbered(f"{SEGMENTS_ROOT}/{year}"):
                for day in self._numbered(f"{SEGMENTS_ROOT}/{year}/{month}"):
                    starts.extend(self._segment_starts_on(date(int(year), int(month), int(day))))
        return sorted(starts)

    def first_segment_start(self) -> datetime | None:
        """The earliest segment, listing only the lowest year, month and day folders that hold one."""
        for year in self._numbered(SEGMENTS_ROOT):
            if year == INIT_SEGMENT_YEAR:
                continue
            for month in self._numbered(f"{SEGMENTS_ROOT}/{year}"):
                for day in self._numbered(f"{SEGMENTS_ROOT}/{year}/{month}"):
                    starts = self._segment_starts_on(date(int(year), int(month), int(day)))
                    if starts:
                        return min(starts)
        return None

    def _numbered(self, relative: str) -> list[str]:
        return [e.name for e in self.store.list(relative) if e.is_dir and e.name.isdigit()]

    def _segment_starts_on(self, day: date) -> list[datetime]:
        if day.year == int(INIT_SEGMENT_YEAR):
            return []
        starts = []
        for entry in self.store.list(f"{SEGMENTS_ROOT}/{day:%Y/%m/%d}"):
            if entry.is_dir and len(entry.name) == 4 and entry.name.isdigit():
                starts.append(
                    datetime(day.year, day.month, day.day, int(entry.name[:2]), int(entry.name[2:]), tzinfo=UTC)
                )
        return starts

    def read_segment(self, start: datetime) -> Segment:
        path = segment_manifest_path(start)
        return parse_manifest(self.store.read_json(path), self.store.url(path), start)

    def segment_chunks(self, segment: Segment) -> SegmentChunks:
        """Every shard's chunk files, and the shard folders holding none: one listing per shard folder."""
        files: list[ChunkFile] = []
        empty: list[str] = []
        for shard_path in segment.shard_paths:
            entries = [e for e in self.store.list(shard_path) if not e.is_dir and e.name.endswith(".avro")]
            if not entries:
                empty.append(shard_path)
            entries.sort(key=lambda e: (_chunk_number(e.name), e.name))
            files.extend(
                ChunkFile(
                    segment_start=segment.start, shard=shard_name(shard_path), path=shard_path + e.name, size=e.size
                )
                for e in entries
            )
        return SegmentChunks(segment=segment, chunk_files=files, empty_shards=tuple(empty))

    def chunk_files(self, segment: Segment) -> list[ChunkFile]:
        """Every shard's chunk files, in shard order then chunk-name order (a shard folder holding none adds
        nothing: :meth:`segment_chunks` names such folders)."""
        return self.segment_chunks(segment).chunk_files


def _chunk_number(name: str) -> int:
    stem = name.split(".", 1)[0]
    return int(stem) if stem.isdigit() else -1
