"""The yardstick of the blob change feed job: the single-process script a user would write in an afternoon.

From ``meta/Segments.json`` (lastConsumable) and the segment manifests, the chunk files of the segments
that feed the windows asked for (a window T reads the segments starting at T-1h, T and T+1h), read with
fastavro record by record, in lineage order (segment, shard, chunk file, record). Each record is claimed
by the coverage rule: the grid hour holding its ``eventTime`` (100 ns ticks), unless that hour is more
than an hour away from its segment's, then its segment's hour (a stray). The records the windows claim
are kept, ``Control`` records dropped, and one copy of each event id: the first read. Per blob
(``subject``), the latest event by ``data.sequencer`` as a hex number (then event time, then id). Both
tables written with delta-rs (the ``deltalake`` package) into fresh targets, with the columns and rows
our job's targets hold: ``TARGET_ROOT/events`` (partitioned by ``eventDate``; written as the files are
read) and ``TARGET_ROOT/state``. No Spark, no JVM.

    python bench/blob_reference.py FEED_ROOT TARGET_ROOT [WINDOW_START WINDOW_END]

Windows: every hour of the feed's grid in [WINDOW_START, WINDOW_END); by default every ready window,
from an hour before the first segment to lastConsumable. Prints a JSON line of counts.
"""

from __future__ import annotations

import calendar
import json
import re
import shutil
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import fastavro
import pyarrow as pa

TICKS_PER_SECOND = 10_000_000  # eventTime has 7 fractional digits: 100 ns ticks since the epoch
HOUR_TICKS = 3600 * TICKS_PER_SECOND
DAY_TICKS = 24 * HOUR_TICKS
HOUR = timedelta(hours=1)
CONTAINER_PREFIX = "$blobchangefeed/"
SUBJECT = re.compile(r"^/blobServices/default/containers/([^/]+)/blobs/(.+)$")

# The table's columns: every field of every schema version (1, 3, 4, 5, 6), null where a version lacks it.
STRING_MAP = pa.map_(pa.string(), pa.string())
DATA = pa.struct(
    [
        (name, pa.string())
        for name in (
            "api",
            "clientRequestId",
            "requestId",
            "etag",
            "contentType",
            "blobType",
            "blobVersion",
            "containerVersion",
            "blobTier",
            "url",
            "destinationUrl",
            "sourceUrl",
            "sequencer",
            "snapshot",
        )
    ]
    + [("contentLength", pa.int64()), ("contentOffset", pa.int64()), ("recursive", pa.bool_())]
    + [
        (name, STRING_MAP)
        for name in ("previousInfo", "asyncOperationInfo", "restorePointMarker", "storageDiagnostics")
    ]
    + [
        (
            "blobPropertiesUpdated",
            pa.map_(pa.string(), pa.struct([("current", pa.string()), ("previous", pa.string())])),
        ),
        ("blobTagsUpdated", pa.struct([("previous", STRING_MAP), ("current", STRING_MAP)])),
        ("extra", STRING_MAP),  # fields of data none of these names: JSON-encoded
    ]
)
TIMESTAMP = pa.timestamp("us", tz="UTC")
EVENTS = pa.schema(
    [
        ("id", pa.string()),
        ("eventType", pa.string()),
        ("eventTime", pa.string()),
        ("eventTimestamp", TIMESTAMP),
        ("eventDate", pa.date32()),
        ("subject", pa.string()),
        ("topic", pa.string()),
        ("schemaVersion", pa.int32()),
        ("data", DATA),
        ("extra", STRING_MAP),  # top-level fields of none of these names: JSON-encoded
        ("eventTimeTicks", pa.int64()),
        ("claimWindow", TIMESTAMP),
        ("isStray", pa.bool_()),
        ("segmentStart", TIMESTAMP),
        ("shard", pa.string()),
        ("chunkFile", pa.string()),
        ("chunkRecordIndex", pa.int64()),
        ("ingestedAt", TIMESTAMP),
    ]
)
STATE_PROPERTIES = (
    "contentType",
    "contentLength",
    "blobType",
    "blobTier",
    "etag",
    "url",
    "blobVersion",
    "snapshot",
    "api",
)
STATE = pa.schema(
    [
        ("subject", pa.string()),
        ("container", pa.string()),
        ("blobName", pa.string()),
        ("sequencer", pa.string()),
        ("eventId", pa.string()),
        ("eventType", pa.string()),
        ("eventTime", pa.string()),
        ("eventTimestamp", TIMESTAMP),
        ("isDeleted", pa.bool_()),
        *[(name, DATA.field(name).type) for name in STATE_PROPERTIES],
        ("claimWindow", TIMESTAMP),
        ("updatedAt", TIMESTAMP),
    ]
)
EVENT_FIELDS = frozenset(("id", "eventType", "eventTime", "subject", "topic", "schemaVersion", "data"))
DATA_FIELDS = frozenset(DATA.field(i).name for i in range(DATA.num_fields)) - {"extra"}
Row = tuple[dict[str, Any], int, int, bool, int]  # a record, its ticks, its claim window, stray, index in its file


