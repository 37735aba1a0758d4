"""The monitor's figures from run summaries, and what it refuses to show."""

from datetime import UTC, datetime

from lakefeed.blob.monitoring import run_row as blob_row
from lakefeed.cdf.monitoring import run_row as cdf_row
from lakefeed.crdb.monitoring import run_row as crdb_row
from lakefeed.monitor import (
    explain,
    health,
    lag_of,
    outcome_of,
    redact,
    run_base,
    run_purpose,
    safe_config,
)

BASE = run_base(
    "scheduled__1",
    "scheduled",
    "success",
    datetime(2026, 1, 1, 1, tzinfo=UTC),
    datetime(2026, 1, 1, 1, 2, 30, tzinfo=UTC),
)


def test_a_run_without_a_summary_shows_its_state_and_dashes():
    row = blob_row(BASE, None).to_dict()
    assert row["state"] == "success" and row["wallSeconds"] == 150.0 and row["start"] == "2026-01-01T01:00:00Z"
    assert row["read"] is None and row["throughput"] is None and row["failedBatches"] == []


def test_blob_rows_carry_the_summary_figures():
    report = {
        "kind": "scheduled",
        "batches": 1,
        "windowsPlanned": 2,
        "recordsRead": 611,
        "eventsClaimed": 298,
        "strays": 3,
        "duplicatesRemoved": 2,
        "eventsInserted": 298,
        "stateInserted": 189,
        "stateUpdated": 4,
        "sparkSeconds": 20.0,
        "lagHours": 0.0,
        "batchesFailed": [],
        "targetsChanged": [
            {
                "table": "/l/events",
                "uri": "file:///l/events",
                "extra": {"windows": ["2026-01-01T00:10:00Z", "2026-01-01T01:10:00Z"]},
            }
        ],
    }
    row = blob_row(BASE, report)
    assert (row.read, row.claimed, row.strays, row.duplicates, row.inserted, row.updated, row.deleted) == (
        611,
        298,
        3,
        2,
        487,
        4,
        0,
    )
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
    report = {
        "kind": "scheduled",
        "pipelines": {
            "orders": {
                "kind": "scheduled",
                "versions": [[1, 4], [5, 5]],
                "rowsRead": 54,
                "inserted": 18,
                "updated": 2,
                "deleted": 1,
                "sparkSeconds": 9.0,
                "lagVersions": 0,
                "jobsFailed": [],
            },
            "users": {"kind": "backfill", "versions": [[3, 3]], "rowsRead": 5},
        },
        "targetsChanged": [
            {"table": "/l/orders", "extra": {"pipeline": "cdf:orders"}},
            {"table": "/l/users", "extra": {"pipeline": "cdf:users"}},
        ],
    }
    orders = cdf_row(BASE, report, "orders")
    assert (orders.applied, orders.read, orders.inserted, orders.updated, orders.deleted) == (
        "1..4 … 5 (2)",
        54,
        18,
        2,
        1,
    )
    assert [c["table"] for c in orders.targetsChanged] == ["/l/orders"]
    assert cdf_row(BASE, report, "absent").read is None


def test_crdb_rows_show_the_resolved_span():
    row = crdb_row(
        BASE,
        {
            "resolvedBefore": None,
            "resolved": "20.0000000000",
            "messagesRead": 9,
            "duplicatesDropped": 2,
            "inserted": 4,
            "updated": 1,
            "deleted": 1,
            "quarantined": 3,
            "lagSeconds": 3.5,
        },
    )
    assert row.applied == "first file → 20.0000000000" and row.duplicates == 2 and row.lag == 3.5
    assert row.quarantined == 3
    assert crdb_row(BASE, {"resolvedBefore": "20.0", "resolved": "20.0"}).applied is None


def test_lag_is_unknown_until_both_positions_are_known():
    assert lag_of("versions", 7, 4, lambda a, b: a - b) == {"value": 3, "unit": "versions"}
    assert lag_of("versions", 7, None, lambda a, b: a - b) == {"value": None, "unit": "versions"}


def test_secrets_are_never_shown():
    config = {
        "feed_root": "https://acct.blob.core.windows.net/c?sv=2024&sig=abc%2Fdef&se=1",
        "account_key": "k",
        "spark_conf": {"spark.executor.memory": "2g", "fs.azure.sas.token": "t"},
        "wasb_conn_id": "wasb_feed",
    }
    shown = safe_config(config)
    assert shown == {
        "feed_root": "https://acct.blob.core.windows.net/c?sv=2024&sig=***&se=1",
        "spark_conf": {"spark.executor.memory": "2g"},
        "wasb_conn_id": "wasb_feed",
    }
    assert redact("BlobEndpoint=x;AccountKey=c2VjcmV0;") == "BlobEndpoint=x;AccountKey=***;"


def test_a_failed_run_shows_why_in_every_pipelines_row():
    reason = explain("plan_windows", "DataLossError: the segments from 2026-01-01T00:10:00Z …", "Reset the checkpoint")
    failed = run_base(
        "manual__1", "manual", "failed", None, None, reason=reason, outcome=outcome_of("failed", False, False, reason)
    )
    for row in (blob_row(failed, None), cdf_row(failed, None, "orders"), crdb_row(failed, None)):
        assert row.state == "failed" and row.outcome == "refused" and row.read is None
        assert row.reason["error"] == "DataLossError" and row.reason["task"] == "plan_windows"
    assert blob_row(BASE, None).reason is None


