"""The coverage rule applied where the records are decoded: each record's claim window, and only the
records this run owns kept, before anything crosses into the JVM.

An event with time t read from segment S belongs to the window W(t) holding t when |W(t) - S| <= 1h, and
otherwise to S's own window (a *stray*). A run owns the records claimed by its windows; ``Control``
records are dropped there too. Everything is exact integer arithmetic on 100 ns ticks
(:meth:`lakefeed.blob.timegrid.WindowGrid.claim` is the same rule for one record).

About a quarter of what a run reads belongs to the neighbouring hours (the ±1 hour boundary reads): it
is counted and left in the decoding task instead of being converted to Spark rows and shuffled.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from lakefeed.blob.schema import CONTROL_EVENT_TYPE, RECORD_SCHEMA
from lakefeed.blob.timegrid import HOUR_TICKS, TICKS_PER_MICROSECOND

# Decoded records of the run's windows: the record columns, then the claim.
CLAIMED_SCHEMA = pa.schema(
    list(RECORD_SCHEMA)
    + [
        pa.field("isStray", pa.bool_()),
        pa.field("claimWindowTicks", pa.int64()),
        pa.field("claimWindow", pa.timestamp("us", tz="UTC")),
    ]
)


class ClaimRule(NamedTuple):
    """What a run claims: the grid's offset and the start of each of its windows, in ticks."""

    grid_offset_ticks: int
    window_ticks: tuple[int, ...]


class ClaimCounts(NamedTuple):
    """What one chunk file (or a run) held: records read, records its windows claim, of those the
    ``Control`` records and the strays that are not ``Control``."""

    records: int = 0
    claimed: int = 0
    control: int = 0
    strays: int = 0

    def __add__(self, other: object) -> ClaimCounts:
        if not isinstance(other, ClaimCounts):
            return NotImplemented
        return ClaimCounts(*(a + b for a, b in zip(self, other, strict=True)))


def claim(batch: pa.RecordBatch, rule: ClaimRule) -> tuple[pa.RecordBatch, ClaimCounts]:
    """The records of ``batch`` (:data:`RECORD_SCHEMA`) that ``rule``'s windows own, ``Control`` records
    left out, as :data:`CLAIMED_SCHEMA`; and the batch's :class:`ClaimCounts`."""
    ticks = batch.column("eventTimeTicks")
    segment = pc.multiply_checked(batch.column("segmentStart").cast(pa.int64()), TICKS_PER_MICROSECOND)
    window = pc.subtract_checked(ticks, _floor_mod(pc.subtract_checked(ticks, rule.grid_offset_ticks), HOUR_TICKS))
    stray = pc.greater(pc.abs_checked(pc.subtract_checked(window, segment)), HOUR_TICKS)
    claim_ticks = pc.if_else(stray, segment, window)
    owned = pc.is_in(claim_ticks, value_set=pa.array(rule.window_ticks, pa.int64()))
    control = pc.fill_null(pc.equal(batch.column("eventType"), CONTROL_EVENT_TYPE), False)
    kept = pc.and_(owned, pc.invert(control))
    counts = ClaimCounts(
        records=batch.num_rows,
        claimed=_count(owned),
        control=_count(pc.and_(owned, control)),
        strays=_count(pc.and_(kept, stray)),
    )
    kept_ticks = claim_ticks.filter(kept)
    columns = [column.filter(kept) for column in batch.columns] + [
        stray.filter(kept),
        kept_ticks,
        # A claim window starts on the grid or at a segment's start: whole microseconds.
        pc.divide(kept_ticks, TICKS_PER_MICROSECOND).cast(pa.timestamp("us", tz="UTC")),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=CLAIMED_SCHEMA), counts


def _floor_mod(values: pa.Array, divisor: int) -> pa.Array:
    """``values mod divisor`` rounded toward minus infinity (Arrow's integer division truncates toward zero)."""
    rest = pc.subtract_checked(values, pc.multiply_checked(pc.divide(values, divisor), divisor))
    return pc.if_else(pc.less(rest, 0), pc.add_checked(rest, divisor), rest)


def _count(mask: pa.Array) -> int:
    return int(pc.sum(mask.cast(pa.int64())).as_py() or 0)
