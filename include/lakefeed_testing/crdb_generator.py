"""A synthetic CockroachDB changefeed sink folder, deterministic from a seed, with its ground truth.

For the demo, the tests and the benchmarks. It simulates two tables changing over time and a
changefeed ``WITH updated, resolved`` writing them the way the cloud storage sink does: an initial
scan named at the statement time, two change aggregators (nodes) each flushing one file per topic and
schema version, named with the inclusive lower bound of its rows' ``updated`` (the last RESOLVED's
successor), RESOLVED files from the coordinator, ``daily``/``hourly``/``flat`` partition folders,
optionally gzip or parquet. And what real feeds throw at a reader: composite keys, updates, deletes,
inserts after deletes, a delete of a key never seen, duplicates in one file and across files, a node
restart that re-emits everything since the last RESOLVED under a new session ("1 2 1"), rows newer
than the RESOLVED file that follows them, a schema change (new schema id, every row re-emitted with a
new column), and a file of the sink's naming bug: written after a RESOLVED file but named before it
(listed in the truth as late, so a test can hold it back until its RESOLVED was applied).

The expected final state is the last committed version of every row, from the simulated history, not
from the rule under test.

    python -m lakefeed_testing.crdb_generator --out data/crdb_sink --steps 40 --changes-per-step 200
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

from lakefeed.crdb.hlc import NANOS, Hlc

DEFAULT_START = datetime(2026, 3, 14, 9, 59, 58, tzinfo=UTC)
PARTITIONS = ("daily", "hourly", "flat")
FORMATS = ("ndjson", "parquet")


@dataclass(frozen=True)
class SinkSpec:
    start: datetime = DEFAULT_START  # the changefeed's statement time (initial scan)
    steps: int = 30  # commit steps after the initial scan, step_seconds apart
    step_seconds: float = 7.0
    changes_per_step: int = 40
    customers: int = 60  # rows before the initial scan
    orders: int = 120
    steps_per_flush: int = 3  # aggregators flush every this many steps
    flushes_per_resolved: int = 2  # the coordinator writes a RESOLVED file every this many flushes
    duplicate_rate: float = 0.03  # messages written twice in the same file
    restart_at_flush: int | None = 4  # node 2 restarts after this flush: it re-emits since the last RESOLVED
    schema_change_at_step: int | None = 12  # customers gains a column: new schema id, every row re-emitted
    late_file_at_resolved: int | None = 3  # a file written after this RESOLVED, named before it
    partition_format: str = "daily"
    format: str = "ndjson"
    compression: str | None = None  # None | gzip (ndjson only)
    # The sink's file_size (default 16 MiB): a file is cut once its bytes pass it, the row that passed it
    # included, and the next file of the same flush takes the next file id and the same name timestamp.
    # Measured on the rows' text before compression (the sink measures after).
    file_size: int = 16 << 20
    seed: int = 7


@dataclass(frozen=True)
class Change:
    """One committed row change, as the simulated cluster's history holds it: a core changefeed over SQL
    (:mod:`lakefeed_testing.crdb_server`) serves these, the sink writes them into files."""

    topic: str
    key: str  # the primary key as a JSON array
    after: str | None  # the row as JSON (CockroachDB's text), None for a delete
    stamp: Hlc


@dataclass
class SinkTruth:
    spec: SinkSpec
    rows: dict[str, dict[str, dict | None]] = field(default_factory=dict)  # topic -> key JSON -> row or None
    history: list[Change] = field(default_factory=list)  # every committed change, in commit order
    resolved: list[str] = field(default_factory=list)  # RESOLVED timestamps, in order
    late_files: list[str] = field(default_factory=list)  # keys of files named before a RESOLVED written earlier
    messages: int = 0
    duplicates: int = 0

    def live(self, topic: str) -> dict[str, dict]:
        return {key: row for key, row in self.rows[topic].items() if row is not None}

    def deleted(self, topic: str) -> set[str]:
        return {key for key, row in self.rows[topic].items() if row is None}

    def as_of(self, stamp: Hlc) -> dict[str, dict[str, dict | None]]:
        """topic -> key JSON -> row (None: deleted) from the changes committed at or before ``stamp``."""
        rows: dict[str, dict[str, dict | None]] = {topic: {} for topic in self.rows}
        for change in sorted(self.history, key=lambda c: c.stamp):
            if change.stamp <= stamp:
                rows[change.topic][change.key] = None if change.after is None else json.loads(change.after)
        return rows


def key_json(values: list) -> str:
    return json.dumps(values, separators=(",", ":"))


class _Sink:
    def __init__(self, spec: SinkSpec, root: Path):
        self.spec, self.root = spec, root
        self.rng = random.Random(spec.seed)
        self.truth = SinkTruth(spec=spec, rows={"customers": {}, "orders": {}})
        self.tables: dict[str, dict[str, dict]] = {"customers": {}, "orders": {}}
        self.deleted: dict[str, dict[str, None]] = {"customers": {}, "orders": {}}  # keys whose row is gone
        self.schema_ids = {"customers": 1, "orders": 1}
        self.sessions = {1: self._session(), 2: self._session()}
        self.file_ids = {1: 0, 2: 0}
        self.buffers: dict[int, list] = {1: [], 2: []}  # (topic, schema id, key, message text)
        self.since_resolved: dict[int, list] = {1: [], 2: []}
        self.last_resolved = Hlc(int(spec.start.timestamp()) * NANOS + spec.start.microsecond * 1000, 0)
        self.wall = self.last_resolved.wall
        self.late_pending = False
        self._keys: dict[str, list[str]] = {"customers": [], "orders": []}  # live keys, for sampling
        self._index: dict[str, dict[str, int]] = {"customers": {}, "orders": {}}

    def _session(self) -> str:
        return f"{self.rng.getrandbits(64):016x}"

    def _now(self, seconds: float) -> Hlc:
        self.wall += int(seconds * NANOS)
        return Hlc(self.wall, 0)

    # -- the simulated tables --------------------------------------------------------------------
    def _customer(self, cid: int) -> dict:
        row = {
            "id": cid,
            "name": f"customer {cid}",
            "tier": self.rng.choice(["gold", "silver", "bronze"]),
            "balance": Decimal(f"{self.rng.randint(0, 99999)}.{self.rng.randint(0, 99):02d}"),
            "active": self.rng.random() < 0.8,
        }
        if self.schema_ids["customers"] > 1:
            row["note"] = self.rng.choice(["vip", "new", "late payer"])
        return row

    def _order(self, region: str, oid: int) -> dict:
        return {
            "region": region,
            "id": oid,
            "customer_id": self.rng.randint(1, self.spec.customers),
            "status": self.rng.choice(["new", "paid", "shipped"]),
            "total": self.rng.randint(100, 99999) / 100,
            "meta": {"source": self.rng.choice(["web", "app"]), "tags": [self.rng.randint(1, 9)]},
        }

    def _key(self, topic: str, row: dict) -> list:
        return [row["id"]] if topic == "customers" else [row["region"], row["id"]]

    def _change(self, topic: str, key: list, row: dict | None, stamp: Hlc, node: int | None = None) -> None:
        """Commit a change: the truth follows it, and the change is emitted by the node owning the key."""
        k = key_json(key)
        if row is None:
            if self.tables[topic].pop(k, None) is not None:
                self._forget(topic, k)
            self.deleted[topic][k] = None
        else:
            if k not in self.tables[topic]:
                self._index[topic][k] = len(self._keys[topic])
                self._keys[topic].append(k)
            self.tables[topic][k] = row
            self.deleted[topic].pop(k, None)
        self.truth.rows[topic][k] = None if row is None else json.loads(_dumps(row))
        self.truth.history.append(Change(topic, k, None if row is None else _dumps(row, sort=True), stamp))
        self._emit(topic, key, row, stamp, node or (1 + zlib.crc32(k.encode()) % 2))

    def _emit(self, topic: str, key: list, row: dict | None, stamp: Hlc, node: int) -> None:
        message = {"after": row, "key": key, "updated": str(stamp)}
        entry = (topic, self.schema_ids[topic], key, row, stamp, _dumps(message, sort=True))
        self.buffers[node].append(entry)
        self.since_resolved[node].append(entry)
        if self.rng.random() < self.spec.duplicate_rate:
            self.buffers[node].append(entry)
            self.truth.duplicates += 1

    # -- the sink ------------------------------------------------------------------------------
    def run(self) -> SinkTruth:
        spec = self.spec
        for cid in range(1, spec.customers + 1):
            row = self._customer(cid)
            self.tables["customers"][key_json([cid])] = row
        for oid in range(1, spec.orders + 1):
            row = self._order(self.rng.choice(["eu", "us"]), oid)
            self.tables["orders"][key_json([row["region"], oid])] = row
        for topic, rows in self.tables.items():
            self._keys[topic] = list(rows)
            self._index[topic] = {k: i for i, k in enumerate(self._keys[topic])}
        scan = self.last_resolved  # the initial scan: every row at the statement time, files named by it
        for topic, rows in self.tables.items():
            for k, row in list(rows.items()):
                self._change(topic, json.loads(k), row, scan)
        self._flush(scan, scan)
        flush_number, next_customer, next_order = 1, spec.customers + 1, spec.orders + 1
        for step in range(1, spec.steps + 1):
            base = self._now(spec.step_seconds)
            if step == spec.schema_change_at_step:
                self._schema_change(base)
            for n in range(spec.changes_per_step):
                stamp = Hlc(base.wall + n * 1000, self.rng.choice([0, 0, 1]))
                topic = self.rng.choice(["customers", "orders"])
                roll = self.rng.random()
                rows = self.tables[topic]
                if roll < 0.25 or not rows:  # insert (a new key, or one deleted before)
                    deleted = self.deleted[topic]
                    if deleted and self.rng.random() < 0.3:
                        key = json.loads(next(iter(deleted)))
                    elif topic == "customers":
                        key, next_customer = [next_customer], next_customer + 1
                    else:
                        key, next_order = [self.rng.choice(["eu", "us"]), next_order], next_order + 1
                    row = self._customer(key[0]) if topic == "customers" else self._order(*key)
                    self._change(topic, key, row, stamp)
                elif roll < 0.85:  # update
                    key = json.loads(self._any_key(topic))
                    row = dict(rows[key_json(key)])
                    if topic == "customers":
                        row["balance"] = Decimal(f"{self.rng.randint(0, 99999)}.{self.rng.randint(0, 99):02d}")
                        row["tier"] = self.rng.choice(["gold", "silver", "bronze"])
                    else:
                        row["status"] = self.rng.choice(["paid", "shipped", "returned"])
                    self._change(topic, key, row, stamp)
                elif roll < 0.98:  # delete
                    key = json.loads(self._any_key(topic))
                    self._change(topic, key, None, stamp)
                else:  # a delete of a key never seen
                    self._change(
                        topic,
                        [10_000_000 + step * 100 + n] if topic == "customers" else ["xx", 10_000_000 + step * 100 + n],
                        None,
                        stamp,
                    )
            if step % spec.steps_per_flush == 0:
                resolves = flush_number % spec.flushes_per_resolved == 0
                if resolves:  # rows newer than the RESOLVED file that follows the file holding them
                    for k in self.rng.sample(list(self.tables["orders"]), min(2, len(self.tables["orders"]))):
                        row = dict(self.tables["orders"][k], status="ahead")
                        self._change("orders", json.loads(k), row, Hlc(self.wall + NANOS, 0))
                self._flush(self._after_resolved(), self._now(0))
                if spec.restart_at_flush is not None and flush_number == spec.restart_at_flush:
                    self._restart(2)
                if resolves:
                    self._resolved(Hlc(self.wall + NANOS // 2, 0))
                    self.wall += 2 * NANOS
                flush_number += 1
        self._flush(self._after_resolved(), self._now(0))
        self._resolved(self._now(1))
        return self.truth

    def _after_resolved(self) -> Hlc:
        """What data files flushed now are named by: the successor of the last RESOLVED timestamp."""
        return Hlc(self.last_resolved.wall, self.last_resolved.logical + 1)

    def _any_key(self, topic: str) -> str:
        """A random live key of a table, in constant time (a list of keys with an index for removal)."""
        return self._keys[topic][self.rng.randrange(len(self._keys[topic]))]

    def _forget(self, topic: str, key: str) -> None:
        keys, index = self._keys[topic], self._index[topic]
        position = index.pop(key)
        last = keys.pop()
        if last != key:
            keys[position] = last
            index[last] = position

    def _schema_change(self, stamp: Hlc) -> None:
        """customers gains a column: a new descriptor version, and every row re-emitted (a backfill)."""
        self._flush(self._after_resolved(), stamp)
        self.schema_ids["customers"] += 1
        for k, row in list(self.tables["customers"].items()):
            self._change("customers", json.loads(k), {**row, "note": None}, stamp)

    def _restart(self, node: int) -> None:
        """A node restart: a new session re-emits what it emitted since the last RESOLVED (duplicates)."""
        self.sessions[node] = self._session()
        self.file_ids[node] = 0
        replay = list(self.since_resolved[node])
        self.buffers[node].extend(replay)
        self.truth.duplicates += len(replay)
        self._flush(self._after_resolved(), self._now(0), only=node)

    def _resolved(self, stamp: Hlc) -> None:
        self.last_resolved = stamp
        self.truth.resolved.append(str(stamp))
        for node in self.since_resolved:
            self.since_resolved[node] = []
        self._write(stamp, f"{stamp.file_timestamp()}.RESOLVED", self._resolved_bytes(stamp))
        if len(self.truth.resolved) == self.spec.late_file_at_resolved:
            self.late_pending = True

    def _flush(self, lower_bound: Hlc, now: Hlc, only: int | None = None) -> None:
        del now  # files are named by their lower bound, never by the time they are written
        for node in [only] if only else [1, 2]:
            entries, self.buffers[node] = self.buffers[node], []
            groups: dict[tuple[str, int], list] = {}
            for entry in entries:
                groups.setdefault((entry[0], entry[1]), []).append(entry)
            for (topic, schema_id), group in sorted(groups.items(), key=lambda item: item[0]):
                self.rng.shuffle(group)  # records in a file are not sorted by timestamp
                name_stamp = lower_bound
                late = self.late_pending and node == 1
                if late:  # the naming bug: named before the RESOLVED file already written
                    previous = Hlc.parse(self.truth.resolved[-2]) if len(self.truth.resolved) > 1 else lower_bound
                    name_stamp = Hlc(previous.wall, previous.logical + 1)
                    self.late_pending = False
                ext = ".ndjson" if self.spec.format == "ndjson" else ".parquet"
                if self.spec.compression == "gzip":
                    ext += ".gz"
                for piece in self._cut(group):
                    name = (
                        f"{name_stamp.file_timestamp()}-{self.sessions[node]}-{node}-3-{self.file_ids[node]:08x}-"
                        f"{topic}-{schema_id:x}{ext}"
                    )
                    self.file_ids[node] += 1
                    key = self._write(name_stamp, name, self._data_bytes(topic, piece))
                    if late:
                        self.truth.late_files.append(key)
                    self.truth.messages += len(piece)

    def _cut(self, group: list) -> list[list]:
        """The files one flush of a topic writes: cut where a file's bytes pass ``file_size``."""
        pieces: list[list] = [[]]
        size = 0
        for entry in group:
            if size > self.spec.file_size:
                pieces.append([])
                size = 0
            pieces[-1].append(entry)
            size += len(entry[-1].encode()) + 1
        return pieces

    def _data_bytes(self, topic: str, group: list) -> bytes:
        if self.spec.format == "parquet":
            return _parquet(topic, group)
        data = "".join(text + "\n" for *_, text in group).encode()
        return gzip.compress(data, mtime=0) if self.spec.compression == "gzip" else data

    def _resolved_bytes(self, stamp: Hlc) -> bytes:
        if self.spec.format == "parquet":
            import io

            import pyarrow as pa
            import pyarrow.parquet as pq

            buffer = io.BytesIO()
            pq.write_table(
                pa.table({"__crdb__resolved": pa.array([Decimal(str(stamp))], pa.decimal128(38, 10))}), buffer
            )
            return buffer.getvalue()
        return json.dumps({"resolved": str(stamp)}, separators=(",", ":")).encode()

    def _write(self, stamp: Hlc, name: str, data: bytes) -> str:
        moment = stamp.datetime()
        folder = {"daily": f"{moment:%Y-%m-%d}/", "hourly": f"{moment:%Y-%m-%d/%H}/", "flat": ""}[
            self.spec.partition_format
        ]
        path = self.root / folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return folder + name


