"""An SCD type 2 pipeline (``"scd_type": 2``) through `airflow dags test delta_cdf_to_delta` run after run:
a chunked first run, new commits (unchanged updates among them), replayed and overlapping backfills, a
refused full refresh, each checked against the history computed from the source's snapshots (issue 25). The
helpers and the configuration in the metadata database are those of test_cdf_dag_identity.py (a configuration
of one pipeline: the runs' params leave ``pipeline`` empty)."""

from __future__ import annotations

import pytest
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, history_from_snapshots, latest_version

from tests.airflow_env import dags_test, dags_test_env, job_summaries, last_run_id, variable, xcom
from tests.integration.test_cdf_dag_identity import DAG, set_config

pytestmark = pytest.mark.integration
COLUMNS = ["name", "amount", "touched"]


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    return dags_test_env(tmp_path_factory.mktemp("cdf_scd2") / "airflow")


def history(spark, target) -> list[tuple]:
    rows = spark.read.format("delta").load(target).select("id", *COLUMNS, "__START_AT", "__END_AT").collect()
    return sorted((tuple(r) for r in rows), key=repr)


def target_version(spark, target) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]


def test_an_scd2_pipelines_runs_backfills_and_a_refused_full_refresh_equal_the_snapshots_history(
    spark, airflow_env, tmp_path
):
    env = airflow_env
    source, target = str(tmp_path / "source"), str(tmp_path / "target")
    create_source(spark, source, rows=20)
    simulator = SourceSimulator(spark, source, seed=12, key_space=50)
    for kind in ("update", "delete", "merge", "overwrite", "reinsert"):
        simulator.commit(kind)
    set_config(
        env,
        tmp_path,
        {"name": "history", "source_table": source, "target_table": target, "versions_per_job": 3, "scd_type": 2},
    )
    dags_test(env, DAG)  # the first run: the change feed from version 0, in one job (a history goes in order)
    first = latest_version(spark, source)
    assert [(s["startingVersion"], s["endingVersion"]) for s in job_summaries(env, DAG)] == [(0, first)]
    assert {s["scdType"] for s in job_summaries(env, DAG)} == {2}
    assert history(spark, target) == history_from_snapshots(spark, source, COLUMNS, 0, first)

    for kind in ("noop", "touch", "update", "delete", "reinsert"):
        simulator.commit(kind)
    dags_test(env, DAG)  # the new versions, an unchanged update among them
    latest = latest_version(spark, source)
    assert variable(env, "lakefeed_cdf_checkpoint__history")["appliedVersion"] == latest
    assert history(spark, target) == history_from_snapshots(spark, source, COLUMNS, 0, latest)

    # A backfill of applied versions (the job tests cover replays inside the history): nothing written.
    version = target_version(spark, target)
    dags_test(env, DAG, {"starting_version": latest - 2, "ending_version": latest})
    assert target_version(spark, target) == version

    # A full refresh would replace the history: the run fails naming why, the target and checkpoint stay.
    failed = dags_test(env, DAG, {"full_refresh": True}, succeed=False)
    assert "already holds a history" in failed.stdout + failed.stderr
    assert target_version(spark, target) == version
    assert variable(env, "lakefeed_cdf_checkpoint__history")["appliedVersion"] == latest

    simulator.commit("merge")
    dags_test(env, DAG)
    newest = latest_version(spark, source)
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoints")["pipelines"]["history"]
    assert report["appliedVersion"] == newest
    assert history(spark, target) == history_from_snapshots(spark, source, COLUMNS, 0, newest)
