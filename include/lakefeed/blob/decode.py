"""Streaming decode of Avro chunk files into Arrow batches of the superset schema.

Runs in Spark's Python workers (one task per chunk file) and in plain Python
(benchmarks, tests). Memory is bounded by ``batch_size`` records, whatever
the file's size: fastavro reads the file block by block.

A 0-byte chunk file is an empty chunk (the feed appends to it later or never);
a non-empty file that is not valid Avro, a truncated block, an unknown
``schemaVersion`` or an unreadable ``eventTime`` raise :class:`FeedCorruptError`
naming the file and, where known, the record.

The two readers: :mod:`lakefeed.blob.columnar` (a Rust Avro reader, column by column, for the writer
schemas :mod:`lakefeed.blob.writer_schema` accepts) and :mod:`lakefeed.blob.records` (fastavro, record by
record, for any other).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from lakefeed.blob.avro_container import read_header
from lakefeed.blob.columnar import decode_columnar
from lakefeed.blob.feed import ChunkRef
from lakefeed.blob.records import decode_records
from lakefeed.blob.writer_schema import columnar_readable
from lakefeed.storage import Store

DEFAULT_BATCH_SIZE = 8192

# The columns of the decode input: one row per chunk file (see spark_decode_input).
CHUNK_INPUT_SCHEMA = pa.schema(
    [
        ("root", pa.string()),
        ("path", pa.string()),
        ("shard", pa.string()),
        ("segmentStart", pa.timestamp("us", tz="UTC")),
        ("columnar", pa.bool_()),  # the columnar reader where lossless (false: fastavro for every file)
    ]
)


def decode_chunk(store: Store, chunk: ChunkRef, batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    """Decoded records of one chunk file, in ``batch_size`` batches of :data:`RECORD_SCHEMA`.

    A file whose writer schema the superset represents exactly (:func:`columnar_readable`, the
    service's own schema included) is decoded column by column by a Rust Avro reader, a group of
    whole blocks at a time; any other file (unknown fields, odd types), or every file when
    ``chunk.columnar`` is false, record by record with fastavro, which keeps unknown fields in ``extra``.
    """
    url = store.url(chunk.path)
    with store.open(chunk.path) as handle:
        if not handle.read(1):
            return  # 0-byte chunk file: empty, not corrupt
        handle.seek(0)
        header, stream = read_header(handle, url)
        if chunk.columnar and columnar_readable(header.schema):
            yield from decode_columnar(header, stream, chunk, url, batch_size)
            return
        handle.seek(0)
        yield from decode_records(handle, chunk, url, batch_size)


def decode_chunks(chunks: Iterable[ChunkRef], batch_size: int = DEFAULT_BATCH_SIZE) -> Iterator[pa.RecordBatch]:
    stores: dict[str, Store] = {}
    for chunk in chunks:
        store = stores.get(chunk.root)
        if store is None:
            store = stores[chunk.root] = Store(chunk.root)
        yield from decode_chunk(store, chunk, batch_size)


def decode_arrow_partition(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: rows of :data:`CHUNK_INPUT_SCHEMA` in, decoded records out."""

    def refs() -> Iterator[ChunkRef]:
        for batch in batches:
            for row in batch.to_pylist():
                yield ChunkRef(
                    root=row["root"],
                    path=row["path"],
                    shard=row["shard"],
                    segment_start=row["segmentStart"],
                    columnar=row["columnar"],
                )

    yield from decode_chunks(refs())
