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

from collections.abc import Iterable, Iterator, Sequence

import pyarrow as pa
from pyspark.accumulators import Accumulator, AccumulatorParam

from lakefeed.blob.avro_container import read_header
from lakefeed.blob.claim import ClaimCounts, ClaimRule, claim
from lakefeed.blob.columnar import decode_columnar
from lakefeed.blob.feed import ChunkRef
from lakefeed.blob.records import decode_records
from lakefeed.blob.writer_schema import columnar_readable
from lakefeed.storage import Store

DEFAULT_BATCH_SIZE = 8192


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


class ChunkTask:
    """``mapInArrow`` body of the decode stage, one task per chunk file: rows of ``spark.range(len(chunks))`` in
    (the index of each task's chunk file), the chunk file's decoded records out, each batch as it is decoded.

    With a ``rule``, the records go through :func:`lakefeed.blob.claim.claim` first: only those the run's
    windows own leave the task (:data:`~lakefeed.blob.claim.CLAIMED_SCHEMA`), and each chunk file's
    :class:`~lakefeed.blob.claim.ClaimCounts` is added to ``counts`` under its path (a task run again adds
    the same figures under the same key, so nothing counts twice).
    """

    def __init__(
        self,
        chunks: Sequence[ChunkRef],
        rule: ClaimRule | None = None,
        counts: Accumulator[dict[str, ClaimCounts]] | None = None,
    ) -> None:
        self.chunks = list(chunks)
        self.rule = rule
        self.counts = counts

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        stores: dict[str, Store] = {}
        for batch in batches:
            for index in batch.column(0).to_pylist():
                chunk = self.chunks[index]
                store = stores.get(chunk.root)
                if store is None:
                    store = stores[chunk.root] = Store(chunk.root)
                decoded = decode_chunk(store, chunk)
                if self.rule is None:
                    yield from decoded
                    continue
                seen = ClaimCounts()
                for records in decoded:
                    kept, counts = claim(records, self.rule)
                    seen += counts
                    if kept.num_rows:
                        yield kept
                if self.counts is not None:
                    self.counts.add({chunk.path: seen})


class CountsByChunk(AccumulatorParam[dict[str, ClaimCounts]]):
    """Each chunk file's :class:`~lakefeed.blob.claim.ClaimCounts`, by path."""

    def zero(self, value: dict[str, ClaimCounts]) -> dict[str, ClaimCounts]:
        return {}

    def addInPlace(self, value1: dict[str, ClaimCounts], value2: dict[str, ClaimCounts]) -> dict[str, ClaimCounts]:
        value1.update(value2)
        return value1