def _dumps(value, sort: bool = False) -> str:
    """JSON as CockroachDB writes it: keys sorted, DECIMAL values as numbers with their digits."""

    def default(item):
        if isinstance(item, Decimal):
            return float(item)
        raise TypeError(type(item).__name__)

    text = json.dumps(value, sort_keys=sort, default=default, separators=(", ", ": "))
    return text


def _parquet(topic: str, group: list) -> bytes:
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = []
    for _, _, key, row, stamp, _ in group:
        values = dict(row) if row is not None else {}
        if topic == "customers":
            values.setdefault("id", key[0])
        else:
            values.setdefault("region", key[0])
            values.setdefault("id", key[1])
        if "meta" in values:
            values["meta"] = json.dumps(values["meta"], separators=(",", ":"))
        if "balance" in values and values["balance"] is not None:
            values["balance"] = float(values["balance"])
        values["__crdb__event_type"] = "d" if row is None else "c"
        values["__crdb__updated"] = str(stamp)
        rows.append(values)
    # The table's columns on every row, a delete's non-key ones null, as the sink writes them.
    columns = list(dict.fromkeys(name for row in rows for name in row))
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{name: row.get(name) for name in columns} for row in rows]), buffer)
    return buffer.getvalue()


def generate_sink(root: str | Path, spec: SinkSpec = SinkSpec()) -> SinkTruth:
    """Write a sink folder under ``root`` and return its ground truth."""
    if spec.partition_format not in PARTITIONS or spec.format not in FORMATS:
        raise ValueError(f"partition_format must be one of {PARTITIONS} and format one of {FORMATS}")
    if spec.format == "parquet" and spec.compression:
        raise ValueError("parquet changefeed files compress their pages, not the file")
    return _Sink(spec, Path(root)).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a synthetic CockroachDB changefeed sink folder.")
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=SinkSpec.steps)
    parser.add_argument("--changes-per-step", type=int, default=SinkSpec.changes_per_step)
    parser.add_argument("--partition-format", default="daily", choices=PARTITIONS)
    parser.add_argument("--format", default="ndjson", choices=FORMATS)
    parser.add_argument("--gzip", action="store_true")
    parser.add_argument("--seed", type=int, default=SinkSpec.seed)
    args = parser.parse_args(argv)
    spec = SinkSpec(
        steps=args.steps,
        changes_per_step=args.changes_per_step,
        partition_format=args.partition_format,
        format=args.format,
        compression="gzip" if args.gzip else None,
        seed=args.seed,
    )
    truth = generate_sink(args.out, spec)
    print(
        f"wrote {truth.messages} messages ({truth.duplicates} duplicates) and {len(truth.resolved)} RESOLVED "
        f"files to {args.out}; newest resolved {truth.resolved[-1]}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