def test_an_error_is_explained_by_its_innermost_lakefeed_class_with_what_to_do():
    wrapped = (
        "AirflowFailException: the job refused its input (exit code 2), nothing was written; not retried: "
        "WindowNotReadyError: the backfill asks for 1 window(s) not ready yet (first 2026-01-01T05:10:00Z)"
    )
    reason = explain("plan_windows", wrapped, "Reset the checkpoint")
    assert (reason.error, reason.kind, reason.refused) == ("WindowNotReadyError", "not ready", True)
    assert reason.message.startswith("the backfill asks for 1 window(s)") and "Trigger it again" in reason.remedy

    moved = explain(
        "wait", "AirflowFailException: CheckpointMismatchError: target orders was recreated", "Full refresh"
    )
    assert (moved.kind, moved.refused) == ("moved", True) and "'Full refresh'" in moved.remedy
    assert explain("p", "ConfigError: unknown key 'x'", "r").kind == "configuration"
    assert explain("p", "FeedCorruptError: bad.avro: not an Avro file", "r").kind == "bad input"
    assert explain("p", "DataLossError: gone", "Full refresh").kind == "data loss"
    assert explain("p", "CheckpointConflictError: moved 5 times", "r").refused is False

    transient = explain(
        "apply_ranges[1]",
        "RuntimeError: the Spark job failed (exit code 1), retried as configured: "
        "Py4JJavaError: An error occurred while calling o42.execute",
        "r",
    )
    assert (transient.error, transient.kind, transient.refused) == ("Py4JJavaError", "failed", False)
    assert transient.message == "An error occurred while calling o42.execute" and "clear the task" in transient.remedy
    assert explain("s", "StorageUnavailableError: reset by peer", "r").refused is False
    assert explain("s", "AirflowException: Cannot execute: spark-submit", "r").error == "AirflowException"
    assert explain("s", "TaskDeferralTimeout: Trigger/execution timeout", "r").kind == "timeout"
    assert explain("s", "no class here", "r").message == "no class here"


def test_a_reason_never_shows_a_secret():
    reason = explain("plan", "FeedError: cannot list https://a.blob.core.windows.net/c?sv=1&sig=SECRET", "r")
    assert "SECRET" not in str(reason.to_dict()) and "sig=***" in reason.message


def test_a_run_is_a_backfill_when_it_names_a_range_or_airflow_made_it():
    ranges = ("window_start", "window_end")
    assert run_purpose("manual", {"window_start": "2026-01-01T00:10:00Z"}, ranges) == "backfill"
    assert run_purpose("backfill", None, ranges) == "backfill"
    assert run_purpose("manual", {"window_start": None, "reset_checkpoint": True}, ranges) == "pipeline"
    assert run_purpose("scheduled", {}, ranges) == "pipeline"


def test_outcomes_in_a_word():
    refusal, failure = explain("p", "ConfigError: x", "r"), explain("p", "OSError: y", "r")
    assert outcome_of("failed", False, False, refusal) == "refused"
    assert outcome_of("failed", False, False, failure) == "failed"
    assert outcome_of("success", True, False, None) == "applied"
    assert outcome_of("success", False, True, None) == "up to date"
    assert outcome_of("running", False, False, None) == "running"
    # Skipped because its range is not in the source yet: nothing applied, and said so, not "up to date".
    not_ready = explain("plan_windows", "WindowNotReadyError: not ready yet, nothing applied: …", "r")
    assert (not_ready.kind, not_ready.refused) == ("not ready", True)
    assert outcome_of("success", False, True, not_ready) == "not ready"


def _row(run_id, state, purpose="pipeline", text=None):
    reason = explain("plan", text, "r") if text else None
    return blob_row(
        run_base(
            run_id,
            "manual",
            state,
            None,
            None,
            purpose=purpose,
            reason=reason,
            outcome=outcome_of(state, state == "success", False, reason),
        ),
        None,
    )


def test_the_headline_separates_a_refused_backfill_from_a_failing_pipeline():
    refused_backfill = _row("b", "failed", "backfill", "WindowNotReadyError: not yet")
    healthy = health([refused_backfill, _row("s2", "success"), _row("s1", "failed", text="OSError: x")])
    assert healthy["status"] == "healthy" and healthy["run"] == "s2" and healthy["reason"] is None
    assert healthy["backfillRun"] == "b" and "refused: not ready" in healthy["backfillNote"]
    assert healthy["counts"] == {"refused": 1, "applied": 1, "failed": 1} and healthy["shown"] == 3

    failing = health(
        [_row("r", "running"), _row("s3", "failed", text="CheckpointMismatchError: moved"), _row("s2", "success")]
    )
    assert failing["status"] == "failing" and failing["run"] == "s3" and failing["reason"]["kind"] == "moved"
    assert failing["backfillNote"] is None and failing["counts"] == {"refused": 1, "applied": 1, "running": 1}
    assert (
        health([])["status"] == "no runs" and health([_row("b", "failed", "backfill", "X: y")])["status"] == "no runs"
    )
