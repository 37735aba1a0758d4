"""The SQL-pulled CockroachDB feed's configuration and the ranges its hooks plan (lakefeed.crdbsql), without
a cluster: a first run scans, later runs go from the checkpoint to the clock less the lag (at most
max_span_hours), a backfill of an hour not reached is not ready, and an initial scan's job reads its own
files only, as a snapshot."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lakefeed import pipeline as skeleton
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.crdb.hlc import NANOS, Hlc
from lakefeed.crdb.run_plan import ResolvedRange
from lakefeed.crdb.summary import CrdbSummary
from lakefeed.crdbsql.config import CrdbSqlConfig
from lakefeed.crdbsql.pipeline import HOOKS, ClusterSource, CrdbSqlPlan
from lakefeed.errors import ConfigError, WindowNotReadyError
from lakefeed.progress import BACKFILL, SCHEDULED
from lakefeed.sql import SqlEndpoint

HOUR = 3600 * NANOS


def config(**overrides) -> CrdbSqlConfig:
    import json

    return CrdbSqlConfig.from_json(json.dumps(overrides), "Variable lakefeed_crdb_sql_config")


def test_the_defaults_read_and_the_staging_root_is_the_folder_the_job_reads():
    found = config()
    assert found.tables == ["customers", "orders"] and found.sink_root == found.staging_root
    moved = config(staging_root="/stage/x")
    assert moved.sink_root == "/stage/x" and CrdbSqlConfig.of_document(moved.as_document(), "plan") == moved


@pytest.mark.parametrize(
    "overrides, refused",
    [
        ({"sink_root": "/elsewhere"}, "stages them under staging_root"),
        ({"tables": ["orders; DROP TABLE x"]}, "is not a table name"),
        ({"tables": []}, "tables must list"),
        ({"statement_form": "newest"}, "statement_form must be one of"),
        ({"parquet_keys": {"orders": ["id"]}}, "parquet_keys is for parquet sink files"),
        ({"max_span_hours": 0}, "max_span_hours > 0"),
        ({"tables": ["shop.public.orders", "audit.public.Orders"]}, "name one table twice"),
        ({"min_checkpoint_frequency": "5 seconds"}, "is not a duration"),
    ],
)
def test_a_configuration_no_run_can_serve_is_refused_by_name(overrides, refused):
    with pytest.raises(ConfigError, match=refused):
        config(**overrides)


def source(horizon: Hlc) -> ClusterSource:
    return ClusterSource(None, SqlEndpoint("db", 26257), ("customers", "orders"), horizon, "v24.1")  # type: ignore[arg-type]


def found(resolved: str | None, horizon: Hlc, **overrides) -> skeleton.Found:
    checkpoint = CrdbCheckpoint.from_json(None, "cp")
    if resolved:
        checkpoint = checkpoint.moved(resolved=resolved)
    return skeleton.Found(config(**overrides), checkpoint, source(horizon), None, None)  # type: ignore[arg-type]


def test_a_first_run_scans_at_the_horizon_and_later_runs_go_from_the_checkpoint_to_it():
    horizon = Hlc(100 * HOUR, 0)
    first = HOOKS.pending(found(None, horizon))
    assert (first.kind, first.after, first.stamps) == (SCHEDULED, None, [Hlc(100 * HOUR - 1, 2147483647)])
    cursor = Hlc(99 * HOUR, 5)
    later = HOOKS.pending(found(str(cursor), horizon))
    assert later.after == cursor and later.stamps == [Hlc(100 * HOUR - 1, 2147483647)]  # the range ends before it
    capped = HOOKS.pending(found(str(Hlc(10 * HOUR, 0)), horizon, max_span_hours=24))
    assert capped.stamps == [Hlc(34 * HOUR, 0)]
    assert HOOKS.pending(found(str(Hlc(100 * HOUR - 1, 2147483647)), horizon)).stamps == []  # up to date


def test_an_airflow_backfill_run_pulls_its_hour_once_the_clock_passed_it():
    start, end = datetime(2026, 3, 14, 9, tzinfo=UTC), datetime(2026, 3, 14, 10, tzinfo=UTC)
    end_ns = int(end.timestamp()) * NANOS
    ready = HOOKS.in_interval(config(), source(Hlc(end_ns, 0)), start, end)
    assert (ready.kind, ready.after, ready.stamps) == (
        BACKFILL,
        Hlc(int(start.timestamp()) * NANOS - 1, 2147483647),
        [Hlc(end_ns - 1, 2147483647)],
    )
    with pytest.raises(WindowNotReadyError, match="has not passed this run's hour end"):
        HOOKS.in_interval(config(), source(Hlc(end_ns - 1, 0)), start, end)


def test_an_initial_scan_job_reads_its_own_files_as_a_snapshot_and_is_credited_for_them():
    scan = Hlc(100 * HOUR, 0)
    plan = CrdbSqlPlan(
        kind=SCHEDULED,
        batches=[ResolvedRange(None, str(scan))],
        sink="cockroach://db:26257/defaultdb?tables=customers,orders",
        resolved_before=None,
        newest_resolved=str(scan),
        target_root="/lake",
        config=config(tables=["Customers", 'shop.public."Orders.Archive"'], target_root="/lake"),
    )
    (args,) = HOOKS.arguments(plan)
    floor = str(Hlc(100 * HOUR - 1, 2147483647))
    assert args[args.index("--after-resolved") + 1] == floor
    assert args[args.index("--snapshot-topics") + 1] == "customers,Orders.Archive"  # as SQL folds names
    summary = CrdbSummary(after_resolved=floor, through_resolved=str(scan), target_root="/lake")
    assert HOOKS.belongs(plan, summary, plan.batches[0])
    other = CrdbSummary(after_resolved=None, through_resolved=str(scan), target_root="/lake")
    assert not HOOKS.belongs(plan, other, plan.batches[0])
