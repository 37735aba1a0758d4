"""The CDF planner with real Spark and real Delta: a range that changed most of the table is applied by a
rebuild in one commit, which the ledger takes for that range; replays after it change nothing and resurrect
no deleted key; a small range still MERGEs; a target ahead of the range, or commits without metrics, keep the
MERGE."""

from __future__ import annotations

import json

import pytest
from lakefeed_testing.cdf_simulator import create_source, latest_version, live_rows

from lakefeed import delta
from lakefeed.assets import cdf_changes
from lakefeed.cdf.job import run
from lakefeed.cdf.planner import MERGE, REBUILD
from lakefeed.delta import REFRESH_MARKER
from lakefeed.deltalog import DeltaLog
from lakefeed.ledger import ReportedCommit, disproved, entries_after
from lakefeed.storage import Store
from lakefeed.targets import rebuilt_after

pytestmark = pytest.mark.integration
PIPELINE_ID = "lakefeed_cdf_checkpoint__rebuilt"
ANY_SIZE = {"rebuild_min_rows": 0}  # the planner's floor off: these tables are small


def rows_of(df):
    return sorted(tuple(r) for r in df.select("id", "name", "amount", "touched").collect())


def assert_target_equals_source(spark, source, target):
    assert rows_of(live_rows(spark, target)) == rows_of(spark.read.format("delta").load(source))


def history(spark, target, after):
    rows = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").where(f"version > {after}").orderBy("version").collect()
    return [(r["version"], r["operation"], json.loads(r["userMetadata"] or "{}")) for r in rows]


def target_version(spark, target):
    return spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]


@pytest.fixture
def tagged(monkeypatch):
    """Commits tagged with a pipeline id, as the spark-submit entry point tags them."""
    monkeypatch.setitem(delta.COMMIT_TAGS, "pipelineId", PIPELINE_ID)


def test_large_range_rebuilt_in_one_commit_then_replays_change_nothing(spark, tmp_path, tagged):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=40)  # v0 create, v1 forty rows
    first = run(spark, source, target, ["id"], 0, 1)  # the planner's floor: a MERGE
    assert first.plan is not None and first.plan.chosen == MERGE and "fewer than" in first.plan.reason
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 30")  # v2: key 30 deleted before the large range
    run(spark, source, target, ["id"], 2, 2)  # ... and kept as a tombstone by the MERGE
    spark.sql(f"UPDATE delta.`{source}` SET amount = amount + 1, touched = 3")  # v3: every key
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id IN (3, 4, 5)")  # v4
    spark.sql(f"UPDATE delta.`{source}` SET amount = -7, touched = 5 WHERE id = 7")  # v5
    spark.sql(f"INSERT INTO delta.`{source}` VALUES (100, 'n100', 1, 6), (101, 'n101', 1, 6)")  # v6
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 100")  # v7: inserted and deleted inside the range
    end = latest_version(spark, source)
    before = target_version(spark, target)
    table_id = DeltaLog(Store(target)).table_id()

    summary = run(spark, source, target, ["id"], 3, end, **ANY_SIZE)

    assert summary.plan is not None and summary.plan.chosen == REBUILD
    assert summary.plan.changed_rows == 39 + 3 + 1 + 2 + 1  # the range's commits, from their metrics
    assert summary.plan.snapshot_rows is not None and summary.plan.snapshot_rows >= 37
    assert summary.mode == "changes" and summary.committed
    assert (summary.inserted, summary.updated, summary.deleted, summary.rows_read) == (37, 0, 0, 37)
    commits = history(spark, target, before)
    assert [(version, operation) for version, operation, _ in commits] == [(before + 1, "WRITE")]  # one commit
    tags = commits[0][2]
    assert {k: tags[k] for k in ("startingVersion", "endingVersion", "plan")} == {
        "startingVersion": 3,
        "endingVersion": end,
        "plan": "rebuild",
    }
    assert REFRESH_MARKER not in tags and tags["pipelineId"] == PIPELINE_ID
    assert summary.commits == [{"table": target, "version": before + 1, "token": tags["commitToken"]}]
    assert summary.target_version == before + 1
    assert_target_equals_source(spark, source, target)
    # The same table (the checkpoint's marks and the ledger see no other), its properties kept.
    assert DeltaLog(Store(target)).table_id() == table_id
    properties = DeltaLog(Store(target)).properties() or {}
    assert properties["delta.enableChangeDataFeed"] == "true" and properties["delta.enableDeletionVectors"] == "true"

    # The ledger and the DAG's commit step take it for the application of range 3..end, not a full refresh.
    entries, _, _ = entries_after(target, PIPELINE_ID, None)
    changes = cdf_changes("rebuilt", target, {target: entries})
    assert changes[0]["extra"]["versions"][-1] == [3, end] and changes[0]["extra"]["fullRefresh"] is False
    assert rebuilt_after(target, before, REFRESH_MARKER) is None  # no job of the run is voided
    earlier = [ReportedCommit(target, e.version, e.tags["commitToken"]) for e in entries]
    assert disproved(earlier, PIPELINE_ID) == []  # nor is any earlier commit taken for undone

    # Replays of older ranges, of the same range and of ranges inside it: no commit, nothing resurrected
    # (30, 3, 4, 5 and 100 stay deleted) nor regressed (7 keeps -7).
    for start, stop in [(0, 1), (2, 2), (0, end), (3, end), (3, 4), (6, 7), (2, end)]:
        replay = run(spark, source, target, ["id"], start, stop, **ANY_SIZE)
        assert replay.commits == [] and (replay.inserted, replay.updated, replay.deleted) == (0, 0, 0)
    assert target_version(spark, target) == before + 1
    assert_target_equals_source(spark, source, target)

    # A small range after the rebuild still MERGEs, reading from the base version on.
    spark.sql(f"UPDATE delta.`{source}` SET amount = 0, touched = 9 WHERE id = 8")
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 9")
    small = run(spark, source, target, ["id"], 3, end + 2, **ANY_SIZE)  # crosses the base version
    assert small.plan is not None and small.plan.chosen == MERGE and "less than 0.5" in small.plan.reason
    assert (small.plan.changed_rows, small.updated, small.deleted) == (2, 1, 1)
    assert [operation for _, operation, _ in history(spark, target, before + 1)] == ["MERGE"]
    assert_target_equals_source(spark, source, target)
    for start, stop in [(0, end), (3, end + 1), (end + 1, end + 2)]:
        assert run(spark, source, target, ["id"], start, stop, **ANY_SIZE).commits == []
    assert_target_equals_source(spark, source, target)


