"""The whole stack natively, as docker-compose runs it but without Docker: PostgreSQL as Airflow's
metadata database with the LocalExecutor, a Spark standalone master and worker, Azurite, and the
Airflow api-server, scheduler, dag-processor and triggerer. The blob DAG is triggered while no window
is ready, its sensor defers to the triggerer, the feed then advances, and the run completes on the
Spark cluster; targets and checkpoint are checked, and everything is torn down."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from lakefeed.blob.generator import FeedSpec, generate_feed
from lakefeed.blob.timegrid import HOUR, format_time
from tests.fullstack.services import (
    airflow,
    airflow_services,
    free_port,
    metadata_rows,
    postgres,
    service_env,
    spark_standalone,
)

pytestmark = [pytest.mark.integration, pytest.mark.fullstack]
ROOT = Path(__file__).resolve().parents[2]
SPEC = FeedSpec(hours=3, events_per_hour=600, shards=2, records_per_chunk=300, gap_hours=(), seed=41)
CONTAINER = "$blobchangefeed"


def json_lines(out: str):
    """The CLI's JSON output: the line that is a JSON list (warnings may precede it)."""
    for line in out.splitlines():
        if line.startswith("[{") or line.strip() == "[]":
            return json.loads(line)
    return None


def task_states(env, run_id) -> dict[str, str]:
    rows = json_lines(airflow(env, "tasks", "states-for-dag-run", "blob_changefeed_to_delta", run_id,
                              "-o", "json").stdout) or []
    return {r["task_id"] if r.get("map_index") in (None, "", -1, "-1") else f"{r['task_id']}[{r['map_index']}]":
            r["state"] for r in rows}


def first_run_id(env) -> str | None:
    runs = json_lines(airflow(env, "dags", "list-runs", "blob_changefeed_to_delta", "-o", "json",
                              check=False).stdout)
    return runs[0]["run_id"] if runs else None


def backfill_runs(env) -> list[dict]:
    runs = json_lines(airflow(env, "dags", "list-runs", "blob_changefeed_to_delta", "-o", "json", check=False).stdout)
    return sorted((r for r in runs or [] if r["run_id"].startswith("backfill__")), key=lambda r: r["run_id"])


def job_summaries(env, run_id: str) -> list[dict]:
    """The summaries the run's spark-submit tasks returned (their XCom, in PostgreSQL): what its commit
    step credited."""
    rows = metadata_rows(env, "SELECT value FROM xcom WHERE dag_id = 'blob_changefeed_to_delta' AND run_id = :run "
                              "AND task_id = 'ingest_windows' AND key = 'return_value' ORDER BY map_index", run=run_id)
    return [value if isinstance(value, dict) else json.loads(value) for (value,) in rows]


def wait_until(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        print(f"{time.strftime('%H:%M:%S')} waiting for {what}: {value}", flush=True)
        if value:
            return value
        time.sleep(2)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


def test_full_stack(spark, azurite, tmp_path):
    local = tmp_path / "feed"
    truth = generate_feed(local, SPEC)
    # Publish everything but hold lastConsumable back: no window is ready yet.
    segments_json = (local / "meta" / "Segments.json").read_text()
    held = json.loads(segments_json)
    held["lastConsumable"] = format_time(SPEC.start - HOUR)
    (local / "meta" / "Segments.json").write_text(json.dumps(held))
    azurite.upload_folder(local, CONTAINER)

    base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    with postgres() as database, spark_standalone(tmp_path, base) as master:
        api_port = free_port()
        config = {"feed_root": f"az://{CONTAINER}", "wasb_conn_id": "wasb_feed",
                  "events_table": str(tmp_path / "lake" / "events"), "state_table": str(tmp_path / "lake" / "state"),
                  "sensor_poke_seconds": 2, "sensor_timeout_seconds": 600}
        env = service_env(
            base, tmp_path / "airflow", database, api_port, ROOT,
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": master.rsplit(":", 1)[0],
                                                   "port": int(master.rsplit(":", 1)[1])}),
            AIRFLOW_CONN_WASB_FEED=json.dumps({"conn_type": "wasb", "login": azurite.account,
                                               "password": azurite.key, "host": azurite.endpoint}),
            AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG=json.dumps(config),
        )
        airflow(env, "db", "migrate")
        airflow(env, "pools", "set", "lakefeed_spark", "1", "spark jobs")
        airflow(env, "pools", "set", "lakefeed_checkpoints", "1", "checkpoint writers")
        with airflow_services(tmp_path, env):
            wait_until(lambda: "blob_changefeed_to_delta" in airflow(env, "dags", "list", check=False).stdout,
                       180, "the dag-processor to parse the DAG")
            airflow(env, "dags", "unpause", "blob_changefeed_to_delta")  # the scheduler creates the hourly run
            run_id = wait_until(lambda: first_run_id(env), 120, "the scheduler to create a run")
            wait_until(lambda: task_states(env, run_id).get("wait_for_ready_window") == "deferred", 240,
                       "the sensor to defer to the triggerer")

            azurite.container(CONTAINER).upload_blob("meta/Segments.json", segments_json, overwrite=True)
            states = wait_until(
                lambda: (lambda s: s if s.get("commit_checkpoint") in ("success", "failed", "skipped") else None)(
                    task_states(env, run_id)), 900, "the DAG run to finish")
            assert states["commit_checkpoint"] == "success", states
            assert states["wait_for_ready_window"] == "success"

            checkpoint = json.loads(airflow(env, "variables", "get", "lakefeed_blob_checkpoint").stdout
                                    .strip().splitlines()[-1])
            assert checkpoint["watermark"] == format_time(SPEC.last_consumable)

            # Airflow's own Backfill: one run per hourly interval, each re-processing exactly the grid
            # window that starts in its data interval, at most two at once; the checkpoint stays.
            airflow(env, "backfill", "create", "--dag-id", "blob_changefeed_to_delta", "--from-date",
                    format_time(SPEC.start.replace(minute=0)), "--to-date", format_time(SPEC.start.replace(minute=0) + HOUR),
                    "--max-active-runs", "2")
            finished = wait_until(lambda: (lambda runs: runs if len(runs) == 2 and all(
                r["state"] in ("success", "failed") for r in runs) else None)(backfill_runs(env)), 900,
                "the two backfill runs to finish")
            assert [r["state"] for r in finished] == ["success", "success"], finished
            windows_by_run = {r["run_id"]: [w for summary in job_summaries(env, r["run_id"])
                                            for w in summary["windows"]] for r in finished}
            assert sorted(w for ws in windows_by_run.values() for w in ws) == [
                format_time(SPEC.start), format_time(SPEC.start + HOUR)]
            assert all(len(ws) == 1 for ws in windows_by_run.values())
            assert json.loads(airflow(env, "variables", "get", "lakefeed_blob_checkpoint").stdout
                              .strip().splitlines()[-1]) == checkpoint

    windows = truth.ready_windows()
    events = {r["id"] for r in spark.read.format("delta").load(config["events_table"]).select("id").collect()}
    assert events == {e.id for e in truth.claimed(windows)}
    state = {r["subject"]: r["eventId"] for r in spark.read.format("delta").load(config["state_table"]).collect()}
    assert state == {s: e.id for s, e in truth.state(windows).items()}
