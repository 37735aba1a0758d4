"""The generator's feed has every feature it promises, deterministically."""

import hashlib
import json
from pathlib import Path

import fastavro
import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed, service_schema

from lakefeed.blob.feed import ChangeFeed
from lakefeed.storage import Store

SPEC = FeedSpec(hours=4, events_per_hour=600, shards=3, records_per_chunk=150, seed=11)


def digest(root: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return h.hexdigest()


def test_same_seed_same_bytes(tmp_path):
    generate_feed(tmp_path / "a", SPEC)
    generate_feed(tmp_path / "b", SPEC)
    assert digest(tmp_path / "a") == digest(tmp_path / "b")


def test_feed_layout_and_features(tmp_path):
    truth = generate_feed(tmp_path, SPEC)
    feed = ChangeFeed(Store(str(tmp_path)))
    starts = feed.all_segment_starts()
    assert [s.hour for s in starts] == [0, 1, 3, 4]  # hour 2 is a gap; 04:10 is past lastConsumable
    assert (tmp_path / "idx/segments/1601/01/01/0000/meta.json").exists()
    assert feed.last_consumable() == SPEC.last_consumable
    assert not feed.read_segment(starts[-1]).is_finalized
    assert truth.control_records > 0 and truth.duplicate_records > 0
    assert any(e.stray for e in truth.events)
    assert any(e.eventTime.endswith(":09:59.9999999Z") for e in truth.events)
    assert {e.window for e in truth.events} >= {"2025-12-31T23:10:00Z", "2026-01-01T02:10:00Z"}
    chunks = feed.chunk_files(feed.read_segment(starts[1]))
    assert any(c.size == 0 for c in chunks)
    versions = set()
    for chunk in (c for s in starts for c in feed.chunk_files(feed.read_segment(s)) if c.size):
        with (tmp_path / chunk.path).open("rb") as handle:
            versions.update(r["schemaVersion"] for r in fastavro.reader(handle))
    assert versions == {1, 3, 4, 5, 6}


def test_sequencers_increase_per_blob_in_feed_order(tmp_path):
    truth = generate_feed(tmp_path, SPEC)
    last: dict[str, str] = {}
    for event in truth.events:
        assert event.sequencer > last.get(event.subject, "")
        last[event.subject] = event.sequencer


def test_adding_hours_keeps_earlier_hours_identical(tmp_path):
    small = generate_feed(tmp_path / "a", SPEC)
    bigger = generate_feed(tmp_path / "b", FeedSpec(**{**SPEC.__dict__, "hours": 6}))
    assert [e.id for e in bigger.events[: len(small.events) - 600]] == [e.id for e in small.events[:-600]]


# The writer schema in the header of a real v6 chunk file the service wrote in 2025 (an Azure SDK test
# recording of log/00/2025/10/06/1900/00000.avro), byte for byte.
SERVICE_V6_SCHEMA = (
    '{"type":"record","name":"BlobChangeEvent","namespace":"Microsoft.Storage","fields":[{"name":"schemaV'
    'ersion","type":"long","default":4},{"name":"topic","type":"string","default":""},{"name":"subject","'
    'type":"string","default":""},{"name":"eventType","type":{"type":"enum","name":"EventTypeEnum","symbo'
    'ls":["UnspecifiedEventType","BlobCreated","BlobDeleted","BlobPropertiesUpdated","BlobSnapshotCreated'
    '","Control","BlobTierChanged","BlobAsyncOperationInitiated","RestorePointMarkerCreated"],"default":"'
    'UnspecifiedEventType"}},{"name":"eventTime","type":"string","default":""},{"name":"id","type":"strin'
    'g","default":""},{"name":"data","type":{"type":"record","name":"BlobChangeEventData","fields":[{"nam'
    'e":"api","type":{"type":"enum","name":"ApiEnum","symbols":["UnspecifiedApi","PutBlob","PutBlockList"'
    ',"CopyBlob","DeleteBlob","SetBlobMetadata","ControlEvent","UndeleteBlob","SetBlobProperties","Snapsh'
    'otBlob","SetBlobTier","AbortCopyBlob","SetBlobTags","CreateRestorePointMarker"],"default":"Unspecifi'
    'edApi"},"default":"UnspecifiedApi"},{"name":"clientRequestId","type":"string","default":""},{"name":'
    '"requestId","type":"string","default":""},{"name":"etag","type":"string","default":""},{"name":"cont'
    'entType","type":"string","default":""},{"name":"contentLength","type":"long","default":0},{"name":"b'
    'lobType","type":{"type":"enum","name":"BlobTypeEnum","symbols":["UnspecifiedBlobType","BlockBlob","P'
    'ageBlob","AppendBlob"],"default":"UnspecifiedBlobType"},"default":"UnspecifiedBlobType"},{"name":"bl'
    'obVersion","type":["null","string"],"default":null},{"name":"containerVersion","type":["null","strin'
    'g"],"default":null},{"name":"blobTier","type":["null",{"type":"enum","name":"BlobTierEnum","symbols"'
    ':["UnspecifiedBlobTier","Hot","Cool","Archive","Cold"],"default":"UnspecifiedBlobTier"}],"default":n'
    'ull},{"name":"url","type":"string","default":""},{"name":"sequencer","type":"string","default":""},{'
    '"name":"previousInfo","type":["null",{"type":"map","values":"string"}],"default":null},{"name":"snap'
    'shot","type":["null","string"],"default":null},{"name":"blobPropertiesUpdated","type":["null",{"type'
    '":"map","values":{"type":"record","name":"values","fields":[{"name":"current","type":"string","defau'
    'lt":""},{"name":"previous","type":"string","default":""}]}}],"default":null},{"name":"asyncOperation'
    'Info","type":["null",{"type":"map","values":"string"}],"default":null},{"name":"blobTagsUpdated","ty'
    'pe":["null",{"type":"map","values":{"type":"map","values":"string"}}],"default":null},{"name":"resto'
    'rePointMarker","type":["null",{"type":"map","values":"string"}],"default":null},{"name":"storageDiag'
    'nostics","type":{"type":"map","values":"string"},"default":{}}]}}]}'
)


def test_the_generator_writes_the_services_own_schema():
    assert json.dumps(service_schema(6), separators=(",", ":")) == SERVICE_V6_SCHEMA
    v5, v4 = service_schema(5), service_schema(4)
    assert json.dumps(v5, separators=(",", ":")) == SERVICE_V6_SCHEMA.replace(',"Cold"', "")
    data_v4 = [f["name"] for f in v4["fields"][6]["type"]["fields"]]
    assert "blobTagsUpdated" not in data_v4 and "restorePointMarker" not in data_v4
    assert "RestorePointMarkerCreated" not in v4["fields"][3]["type"]["symbols"]


def test_the_legacy_writer_is_kept_as_an_older_case(tmp_path):
    truth = generate_feed(tmp_path, FeedSpec(hours=2, events_per_hour=20, gap_hours=(), writer="legacy"))
    chunk = next(p for p in sorted((tmp_path / "log").rglob("*.avro")) if p.stat().st_size)
    with chunk.open("rb") as handle:
        schema = fastavro.reader(handle).writer_schema
    assert {f["name"]: f["type"] for f in schema["fields"]}["eventType"] == "string" and truth.events
    with pytest.raises(ValueError, match="writer must be one of"):
        generate_feed(tmp_path / "x", FeedSpec(writer="jvm"))
