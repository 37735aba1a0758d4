"""The CDF planner's decision (pure) and its readings of commit metrics, on commit files written by hand."""

from __future__ import annotations

import json

import pytest

from lakefeed.cdf.planner import (
    MERGE,
    REBUILD,
    REBUILD_MIN_ROWS,
    REBUILD_SHARE,
    applied_through,
    choose_plan,
    is_rebuild,
    range_rows_changed,
    rows_changed,
)
from lakefeed.deltalog import DeltaLog
from lakefeed.storage import Store

ADD = [{"add": {"path": "f.parquet", "dataChange": True}}]


def test_rebuild_from_the_share_of_rows_changed_and_the_floor():
    rows = 200_000
    assert choose_plan(int(REBUILD_SHARE * rows), rows).chosen == REBUILD  # the share itself rebuilds
    assert choose_plan(int(REBUILD_SHARE * rows) - 1, rows).chosen == MERGE
    assert choose_plan(1_000_000, rows).chosen == REBUILD  # every key changed, several times
    assert choose_plan(REBUILD_MIN_ROWS - 1, 10).chosen == MERGE  # a small table: fixed costs dominate
    assert choose_plan(REBUILD_MIN_ROWS - 1, 10, min_rows=0).chosen == REBUILD
    assert choose_plan(30, 100, share=0.25, min_rows=0).chosen == REBUILD
    assert choose_plan(5, 0, min_rows=0).chosen == REBUILD  # the snapshot is empty: writing it costs nothing


def test_unknown_counts_and_blocks_never_rebuild():
    assert choose_plan(None, 10, min_rows=0).chosen == MERGE
    assert choose_plan(10, None, min_rows=0).chosen == MERGE
    plan = choose_plan(900, 1000, min_rows=0, blocked="the target is ahead")
    assert (plan.chosen, plan.reason, plan.changed_rows, plan.snapshot_rows) == (
        MERGE,
        "the target is ahead",
        900,
        1000,
    )
    chosen = choose_plan(900, 1000, min_rows=0)
    assert chosen.reason == "900 rows changed, at least 0.5 of the 1000 rows"


@pytest.mark.parametrize(
    ("operation", "metrics", "rows"),
    [
        ("WRITE", {"numOutputRows": "100", "numFiles": "2"}, 100),  # an append
        ("UPDATE", {"numUpdatedRows": "10", "numCopiedRows": "3"}, 10),
        ("DELETE", {"numDeletedRows": "95", "numRemovedFiles": "1"}, 95),
        (
            "MERGE",
            {
                "numTargetRowsInserted": "5",
                "numTargetRowsUpdated": "10",
                "numTargetRowsDeleted": "2",
                "numOutputRows": "15",
            },
            17,
        ),
        # replaceWhere: 10 rows deleted, 40 written of which 30 copied from the files it rewrote
        ("WRITE", {"numOutputRows": "40", "numCopiedRows": "30", "numDeletedRows": "10", "numRemovedFiles": "0"}, 20),
        ("WRITE", {"numOutputRows": "5", "numRemovedFiles": "2"}, None),  # an overwrite: the rows it removed unknown
        ("MERGE", {"numTargetRowsInserted": "5"}, None),  # metrics cut short
        ("UPDATE", {}, None),  # metrics off (spark.databricks.delta.history.metricsEnabled)
        ("RESTORE", {"numRestoredFiles": "3"}, None),
    ],
)
def test_rows_changed_by_operation(operation, metrics, rows):
    assert rows_changed({"operation": operation, "operationMetrics": metrics}, ADD) == rows


def test_commits_that_change_no_rows_count_nothing():
    assert (
        rows_changed(
            {"operation": "OPTIMIZE", "operationMetrics": {"numAddedFiles": "1"}},
            [
                {"add": {"path": "f", "dataChange": False}},
                {"remove": {"path": "g", "dataChange": False}},
            ],
        )
        == 0
    )
    assert rows_changed({"operation": "SET TBLPROPERTIES"}, [{"metaData": {"id": "x"}}]) == 0


def _commit(root, version, operation, metrics, actions=ADD):
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    lines = [{"commitInfo": {"operation": operation, "operationMetrics": metrics}}, *actions]
    (log / f"{version:020d}.json").write_text("\n".join(json.dumps(line) for line in lines) + "\n")


def test_a_range_sums_its_commits_and_names_the_first_it_cannot_count(tmp_path):
    _commit(tmp_path, 0, "CREATE TABLE", {}, [{"metaData": {"id": "t"}}])
    _commit(tmp_path, 1, "WRITE", {"numOutputRows": "100"})
    _commit(tmp_path, 2, "UPDATE", {"numUpdatedRows": "7"})
    _commit(tmp_path, 3, "UPDATE", {})
    log = DeltaLog(Store(str(tmp_path)))
    assert range_rows_changed(log, 0, 2) == (107, None)
    assert range_rows_changed(log, 2, 3) == (None, 3)
    assert range_rows_changed(log, 4, 4) == (None, 4)  # removed by log cleanup: unknown too


def test_target_commit_tags():
    assert applied_through({"startingVersion": 2, "endingVersion": 9, "plan": "rebuild"}) == 9
    assert applied_through({"fullRefreshVersion": 4}) == 4
    assert applied_through({"pipeline": "x"}) is None
    assert is_rebuild({"fullRefreshVersion": 4}) and is_rebuild({"endingVersion": 9, "plan": "rebuild"})
    assert not is_rebuild({"endingVersion": 9}) and not is_rebuild({"endingVersion": 9, "step": "schema"})
