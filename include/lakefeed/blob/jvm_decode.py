"""Decode chunk files in the JVM with Spark's own Avro reader, where that keeps every field.

Spark ships an Avro file reader (``AvroFileFormat``) that decodes about five
times faster than the Python decoder, which spends most of its time building
Python dicts. It is used for a chunk file only when nothing can be lost:

- the feed sits on a filesystem Spark reads natively (local disk / a mount;
  Azure feeds go through the Python decoder, which reads them with adlfs), and
- the file's writer schema holds only superset fields, each of exactly the
  superset's type (:func:`jvm_readable`). A file with an unknown field or an
  odd type takes the Python decoder, which keeps the field in ``extra``.

Both decoders produce the same columns (:data:`RECORD_SCHEMA`) and the same
errors: a record with an unknown ``schemaVersion``, no ``id`` or an unreadable
``eventTime`` is reported, naming the file and the record, by
:func:`raise_record_problem` after the decoding action and before any write.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import unquote, urlparse

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from lakefeed.blob.decode import fits_superset, non_null
from lakefeed.blob.schema import (
    DATA_BOOL_FIELDS,
    DATA_LONG_FIELDS,
    DATA_MAP_FIELDS,
    DATA_STRING_FIELDS,
    EVENT_STRING_FIELDS,
    RECORD_SCHEMA,
    SUPPORTED_SCHEMA_VERSIONS,
    spark_schema,
)
from lakefeed.blob.timegrid import TICKS_PER_SECOND
from lakefeed.errors import FeedCorruptError

AVRO_FORMAT = "org.apache.spark.sql.avro.AvroFileFormat"  # in spark-sql itself since Spark 4
# Record index within a chunk file = the row's position in its scan partition,
# which holds exactly one whole file while these settings are in force.
_ONE_FILE_PER_PARTITION = {
    "spark.sql.files.maxPartitionBytes": str(1 << 40),
    "spark.sql.files.openCostInBytes": str(1 << 40),
}
_POSITION_BITS = (1 << 33) - 1  # monotonically_increasing_id = partition << 33 | position
_EVENT_TIME = r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})?$"
_PROBLEM = "_recordProblem"

def _is_string_map(avro_type: Any) -> bool:
    avro_type = non_null(avro_type)
    return isinstance(avro_type, dict) and avro_type.get("type") == "map" and non_null(avro_type.get("values")) == "string"


def _record_fields(avro_type: Any) -> list[dict] | None:
    avro_type = non_null(avro_type)
    if isinstance(avro_type, dict) and avro_type.get("type") == "record":
        return avro_type.get("fields", [])
    return None


def _is_record_of(avro_type: Any, names: list[str], is_field_type) -> bool:
    fields = _record_fields(avro_type)
    return fields is not None and [f["name"] for f in fields] == names and all(is_field_type(f["type"]) for f in fields)


def _has_logical_type(avro_type: Any) -> bool:
    if isinstance(avro_type, dict):
        return "logicalType" in avro_type or any(_has_logical_type(v) for v in avro_type.values())
    if isinstance(avro_type, list):
        return any(_has_logical_type(v) for v in avro_type)
    return False


def jvm_readable(writer_schema: Any) -> bool:
    """Whether Spark's Avro reader decodes this writer schema into superset columns losslessly:
    the superset's fields only (:func:`fits_superset`), no logical types, and every nested map and
    record of exactly the superset's shape (the Python decoder also takes looser shapes)."""
    if not fits_superset(writer_schema) or _has_logical_type(writer_schema):
        return False
    data = _record_fields(next(f["type"] for f in writer_schema["fields"] if f["name"] == "data"))
    for field in data:
        name, kind = field["name"], non_null(field["type"])
        if name in DATA_MAP_FIELDS and not _is_string_map(kind):
            return False
        if name == "blobPropertiesUpdated" and not (
                isinstance(kind, dict) and kind.get("type") == "map"
                and _is_record_of(kind.get("values"), ["current", "previous"], lambda t: non_null(t) == "string")):
            return False
        if name == "blobTagsUpdated" and not _is_record_of(kind, ["previous", "current"], _is_string_map):
            return False
    return True


