"""Sequences of `airflow dags test cockroach_sql_changefeed_to_delta` runs against the wire-protocol test
server (lakefeed_testing.crdb_server) serving the sink generator's history, with the cluster's clock moved
by the test: each run's targets are checked against the history as of the checkpoint. A first run (an
initial scan), an hourly run whose pull is killed mid-stream and retried while its stream repeats itself,
a backfill of an applied range (nothing changes), a cursor past the GC threshold (refused, naming the
tables), and the reset that goes on (a new initial scan: rows deleted in the gap become tombstones)."""

from __future__ import annotations

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink
from lakefeed_testing.crdb_server import Cluster, Faults, serve

from lakefeed.crdb.hlc import NANOS, Hlc
from lakefeed.crdbsql.pull import prev_of
from tests.airflow_env import (
    assert_each_entry_announced_once,
    dags_test,
    dags_test_env,
    last_run_id,
    progress,
    task_tries,
    variable,
    with_config,
    xcom,
)
from tests.integration.test_crdb_job import assert_live_rows, tables

pytestmark = pytest.mark.integration
DAG = "cockroach_sql_changefeed_to_delta"
CHECKPOINT = "lakefeed_crdb_sql_checkpoint"
PASSWORD = "pw-never-logged"


def assert_state(spark, lake, truth, stamp: Hlc) -> None:
    """The topic tables hold the live rows of the history as of ``stamp``, with their values; a tombstone
    only for a key deleted by then (keys deleted before an initial scan are not in the tables at all)."""
    state = truth.as_of(stamp)
    for topic, got in tables(spark, lake).items():
        assert_live_rows(topic, got, {k: row for k, row in state[topic].items() if row is not None})
        tombstones = {k for k, r in got.items() if r["_crdb_deleted"]}
        assert tombstones <= {k for k, row in state[topic].items() if row is None}, topic


def test_scan_hourly_kill_repeats_backfill_gc_and_reset(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SinkSpec(steps=24, changes_per_step=20, seed=41, restart_at_flush=None))
    stamps = sorted({c.stamp for c in truth.history})
    clock = [Hlc(stamps[len(stamps) // 4].wall + 1, 0)]
    cluster = Cluster(truth.history, lambda: clock[0], password=PASSWORD, resolved_every=25)
    server = serve(cluster)
    lake = tmp_path / "lake"
    config = {
        "tables": ["customers", "orders"],
        "staging_root": str(tmp_path / "staging"),
        "target_root": str(lake),
        "safety_lag_seconds": 0,
        "min_checkpoint_frequency": "1s",
        "sensor_poke_seconds": 1,
        "sensor_timeout_seconds": 900,
    }
    uri = f"postgres://root:{PASSWORD}@127.0.0.1:{server.port}/defaultdb?sslmode=disable"
    env = with_config(
        dags_test_env(tmp_path / "airflow", AIRFLOW_CONN_LAKEFEED_COCKROACH=uri, LAKEFEED_RETRY_DELAY_SECONDS="3"),
        "lakefeed_crdb_sql_config",
        config,
    )
    try:
        # 1. The first run: an initial scan at the cluster's clock.
        result = dags_test(env, DAG)
        assert PASSWORD not in result.stdout + result.stderr
        scanned = variable(env, CHECKPOINT)
        assert scanned["resolved"] == str(prev_of(clock[0]))
        assert scanned["sink"] == f"cockroach://127.0.0.1:{server.port}/defaultdb?tables=customers,orders"
        assert_state(spark, lake, truth, clock[0])

        # 2. An hour later: the connection drops mid-stream and the pull is retried; the retried stream
        # repeats itself (an in-process retry of the changefeed, duplicated messages).
        clock[0] = Hlc(stamps[2 * len(stamps) // 3].wall + 1, 0)
        cluster.faults = Faults(drop_after_rows=40)
        cluster.every_feed = Faults(retry_after_rows=30, duplicate_every=7)
        dags_test(env, DAG)
        cluster.every_feed = Faults()
        run = last_run_id(env, DAG)
        assert task_tries(env, DAG, run)["pull_ranges[0]"] == ("success", 2)
        hourly = variable(env, CHECKPOINT)
        assert hourly["resolved"] == str(prev_of(clock[0]))
        report = xcom(env, DAG, run, "commit_checkpoint")
        assert report["duplicatesDropped"] > 0 and report["resolvedBefore"] == scanned["resolved"]
        assert_state(spark, lake, truth, clock[0])
        before_backfill = variable(env, CHECKPOINT)

        # 3. A backfill of a range applied before: pulled again, nothing changes, the checkpoint stays.
        dags_test(env, DAG, {"after_resolved": scanned["resolved"], "through_resolved": hourly["resolved"]})
        report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
        assert report["kind"] == "backfill" and (report["inserted"], report["updated"], report["deleted"]) == (0, 0, 0)
        assert progress(variable(env, CHECKPOINT)) == progress(before_backfill)
        assert_state(spark, lake, truth, clock[0])

        # 4. The cluster garbage-collected the history after the checkpoint: refused, naming the tables.
        clock[0] = Hlc(stamps[-1].wall + 5 * NANOS, 0)
        cluster.gc_threshold = Hlc(stamps[-10].wall, 0)
        result = dags_test(env, DAG, succeed=False)
        assert "customers, orders" in result.stdout + result.stderr and "GC threshold" in result.stdout + result.stderr
        assert progress(variable(env, CHECKPOINT)) == progress(before_backfill)  # its announcements may catch up

        # 5. Going on takes the reset: a new initial scan, and what was deleted in the gap is a tombstone.
        dags_test(env, DAG, {"reset_checkpoint": True})
        assert variable(env, CHECKPOINT)["resolved"] == str(prev_of(clock[0]))
        assert_state(spark, lake, truth, clock[0])
        got = tables(spark, lake)
        for topic in ("customers", "orders"):
            gone = {k for k, row in truth.as_of(clock[0])[topic].items() if row is None}
            applied_before = {k for k, r in got[topic].items()}
            assert gone & applied_before <= {k for k, r in got[topic].items() if r["_crdb_deleted"]}
            assert_each_entry_announced_once(env, str(lake / topic), CHECKPOINT)
    finally:
        server.stop()
