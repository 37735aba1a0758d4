"""A synthetic ``$blobchangefeed`` container, deterministic from a seed, with its ground truth.

For the demo, the tests and the benchmarks. It writes what the service writes:
``meta/Segments.json``, the 1601 init segment, hourly segment manifests at
``hh:10`` and Avro chunk files per shard, and adds what real feeds throw at a
reader: mixed schema versions (1, 3, 4, 5, 6), ``Control`` records, events a
few minutes across the hour edges (claimed by the neighbouring window), events
at ``…:09:59.9999999``, strays, duplicated records, hours without a segment, a
0-byte chunk file and an Avro file with no records in the middle of a shard,
and a ``Publishing`` segment past ``lastConsumable``.

The expected claim window of every event is decided by construction (which
kind of event it was made as), not by the coverage rule under test.

    python -m lakefeed_testing.blob_generator --out data/feed --hours 4 --events-per-hour 5000
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import fastavro

from lakefeed.blob.feed import CONTAINER, FINALIZED, PUBLISHING, segment_manifest_path
from lakefeed.blob.timegrid import HOUR, TICKS_PER_SECOND, from_ticks, to_ticks
from lakefeed.times import format_time, parse_time

DEFAULT_START = datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
TOPIC = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Storage/storageAccounts/demo"


@dataclass(frozen=True)
class FeedSpec:
    start: datetime = DEFAULT_START  # first segment; on the hh:10 grid like the service's
    hours: int = 4  # consumable hours: segments start .. start + (hours-1)h
    events_per_hour: int = 2_000
    shards: int = 2
    records_per_chunk: int = 700
    blobs: int = 300
    containers: int = 3
    gap_hours: tuple[int, ...] = (2,)  # hour indexes with no segment of their own
    publishing_hours: int = 1  # segments past lastConsumable, still Publishing
    control_rate: float = 0.02
    duplicate_rate: float = 0.003
    boundary_rate: float = 0.06  # events up to 14 minutes across either hour edge
    stray_rate: float = 0.002
    codec: str = "null"
    writer: str = "service"  # the service's own schema (enums), or "legacy": an older string-typed writer
    seed: int = 7

    @property
    def last_consumable(self) -> datetime:
        return self.start + (self.hours - 1) * HOUR


@dataclass
class TruthEvent:
    id: str
    eventType: str
    eventTime: str
    subject: str
    sequencer: str
    schemaVersion: int
    window: str  # expected claim window (ISO)
    stray: bool
    segment: str  # segment it was written to (ISO)
    consumable: bool  # segment dated at or before lastConsumable


@dataclass
class GroundTruth:
    spec: FeedSpec
    events: list[TruthEvent] = field(default_factory=list)  # unique, non-Control
    control_records: int = 0
    duplicate_records: int = 0

    def claimed(self, windows: list[datetime]) -> list[TruthEvent]:
        names = {format_time(w) for w in windows}
        return [e for e in self.events if e.consumable and e.window in names]

    def state(self, windows: list[datetime]) -> dict[str, TruthEvent]:
        """Latest event per subject (by sequencer) among the events of ``windows``."""
        latest: dict[str, TruthEvent] = {}
        for event in self.claimed(windows):
            current = latest.get(event.subject)
            if current is None or event.sequencer > current.sequencer:
                latest[event.subject] = event
        return latest

    def ready_windows(self) -> list[datetime]:
        """Every window a full run processes: the hour before the first segment .. lastConsumable - 1h."""
        first = self.spec.start - HOUR
        count = int((self.spec.last_consumable - first) / HOUR)
        return [first + i * HOUR for i in range(count)]

    def to_json(self) -> str:
        return json.dumps(
            {
                "spec": {**asdict(self.spec), "start": format_time(self.spec.start)},
                "control_records": self.control_records,
                "duplicate_records": self.duplicate_records,
                "events": [asdict(e) for e in self.events],
            }
        )


def _nullable(avro_type):
    return ["null", avro_type]


_STRING_MAP = {"type": "map", "values": "string"}
SERVICE = "service"
LEGACY = "legacy"
WRITERS = (SERVICE, LEGACY)


def _enum(name: str, symbols: list[str]) -> dict:
    return {"type": "enum", "name": name, "symbols": symbols, "default": symbols[0]}


def _text(name: str) -> dict:
    return {"name": name, "type": "string", "default": ""}


def service_schema(version: int) -> dict:
    """The writer schema the Azure service puts in its chunk files, as read from real ones (Azure SDK test
    recordings of v4, v5 and v6 chunk files): record ``Microsoft.Storage.BlobChangeEvent``; ``eventType``,
    ``api``, ``blobType`` and ``blobTier`` are Avro enums; unions put ``null`` first; ``blobTagsUpdated``
    is a map of maps (``previous``, ``current``); ``schemaVersion`` is a long whose default stays 4 (each
    record carries its own version). The text does not follow the version number: the 2020 (v4) text
    lacks the v5 fields and symbols, v6 adds the ``Cold`` tier. Versions 1 and 3 (no real file is public)
    use the v4 text with the fields they lack left null.
    """
    event_types = [
        "UnspecifiedEventType",
        "BlobCreated",
        "BlobDeleted",
        "BlobPropertiesUpdated",
        "BlobSnapshotCreated",
        "Control",
        "BlobTierChanged",
        "BlobAsyncOperationInitiated",
    ]
    apis = [
        "UnspecifiedApi",
        "PutBlob",
        "PutBlockList",
        "CopyBlob",
        "DeleteBlob",
        "SetBlobMetadata",
        "ControlEvent",
        "UndeleteBlob",
        "SetBlobProperties",
        "SnapshotBlob",
        "SetBlobTier",
        "AbortCopyBlob",
    ]
    tiers = ["UnspecifiedBlobTier", "Hot", "Cool", "Archive"]
    if version >= 5:
        event_types.append("RestorePointMarkerCreated")
        apis += ["SetBlobTags", "CreateRestorePointMarker"]
    if version >= 6:
        tiers.append("Cold")
    api = _enum("ApiEnum", apis)
    blob_type = _enum("BlobTypeEnum", ["UnspecifiedBlobType", "BlockBlob", "PageBlob", "AppendBlob"])
    data_fields = [
        {"name": "api", "type": api, "default": api["default"]},
        _text("clientRequestId"),
        _text("requestId"),
        _text("etag"),
        _text("contentType"),
        {"name": "contentLength", "type": "long", "default": 0},
        {"name": "blobType", "type": blob_type, "default": blob_type["default"]},
        {"name": "blobVersion", "type": _nullable("string"), "default": None},
        {"name": "containerVersion", "type": _nullable("string"), "default": None},
        {"name": "blobTier", "type": _nullable(_enum("BlobTierEnum", tiers)), "default": None},
        _text("url"),
        _text("sequencer"),
        {"name": "previousInfo", "type": _nullable(_STRING_MAP), "default": None},
        {"name": "snapshot", "type": _nullable("string"), "default": None},
        {
            "name": "blobPropertiesUpdated",
            "type": _nullable(
                {
                    "type": "map",
                    "values": {"type": "record", "name": "values", "fields": [_text("current"), _text("previous")]},
                }
            ),
            "default": None,
        },
        {"name": "asyncOperationInfo", "type": _nullable(_STRING_MAP), "default": None},
    ]
    if version >= 5:
        data_fields += [
            {"name": "blobTagsUpdated", "type": _nullable({"type": "map", "values": _STRING_MAP}), "default": None},
            {"name": "restorePointMarker", "type": _nullable(_STRING_MAP), "default": None},
        ]
    data_fields.append({"name": "storageDiagnostics", "type": _STRING_MAP, "default": {}})
    return {
        "type": "record",
        "name": "BlobChangeEvent",
        "namespace": "Microsoft.Storage",
        "fields": [
            {"name": "schemaVersion", "type": "long", "default": 4},
            _text("topic"),
            _text("subject"),
            {"name": "eventType", "type": _enum("EventTypeEnum", event_types)},
            _text("eventTime"),
            _text("id"),
            {"name": "data", "type": {"type": "record", "name": "BlobChangeEventData", "fields": data_fields}},
        ],
    }


def legacy_schema(version: int) -> dict:
    """An older writer's schema, kept as an extra case: every enum a plain string, ``blobTagsUpdated`` a
    record, ``schemaVersion`` an int, only the fields each version defines."""
    data_fields: list[dict[str, Any]] = [
        {"name": "api", "type": "string"},
        {"name": "clientRequestId", "type": "string"},
        {"name": "requestId", "type": "string"},
        {"name": "etag", "type": "string"},
        {"name": "contentType", "type": "string"},
        {"name": "contentLength", "type": "long"},
        {"name": "blobType", "type": "string"},
        {"name": "url", "type": "string"},
        {"name": "sequencer", "type": "string"},
    ]
    if version >= 4:
        data_fields += [
            {"name": "blobVersion", "type": _nullable("string"), "default": None},
            {"name": "containerVersion", "type": _nullable("string"), "default": None},
            {"name": "blobTier", "type": _nullable("string"), "default": None},
        ]
    if version >= 3:
        data_fields += [
            {"name": "previousInfo", "type": _nullable(_STRING_MAP), "default": None},
            {"name": "snapshot", "type": _nullable("string"), "default": None},
            {
                "name": "blobPropertiesUpdated",
                "default": None,
                "type": _nullable(
                    {
                        "type": "map",
                        "values": {
                            "type": "record",
                            "name": "BlobPropertyChange",
                            "fields": [
                                {"name": "current", "type": _nullable("string"), "default": None},
                                {"name": "previous", "type": _nullable("string"), "default": None},
                            ],
                        },
                    }
                ),
            },
        ]
    if version >= 4:
        data_fields.append({"name": "asyncOperationInfo", "type": _nullable(_STRING_MAP), "default": None})
    if version >= 5:
        data_fields += [
            {
                "name": "blobTagsUpdated",
                "default": None,
                "type": _nullable(
                    {
                        "type": "record",
                        "name": "BlobTagsChange",
                        "fields": [
                            {"name": "previous", "type": _STRING_MAP},
                            {"name": "current", "type": _STRING_MAP},
                        ],
                    }
                ),
            },
            {"name": "restorePointMarker", "type": _nullable(_STRING_MAP), "default": None},
        ]
    data_fields.append({"name": "storageDiagnostics", "type": _STRING_MAP})
    return {
        "type": "record",
        "name": "BlobChangeEvent",
        "namespace": "com.microsoft.azure.storage.blob",
        "fields": [
            {"name": "schemaVersion", "type": "int"},
            {"name": "topic", "type": "string"},
            {"name": "subject", "type": "string"},
            {"name": "eventType", "type": "string"},
            {"name": "eventTime", "type": "string"},
            {"name": "id", "type": "string"},
            {"name": "data", "type": {"type": "record", "name": "BlobChangeEventData", "fields": data_fields}},
        ],
    }


def avro_schema(version: int, writer: str = SERVICE) -> dict:
    """The writer schema of a chunk file holding schema version ``version`` records."""
    if writer not in WRITERS:
        raise ValueError(f"writer must be one of {', '.join(WRITERS)}, not {writer!r}")
    return service_schema(version) if writer == SERVICE else legacy_schema(version)


SCHEMA_VERSIONS = (1, 3, 4, 5, 6)
_PARSED_SCHEMAS = {(v, w): fastavro.parse_schema(avro_schema(v, w)) for v in SCHEMA_VERSIONS for w in WRITERS}


def event_time_text(ticks: int) -> str:
    """``2026-01-01T00:10:12.3456789Z``: 7 fractional digits, as the service writes."""
    seconds = ticks // TICKS_PER_SECOND
    return f"{format_time(from_ticks(seconds * TICKS_PER_SECOND))[:-1]}.{ticks % TICKS_PER_SECOND:07d}Z"


class _Generator:
    def __init__(self, spec: FeedSpec, root: Path):
        self.spec = spec
        self.root = root
        self.truth = GroundTruth(spec)
        self.sequence = 0
        self.blob_exists: dict[str, bool] = {}
        self.blob_shard: dict[str, int] = {}
        subjects = []
        for i in range(spec.blobs):
            container = f"container{i % spec.containers}"
            subjects.append(f"/blobServices/default/containers/{container}/blobs/folder{i % 7}/blob-{i:06d}.json")
        self.subjects = subjects

    def run(self) -> GroundTruth:
        spec = self.spec
        self._write_json(
            "meta/Segments.json",
            {
                "version": 0,
                "lastConsumable": format_time(spec.last_consumable).replace("Z", ".000Z"),
                "storageDiagnostics": {
                    "version": 0,
                    "lastModifiedTime": format_time(spec.last_consumable),
                    "data": {"aid": "00000000-0000-0000-0000-000000000000"},
                },
            },
        )
        init = datetime(1601, 1, 1, tzinfo=UTC)
        self._write_json(segment_manifest_path(init), self._manifest(init, FINALIZED, []))
        for hour in range(spec.hours + spec.publishing_hours):
            if hour in spec.gap_hours and hour < spec.hours:
                continue
            self._segment(hour)
        return self.truth

    def _segment(self, hour: int) -> None:
        spec = self.spec
        start = spec.start + hour * HOUR
        rng = random.Random(f"{spec.seed}:{hour}")
        consumable = start <= spec.last_consumable
        start_ticks = to_ticks(start)
        hour_ticks = 3600 * TICKS_PER_SECOND
        planned = []  # (ticks, expected window ticks, stray)
        for _ in range(spec.events_per_hour):
            roll = rng.random()
            if roll < spec.stray_rate:
                offset = rng.choice((-1, 1)) * rng.randint(2 * hour_ticks + 1, 3 * hour_ticks)
                planned.append((start_ticks + offset, start_ticks, True))
            elif roll < spec.stray_rate + spec.boundary_rate / 2:
                ticks = start_ticks - rng.randint(1, 14 * 60 * TICKS_PER_SECOND)
                planned.append((ticks, start_ticks - hour_ticks, False))
            elif roll < spec.stray_rate + spec.boundary_rate:
                ticks = start_ticks + hour_ticks + rng.randint(0, 14 * 60 * TICKS_PER_SECOND)
                planned.append((ticks, start_ticks + hour_ticks, False))
            elif roll < spec.stray_rate + spec.boundary_rate + 0.002:
                planned.append((start_ticks + hour_ticks - 1, start_ticks, False))  # …:09:59.9999999
            else:
                planned.append((start_ticks + rng.randrange(hour_ticks), start_ticks, False))
        planned.sort()

        shard_records: list[list[dict]] = [[] for _ in range(spec.shards)]
        for ticks, window, stray in planned:
            subject = rng.choice(self.subjects)
            shard = self.blob_shard.setdefault(subject, len(self.blob_shard) % spec.shards)
            version = SCHEMA_VERSIONS[(hour + shard) % len(SCHEMA_VERSIONS)]
            record = self._event(rng, subject, ticks, version)
            shard_records[shard].append(record)
            self.truth.events.append(
                TruthEvent(
                    id=record["id"],
                    eventType=record["eventType"],
                    eventTime=record["eventTime"],
                    subject=subject,
                    sequencer=record["data"]["sequencer"],
                    schemaVersion=version,
                    window=format_time(from_ticks(window)),
                    stray=stray,
                    segment=format_time(start),
                    consumable=consumable,
                )
            )
            if rng.random() < spec.control_rate:
                shard_records[shard].append(self._control(rng, ticks, version))
                self.truth.control_records += 1
        for records in shard_records:
            copies = max(1, int(len(records) * spec.duplicate_rate)) if spec.duplicate_rate and records else 0
            for record in rng.sample(records, copies):
                if record["eventType"] != "Control":
                    records.append(dict(record))  # the same record written twice
                    self.truth.duplicate_records += 1

        shard_paths = []
        for shard, records in enumerate(shard_records):
            shard_path = f"log/{shard:02d}/{start:%Y/%m/%d/%H%M}/"
            shard_paths.append(f"{CONTAINER}/{shard_path}")
            self._write_chunks(
                shard_path,
                records,
                SCHEMA_VERSIONS[(hour + shard) % len(SCHEMA_VERSIONS)],
                odd_chunks=(shard == 0 and hour == 1),
            )
        status = FINALIZED if consumable else PUBLISHING
        self._write_json(segment_manifest_path(start), self._manifest(start, status, shard_paths))

    def _write_chunks(self, shard_path: str, records: list[dict], version: int, odd_chunks: bool) -> None:
        size = self.spec.records_per_chunk
        pieces: list[list[dict[str, Any]] | None] = [records[i : i + size] for i in range(0, len(records), size)] or [
            []
        ]
        if odd_chunks:
            # A 0-byte chunk and an Avro file with no records inside the shard:
            # everything after them must still be read.
            middle = min(1, len(pieces))
            pieces[middle:middle] = [None, []]
        folder = self.root / shard_path
        folder.mkdir(parents=True, exist_ok=True)
        for number, piece in enumerate(pieces):
            path = folder / f"{number:05d}.avro"
            if piece is None:
                path.write_bytes(b"")
                continue
            with path.open("wb") as handle:
                # A seeded sync marker keeps the bytes reproducible (fastavro picks a random one).
                marker = random.Random(f"{self.spec.seed}:{path.relative_to(self.root)}").randbytes(16)
                fastavro.writer(
                    handle, _PARSED_SCHEMAS[version, self.spec.writer], piece, codec=self.spec.codec, sync_marker=marker
                )

    def _event(self, rng: random.Random, subject: str, ticks: int, version: int) -> dict:
        exists = self.blob_exists.get(subject, False)
        if not exists:
            event_type = "BlobCreated"
        else:
            choices = ["BlobCreated", "BlobPropertiesUpdated", "BlobSnapshotCreated", "BlobDeleted"]
            if version >= 4:
                choices.append("BlobTierChanged")
            event_type = rng.choices(choices, weights=[4, 3, 1, 2, 1][: len(choices)])[0]
        self.blob_exists[subject] = event_type != "BlobDeleted"
        self.sequence += 1
        request = f"{rng.getrandbits(32):08x}-8020-0000-00fe-{rng.getrandbits(48):012x}"
        data: dict[str, Any] = {
            "api": {
                "BlobCreated": "PutBlob",
                "BlobDeleted": "DeleteBlob",
                "BlobPropertiesUpdated": "SetBlobProperties",
                "BlobSnapshotCreated": "SnapshotBlob",
                "BlobTierChanged": "SetBlobTier",
            }[event_type],
            "clientRequestId": f"{rng.getrandbits(128):032x}",
            "requestId": request,
            "etag": f"0x8D{rng.getrandbits(52):013X}",
            "contentType": rng.choice(("application/json", "application/octet-stream", "text/csv")),
            "contentLength": rng.randint(0, 10_000_000),
            "blobType": "BlockBlob",
            "url": "",
            # Like the service's: a 32-digit upper-case epoch part, then a 16-digit lower-case counter.
            "sequencer": f"{0x48CF0:032X}{self.sequence:016x}",
            "storageDiagnostics": {
                "bid": f"{rng.getrandbits(64):016x}",
                "seq": "(2,18446744073709551615,29,29)",
                "sid": f"{rng.getrandbits(64):016x}",
            },
        }
        if version >= 3:
            data["previousInfo"] = {"PreviousTier": "Hot"} if event_type == "BlobTierChanged" else None
            data["snapshot"] = event_time_text(ticks) if event_type == "BlobSnapshotCreated" else None
            data["blobPropertiesUpdated"] = (
                {"ContentType": {"current": data["contentType"], "previous": "application/octet-stream"}}
                if event_type == "BlobPropertiesUpdated"
                else None
            )
        if version >= 4:
            data["blobVersion"] = event_time_text(ticks)
            data["containerVersion"] = "0000000000000001"
            data["blobTier"] = (
                rng.choice(("Hot", "Cool", "Archive"))
                if version < 6
                else rng.choice(("Hot", "Cool", "Cold", "Archive"))
            )
            data["asyncOperationInfo"] = None
        if version >= 5:
            data["blobTagsUpdated"] = (
                {"previous": {"team": "a"}, "current": {"team": "b"}} if rng.random() < 0.1 else None
            )
            data["restorePointMarker"] = None
        if self.spec.writer == SERVICE:  # the service's text always has the v4 fields: null where a version lacks them
            for name in (
                "blobVersion",
                "containerVersion",
                "blobTier",
                "previousInfo",
                "snapshot",
                "blobPropertiesUpdated",
                "asyncOperationInfo",
            ):
                data.setdefault(name, None)
        return {
            "schemaVersion": version,
            "topic": TOPIC,
            "subject": subject,
            "eventType": event_type,
            "eventTime": event_time_text(ticks),
            "id": f"{request[:8]}-{rng.getrandbits(16):04x}-0000-00fe-{rng.getrandbits(48):012x}",
            "data": data,
        }

    def _control(self, rng: random.Random, ticks: int, version: int) -> dict:
        record = self._event(rng, "/blobServices/default/containers/$blobchangefeed/blobs/control", ticks, version)
        self.sequence -= 1  # Control records are not changes: no sequencer of their own
        record["eventType"] = "Control"
        record["data"]["sequencer"] = ""
        record["data"]["api"] = "ControlEvent"
        return record

    def _manifest(self, start: datetime, status: str, shard_paths: list[str]) -> dict:
        return {
            "version": 0,
            "begin": format_time(start).replace("Z", ".000Z"),
            "intervalSecs": 3600,
            "status": status,
            "config": {
                "version": 0,
                "configVersionEtag": "0x8d698f0fba563db",
                "numShards": len(shard_paths),
                "recordsFormat": "avro",
                "formatSchemaVersion": 1,
                "shardDistFnVersion": 1,
            },
            "chunkFilePaths": shard_paths,
            "storageDiagnostics": {"version": 0, "lastModifiedTime": format_time(start), "data": {"aid": "0"}},
        }

    def _write_json(self, relative: str, document: dict) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2))


def generate_feed(root: str | Path, spec: FeedSpec = FeedSpec()) -> GroundTruth:
    """Write a feed under ``root`` (the container's folder) and return its ground truth."""
    if spec.hours < 1 or spec.shards < 1:
        raise ValueError("a feed needs at least one hour and one shard")
    if spec.hours - 1 in spec.gap_hours:
        raise ValueError("the last consumable hour must have a segment")
    if spec.writer not in WRITERS:
        raise ValueError(f"writer must be one of {', '.join(WRITERS)}, not {spec.writer!r}")
    return _Generator(spec, Path(root)).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a synthetic $blobchangefeed container.")
    parser.add_argument("--out", required=True, help="folder to write the container into")
    parser.add_argument("--start", default=format_time(DEFAULT_START), type=parse_time)
    parser.add_argument("--hours", type=int, default=FeedSpec.hours)
    parser.add_argument("--events-per-hour", type=int, default=FeedSpec.events_per_hour)
    parser.add_argument("--shards", type=int, default=FeedSpec.shards)
    parser.add_argument("--records-per-chunk", type=int, default=FeedSpec.records_per_chunk)
    parser.add_argument("--blobs", type=int, default=FeedSpec.blobs)
    parser.add_argument("--gap-hours", default="2", help="comma-separated hour indexes with no segment")
    parser.add_argument("--codec", default="null", choices=("null", "deflate"))
    parser.add_argument(
        "--writer",
        default=SERVICE,
        choices=WRITERS,
        help="service: the schema the Azure service writes (enums); legacy: plain strings",
    )
    parser.add_argument("--seed", type=int, default=FeedSpec.seed)
    parser.add_argument("--truth", help="also write the ground truth as JSON to this file")
    args = parser.parse_args(argv)
    spec = FeedSpec(
        start=args.start,
        hours=args.hours,
        events_per_hour=args.events_per_hour,
        shards=args.shards,
        records_per_chunk=args.records_per_chunk,
        blobs=args.blobs,
        codec=args.codec,
        seed=args.seed,
        writer=args.writer,
        gap_hours=tuple(int(h) for h in args.gap_hours.split(",") if h.strip()),
    )
    truth = generate_feed(args.out, spec)
    if args.truth:
        Path(args.truth).write_text(truth.to_json())
    print(
        f"wrote {len(truth.events)} events ({truth.control_records} Control, {truth.duplicate_records} duplicated) "
        f"in {spec.hours} consumable hour(s) to {args.out}; lastConsumable {format_time(spec.last_consumable)}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
