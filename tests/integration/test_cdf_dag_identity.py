"""Sequences of `airflow dags test delta_cdf_to_delta` runs on the paths where data used to stall or be skipped
with a green run (issue 20), each against the source's snapshot and the checkpoint Variable:

- a target another pipeline (another checkpoint Variable) filled, met by a first run: refused until adopted;
- the pipeline's ``keys`` changed between runs: refused naming old and new until a full refresh;
- a source path that does not exist: a failed run naming it, never a green one;
- a backfill of versions whose commits log cleanup removed: a failed run naming the versions;
- rows of a target deleted by another tool: the next run is refused, naming the commit and its writer, until
  a run adopts the table;
- the configuration edited while a run's jobs run: the commit step vouches for what the jobs wrote, and the
  next run refuses the moved target;
- one of two pipelines' targets dropped and recreated by another tool after its job committed, before the
  commit step: the target's log no longer holds the job's commit, so the commit step refuses that pipeline by
  name and leaves its checkpoint, and moves the other pipeline's.

(A chunked backfill across an additive column change is in test_cdf_dag_added_column.py, its own file so
the two long sequences run on different test workers.)

Configuration lives in the metadata database here (``airflow variables set``), so a test can edit it while a
run is in flight, as a user editing the Variable in the UI would. (`airflow dags test` parses the DAG without
reading that Variable, so the form's ``pipeline`` choice is the demo's: runs here leave it empty, which a
configuration of one pipeline allows.)
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, latest_version, live_rows

from tests.airflow_env import (
    dags_test,
    dags_test_env,
    last_run_id,
    start_dags_test,
    task_tries,
    variable,
    wait_for,
)

pytestmark = pytest.mark.integration
DAG = "delta_cdf_to_delta"
CONFIG = "lakefeed_cdf_config"


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    return dags_test_env(tmp_path_factory.mktemp("cdf_identity") / "airflow")


def set_config(env, base: Path, *pipelines: dict, **extra) -> dict:
    config = {
        "pipelines": [{"keys": ["id"], "versions_per_job": 50, **p} for p in pipelines],
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
        **extra,
    }
    subprocess.run(
        ["airflow", "variables", "set", CONFIG, json.dumps(config)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return config


def rows(df, columns=("id", "name", "amount", "touched")):
    return sorted(tuple(r) for r in df.select(*columns).collect())


def output(result) -> str:
    return result.stdout + result.stderr


def source_with_history(spark, path, seed, commits=4):
    create_source(spark, str(path), rows=20)
    simulator = SourceSimulator(spark, str(path), seed=seed, key_space=50)
    for kind in ("update", "delete", "merge", "update")[:commits]:
        simulator.commit(kind)
    return simulator


def test_another_pipelines_target_and_changed_keys_are_refused_until_adopted_or_refreshed(spark, airflow_env, tmp_path):
    env = airflow_env
    source, target = tmp_path / "source", tmp_path / "target"
    simulator = source_with_history(spark, source, seed=3)
    first = {"name": "first", "source_table": str(source), "target_table": str(target)}
    set_config(env, tmp_path, first)
    dags_test(env, DAG)
    assert rows(live_rows(spark, str(target))) == rows(simulator.snapshot())

    # The same table under another pipeline (another checkpoint Variable): before, its first run MERGEd into
    # the rows of "first" as if they were its own, green.
    second = {**first, "name": "second"}
    set_config(env, tmp_path, second)
    result = dags_test(env, DAG, succeed=False)
    assert f"the target {target} already holds rows" in output(result)
    assert "written by pipeline lakefeed_cdf_checkpoint__first" in output(result)
    assert "adopt_targets=true" in output(result)
    assert variable(env, "lakefeed_cdf_checkpoint__second") is None
    dags_test(env, DAG, {"adopt_targets": True})
    assert variable(env, "lakefeed_cdf_checkpoint__second")["appliedVersion"] == latest_version(spark, str(source))
    assert rows(live_rows(spark, str(target))) == rows(simulator.snapshot())

    # keys changed between runs: before, the next run MERGEd on the new keys into rows keyed on the old.
    set_config(env, tmp_path, {**first, "keys": ["id", "name"]})
    simulator.commit("update")
    result = dags_test(env, DAG, succeed=False)
    assert "keys [id], but the configuration now says [id, name]" in output(result)
    assert "full_refresh=true" in output(result)
    before = variable(env, "lakefeed_cdf_checkpoint__first")
    assert before["keys"] == ["id"] and before["appliedVersion"] == latest_version(spark, str(source)) - 1
    dags_test(env, DAG, {"full_refresh": True})
    after = variable(env, "lakefeed_cdf_checkpoint__first")
    assert after["keys"] == ["id", "name"] and after["appliedVersion"] == latest_version(spark, str(source))
    assert rows(live_rows(spark, str(target))) == rows(simulator.snapshot())

    # Another tool deletes rows of the target: before, the next runs vouched for it as the pipeline's own. Now
    # the next run is refused, naming the commit and its writer, until a run adopts the table as it is.
    marked = after["targets"][str(target)]["version"]
    lowest = spark.sql(f"SELECT min(id) FROM delta.`{target}`").first()[0]
    spark.sql(f"DELETE FROM delta.`{target}` WHERE id = {lowest}")
    simulator.commit("update")
    result = dags_test(env, DAG, succeed=False)
    assert (
        f"says the target {target} holds only this pipeline's work through version {marked}, but since then "
        f"version {marked + 1} (DELETE) changed its rows, written by another writer (Apache-Spark"
    ) in output(result)
    assert "with the params pipeline=first and adopt_targets=true" in output(result)
    assert variable(env, "lakefeed_cdf_checkpoint__first")["appliedVersion"] == after["appliedVersion"]
    dags_test(env, DAG, {"adopt_targets": True})
    adopted = variable(env, "lakefeed_cdf_checkpoint__first")
    assert adopted["appliedVersion"] == latest_version(spark, str(source))
    assert adopted["targets"][str(target)]["version"] > marked + 1


def test_a_missing_source_and_versions_cleaned_from_the_log_fail_the_run_naming_them(spark, airflow_env, tmp_path):
    env = airflow_env
    missing = tmp_path / "no_such_table"
    set_config(env, tmp_path, {"name": "ghost", "source_table": str(missing), "target_table": str(tmp_path / "t1")})
    result = dags_test(env, DAG, succeed=False)  # before: a warning, and a green (skipped) run, every hour
    assert f"the source table {missing} does not exist" in output(result)
    tries = task_tries(env, DAG, last_run_id(env, DAG))
    assert tries["wait_for_new_versions"] == ("failed", 1)  # refused, not retried

    # Versions 0..9 cleaned from the log (a checkpoint at 10 keeps the table readable).
    source = tmp_path / "cleaned"
    create_source(spark, str(source), rows=5)
    for i in range(10):
        spark.sql(f"UPDATE delta.`{source}` SET touched = {i + 10} WHERE id = {i % 5}")
    log = source / "_delta_log"
    assert list(log.glob("00000000000000000010.checkpoint*.parquet"))
    for version in range(10):
        (log / f"{version:020d}.json").unlink()
    set_config(env, tmp_path, {"name": "cleaned", "source_table": str(source), "target_table": str(tmp_path / "t2")})
    result = dags_test(env, DAG, {"starting_version": 2, "ending_version": 4}, succeed=False)
    assert f"versions 2..9 of {source} are no longer in its log" in output(result)
    assert not (tmp_path / "t2").exists()


def test_a_config_edit_while_the_jobs_run_cannot_make_the_checkpoint_vouch_for_another_target(
    spark, airflow_env, tmp_path
):
    env = airflow_env
    source, target, moved = tmp_path / "source", tmp_path / "target", tmp_path / "moved"
    simulator = source_with_history(spark, source, seed=4)
    pipeline = {"name": "edited", "source_table": str(source), "target_table": str(target)}
    set_config(env, tmp_path, pipeline)
    run = start_dags_test(env, DAG, log=tmp_path / "run.log")
    wait_for(
        lambda: task_tries(env, DAG, last_run_id(env, DAG)).get("apply_ranges[0]", ("",))[0] == "running",
        300,
        "the job to start",
    )
    set_config(env, tmp_path, {**pipeline, "target_table": str(moved)})  # edited while the job runs
    assert run.wait(timeout=600) == 0, (tmp_path / "run.log").read_text()[-4000:]

    checkpoint = variable(env, "lakefeed_cdf_checkpoint__edited")
    assert set(checkpoint["targets"]) == {str(target)} and not moved.exists()
    assert rows(live_rows(spark, str(target))) == rows(simulator.snapshot())
    # The next run reads the new configuration and refuses the moved target (before: the checkpoint held no
    # target, and the next run applied only the newer versions into the empty new table).
    simulator.commit("update")
    result = dags_test(env, DAG, succeed=False)
    assert f"the target table is now configured as {moved}" in output(result)


def merge_committed(target: Path) -> bool:
    """Whether a MERGE (the job's range commit) is in the target's log."""
    log = target / "_delta_log"
    return log.is_dir() and any(
        json.loads(line).get("commitInfo", {}).get("operation") == "MERGE"
        for commit in log.glob("*.json")
        for line in commit.read_text().splitlines()
        if line.strip()
    )


def test_a_target_recreated_after_its_job_committed_is_refused_and_the_other_pipeline_moves(
    spark, airflow_env, tmp_path
):
    import shutil

    import pyarrow as pa
    from deltalake import write_deltalake

    env = airflow_env
    source = tmp_path / "source"
    targets = {"one": tmp_path / "one", "two": tmp_path / "two"}
    simulator = source_with_history(spark, source, seed=6)
    set_config(
        env,
        tmp_path,
        *({"name": name, "source_table": str(source), "target_table": str(target)} for name, target in targets.items()),
    )
    run = start_dags_test(env, DAG, log=tmp_path / "run.log")

    def first_done() -> str | None:
        """The pipeline whose job is done while the other's runs. `dags test` runs the two jobs one after the
        other, in either order: the first has MERGEd once the second has made its table and not yet MERGEd."""
        for name, other in (("one", "two"), ("two", "one")):
            started = (targets[other] / "_delta_log").is_dir()
            if merge_committed(targets[name]) and started and not merge_committed(targets[other]):
                return name
        return None

    lost_name = wait_for(first_done, 600, "the first job's MERGE while the second job runs")
    kept_name = "two" if lost_name == "one" else "one"
    lost, kept = targets[lost_name], targets[kept_name]
    shutil.rmtree(lost)  # another tool recreates the first target before the commit step runs
    write_deltalake(str(lost), pa.table({"id": [1, 2], "name": ["x", "y"]}))
    assert run.wait(timeout=600) != 0
    log = (tmp_path / "run.log").read_text()
    assert (
        (
            f"checkpoint Variable lakefeed_cdf_checkpoint__{lost_name} was left as it was: the targets' logs do not "
            "hold what this run's jobs committed: the job committed version "
        )
        in log
        and f"of {lost}, but that table is now at version 0: another table (or an older copy) took its place" in log
    ), log[-4000:]
    # Before: the commit step recorded the new table as holding versions 0..4, and the next runs applied only
    # later versions into it. Now its checkpoint is still empty, and the next run refuses the table by name;
    # the other pipeline's checkpoint moved over what its job applied.
    assert variable(env, f"lakefeed_cdf_checkpoint__{lost_name}") is None
    assert variable(env, f"lakefeed_cdf_checkpoint__{kept_name}")["appliedVersion"] == latest_version(
        spark, str(source)
    )
    assert rows(live_rows(spark, str(kept))) == rows(simulator.snapshot())
    result = dags_test(env, DAG, succeed=False)
    assert f"the target {lost} already holds rows: version 0 (WRITE) changed its rows" in output(result)