@contextmanager
def one_file_per_partition(spark: SparkSession) -> Iterator[None]:
    """Plan Avro scans with one whole chunk file per partition (see ``chunkRecordIndex``)."""
    before = {key: spark.conf.get(key, None) for key in _ONE_FILE_PER_PARTITION}
    for key, value in _ONE_FILE_PER_PARTITION.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def reader_schema(writer_schema: dict) -> dict:
    """The superset as an Avro reader schema, named as ``writer_schema`` names its records.

    Avro's schema resolution then fills the fields a version lacks with null and
    widens int to long, so Spark's reader emits superset columns directly.
    """
    def nullable(avro_type: Any) -> list:
        return ["null", avro_type]

    def name_of(avro_type: Any, default: str) -> str:
        avro_type = non_null(avro_type)
        while isinstance(avro_type, dict) and avro_type.get("type") == "map":
            avro_type = non_null(avro_type.get("values"))
        if isinstance(avro_type, dict) and avro_type.get("name"):
            name = avro_type["name"]
            namespace = avro_type.get("namespace")
            return f"{namespace}.{name}" if namespace and "." not in name else name
        return default

    def field(name: str, avro_type: Any) -> dict:
        return {"name": name, "type": nullable(avro_type), "default": None}

    string_map = {"type": "map", "values": nullable("string")}
    top = {f["name"]: f["type"] for f in writer_schema["fields"]}
    data = {f["name"]: f["type"] for f in _record_fields(top["data"])}
    data_fields = (
        [field(name, "string") for name in DATA_STRING_FIELDS]
        + [field(name, "long") for name in DATA_LONG_FIELDS]
        + [field(name, "boolean") for name in DATA_BOOL_FIELDS]
        + [field(name, string_map) for name in DATA_MAP_FIELDS]
        + [
            field("blobPropertiesUpdated", {"type": "map", "values": {
                "type": "record", "name": name_of(data.get("blobPropertiesUpdated"), "lakefeed.BlobPropertyChange"),
                "fields": [field("current", "string"), field("previous", "string")]}}),
            field("blobTagsUpdated", {
                "type": "record", "name": name_of(data.get("blobTagsUpdated"), "lakefeed.BlobTagsChange"),
                "fields": [field("previous", string_map), field("current", string_map)]}),
            field("extra", string_map),
        ]
    )
    return {
        "type": "record",
        "name": name_of(writer_schema, "lakefeed.BlobChangeEvent"),
        "fields": [field(name, "string") for name in EVENT_STRING_FIELDS]
        + [field("schemaVersion", "long"),
           field("data", {"type": "record", "name": name_of(top["data"], "lakefeed.BlobChangeEventData"),
                          "fields": data_fields})],
    }


def read_chunk_files(spark: SparkSession, files: list[tuple[str, str, str, Any, Any]]) -> DataFrame:
    """Records of ``files`` — (local path, chunk path, shard, segment start, writer schema) —
    as :data:`RECORD_SCHEMA` rows. Files sharing a writer schema are read in one scan."""
    groups: dict[str, list] = defaultdict(list)
    for local, chunk_path, shard, segment_start, writer_schema in files:
        schema = json.dumps(reader_schema(writer_schema), sort_keys=True)
        groups[schema].append((local, chunk_path, shard, segment_start))
    frames = []
    for schema_json, members in groups.items():
        scan = spark.read.format(AVRO_FORMAT).option("avroSchema", schema_json).load([m[0] for m in members])
        # Rows name their file by URI (`file:/a%20b`; the listing says `file:///a%20b`):
        # key the lineage by both spellings of each listed file's URI.
        by_local = {os.path.normpath(m[0]): m for m in members}
        lineage = []
        for uri in scan.inputFiles():
            _, chunk, shard, start = by_local[local_path(uri)]
            for spelling in {uri, re.sub(r"^file:/+", "file:/", uri), re.sub(r"^file:/+", "file:///", uri)}:
                lineage.append((spelling, chunk, shard, start))
        lineage_frame = spark.createDataFrame(
            lineage, "_filePath string, chunkFile string, shard string, segmentStart timestamp")
        raw = scan.select(
            "*", F.col("_metadata.file_path").alias("_filePath"),
            F.monotonically_increasing_id().bitwiseAND(F.lit(_POSITION_BITS)).alias("chunkRecordIndex"))
        frames.append(_to_records(raw.join(F.broadcast(lineage_frame), "_filePath", "left")))
    if not frames:
        return spark.createDataFrame([], spark_schema())
    records = frames[0]
    for frame in frames[1:]:
        records = records.unionByName(frame)
    return records


def local_path(file_uri: str) -> str:
    """``file:/a%20b+c`` or ``file:///a%20b+c`` → ``/a b+c``."""
    return os.path.normpath(unquote(urlparse(file_uri).path))


