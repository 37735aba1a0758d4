"""A source Delta table with change data feed on, changed by realistic commits (demo, tests, benchmarks).

Each commit is one of: append new keys, UPDATE some keys, DELETE some keys,
re-insert deleted keys, MERGE (update + insert), or an overwrite of a slice
(``replaceWhere``), where a key is both deleted and inserted in one version;
and, when asked for, an UPDATE that changes only ``touched`` (``touch``) or
nothing at all (``noop``: the change feed still holds its pre- and post-images).
"""

from __future__ import annotations

import random

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

SCHEMA = "id BIGINT, name STRING, amount BIGINT, touched INT"


def create_source(spark: SparkSession, path: str, rows: int = 100, cdf: bool = True) -> int:
    """Create the table (CDF on unless told otherwise) holding ``rows`` keys; return its version."""
    spark.sql(
        f"CREATE TABLE delta.`{path}` ({SCHEMA}) USING delta "
        f"TBLPROPERTIES (delta.enableChangeDataFeed = {'true' if cdf else 'false'})"
    )
    _rows(spark, range(rows), 0).write.format("delta").mode("append").save(path)
    return latest_version(spark, path)


def latest_version(spark: SparkSession, path: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]


def _rows(spark: SparkSession, ids, touched: int):
    return spark.createDataFrame([(int(i), f"name-{i}-{touched}", int(i) * 10 + touched, touched) for i in ids], SCHEMA)


class SourceSimulator:
    """Applies random commits to a source table; deterministic from ``seed``."""

    KINDS = ("append", "update", "update", "delete", "reinsert", "merge", "overwrite")

    def __init__(
        self, spark: SparkSession, path: str, seed: int = 1, key_space: int = 1_000, kinds: tuple[str, ...] = KINDS
    ):
        self.spark, self.path = spark, path
        self.rng = random.Random(seed)
        self.key_space = key_space
        self.kinds = kinds
        self.step = 0

    def _live_ids(self) -> list[int]:
        return sorted(r["id"] for r in self.spark.read.format("delta").load(self.path).select("id").collect())

    def commit(self, kind: str | None = None) -> str:
        self.step += 1
        kind = kind or self.rng.choice(self.kinds)
        live = self._live_ids()
        sample = self.rng.sample(live, min(len(live), self.rng.randint(1, 12))) if live else []
        ids = ", ".join(map(str, sample)) or "NULL"
        table = f"delta.`{self.path}`"
        if kind == "append" or not live:
            fresh = [i for i in range(self.key_space) if i not in set(live)]
            _rows(self.spark, self.rng.sample(fresh, min(len(fresh), 8)), self.step).write.format("delta").mode(
                "append"
            ).save(self.path)
            return "append"
        if kind == "update":
            self.spark.sql(
                f"UPDATE {table} SET amount = amount + {self.step}, touched = {self.step} WHERE id IN ({ids})"
            )
        elif kind == "touch":
            self.spark.sql(f"UPDATE {table} SET touched = {self.step} WHERE id IN ({ids})")
        elif kind == "noop":
            self.spark.sql(f"UPDATE {table} SET amount = amount WHERE id IN ({ids})")
        elif kind == "delete":
            self.spark.sql(f"DELETE FROM {table} WHERE id IN ({ids})")
        elif kind == "reinsert":
            gone = sorted(set(range(self.key_space)) - set(live))[:5]
            _rows(self.spark, gone, self.step).write.format("delta").mode("append").save(self.path)
        elif kind == "merge":
            from delta.tables import DeltaTable

            fresh = [i for i in range(self.key_space) if i not in set(live)][:3]
            source = _rows(self.spark, sample + fresh, self.step)
            (
                DeltaTable.forPath(self.spark, self.path)
                .alias("t")
                .merge(source.alias("s"), "t.id = s.id")
                .whenMatchedUpdateAll()
                .whenNotMatchedInsertAll()
                .execute()
            )
        elif kind == "overwrite":
            low, high = min(sample), min(sample) + 20
            keep = [i for i in live if low <= i < high and self.rng.random() < 0.7]
            (
                _rows(self.spark, keep, self.step)
                .write.format("delta")
                .mode("overwrite")
                .option("replaceWhere", f"id >= {low} AND id < {high}")
                .save(self.path)
            )
        return kind

    def snapshot(self, version: int | None = None):
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(self.path)


def live_rows(spark: SparkSession, target: str):
    """What a reader of the target sees: live rows, without the pipeline's own columns."""
    from lakefeed.cdf.transforms import DELETED_COLUMN, TARGET_COLUMNS

    return spark.read.format("delta").load(target).where(~F.col(DELETED_COLUMN)).drop(*TARGET_COLUMNS)


def history_from_snapshots(
    spark: SparkSession, source: str, columns: list[str], first: int, last: int, key: str = "id"
) -> list[tuple]:
    """The SCD type 2 history of ``source`` over versions ``first..last``, computed from its snapshots (not
    its change feed): a row starts wherever a key appears or its ``columns`` differ from the version before,
    and ends at the version it changes or disappears. Rows are ``(key, *columns, start, end)``, sorted."""
    history: list[tuple] = []
    current: dict[object, tuple[tuple, int]] = {}  # key -> (values, start)
    for version in range(first, last + 1):
        snapshot = spark.read.format("delta").option("versionAsOf", version).load(source)
        now = {row[0]: tuple(row[1:]) for row in snapshot.select(key, *columns).collect()}
        for gone in [k for k in current if k not in now or now[k] != current[k][0]]:
            values, start = current.pop(gone)
            history.append((gone, *values, start, version))
        for k, values in now.items():
            if k not in current:
                current[k] = (values, version)
    history += [(k, *values, start, None) for k, (values, start) in current.items()]
    return sorted(history, key=repr)
