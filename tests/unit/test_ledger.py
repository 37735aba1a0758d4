"""The targets' commit history as the ledger (JVM-free): which commits are a pipeline's entries, their row
counts from Delta's metrics, and what a commit step has left to announce.

The fixture table's log was written by Spark with Delta (the writer our jobs use; its commits are copied
verbatim): v0 CREATE TABLE (no rows), v1 MERGE inserting 5, v2 ADD COLUMNS, v3 MERGE (2 inserted,
1 updated, 1 deleted), v4 an untagged append, v5 another pipeline's append, v6 a full refresh
(CREATE OR REPLACE TABLE AS SELECT, 4 rows); all but v4 and v5 tagged ``pipelineId = cp_orders``."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
from deltalake import CommitProperties, write_deltalake

from lakefeed.checkpoint import TableMark
from lakefeed.deltalog import DeltaLog
from lakefeed.ledger import entries_after, row_counts, unannounced
from lakefeed.storage import Store

SPARK_TABLE = Path(__file__).parent / "fixtures" / "spark_ledger_table"


def spark_table(tmp_path) -> str:
    location = tmp_path / "orders"
    shutil.copytree(SPARK_TABLE, location)
    return str(location)


def test_entries_are_the_pipelines_commits_that_changed_rows_with_their_row_counts(tmp_path):
    location = spark_table(tmp_path)
    entries, now, start = entries_after(location, "cp_orders", None)
    assert [(e.version, e.operation, e.inserted, e.updated, e.deleted) for e in entries] == [
        (1, "MERGE", 5, 0, 0), (3, "MERGE", 2, 1, 1), (6, "CREATE OR REPLACE TABLE AS SELECT", 4, 0, 0)]
    assert entries[1].tags["startingVersion"] == 4 and entries[2].tags["fullRefreshVersion"] == 6
    assert now == TableMark(DeltaLog(Store(location)).table_id(), 6) and start == TableMark(now.table_id, -1)
    [other], _, _ = entries_after(location, "cp_other", None)
    assert other.version == 5 and other.inserted == 1


def test_only_entries_after_the_mark_of_the_same_table(tmp_path):
    location = spark_table(tmp_path)
    table_id = DeltaLog(Store(location)).table_id()
    assert [e.version for e in entries_after(location, "cp_orders", TableMark(table_id, 3))[0]] == [6]
    assert entries_after(location, "cp_orders", TableMark(table_id, 6))[0] == []
    # A mark of another table (this one was dropped and recreated since): every entry of this one.
    assert [e.version for e in entries_after(location, "cp_orders", TableMark("another-id", 5))[0]] == [1, 3, 6]
    # The full refresh at v6 (CREATE OR REPLACE) gave the table a new id; a mark made before it goes on.
    before_refresh = json.loads((Path(location) / "_delta_log" / f"{0:020d}.json").read_text().splitlines()[1])
    old_id = before_refresh["metaData"]["id"]
    assert old_id != table_id
    found, _, start = entries_after(location, "cp_orders", TableMark(old_id, 3))
    assert [e.version for e in found] == [6] and start == TableMark(old_id, 3)  # the mark, as placed
    assert entries_after(str(tmp_path / "missing"), "cp_orders", None) == ([], None, None)


def test_unannounced_starts_after_the_checkpoints_target_mark_when_nothing_was_announced(tmp_path):
    location = spark_table(tmp_path)
    table_id = DeltaLog(Store(location)).table_id()
    found = unannounced([location], "cp_orders", announced={}, fallback={location: TableMark(table_id, 1)})
    assert [e.version for e in found.entries[location]] == [3, 6]
    assert found.since == {location: TableMark(table_id, 1)} and found.through == {location: TableMark(table_id, 6)}
    again = unannounced([location], "cp_orders", announced=found.through, fallback={})
    assert again.entries == {} and again.through == found.through


def test_row_counts_of_operations_and_missing_metrics():
    assert row_counts({"operation": "WRITE", "operationMetrics": {"numOutputRows": "7"}}) == \
        {"inserted": 7, "updated": 0, "deleted": 0}
    assert row_counts({"operation": "DELETE", "operationMetrics": {"numDeletedRows": "2"}})["deleted"] == 2
    assert row_counts({"operation": "MERGE"}) == {"inserted": 0, "updated": 0, "deleted": 0}
    assert row_counts({"operation": "MERGE", "operationMetrics": {"numTargetRowsInserted": "x"}})["inserted"] == 0


def test_another_writers_tags_are_read_as_written(tmp_path):
    # delta-rs (another engine) tagging its commits the same way: entries, with no Spark metrics to count.
    location = str(tmp_path / "rs")
    write_deltalake(location, pa.table({"id": [1, 2]}),
                    commit_properties=CommitProperties(custom_metadata={"userMetadata": '{"pipelineId": "cp_rs"}'}))
    write_deltalake(location, pa.table({"id": [3]}), mode="append")
    entries, now, _ = entries_after(location, "cp_rs", None)
    assert [e.version for e in entries] == [0] and now is not None and now.version == 1


def test_a_malformed_commit_is_an_error_not_an_entry_skipped(tmp_path):
    import pytest

    from lakefeed.errors import ChangeDataError

    location = spark_table(tmp_path)
    (Path(location) / "_delta_log" / f"{3:020d}.json").write_text("{not json")
    with pytest.raises(ChangeDataError, match="00000000000000000003.json"):
        entries_after(location, "cp_orders", None)
