"""Which chunk files Spark's Avro reader may decode, and the reader schema it decodes them with."""

from __future__ import annotations

import copy
import io

import fastavro
import pytest

from lakefeed.blob.generator import SCHEMA_VERSIONS, avro_schema
from lakefeed.blob.jvm_decode import jvm_readable, reader_schema
from lakefeed.blob.schema import DATA_FIELDS, EVENT_FIELDS


def _with_data_field(schema: dict, field: dict) -> dict:
    schema = copy.deepcopy(schema)
    data = next(f for f in schema["fields"] if f["name"] == "data")
    data["type"]["fields"].append(field)
    return schema


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_every_schema_version_of_the_service_is_jvm_readable(version):
    assert jvm_readable(avro_schema(version))


def test_unknown_fields_and_other_types_stay_with_the_python_decoder():
    schema = avro_schema(6)
    assert not jvm_readable(_with_data_field(schema, {"name": "newField", "type": "string"}))
    assert not jvm_readable(_with_data_field(schema, {"name": "recursive", "type": "string"}))
    top_level = copy.deepcopy(schema)
    top_level["fields"].append({"name": "metadataVersion", "type": "string"})
    assert not jvm_readable(top_level)
    retyped = copy.deepcopy(schema)
    next(f for f in retyped["fields"] if f["name"] == "schemaVersion")["type"] = "string"
    assert not jvm_readable(retyped)
    assert not jvm_readable({"type": "record", "name": "x", "fields": [{"name": "id", "type": "string"}]})
    assert not jvm_readable("string")


@pytest.mark.parametrize("version", SCHEMA_VERSIONS)
def test_reader_schema_resolves_every_version_to_the_superset(version):
    writer = avro_schema(version)
    record = {"schemaVersion": version, "topic": "t", "subject": "s", "eventType": "BlobCreated",
              "eventTime": "2026-01-01T00:00:00.0000000Z", "id": "e1", "data": _data_of(writer)}
    buffer = io.BytesIO()
    fastavro.writer(buffer, writer, [record])
    buffer.seek(0)
    reader = reader_schema(writer)
    assert [f["name"] for f in reader["fields"]] == list(EVENT_FIELDS)  # Spark's column order
    (read,) = list(fastavro.reader(buffer, reader_schema=reader))
    assert set(read) == set(EVENT_FIELDS)
    assert set(read["data"]) == set(DATA_FIELDS)
    assert read["schemaVersion"] == version and read["data"]["contentLength"] == 7
    assert read["data"]["extra"] is None


def _data_of(writer: dict) -> dict:
    data = {}
    for field in next(f for f in writer["fields"] if f["name"] == "data")["type"]["fields"]:
        kind = field["type"]
        data[field["name"]] = (7 if kind == "long" else {} if isinstance(kind, dict) and kind.get("type") == "map"
                               else None if isinstance(kind, list) else "x")
    return data
