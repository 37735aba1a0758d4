"""Sequences of `airflow dags test cockroach_changefeed_to_delta` runs on a generated sink folder, checked
against the generator's ground truth and the checkpoint Variable: a first run, a run with no new RESOLVED
file (up to date at once although the sensor's timeout is long: a manual run does not wait; nothing
planned, no Spark), the sink growing, a half-named backfill refused at once, and a backfill of a past
range."""

from __future__ import annotations

import shutil
import time

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.crdb.hlc import Hlc
from tests.airflow_env import (
    assert_each_entry_announced_once,
    assert_marks_caught_up,
    assert_run_lineage,
    dags_test,
    dags_test_env,
    last_run_id,
    progress,
    task_tries,
    variable,
    with_config,
    xcom,
)
from tests.integration.test_crdb_job import assert_matches_truth

pytestmark = pytest.mark.integration
DAG = "cockroach_changefeed_to_delta"


def test_runs_no_new_resolved_growth_and_backfill(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SinkSpec(steps=24, changes_per_step=20, seed=31))
    config = {
        "sink_root": str(tmp_path / "sink"),
        "target_root": str(tmp_path / "lake"),
        # as deployed: scheduled runs would wait 15 minutes for new data; manual ones never wait
        "sensor_timeout_seconds": 900,
        "sensor_poke_seconds": 1,
        "resolved_per_batch": 50,
        # as for a driver on the cluster: each job's summary goes to storage, read back by its own task
        "job_summary_root": str(tmp_path / "driver-summaries"),
    }
    env = with_config(dags_test_env(tmp_path / "airflow", lineage=True), "lakefeed_crdb_config", config)

    # Only the files up to the 3rd RESOLVED file exist at first; the rest arrive later, among them the
    # late file: named before that RESOLVED file, written after it (the sink's naming bug).
    cut = Hlc.parse(truth.resolved[2]).file_timestamp() + ".RESOLVED"
    late = {tmp_path / "sink" / key for key in truth.late_files}
    later = [p for p in (tmp_path / "sink").rglob("*") if p.is_file() and (p.name > cut or p in late)]
    held = tmp_path / "held"
    for path in later:
        target = held / path.relative_to(tmp_path / "sink")
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)

    dags_test(env, DAG)
    checkpoint = variable(env, "lakefeed_crdb_checkpoint")
    assert checkpoint["resolved"] == truth.resolved[2] and checkpoint["sink"] == f"file://{tmp_path / 'sink'}"
    assert set(checkpoint["targets"]) == {str(tmp_path / "lake" / t) for t in ("customers", "orders")}
    # OpenLineage: each job read the sink and wrote the topic tables (lakefeed_airflow.lineage).
    [complete] = assert_run_lineage(env, DAG, [("file", str(tmp_path / "sink"))]).values()
    assert {d["name"] for d in complete["outputs"]} == {str(tmp_path / "lake" / t) for t in ("customers", "orders")}
    applied = complete["run"]["facets"]["lakefeed_job"]["applied"]
    assert applied == {"unit": "resolved timestamp", "through": truth.resolved[2]}

    started = time.monotonic()
    result = dags_test(env, DAG)  # no new RESOLVED file: up to date at once, nothing planned, no Spark
    assert time.monotonic() - started < 90, "a manual run with nothing new waited for new data"
    assert "up to date: nothing new to ingest" in result.stdout + result.stderr
    tries = task_tries(env, DAG, last_run_id(env, DAG))
    assert tries["wait_for_resolved"][0] == "skipped" and tries["plan_ranges"][0] == "skipped"
    # A backfill form with only after_resolved names no range: refused at once, not after a wait.
    started = time.monotonic()
    result = dags_test(env, DAG, {"after_resolved": truth.resolved[0]}, succeed=False)
    assert time.monotonic() - started < 90
    assert "A backfill needs through_resolved" in result.stdout + result.stderr
    assert variable(env, "lakefeed_crdb_checkpoint") == checkpoint

    shutil.copytree(held, tmp_path / "sink", dirs_exist_ok=True)
    dags_test(env, DAG)
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    assert report["resolvedBefore"] == truth.resolved[2] and report["resolved"] == truth.resolved[-1]
    assert report["lagSeconds"] == 0 and report["lateFiles"] == truth.late_files
    assert_run_lineage(env, DAG, [("file", str(tmp_path / "sink"))])
    assert_matches_truth(spark, tmp_path / "lake", truth)

    before = variable(env, "lakefeed_crdb_checkpoint")
    dags_test(env, DAG, {"after_resolved": truth.resolved[0], "through_resolved": truth.resolved[3]})
    report = xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")
    assert report["kind"] == "backfill" and (report["inserted"], report["updated"], report["deleted"]) == (0, 0, 0)
    assert progress(variable(env, "lakefeed_crdb_checkpoint")) == progress(before)
    assert_marks_caught_up(variable(env, "lakefeed_crdb_checkpoint"))
    assert_matches_truth(spark, tmp_path / "lake", truth)
    for topic in ("customers", "orders"):  # each topic table's commits announced once
        assert_each_entry_announced_once(env, str(tmp_path / "lake" / topic), "lakefeed_crdb_checkpoint")
    # Every summary went through job_summary_root and was removed once its task had read it.
    assert (tmp_path / "driver-summaries" / DAG).is_dir()
    assert [p for p in (tmp_path / "driver-summaries").rglob("*") if p.is_file()] == []
