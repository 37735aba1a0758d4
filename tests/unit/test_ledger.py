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

from lakefeed.assets import announced_in
from lakefeed.checkpoint import TableMark
from lakefeed.deltalog import DeltaLog
from lakefeed.ledger import EVENT_CLOCK_MARGIN_MS, entries_after, nothing_announced, row_counts, unannounced
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
        (1, "MERGE", 5, 0, 0),
        (3, "MERGE", 2, 1, 1),
        (6, "CREATE OR REPLACE TABLE AS SELECT", 4, 0, 0),
    ]
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
    # A mark before any version (nothing confirmed yet), made before the refresh gave the new id: everything.
    found, _, start = entries_after(location, "cp_orders", TableMark(old_id, -1))
    assert [e.version for e in found] == [1, 3, 6] and start == TableMark(table_id, -1)
    assert entries_after(str(tmp_path / "missing"), "cp_orders", None) == ([], None, None)


def test_unannounced_starts_after_the_checkpoints_target_mark_when_nothing_was_announced(tmp_path):
    location = spark_table(tmp_path)
    table_id = DeltaLog(Store(location)).table_id()
    found = unannounced(
        [location],
        "cp_orders",
        announced={},
        fallback={location: TableMark(table_id, 1)},
        announced_since=nothing_announced,
    )
    assert [e.version for e in found.entries[location]] == [3, 6]
    # No event names them yet: the mark stays where they start (the fallback), not past them.
    assert found.marks == {location: TableMark(table_id, 1)}


def events_naming(entries, by="commitIds"):
    """The asset events Airflow would hold had a commit step announced ``entries`` (one per table)."""
    from lakefeed.assets import table_uri

    tables = sorted({e.table for e in entries})
    return [
        (
            table_uri(t),
            {
                "commits": [e.version for e in entries if e.table == t],
                **({"commitIds": [e.commit_id for e in entries if e.table == t]} if by else {}),
            },
        )
        for t in tables
    ]


def test_marks_move_past_the_entries_an_event_names_up_to_the_first_none_names(tmp_path):
    location = spark_table(tmp_path)
    table_id = DeltaLog(Store(location)).table_id()
    everything, _, _ = entries_after(location, "cp_orders", None)
    assert all(e.commit_id for e in everything)  # Spark's Delta writes commitInfo.txnId
    asked = []

    def since(events):
        def announced_since(since_ms):
            asked.append(since_ms)
            return announced_in(events)

        return announced_since

    # v1 was announced, v3 not (its step failed), v6 was (a later step): v3 is due, the mark stops before it.
    found = unannounced([location], "cp_orders", {}, {}, since(events_naming([everything[0], everything[2]])))
    assert [e.version for e in found.entries[location]] == [3]
    assert found.marks == {location: TableMark(everything[0].table_id, 1)} and found.named
    # The events were asked for from a day before the oldest entry's commit time.
    assert asked == [min(e.committed_ms for e in everything) - EVENT_CLOCK_MARGIN_MS]
    # Every entry named (by commit id, or by version for older events): nothing due, the mark past all.
    for by in ("commitIds", None):
        done = unannounced([location], "cp_orders", {}, {}, since(events_naming(everything, by)))
        assert done.entries == {} and done.marks == {location: TableMark(table_id, 6)} and done.named
    # From there nothing is left to read, and no event is asked for.
    asked.clear()
    again = unannounced([location], "cp_orders", done.marks, {}, since([]))
    assert again.entries == {} and again.marks == done.marks and asked == [] and not again.named


def test_an_event_of_a_commit_with_the_same_version_but_another_id_does_not_count(tmp_path):
    # The table was recreated: version 3 again, another commit. Events name commits by Delta's txnId.
    location = spark_table(tmp_path)
    _everything, _, _ = entries_after(location, "cp_orders", None)
    from lakefeed.assets import table_uri

    stale = [(table_uri(location), {"commits": [1, 3, 6], "commitIds": ["old-1", "old-3", "old-6"]})]
    found = unannounced([location], "cp_orders", {}, {}, lambda since_ms: announced_in(stale))
    assert [e.version for e in found.entries[location]] == [1, 3, 6]


def test_row_counts_of_operations_and_missing_metrics():
    assert row_counts({"operation": "WRITE", "operationMetrics": {"numOutputRows": "7"}}) == {
        "inserted": 7,
        "updated": 0,
        "deleted": 0,
    }
    assert row_counts({"operation": "DELETE", "operationMetrics": {"numDeletedRows": "2"}})["deleted"] == 2
    assert row_counts({"operation": "MERGE"}) == {"inserted": 0, "updated": 0, "deleted": 0}
    assert row_counts({"operation": "MERGE", "operationMetrics": {"numTargetRowsInserted": "x"}})["inserted"] == 0


