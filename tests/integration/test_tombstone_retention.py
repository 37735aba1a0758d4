"""Tombstone retention with real Spark and real Delta (issue 25): the CDF job and the CockroachDB job remove
tombstones past the threshold and from before their range, keep one exactly at the threshold, record the
horizon, and refuse a later range ending before it (which could bring a removed key back)."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from lakefeed_testing.cdf_simulator import create_source, latest_version
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.cdf.job import run
from lakefeed.crdb.hlc import Hlc
from lakefeed.errors import ChangeDataError
from lakefeed.tombstones import HORIZON, retention
from tests.integration.test_crdb_job import SPEC, apply

pytestmark = pytest.mark.integration


def commit_millis(spark, table, version) -> int:
    row = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").where(f"version = {version}").collect()[0]
    return int(row["timestamp"].timestamp() * 1000)


def properties(spark, table) -> dict:
    return {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{table}`").collect()}


def test_cdf_tombstones_past_the_threshold_go_one_at_it_stays_and_older_ranges_are_refused(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=6)  # v0 create, v1 six rows
    for key in (1, 2, 3):  # v2, v3, v4: one delete each, apart in time
        spark.sql(f"DELETE FROM delta.`{source}` WHERE id = {key}")
        time.sleep(0.3)
    run(spark, source, target, ["id"], 0, 4)
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 4")  # v5: a tombstone of the range itself
    spark.sql(f"UPDATE delta.`{source}` SET amount = 0 WHERE id = 5")  # v6
    end = latest_version(spark, source)
    # The threshold lands exactly on the delete of key 2 (version 3): key 1's tombstone is older and goes, key
    # 2's is exactly as old as the threshold and stays, key 3's is younger; key 4's is from this very range.
    hours = (commit_millis(spark, source, end) - commit_millis(spark, source, 3)) / 3_600_000
    summary = run(spark, source, target, ["id"], 5, end, tombstone_retention=retention(hours))
    assert summary.tombstones_removed == 1
    rows = {r["id"]: r["_cdf_deleted"] for r in spark.read.format("delta").load(target).collect()}
    assert rows == {0: False, 2: True, 3: True, 4: True, 5: False}
    assert properties(spark, target)[HORIZON] == "2"  # the version of key 1's delete
    # A range ending before the horizon could insert key 1 again (its tombstone is gone): refused.
    with pytest.raises(ChangeDataError, match="ends at 1, before 2, the newest tombstone"):
        run(spark, source, target, ["id"], 0, 1)
    # A range reaching past it holds key 1's delete too: applied as always, the key comes back as a tombstone.
    run(spark, source, target, ["id"], 0, end)
    after = {r["id"]: r["_cdf_deleted"] for r in spark.read.format("delta").load(target).collect()}
    assert after == {**rows, 1: True}


def test_crdb_tombstones_past_the_threshold_go_and_the_rest_of_the_tables_stay(spark, tmp_path):
    sink, lake = tmp_path / "sink", tmp_path / "lake"
    truth = generate_sink(sink, SinkSpec(**{**SPEC.__dict__, "steps": 18}))
    middle = truth.resolved[-2]
    apply(spark, sink, lake, None, middle)
    before = {
        topic: {r["_crdb_key"]: r.asDict() for r in spark.read.format("delta").load(str(lake / topic)).collect()}
        for topic in ("customers", "orders")
    }
    through = Hlc.parse(truth.resolved[-1])
    tombstones = sorted(
        Hlc.parse(r["_crdb_updated"]) for rows in before.values() for r in rows.values() if r["_crdb_deleted"]
    )
    assert len(tombstones) >= 2
    cut = tombstones[len(tombstones) // 2]  # the threshold falls on this tombstone: older ones may go
    hours = (through.wall - cut.wall) / 3.6e12
    limit = Hlc(through.wall - retention(hours) // timedelta(microseconds=1) * 1000, 0)
    summary = apply(spark, sink, lake, middle, truth.resolved[-1], tombstone_retention=retention(hours))
    after = {
        topic: {r["_crdb_key"]: r.asDict() for r in spark.read.format("delta").load(str(lake / topic)).collect()}
        for topic in ("customers", "orders")
    }
    gone = {(topic, key) for topic, rows in before.items() for key in rows if key not in after[topic]}
    assert gone and summary.tombstones_removed == len(gone)
    for topic, key in gone:  # only tombstones older than the threshold and from before the range went
        row = before[topic][key]
        assert row["_crdb_deleted"] and Hlc.parse(row["_crdb_updated"]) < limit
        assert Hlc.parse(row["_crdb_updated"]) <= Hlc.parse(middle)
    for topic, rows in before.items():  # tombstones at or past the threshold stay
        for key, row in rows.items():
            if row["_crdb_deleted"] and Hlc.parse(row["_crdb_updated"]) >= limit:
                assert key in after[topic]
    # A range through a RESOLVED before the newest removed tombstone could bring its key back: refused.
    horizons = [properties(spark, lake / t).get(HORIZON) for t in ("customers", "orders")]
    newest = max(Hlc.parse(h) for h in horizons if h)
    earlier = [r for r in truth.resolved if Hlc.parse(r) < newest]
    assert earlier
    with pytest.raises(ChangeDataError, match="before .* the newest tombstone that tombstone retention removed"):
        apply(spark, sink, lake, None, earlier[0])
