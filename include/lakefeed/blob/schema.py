"""One superset schema for change feed records of schema versions 1, 3, 4, 5 and 6.

The Arrow schema here is the single source of truth: the decoder builds Arrow
batches of it and Spark derives its ``StructType`` from it. Fields a version
lacks are null. Nothing is dropped: a field this schema does not know lands,
JSON-encoded, in ``extra`` (top level) or ``data.extra``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

SUPPORTED_SCHEMA_VERSIONS = frozenset({1, 3, 4, 5, 6})
CONTROL_EVENT_TYPE = "Control"
DELETE_EVENT_TYPE = "BlobDeleted"

STRING_MAP = pa.map_(pa.string(), pa.string())

# data.* fields by Arrow type; order is the column order in the events table.
DATA_STRING_FIELDS = (
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
DATA_LONG_FIELDS = ("contentLength", "contentOffset")
DATA_BOOL_FIELDS = ("recursive",)
DATA_MAP_FIELDS = ("previousInfo", "asyncOperationInfo", "restorePointMarker", "storageDiagnostics")
PROPERTY_CHANGE = pa.struct([("current", pa.string()), ("previous", pa.string())])
BLOB_PROPERTIES_UPDATED = pa.map_(pa.string(), PROPERTY_CHANGE)
BLOB_TAGS_UPDATED = pa.struct([("previous", STRING_MAP), ("current", STRING_MAP)])

DATA_TYPE = pa.struct(
    [pa.field(name, pa.string()) for name in DATA_STRING_FIELDS]
    + [pa.field(name, pa.int64()) for name in DATA_LONG_FIELDS]
    + [pa.field(name, pa.bool_()) for name in DATA_BOOL_FIELDS]
    + [pa.field(name, STRING_MAP) for name in DATA_MAP_FIELDS]
    + [
        pa.field("blobPropertiesUpdated", BLOB_PROPERTIES_UPDATED),
        pa.field("blobTagsUpdated", BLOB_TAGS_UPDATED),
        pa.field("extra", STRING_MAP),
    ]
)
DATA_FIELDS = tuple(field.name for field in DATA_TYPE)

EVENT_STRING_FIELDS = ("id", "eventType", "eventTime", "subject", "topic")
EVENT_FIELDS = EVENT_STRING_FIELDS + ("schemaVersion", "data")

# What the decoder emits per record: the feed's fields, then derived and lineage columns.
RECORD_SCHEMA = pa.schema(
    [pa.field(name, pa.string()) for name in EVENT_STRING_FIELDS]
    + [
        pa.field("schemaVersion", pa.int32()),
        pa.field("data", DATA_TYPE),
        pa.field("extra", STRING_MAP),
        # 100 ns ticks since the epoch: full eventTime precision for window assignment.
        pa.field("eventTimeTicks", pa.int64()),
        pa.field("segmentStart", pa.timestamp("us", tz="UTC")),
        pa.field("shard", pa.string()),
        pa.field("chunkFile", pa.string()),
        pa.field("chunkRecordIndex", pa.int64()),
    ]
)


def spark_schema(arrow_schema: pa.Schema = RECORD_SCHEMA) -> StructType:
    """The Spark ``StructType`` of an Arrow schema, decoded records by default (imports pyspark lazily)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(arrow_schema)