def test_another_writers_tags_are_read_as_written(tmp_path):
    # delta-rs (another engine) tagging its commits the same way: entries, with no Spark metrics to count.
    location = str(tmp_path / "rs")
    write_deltalake(
        location,
        pa.table({"id": [1, 2]}),
        commit_properties=CommitProperties(custom_metadata={"userMetadata": '{"pipelineId": "cp_rs"}'}),
    )
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


def tagged_commit(location: str, pipeline_id: str, token: str, rows=(1,)) -> int:
    """A commit as a job makes it (rows tagged with its pipeline and commit token); its version."""
    from deltalake import DeltaTable

    tags = json.dumps({"pipelineId": pipeline_id, "commitToken": token})
    write_deltalake(
        location,
        pa.table({"id": list(rows)}),
        mode="append",
        commit_properties=CommitProperties(custom_metadata={"userMetadata": tags}),
    )
    return DeltaTable(location).version()


def test_a_reported_commit_is_proven_by_the_jobs_token_at_its_version(tmp_path):
    from lakefeed.ledger import ReportedCommit, disproved, reported_commits

    location = str(tmp_path / "t")
    first = tagged_commit(location, "cp", "token-a")
    second = tagged_commit(location, "cp", "token-b")
    write_deltalake(location, pa.table({"id": [9]}), mode="append")  # another writer after them: no matter
    assert (
        disproved([ReportedCommit(location, first, "token-a"), ReportedCommit(location, second, "token-b")], "cp") == []
    )
    assert reported_commits({"commits": [{"table": location, "version": first, "token": "token-a"}, "junk"]}) == [
        ReportedCommit(location, first, "token-a")
    ]
    assert reported_commits({}) == []  # a job that predates the report: nothing to check

    [wrong_token] = disproved([ReportedCommit(location, second, "token-x")], "cp")
    assert f"version {second} of {location}" in wrong_token and "not the job's commit" in wrong_token
    [other_pipeline] = disproved([ReportedCommit(location, first, "token-a")], "cp_other")
    assert "by pipeline cp, not the job's commit" in other_pipeline
    [beyond] = disproved([ReportedCommit(location, 7, "token-z")], "cp")
    assert "now at version 2" in beyond and "took its place" in beyond


def test_a_target_dropped_and_recreated_after_the_job_committed_disproves_its_commits(tmp_path):
    from lakefeed.ledger import ReportedCommit, disproved

    location = str(tmp_path / "t")
    reported = [
        ReportedCommit(location, tagged_commit(location, "cp", "a"), "a"),
        ReportedCommit(location, tagged_commit(location, "cp", "b"), "b"),
    ]
    shutil.rmtree(location)
    assert disproved(reported, "cp") == [
        f"the job committed version 0 of {location}, but there is no Delta table there any more (dropped or moved)"
    ]
    for rows in ((5,), (6,), (7,)):  # recreated by another writer, with as many versions and more
        write_deltalake(location, pa.table({"id": list(rows)}), mode="append")
    problems = disproved(reported, "cp")
    assert len(problems) == 2 and all(
        "by another writer (delta-rs" in p and "recreated, or replaced, since" in p for p in problems
    )


def test_a_later_rebuild_or_restore_to_before_the_commit_disproves_it_but_not_a_restore_after_it(tmp_path):
    from deltalake import DeltaTable

    from lakefeed.ledger import ReportedCommit, disproved

    # The Spark fixture: v1 and v3 are cp_orders' MERGEs, v6 its CREATE OR REPLACE (another table id).
    location = spark_table(tmp_path)
    [rebuilt] = disproved([ReportedCommit(location, 3, None)], "cp_orders")
    assert rebuilt == (
        f"the job committed version 3 of {location}, but then version 6 (CREATE OR REPLACE TABLE "
        "AS SELECT by pipeline cp_orders) made it another table"
    )
    assert disproved([ReportedCommit(location, 6, None)], "cp_orders") == []  # the rebuild itself
    [foreign] = disproved([ReportedCommit(location, 4, None)], "cp_orders")
    assert "version 4 there now is WRITE by another writer" in foreign

    location = str(tmp_path / "r")
    kept, undone = tagged_commit(location, "cp", "a"), tagged_commit(location, "cp", "b")
    DeltaTable(location).restore(kept)
    assert disproved([ReportedCommit(location, kept, "a")], "cp") == []  # restored to it: its rows are there
    [restored] = disproved([ReportedCommit(location, kept, "a"), ReportedCommit(location, undone, "b")], "cp")
    assert restored == f"the job committed version {undone} of {location}, but then version 2 RESTOREd it to version 0"
