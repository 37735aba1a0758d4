"""Tombstone retention through `airflow dags test delta_cdf_to_delta` (issue 25): a scheduled run removes the
tombstones older than the threshold by the source's clock, records the horizon, and reports the count; a
backfill ending before the horizon (which could bring a removed key back) fails at once, naming it, with the
target and the checkpoint as they were."""

from __future__ import annotations

import time

import pytest
from lakefeed_testing.cdf_simulator import create_source, latest_version, live_rows

from lakefeed.tombstones import HORIZON
from tests.airflow_env import (
    dags_test,
    dags_test_env,
    last_run_id,
    progress,
    task_tries,
    variable,
    with_config,
    xcom,
)

pytestmark = pytest.mark.integration
DAG = "delta_cdf_to_delta"
NAME = "orders"
RETENTION_SECONDS = 2.0


def target_rows(spark, target) -> dict[int, bool]:
    return {r["id"]: r["_cdf_deleted"] for r in spark.read.format("delta").load(target).collect()}


def test_a_scheduled_run_removes_old_tombstones_and_a_backfill_that_could_revive_a_key_is_refused(spark, tmp_path):
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=6)  # v0 create, v1 six rows
    for key in (1, 2):  # v2, v3
        spark.sql(f"DELETE FROM delta.`{source}` WHERE id = {key}")
    config = {
        "pipelines": [
            {
                "name": NAME,
                "source_table": source,
                "target_table": target,
                "keys": ["id"],
                "versions_per_job": 2,
                "tombstone_retention_hours": RETENTION_SECONDS / 3600,
            }
        ],
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
    }
    env = with_config(dags_test_env(tmp_path / "airflow"), "lakefeed_cdf_config", config)
    checkpoint_variable = f"lakefeed_cdf_checkpoint__{NAME}"

    # 1. The first run applies the deletes: the tombstones are from its own range, so they stay.
    dags_test(env, DAG)
    assert target_rows(spark, target) == {0: False, 1: True, 2: True, 3: False, 4: False, 5: False}
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoints")["pipelines"][NAME]
    assert report["versions"] == [[0, 1], [2, 3]] and report["tombstonesRemoved"] == 0

    # 2. Past the threshold by the source's clock, the next scheduled run removes both; the rest is the source.
    time.sleep(RETENTION_SECONDS + 1)
    spark.sql(f"UPDATE delta.`{source}` SET amount = 7 WHERE id = 5")  # v4
    dags_test(env, DAG)
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoints")["pipelines"][NAME]
    assert report["versions"] == [[4, 4]] and report["tombstonesRemoved"] == 2
    assert target_rows(spark, target) == dict.fromkeys((0, 3, 4, 5), False)
    snapshot = spark.read.format("delta").load(source)
    live = live_rows(spark, target).select(*snapshot.columns)
    assert sorted(map(tuple, live.collect())) == sorted(map(tuple, snapshot.collect()))
    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{target}`").collect()}
    assert properties[HORIZON] == "3"  # the newest delete removed
    checkpoint = variable(env, checkpoint_variable)
    assert checkpoint["appliedVersion"] == latest_version(spark, source) == 4

    # 3. A backfill of versions 0..2 would insert key 2 again (its tombstone is gone): refused at once, naming
    #    the horizon; nothing written, the checkpoint as it was.
    before = target_rows(spark, target)
    result = dags_test(env, DAG, {"pipeline": NAME, "starting_version": 0, "ending_version": 2}, succeed=False)
    assert "ends at 2, before 3, the newest tombstone" in result.stdout + result.stderr
    assert task_tries(env, DAG, last_run_id(env, DAG))["apply_ranges[0]"] == ("failed", 1)  # not retried
    assert target_rows(spark, target) == before
    assert progress(variable(env, checkpoint_variable)) == progress(checkpoint)
