"""Sequences of `airflow dags test blob_changefeed_to_delta` runs (SQLite metadata, local Spark, real Delta),
each checked against the generator's ground truth, the checkpoint Variable and the task instances' tries:
scheduled runs with growth and no new data, a backfill before the first scheduled run, bad input that fails
its batches at once then resumes, a transient failure retried, a backfill and a scheduled run at once, and a
dropped target that stops the pipeline until a reset."""

from __future__ import annotations

import json
import shutil

import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.blob.timegrid import HOUR
from lakefeed.times import format_time
from tests.airflow_env import (
    assert_each_entry_announced_once,
    assert_marks_caught_up,
    assert_run_lineage,
    dags_test,
    dags_test_env,
    job_summaries,
    last_run_id,
    lineage_events,
    progress,
    start_dags_test,
    task_tries,
    variable,
    wait_for,
    with_config,
    xcom,
)

pytestmark = pytest.mark.integration
DAG = "blob_changefeed_to_delta"
SPEC = FeedSpec(hours=3, events_per_hour=400, shards=2, records_per_chunk=200, gap_hours=(1,), seed=21)


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    return dags_test_env(tmp_path_factory.mktemp("dag") / "airflow", lineage=True)


@pytest.fixture
def pipeline(airflow_env, tmp_path, request):
    """A pipeline of its own (feed, targets, run folder, checkpoint Variable) in the module's Airflow."""
    name = request.node.name.split("[")[0][-40:]
    config = {
        "feed_root": str(tmp_path / "feed"),
        "events_table": str(tmp_path / "lake" / "events"),
        "state_table": str(tmp_path / "lake" / "state"),
        "checkpoint_variable": f"cp_{name}",
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
        "windows_per_batch": 24,
    }
    return tmp_path, config, with_config(airflow_env, "lakefeed_blob_config", config)


def checkpoint(env, config) -> dict | None:
    return variable(env, config["checkpoint_variable"])


def tables(spark, config):
    events = {
        r["id"]: (r["claimWindow"], r["eventType"])
        for r in spark.read.format("delta").load(config["events_table"]).collect()
    }
    state = {
        r["subject"]: (r["eventId"], r["isDeleted"])
        for r in spark.read.format("delta").load(config["state_table"]).collect()
    }
    return events, state


def assert_matches_truth(spark, config, truth):
    events, state = tables(spark, config)
    windows = truth.ready_windows()
    assert set(events) == {e.id for e in truth.claimed(windows)}
    assert state == {s: (e.id, e.eventType == "BlobDeleted") for s, e in truth.state(windows).items()}