def _to_records(raw: DataFrame) -> DataFrame:
    target = spark_schema()
    columns = {
        **{name: F.col(name) for name in EVENT_STRING_FIELDS},
        "schemaVersion": F.when(F.col("schemaVersion").between(-(2**31), 2**31 - 1),
                                F.col("schemaVersion").cast("int")),
        "data": F.col("data"),
        "extra": F.lit(None).cast(target["extra"].dataType),
        "eventTimeTicks": event_time_ticks(F.col("eventTime")),
        "segmentStart": F.col("segmentStart"),
        "shard": F.col("shard"),
        "chunkFile": F.col("chunkFile"),
        "chunkRecordIndex": F.col("chunkRecordIndex"),
    }
    return raw.select(*[columns[field.name].alias(field.name) for field in RECORD_SCHEMA])


def event_time_ticks(text: Column) -> Column:
    """100 ns ticks of an ISO-8601 ``eventTime``, exactly as :func:`timegrid.parse_event_time` reads it;
    null when it cannot be read. The service's own form (7 digits, ``Z``) skips the regex."""
    digits = F.substring(text, 21, 7)
    service_form = (
        (F.length(text) == 28) & (F.substring(text, 20, 1) == ".") & (F.substring(text, 28, 1) == "Z")
        & (F.translate(digits, "0123456789", "") == "")
    )
    second = F.try_to_timestamp(F.substring(text, 1, 19), F.lit("yyyy-MM-dd'T'HH:mm:ss"))
    fast = F.unix_seconds(second) * F.lit(TICKS_PER_SECOND) + digits.cast("long")

    minute = F.try_to_timestamp(F.regexp_extract(text, _EVENT_TIME, 1), F.lit("yyyy-MM-dd'T'HH:mm"))
    seconds = F.unix_seconds(minute) + F.regexp_extract(text, _EVENT_TIME, 2).cast("long")
    zone = F.regexp_extract(text, _EVENT_TIME, 4)
    offset = F.when(zone.isin("", "Z"), F.lit(0)).otherwise(
        (F.when(F.substring(zone, 1, 1) == "+", 1).otherwise(-1))
        * (F.substring(zone, 2, 2).cast("long") * 3600 + F.substring(zone, 5, 2).cast("long") * 60))
    fraction = F.rpad(F.regexp_extract(text, _EVENT_TIME, 3), 7, "0").cast("long")
    general = F.when(text.rlike(_EVENT_TIME), (seconds - offset) * F.lit(TICKS_PER_SECOND) + fraction)
    return F.coalesce(F.when(service_form, fast), general)


def with_record_problem(records: DataFrame) -> DataFrame:
    """Add ``_recordProblem``: why a record cannot be taken (the Python decoder's words), or null."""
    supported = ", ".join(map(str, sorted(SUPPORTED_SCHEMA_VERSIONS)))
    version_text = F.coalesce(F.col("schemaVersion").cast("string"), F.lit("None"))
    problem = (
        F.when(F.col("chunkFile").isNull(), F.lit("chunk file of the record not matched (lineage lost)"))
        .when(~F.coalesce(F.col("schemaVersion").isin(sorted(SUPPORTED_SCHEMA_VERSIONS)), F.lit(False)),
               F.concat(F.lit("unknown schemaVersion "), version_text, F.lit(f" (supported: {supported})")))
        .when(F.coalesce(F.length("id"), F.lit(0)) == 0, F.lit("missing event id"))
        .when(F.col("eventTimeTicks").isNull(),
              F.concat(F.lit("(id "), F.col("id"), F.lit("): unreadable eventTime "),
                       F.coalesce(F.concat(F.lit("'"), F.col("eventTime"), F.lit("'")), F.lit("None"))))
    )
    return records.withColumn(_PROBLEM, problem)


def first_problem_metric() -> Column:
    """Observed metric: the first bad record (file, index, problem), or null."""
    bad = F.col(_PROBLEM)
    return F.min(F.when(bad.isNotNull(), F.struct("chunkFile", "chunkRecordIndex", bad))).alias("firstProblem")


def raise_record_problem(first_problem: Any, url_of) -> None:
    if first_problem is None:
        return
    chunk_file, index, problem = first_problem[0], first_problem[1], first_problem[2]
    separator = " " if problem.startswith("(") else ": "
    raise FeedCorruptError(f"{url_of(chunk_file)}: record {index}{separator}{problem}")
