"""Sequences of `airflow dags test delta_cdf_to_delta` runs against real Delta sources under random commits,
each checked against the source's snapshot and the checkpoint Variable: first run, no new versions, new
commits, a replayed range, a backfill before the first scheduled run, a full refresh at an older version,
and a source dropped and recreated behind the checkpoint."""

from __future__ import annotations

import shutil

import pytest
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, latest_version, live_rows

from tests.airflow_env import (
    assert_each_entry_announced_once,
    dags_test,
    dags_test_env,
    job_summaries,
    last_run_id,
    variable,
    with_config,
    xcom,
)

pytestmark = pytest.mark.integration
DAG = "delta_cdf_to_delta"


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    return dags_test_env(tmp_path_factory.mktemp("cdf_dag") / "airflow")


@pytest.fixture
def pipeline(airflow_env, tmp_path, request):
    """A pipeline of its own (source, target, run folder, checkpoint Variable) in the module's Airflow."""
    name = request.node.name.split("[")[0].removeprefix("test_")[:40]
    config = {
        "pipelines": [
            {
                "name": name,
                "source_table": str(tmp_path / "source"),
                "target_table": str(tmp_path / "target"),
                "keys": ["id"],
                "versions_per_job": 4 if "growth" in request.node.name else 50,
            }
        ],
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
    }
    return tmp_path, name, config, with_config(airflow_env, "lakefeed_cdf_config", config)


def applied(env, name) -> int | None:
    checkpoint = variable(env, f"lakefeed_cdf_checkpoint__{name}")
    return checkpoint["appliedVersion"] if checkpoint else None


def rows(df):
    return sorted(tuple(r) for r in df.select("id", "name", "amount", "touched").collect())


def run_summary(env) -> dict:
    return xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoints")


def source_with_history(spark, path, seed, kinds=("update", "delete", "update", "overwrite", "merge")):
    create_source(spark, str(path), rows=25)
    simulator = SourceSimulator(spark, str(path), seed=seed, key_space=60)
    for kind in kinds:
        simulator.commit(kind)
    return simulator


def test_a_pipelines_life_backfill_first_runs_growth_replay_full_refreshes_and_a_recreated_source(spark, pipeline):
    """One pipeline through what users do to it, run after run (each step's state is the next one's start:
    one sequence, not one first run per scenario)."""
    base, name, _config, env = pipeline
    source, target = str(base / "source"), str(base / "target")
    simulator = source_with_history(spark, source, seed=5)
    first_latest = latest_version(spark, source)

    # A backfill before the first scheduled run creates no checkpoint (before this fix it created one at
    # version 5, and versions 0..3 were never applied).
    dags_test(env, DAG, {"pipeline": name, "starting_version": 4, "ending_version": 5})
    assert applied(env, name) is None
    assert run_summary(env)["pipelines"][name]["appliedVersion"] is None

    dags_test(env, DAG)  # first run: CDF was on from version 0, so it reads the change feed from 0
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env, name) == first_latest
    assert [s["startingVersion"] for s in job_summaries(env, DAG)] == list(range(0, first_latest + 1, 4))

    target_version = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]
    dags_test(env, DAG)  # no new versions: skipped, nothing written
    assert spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"] == target_version
    assert applied(env, name) == first_latest

    for kind in ("reinsert", "update", "delete"):
        simulator.commit(kind)
    dags_test(env, DAG)  # exactly the new versions
    [summary] = job_summaries(env, DAG)
    assert (summary["startingVersion"], summary["endingVersion"]) == (first_latest + 1, first_latest + 3)
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    latest = first_latest + 3
    assert applied(env, name) == latest

    before = rows(spark.read.format("delta").load(target))
    dags_test(env, DAG, {"pipeline": name, "starting_version": 0, "ending_version": 3})  # a replayed past range
    assert rows(spark.read.format("delta").load(target)) == before
    assert applied(env, name) == latest

    dags_test(env, DAG, {"pipeline": name, "full_refresh": True})
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env, name) == latest
    # Every commit that changed the target (the backfill's, the runs', the refresh) announced once.
    events = assert_each_entry_announced_once(env, target, f"lakefeed_cdf_checkpoint__{name}")
    assert events[-1]["fullRefresh"] is True and events[-1]["versions"] == [[latest] * 2]

    # A full refresh at an older version resets the checkpoint and loses nothing: rebuilt at version 2, the
    # keys deleted or inserted after it must come back right on the next run.
    dags_test(env, DAG, {"pipeline": name, "full_refresh": True, "ending_version": 2})
    assert applied(env, name) == 2
    assert run_summary(env)["pipelines"][name]["checkpointReset"] == {"from": latest, "to": 2}
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot(2))

    simulator.commit("delete")
    dags_test(env, DAG)  # versions 3.. again, in jobs of versions_per_job (4)
    summaries = [(s["startingVersion"], s["endingVersion"]) for s in job_summaries(env, DAG)]
    assert summaries == [(start, min(start + 3, latest + 1)) for start in range(3, latest + 2, 4)]
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env, name) == latest + 1

    # The source dropped and recreated with a shorter history: the sensor saw "nothing new" forever before
    # this was refused; now the run fails naming the table, until a full refresh.
    old_applied = applied(env, name)
    shutil.rmtree(source)
    simulator = source_with_history(spark, source, seed=9, kinds=("update",))
    assert latest_version(spark, source) < old_applied
    result = dags_test(env, DAG, succeed=False)
    assert f"the source table {source} is table" in result.stdout + result.stderr
    assert "dropped and recreated" in result.stdout + result.stderr
    assert applied(env, name) == old_applied

    dags_test(env, DAG, {"pipeline": name, "full_refresh": True})
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env, name) == latest_version(spark, source)
    simulator.commit("delete")
    dags_test(env, DAG)
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