def test_backfill_first_then_scheduled_runs_no_new_data_growth_backfill_and_a_dropped_target(spark, pipeline):
    base, config, env = pipeline
    truth = generate_feed(base / "feed", SPEC)

    # 0. A backfill of a middle window before the first scheduled run sets no watermark (before this fix it
    #    set one at the backfill's end, and every window before it was never ingested); the checkpoint
    #    records only that the backfill's commits were announced.
    middle = SPEC.start + HOUR
    dags_test(env, DAG, {"window_start": format_time(middle), "window_end": format_time(middle + HOUR)})
    assert checkpoint(env, config)["watermark"] is None
    assert set(checkpoint(env, config)["announced"]) == {config["events_table"], config["state_table"]}
    assert xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoint")["checkpointMoved"] is False

    # 1. First scheduled run: from the feed's first window, every ready window; then the checkpoint sits at
    #    lastConsumable, naming its feed and targets.
    dags_test(env, DAG)
    assert [s["windows"][0] for s in job_summaries(env, DAG)] == [format_time(SPEC.start - HOUR)]
    assert_matches_truth(spark, config, truth)
    first = checkpoint(env, config)
    assert first["watermark"] == format_time(SPEC.last_consumable) == first["lastConsumable"]
    assert first["feed"] == f"file://{base / 'feed'}" and first["gridMinute"] == 10
    assert set(first["targets"]) == {config["events_table"], config["state_table"]}
    # OpenLineage: the job read the feed and wrote both tables (lakefeed_airflow.lineage).
    [complete] = assert_run_lineage(env, DAG, [("file", str(base / "feed"))]).values()
    assert [d["name"] for d in complete["outputs"]] == [config["events_table"], config["state_table"]]
    [summary] = job_summaries(env, DAG)
    applied = complete["run"]["facets"]["lakefeed_job"]["applied"]
    assert applied == {
        "unit": "hour window",
        "windows": summary["windows"],
        "from": format_time(SPEC.start - HOUR),
        "until": format_time(SPEC.last_consumable),
    }
    before = tables(spark, config)

    # 2. No new data: the sensor gives up, nothing is planned, nothing changes.
    dags_test(env, DAG)
    assert tables(spark, config) == before
    assert checkpoint(env, config) == first

    # 3. The feed grows: exactly the new windows are ingested.
    grown = FeedSpec(**{**SPEC.__dict__, "hours": SPEC.hours + 2})
    truth = generate_feed(base / "feed", grown)
    dags_test(env, DAG)
    [summary] = job_summaries(env, DAG)
    assert summary["windows"] == [format_time(SPEC.last_consumable + i * HOUR) for i in range(2)]
    assert_matches_truth(spark, config, truth)
    grown_checkpoint = checkpoint(env, config)
    assert grown_checkpoint["watermark"] == format_time(grown.last_consumable)

    # 4. A backfill of a past range re-processes exactly it, writes nothing new; the checkpoint stays.
    before = tables(spark, config)
    start, end = SPEC.start, SPEC.start + 2 * HOUR
    dags_test(env, DAG, {"window_start": format_time(start), "window_end": format_time(end)})
    [summary] = job_summaries(env, DAG)
    assert summary["windows"] == [format_time(start), format_time(start + HOUR)]
    assert summary["eventsInserted"] == 0 and summary["stateUpdated"] == 0
    assert tables(spark, config) == before
    # Its commit step announces nothing; it moves the announced marks past step 3's entries, whose
    # events it finds (so an idle pipeline's marks do not wait for the next commit).
    assert progress(checkpoint(env, config)) == progress(grown_checkpoint)
    assert grown_checkpoint["announced"] != grown_checkpoint["targets"]
    assert_marks_caught_up(checkpoint(env, config))

    # 5. Nothing new arrives, but the state table was dropped: the run says so instead of skipping quietly
    #    (later windows would otherwise land in a table missing everything before them), until a reset.
    recorded = checkpoint(env, config)
    shutil.rmtree(config["state_table"])
    result = dags_test(env, DAG, succeed=False)
    assert f"the state table {config['state_table']} holds its work, but there is no Delta table there" in (
        result.stdout + result.stderr
    )
    assert checkpoint(env, config) == recorded

    dags_test(env, DAG, {"reset_checkpoint": True})
    assert_matches_truth(spark, config, truth)
    reset = checkpoint(env, config)
    assert reset["watermark"] == recorded["watermark"] and reset["generation"] == recorded["generation"] + 1
    assert reset["targets"][config["state_table"]]["tableId"] != recorded["targets"][config["state_table"]]["tableId"]
    assert (
        json.loads(json.dumps(reset["targets"][config["events_table"]]))["tableId"]
        == recorded["targets"][config["events_table"]]["tableId"]
    )


def test_bad_input_fails_its_batches_at_once_and_a_fixed_feed_resumes(spark, pipeline):
    base, config, env = pipeline
    config = {**config, "windows_per_batch": 2}
    env = with_config(env, "lakefeed_blob_config", config)
    spec = FeedSpec(**{**SPEC.__dict__, "hours": 4, "gap_hours": (), "seed": 23})
    truth = generate_feed(base / "feed", spec)
    bad_segment = spec.start + 2 * HOUR  # read by windows 01:10 and 02:10, the second batch
    chunk = sorted((base / "feed" / "log").glob(f"*/{bad_segment:%Y/%m/%d/%H%M}/00000.avro"))[0]
    original = chunk.read_bytes()
    chunk.write_bytes(original[:200] + b"\x00garbage" + original[208:])

    dags_test(env, DAG, succeed=False)
    run_id = last_run_id(env, DAG)
    tries = task_tries(env, DAG, run_id)
    report = xcom(env, DAG, run_id, "commit_checkpoint")
    # The batch whose windows read the corrupt segment is refused, naming the file, and tried once.
    [refused] = report["batchesFailed"]
    assert refused["start"] == format_time(bad_segment - HOUR)
    assert str(chunk) in refused["refused"] and "not a valid Avro file" in refused["refused"]
    assert tries["ingest_windows[0]"] == ("success", 1) and tries["ingest_windows[1]"] == ("failed", 1)
    # The checkpoint covers exactly the windows before the first failed batch.
    assert checkpoint(env, config)["watermark"] == format_time(bad_segment - HOUR)

    # Batch 0 committed, but the commit task failed: Airflow drops a failed task's asset events.
    assert report["targetsChanged"] == [] and report["announcementsDeferred"] == 2
    # OpenLineage: the refused job's FAIL event names its datasets and the job's reason.
    [failed] = [
        e
        for e in lineage_events(env, run_id)
        if e["eventType"] == "FAIL"
        and e["job"]["name"] == f"{DAG}.ingest_windows"
        and e["run"]["facets"]["airflow"]["taskInstance"]["map_index"] == 1
    ]
    assert [d["name"] for d in failed["inputs"]] == [str(base / "feed")]
    assert [d["name"] for d in failed["outputs"]] == [config["events_table"], config["state_table"]]
    assert str(chunk) in failed["run"]["facets"]["errorMessage"]["message"]

    chunk.write_bytes(original)
    dags_test(env, DAG)
    assert_matches_truth(spark, config, truth)
    assert checkpoint(env, config)["watermark"] == format_time(spec.last_consumable)
    # The run that succeeded announced the failed run's commits too, each once, from the targets' ledger.
    for table in (config["events_table"], config["state_table"]):
        assert_each_entry_announced_once(env, table, config["checkpoint_variable"])


