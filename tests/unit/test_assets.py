"""Which targets changed, as asset events: one per table with ledger entries, with what was applied."""

from lakefeed.assets import blob_changes, cdf_changes, crdb_changes, table_uri
from lakefeed.ledger import LedgerEntry


def test_table_uris_are_file_uris_for_paths_and_kept_for_uris(tmp_path):
    assert table_uri(str(tmp_path / "lake" / "events")) == f"file://{tmp_path}/lake/events"
    assert table_uri("/data/lake dir/events/") == "file:///data/lake%20dir/events"
    assert (
        table_uri("abfss://lake@acct.dfs.core.windows.net/events/") == "abfss://lake@acct.dfs.core.windows.net/events"
    )


def test_blob_changes_name_only_tables_with_entries():
    first, second = ["2026-01-01T00:10:00Z"], ["2026-01-01T01:10:00Z"]
    entries = {
        "/lake/events": [
            LedgerEntry("/lake/events", 3, "MERGE", {"windows": first}, inserted=5),
            LedgerEntry("/lake/events", 4, "MERGE", {"windows": second}, inserted=4),
        ],
        "/lake/state": [LedgerEntry("/lake/state", 8, "MERGE", {"windows": second}, inserted=2, updated=4)],
    }
    events, state = blob_changes(entries, "/lake/events", "/lake/state")
    assert events == {
        "table": "/lake/events",
        "uri": "file:///lake/events",
        "extra": {
            "pipeline": "blob",
            "windows": first + second,
            "rowsInserted": 9,
            "rowsUpdated": 0,
            "rowsDeleted": 0,
            "commits": [3, 4],
            "commitIds": [None, None],
            "targetVersion": 4,
        },
    }
    assert state["extra"]["windows"] == second and state["extra"]["rowsUpdated"] == 4
    assert (
        blob_changes({"/lake/state": entries["/lake/state"]}, "/lake/events", "/lake/state")[0]["table"]
        == "/lake/state"
    )


def test_no_entries_no_changes():
    assert blob_changes({}, "/lake/events", "/lake/state") == []
    assert cdf_changes("orders", "/lake/orders", {"/lake/other": [LedgerEntry("/lake/other", 1, "MERGE")]}) == []
    assert crdb_changes({}) == []


def test_cdf_changes_carry_version_ranges_counts_and_full_refresh():
    entries = {
        "/lake/orders": [
            LedgerEntry("/lake/orders", 11, "MERGE", {"startingVersion": 3, "endingVersion": 5}, 1, 2, 3),
            LedgerEntry("/lake/orders", 12, "CREATE OR REPLACE TABLE AS SELECT", {"fullRefreshVersion": 9}, 7),
        ]
    }
    [change] = cdf_changes("orders", "/lake/orders", entries)
    assert change["extra"] == {
        "pipeline": "cdf:orders",
        "versions": [[3, 5], [9, 9]],
        "fullRefresh": True,
        "rowsInserted": 8,
        "rowsUpdated": 2,
        "rowsDeleted": 3,
        "commits": [11, 12],
        "commitIds": [None, None],
        "targetVersion": 12,
    }


def test_crdb_changes_are_per_topic_table():
    spans = ({"afterResolved": None, "throughResolved": "10.0"}, {"afterResolved": "10.0", "throughResolved": "20.0"})
    entries = {
        "/lake/crdb/users": [LedgerEntry("/lake/crdb/users", 2, "MERGE", {**spans[0], "topic": "users"}, 3, 0, 1)],
        "/lake/crdb/orders": [LedgerEntry("/lake/crdb/orders", 1, "MERGE", {**spans[1], "topic": "orders"}, 0, 2)],
    }
    orders, users = crdb_changes(entries)
    assert orders["uri"] == "file:///lake/crdb/orders" and orders["extra"]["rowsUpdated"] == 2
    assert orders["extra"]["resolvedSpans"] == [["10.0", "20.0"]]
    assert users["extra"] == {
        "pipeline": "cockroach",
        "topic": "users",
        "resolvedSpans": [[None, "10.0"]],
        "rowsInserted": 3,
        "rowsUpdated": 0,
        "rowsDeleted": 1,
        "commits": [2],
        "commitIds": [None],
        "targetVersion": 2,
    }
