"""Which targets a run changed, as asset events: only tables that got new rows, with what was applied."""

from lakefeed.assets import blob_changes, cdf_changes, crdb_changes, table_uri


def test_table_uris_are_file_uris_for_paths_and_kept_for_uris(tmp_path):
    assert table_uri(str(tmp_path / "lake" / "events")) == f"file://{tmp_path}/lake/events"
    assert table_uri("/data/lake dir/events/") == "file:///data/lake%20dir/events"
    assert table_uri("abfss://lake@acct.dfs.core.windows.net/events/") == "abfss://lake@acct.dfs.core.windows.net/events"


def test_blob_changes_name_only_tables_with_new_rows():
    batches = [
        {"windows": ["2026-01-01T00:10:00Z"], "eventsInserted": 5, "stateInserted": 2, "stateUpdated": 1,
         "eventsTableVersion": 3, "stateTableVersion": 7},
        {"windows": ["2026-01-01T01:10:00Z"], "eventsInserted": 4, "stateInserted": 0, "stateUpdated": 3,
         "eventsTableVersion": 4, "stateTableVersion": 8},
    ]
    events, state = blob_changes(batches, "/lake/events", "/lake/state")
    assert events == {"table": "/lake/events", "uri": "file:///lake/events", "extra": {
        "pipeline": "blob", "windows": ["2026-01-01T00:10:00Z", "2026-01-01T01:10:00Z"], "rowsInserted": 9,
        "rowsUpdated": 0, "rowsDeleted": 0, "targetVersion": 4}}
    assert state["extra"]["rowsInserted"] == 2 and state["extra"]["rowsUpdated"] == 4
    assert state["extra"]["targetVersion"] == 8


def test_a_replay_that_changed_nothing_emits_nothing():
    replay = {"windows": ["2026-01-01T00:10:00Z"], "eventsInserted": 0, "stateInserted": 0, "stateUpdated": 0,
              "eventsTableVersion": 4, "stateTableVersion": 8}
    assert blob_changes([replay], "/lake/events", "/lake/state") == []
    assert blob_changes([], "/lake/events", "/lake/state") == []
    assert cdf_changes("orders", "/lake/orders", [{"mode": "changes", "startingVersion": 3, "endingVersion": 5,
                                                   "inserted": 0, "updated": 0, "deleted": 0}]) == []
    assert crdb_changes("/lake/crdb", [{"afterResolved": None, "throughResolved": "1.0",
                                        "topics": {"users": {"inserted": 0, "updated": 0, "deleted": 0}}}]) == []


def test_cdf_changes_carry_versions_counts_and_full_refresh():
    [change] = cdf_changes("orders", "/lake/orders", [
        {"mode": "changes", "startingVersion": 3, "endingVersion": 5, "inserted": 1, "updated": 2, "deleted": 3,
         "targetVersion": 11}])
    assert change["extra"] == {"pipeline": "cdf:orders", "versions": [[3, 5]], "fullRefresh": False,
                               "rowsInserted": 1, "rowsUpdated": 2, "rowsDeleted": 3, "targetVersion": 11}
    [refresh] = cdf_changes("orders", "/lake/orders", [
        {"mode": "full-refresh", "startingVersion": 9, "endingVersion": 9, "targetVersion": 12}])
    assert refresh["extra"]["fullRefresh"] is True and refresh["extra"]["versions"] == [[9, 9]]


def test_crdb_changes_are_per_topic_table():
    summaries = [
        {"afterResolved": None, "throughResolved": "10.0", "topics": {
            "users": {"inserted": 3, "updated": 0, "deleted": 1, "targetVersion": 2},
            "orders": {"inserted": 0, "updated": 0, "deleted": 0, "targetVersion": 0}}},
        {"afterResolved": "10.0", "throughResolved": "20.0", "topics": {
            "orders": {"inserted": 0, "updated": 2, "deleted": 0, "targetVersion": 1}}},
    ]
    orders, users = crdb_changes("/lake/crdb/", summaries)
    assert orders["uri"] == "file:///lake/crdb/orders" and orders["extra"]["rowsUpdated"] == 2
    assert users["extra"] == {"pipeline": "cockroach", "topic": "users", "resolvedSpans": [[None, "10.0"], ["10.0", "20.0"]],
                              "rowsInserted": 3, "rowsUpdated": 0, "rowsDeleted": 1, "targetVersion": 2}
