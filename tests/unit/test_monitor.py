"""The monitor's figures from run summaries, and what it refuses to show."""

from datetime import datetime, timezone

from lakefeed.monitor import blob_row, cdf_row, crdb_row, lag_of, redact, run_base, safe_config

BASE = run_base("scheduled__1", "scheduled", "success", datetime(2026, 1, 1, 1, tzinfo=timezone.utc),
                datetime(2026, 1, 1, 1, 2, 30, tzinfo=timezone.utc))


def test_a_run_without_a_summary_shows_its_state_and_dashes():
    row = blob_row(BASE, None).to_dict()
    assert row["state"] == "success" and row["wallSeconds"] == 150.0 and row["start"] == "2026-01-01T01:00:00Z"
    assert row["read"] is None and row["throughput"] is None and row["failedBatches"] == []


def test_blob_rows_carry_the_summary_figures():
    report = {"kind": "scheduled", "batches": 1, "windowsPlanned": 2, "recordsRead": 611, "eventsClaimed": 298,
              "strays": 3, "duplicatesRemoved": 2, "eventsInserted": 298, "stateInserted": 189, "stateUpdated": 4,
              "sparkSeconds": 20.0, "lagHours": 0.0, "batchesFailed": [],
              "targetsChanged": [{"table": "/l/events", "uri": "file:///l/events", "extra": {
                  "windows": ["2026-01-01T00:10:00Z", "2026-01-01T01:10:00Z"]}}]}
    row = blob_row(BASE, report)
    assert (row.read, row.claimed, row.strays, row.duplicates, row.inserted, row.updated, row.deleted) == \
        (611, 298, 3, 2, 487, 4, 0)
    assert row.applied == "2026-01-01T00:10:00Z … 2026-01-01T01:10:00Z (2)"
    assert row.throughput == 30.6 and row.lag == 0.0 and row.kind == "scheduled"
    # The run's own windows, not those of the ledger entries it announced (a failed run's too).
    row = blob_row(BASE, {**report, "windowsApplied": ["2026-01-01T01:10:00Z"]})
    assert row.applied == "2026-01-01T01:10:00Z"


def test_a_failed_blob_run_lists_its_failed_batches_and_applied_nothing():
    failed = [{"start": "2026-01-01T00:10:00Z", "windows": 2, "refused": "corrupt Avro in x.avro"}]
    row = blob_row(BASE, {"batches": 1, "windowsPlanned": 2, "batchesFailed": failed, "targetsChanged": []})
    assert row.failedBatches == failed and row.applied == "2 window(s) in 1 batch(es)"


def test_cdf_rows_are_per_pipeline():
    report = {"kind": "scheduled", "pipelines": {
        "orders": {"kind": "scheduled", "versions": [[1, 4], [5, 5]], "rowsRead": 54, "inserted": 18, "updated": 2,
                   "deleted": 1, "sparkSeconds": 9.0, "lagVersions": 0, "jobsFailed": []},
        "users": {"kind": "backfill", "versions": [[3, 3]], "rowsRead": 5}},
        "targetsChanged": [{"table": "/l/orders", "extra": {"pipeline": "cdf:orders"}},
                           {"table": "/l/users", "extra": {"pipeline": "cdf:users"}}]}
    orders = cdf_row(BASE, report, "orders")
    assert (orders.applied, orders.read, orders.inserted, orders.updated, orders.deleted) == ("1..4 … 5 (2)", 54, 18, 2, 1)
    assert [c["table"] for c in orders.targetsChanged] == ["/l/orders"]
    assert cdf_row(BASE, report, "absent").read is None


def test_crdb_rows_show_the_resolved_span():
    row = crdb_row(BASE, {"resolvedBefore": None, "resolved": "20.0000000000", "messagesRead": 9,
                          "duplicatesDropped": 2, "inserted": 4, "updated": 1, "deleted": 1, "lagSeconds": 3.5})
    assert row.applied == "first file → 20.0000000000" and row.duplicates == 2 and row.lag == 3.5
    assert crdb_row(BASE, {"resolvedBefore": "20.0", "resolved": "20.0"}).applied is None


def test_lag_is_unknown_until_both_positions_are_known():
    assert lag_of("versions", 7, 4, lambda a, b: a - b) == {"value": 3, "unit": "versions"}
    assert lag_of("versions", 7, None, lambda a, b: a - b) == {"value": None, "unit": "versions"}


def test_secrets_are_never_shown():
    config = {"feed_root": "https://acct.blob.core.windows.net/c?sv=2024&sig=abc%2Fdef&se=1",
              "account_key": "k", "spark_conf": {"spark.executor.memory": "2g", "fs.azure.sas.token": "t"},
              "wasb_conn_id": "wasb_feed"}
    shown = safe_config(config)
    assert shown == {"feed_root": "https://acct.blob.core.windows.net/c?sv=2024&sig=***&se=1",
                     "spark_conf": {"spark.executor.memory": "2g"}, "wasb_conn_id": "wasb_feed"}
    assert redact("BlobEndpoint=x;AccountKey=c2VjcmV0;") == "BlobEndpoint=x;AccountKey=***;"


def test_a_run_its_plan_refused_shows_why_in_every_pipelines_row():
    refused = {**BASE, "state": "failed", "refused": "DataLossError: the segments from 2026-01-01T00:10:00Z …"}
    for row in (blob_row(refused, None), cdf_row(refused, None, "orders"), crdb_row(refused, None)):
        assert row.state == "failed" and row.refused.startswith("DataLossError") and row.read is None
    assert blob_row(BASE, None).refused is None