def parse_time(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def ticks_of(moment: datetime) -> int:
    return calendar.timegm(moment.utctimetuple()) * TICKS_PER_SECOND + moment.microsecond * 10


_minutes: dict[str, int] = {}


def event_ticks(text: str) -> int:
    """``2026-01-01T00:10:12.3456789Z`` (the service's form) to ticks, exactly; any other ISO form via datetime."""
    if len(text) == 28 and text[19] == "." and text[27] == "Z":
        base = _minutes.get(text[:16])
        if base is None:
            base = _minutes[text[:16]] = ticks_of(parse_time(text[:16]))
        return base + int(text[17:19]) * TICKS_PER_SECOND + int(text[20:27])
    return ticks_of(parse_time(text))


def chunk_files(feed: Path, windows: list[datetime], last_consumable: datetime) -> list[tuple[datetime, str, str]]:
    """(segment start, shard, chunk file path) of the non-empty chunk files the windows read, in lineage order."""
    wanted = {w + delta for w in windows for delta in (-HOUR, 0 * HOUR, HOUR)}
    files = []
    for manifest in feed.glob("idx/segments/*/*/*/*/meta.json"):
        year, month, day, hhmm = manifest.parts[-5:-1]
        start = datetime(int(year), int(month), int(day), int(hhmm[:2]), int(hhmm[2:]), tzinfo=UTC)
        if start not in wanted or start > last_consumable:
            continue
        segment = json.loads(manifest.read_text())
        if segment["status"] != "Finalized":
            raise SystemExit(f"{manifest}: segment still {segment['status']}")
        for shard_path in segment["chunkFilePaths"]:
            folder = shard_path.removeprefix(CONTAINER_PREFIX).rstrip("/")
            for path in (feed / folder).glob("*.avro"):
                if path.stat().st_size:
                    files.append((start, folder.split("/")[1], f"{folder}/{path.name}"))
    return sorted(files)


class Reference:
    """Reads, claims, drops Control, dedupes; keeps the latest event per blob; counts."""

    def __init__(self, feed: Path, windows: list[datetime], last_consumable: datetime, grid_minute: int):
        self.feed = feed
        self.files = chunk_files(feed, windows, last_consumable)
        self.windows = {ticks_of(w) for w in windows}
        self.offset = grid_minute * 60 * TICKS_PER_SECOND
        self.ingested = ticks_of(datetime.now(UTC)) // 10
        self.seen: set[str] = set()
        self.latest: dict[str, tuple[tuple[str, int, str], tuple[Any, ...]]] = {}
        self.counts = dict.fromkeys(("recordsRead", "recordsClaimed", "controlDropped", "strays"), 0)

    def events(self) -> Iterator[pa.RecordBatch]:
        """One batch of event rows per chunk file."""
        for segment_start, shard, chunk in self.files:
            rows: list[Row] = []
            segment, index = ticks_of(segment_start), -1
            with (self.feed / chunk).open("rb") as handle:
                records = cast(Iterator[dict[str, Any]], fastavro.reader(handle))
                for index, record in enumerate(records):
                    ticks = event_ticks(record["eventTime"])
                    window = ticks - (ticks - self.offset) % HOUR_TICKS
                    stray = abs(window - segment) > HOUR_TICKS
                    claim = segment if stray else window
                    if claim not in self.windows:
                        continue
                    self.counts["recordsClaimed"] += 1
                    if record["eventType"] == "Control":
                        self.counts["controlDropped"] += 1
                        continue
                    self.counts["strays"] += stray
                    if record["id"] in self.seen:
                        continue  # a copy: the first one read is kept
                    self.seen.add(record["id"])
                    rows.append((record, ticks, claim, stray, index))
            self.counts["recordsRead"] += index + 1
            if rows:
                yield self.batch(rows, segment // 10, shard, chunk)

    def batch(self, rows: list[Row], segment_micros: int, shard: str, chunk: str) -> pa.RecordBatch:
        columns: dict[str, list[Any]] = {name: [] for name in EVENTS.names}
        for record, ticks, claim, stray, index in rows:
            data, extra = record["data"], None
            if record.keys() - EVENT_FIELDS:
                extra = {k: _json(v) for k, v in record.items() if k not in EVENT_FIELDS}
            if data is not None and data.keys() - DATA_FIELDS:
                data["extra"] = {k: _json(v) for k, v in data.items() if k not in DATA_FIELDS}
            for name in ("id", "eventType", "eventTime", "subject", "topic", "schemaVersion"):
                columns[name].append(record[name])
            columns["eventTimestamp"].append(ticks // 10)
            columns["eventDate"].append(ticks // DAY_TICKS)
            columns["data"].append(data)
            columns["extra"].append(extra)
            columns["eventTimeTicks"].append(ticks)
            columns["claimWindow"].append(claim // 10)
            columns["isStray"].append(stray)
            columns["chunkRecordIndex"].append(index)
            self.keep_latest(record, ticks // 10, claim // 10)
        n = len(rows)
        columns.update(segmentStart=[segment_micros] * n, shard=[shard] * n, chunkFile=[chunk] * n)
        columns["ingestedAt"] = [self.ingested] * n
        return pa.RecordBatch.from_arrays([pa.array(columns[f.name], f.type) for f in EVENTS], schema=EVENTS)

    def keep_latest(self, record: dict[str, Any], micros: int, claim_micros: int) -> None:
        subject = record["subject"]
        if subject is None:
            return
        data = record["data"] or {}
        sequencer = data.get("sequencer")
        # The sequencer is a hex number: zero-padded, string order is numeric order; none sorts first.
        order = (sequencer.rjust(64, "0")[:64] if sequencer is not None else "", micros, record["id"])
        held = self.latest.get(subject)
        if held is None or order > held[0]:
            values = (record["id"], record["eventType"], record["eventTime"], micros, sequencer, claim_micros)
            self.latest[subject] = (order, (*values, *(data.get(name) for name in STATE_PROPERTIES)))

    def state(self) -> pa.Table:
        columns: dict[str, list[Any]] = {name: [] for name in STATE.names}
        for subject, (_order, values) in self.latest.items():
            event_id, event_type, event_time, micros, sequencer, claim_micros, *properties = values
            match = SUBJECT.match(subject)
            columns["subject"].append(subject)
            columns["container"].append(match.group(1) if match else None)
            columns["blobName"].append(match.group(2) if match else None)
            columns["sequencer"].append(sequencer)
            columns["eventId"].append(event_id)
            columns["eventType"].append(event_type)
            columns["eventTime"].append(event_time)
            columns["eventTimestamp"].append(micros)
            columns["isDeleted"].append(event_type == "BlobDeleted")
            for name, value in zip(STATE_PROPERTIES, properties, strict=True):
                columns[name].append(value)
            columns["claimWindow"].append(claim_micros)
            columns["updatedAt"].append(self.ingested)
        return pa.table({f.name: pa.array(columns[f.name], f.type) for f in STATE}, schema=STATE)


def _json(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


def plan(feed: Path, argv: list[str]) -> tuple[list[datetime], datetime, int]:
    """The windows asked for (each refused unless ready: lastConsumable >= T + 1h), lastConsumable, the grid."""
    last_consumable = parse_time(json.loads((feed / "meta/Segments.json").read_text())["lastConsumable"])
    starts = sorted(
        datetime(int(y), int(m), int(d), int(hhmm[:2]), int(hhmm[2:]), tzinfo=UTC)
        for y, m, d, hhmm in (p.parts[-5:-1] for p in feed.glob("idx/segments/*/*/*/*/meta.json"))
        if y != "1601"
    )
    if not starts:
        raise SystemExit(f"{feed}: no segments")
    minute = starts[0].minute
    first, end = (parse_time(argv[0]), parse_time(argv[1])) if argv else (starts[0] - HOUR, last_consumable)
    if first.minute != minute or first.second or end.minute != minute or end.second or end <= first:
        raise SystemExit(f"windows start at minute {minute:02d}: not {argv}")
    windows = [first + i * HOUR for i in range(round((end - first) / HOUR))]
    if windows[-1] + HOUR > last_consumable:
        raise SystemExit(f"window {windows[-1]} is not ready: lastConsumable is {last_consumable}")
    return windows, last_consumable, minute


def main(argv: list[str]) -> int:
    from deltalake import write_deltalake

    feed, target_root = Path(argv[0]), Path(argv[1])
    windows, last_consumable, minute = plan(feed, argv[2:4])
    reference = Reference(feed, windows, last_consumable, minute)
    shutil.rmtree(target_root, ignore_errors=True)
    events = pa.RecordBatchReader.from_batches(EVENTS, reference.events())
    write_deltalake(str(target_root / "events"), events, mode="overwrite", partition_by=["eventDate"])
    write_deltalake(str(target_root / "state"), reference.state(), mode="overwrite")
    counts = reference.counts
    print(json.dumps({**counts, "eventsUnique": len(reference.seen), "blobs": len(reference.latest)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