def test_a_transient_failure_is_retried_and_the_run_completes(spark, pipeline):
    base, config, env = pipeline
    truth = generate_feed(base / "feed", FeedSpec(**{**SPEC.__dict__, "seed": 24}))
    events_dir = base / "spark-events"  # missing at first: Spark refuses to start, spark-submit exits 1
    config = {
        **config,
        "spark_conf": {
            "spark.eventLog.enabled": "true",
            "spark.eventLog.dir": f"file://{events_dir}",
            "spark.eventLog.compress": "false",
            "spark.sql.shuffle.partitions": "3",
        },
    }  # over the jobs' default of 8
    env = {**with_config(env, "lakefeed_blob_config", config), "LAKEFEED_RETRY_DELAY_SECONDS": "8"}
    process = start_dags_test(env, DAG, log=base / "dags-test.log")
    try:
        wait_for(
            lambda: any(state == "up_for_retry" for state, _ in task_tries(env, DAG, last_run_id(env, DAG)).values()),
            240,
            "the first attempt to fail",
        )
        events_dir.mkdir()
        assert process.wait(600) == 0, (base / "dags-test.log").read_text()[-6000:]
    finally:
        process.kill()
    assert task_tries(env, DAG, last_run_id(env, DAG))["ingest_windows[0]"] == ("success", 2)
    assert_matches_truth(spark, config, truth)
    # The retry ran with the configured spark_conf, which wins over the jobs' own defaults.
    lines = [
        line
        for path in events_dir.rglob("*")
        if path.is_file() and not path.name.startswith(".")
        for line in path.read_text(errors="replace").splitlines()
    ]
    environment = next(json.loads(line) for line in lines if '"SparkListenerEnvironmentUpdate"' in line)
    assert environment["Spark Properties"]["spark.sql.shuffle.partitions"] == "3"


def test_a_backfill_and_a_scheduled_run_at_once_converge(spark, pipeline):
    base, config, env = pipeline
    spec = FeedSpec(**{**SPEC.__dict__, "hours": 4, "seed": 25})
    truth = generate_feed(base / "feed", spec)
    # Both MERGE the same windows into the same tables: Delta's conflicts are retried in the jobs, and
    # the checkpoint moves once, by the scheduled run.
    scheduled = start_dags_test(env, DAG, log=base / "scheduled.log")
    # The backfill starts once the scheduled run exists: two `dags test` processes syncing the parsed DAG
    # into one SQLite file at the same instant can collide (a harness limit; production runs on Postgres).
    # Both runs' Spark jobs still overlap.
    wait_for(
        lambda: "run_id=manual__" in (base / "scheduled.log").read_text() or scheduled.poll() is not None,
        300,
        "the scheduled run to start",
    )
    backfill = start_dags_test(
        env,
        DAG,
        {"window_start": format_time(spec.start - HOUR), "window_end": format_time(spec.last_consumable)},
        log=base / "backfill.log",
    )
    try:
        assert scheduled.wait(600) == 0, (base / "scheduled.log").read_text()[-6000:]
        assert backfill.wait(600) == 0, (base / "backfill.log").read_text()[-6000:]
    finally:
        scheduled.kill()
        backfill.kill()
    assert_matches_truth(spark, config, truth)
    run_ids = {
        log: next(
            line.split("run_id=")[1].split()[0].strip(",")
            for line in (base / f"{log}.log").read_text().splitlines()
            if "run_id=manual__" in line
        )
        for log in ("scheduled", "backfill")
    }
    # The position moved once, by the scheduled run (the backfill's commit step records only which of
    # the tables' commits it announced).
    assert checkpoint(env, config)["watermark"] == format_time(spec.last_consumable)
    assert checkpoint(env, config)["updatedBy"] == run_ids["scheduled"]
    # Each job resolved the race itself (two first commits, MERGE conflicts): no task needed a retry.
    with_tries = {}
    for log, run_id in run_ids.items():
        with_tries.update(
            {
                f"{log} {task}": tries
                for task, (_, tries) in task_tries(env, DAG, run_id).items()
                if task.startswith("ingest_windows")
            }
        )
    assert with_tries and set(with_tries.values()) == {1}, with_tries
    # Both runs' commits are announced, each by one of the two commit steps.
    for table in (config["events_table"], config["state_table"]):
        assert_each_entry_announced_once(env, table, config["checkpoint_variable"])