def test_first_load_rebuilt_in_one_commit_with_the_columns_chosen(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=12)
    spark.sql(f"UPDATE delta.`{source}` SET amount = 5 WHERE id < 8")
    spark.sql(f"DELETE FROM delta.`{source}` WHERE id = 0")
    end = latest_version(spark, source)
    summary = run(spark, source, target, ["id"], 0, end, columns=["amount"], **ANY_SIZE)
    assert summary.plan is not None and summary.plan.chosen == REBUILD
    commits = history(spark, target, -1)
    assert [(v, op) for v, op, _ in commits] == [(0, "CREATE TABLE AS SELECT")]
    assert spark.read.format("delta").load(target).columns == [
        "id",
        "amount",
        "_cdf_version",
        "_cdf_commit_timestamp",
        "_cdf_deleted",
    ]
    expected = sorted(tuple(r) for r in spark.read.format("delta").load(source).select("id", "amount").collect())
    assert sorted(tuple(r) for r in live_rows(spark, target).select("id", "amount").collect()) == expected
    assert (DeltaLog(Store(target)).properties() or {})["lakefeed.cdf.baseVersion"] == str(end)
    assert run(spark, source, target, ["id"], 0, end, columns=["amount"], **ANY_SIZE).commits == []
    # A first load of a range that does not start at 0 would hold versions before it: a MERGE.
    other = str(tmp_path / "other")
    later = run(spark, source, other, ["id"], 2, end, **ANY_SIZE)
    assert later.plan is not None and later.plan.chosen == MERGE and "starts at version 2" in later.plan.reason


def test_target_ahead_of_the_range_or_metrics_missing_keep_the_merge(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=20)
    spark.sql(f"UPDATE delta.`{source}` SET amount = 1")  # v2
    spark.sql(f"UPDATE delta.`{source}` SET amount = 2")  # v3
    run(spark, source, target, ["id"], 0, 3)  # MERGEd (the floor)
    backfill = run(spark, source, target, ["id"], 2, 2, **ANY_SIZE)  # every row changed, but the target is at 3
    assert backfill.plan is not None and backfill.plan.chosen == MERGE
    assert "applied source versions through 3, after 2" in backfill.plan.reason
    assert backfill.commits == []  # the version guard lets nothing through
    assert_target_equals_source(spark, source, target)

    spark.conf.set("spark.databricks.delta.history.metricsEnabled", "false")
    try:
        spark.sql(f"UPDATE delta.`{source}` SET amount = 3")  # v4, its metrics not recorded
    finally:
        spark.conf.unset("spark.databricks.delta.history.metricsEnabled")
    spark.sql(f"UPDATE delta.`{source}` SET amount = 4")  # v5
    unknown = run(spark, source, target, ["id"], 4, 5, **ANY_SIZE)
    assert unknown.plan is not None and unknown.plan.chosen == MERGE
    assert unknown.plan.reason == "the metrics of version 4 do not say how many rows it changed"
    assert unknown.updated == 20
    assert_target_equals_source(spark, source, target)
