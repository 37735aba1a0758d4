"""The stack docker-compose.yaml lays out, natively and with nothing shared but the metadata database and
the storage: the api-server (with the Edge API), scheduler, dag-processor and triggerer on PostgreSQL;
two Edge workers (the Edge executor), each with its own HOME, TMPDIR, AIRFLOW_HOME, Spark scratch
folders and a metadata database URL that leads nowhere (workers reach Airflow through its HTTP APIs
only); a Spark standalone master and worker running the jobs' executors (drivers in client mode on the
Airflow workers). The blob feed, the CockroachDB sink and every Delta target are on Azurite (the
CockroachDB sink and its tables at containers' roots), read and written with the one ``wasb``
connection; only the CDF source is a local folder.

The blob sensor defers to the triggerer while no window is ready, and a manual run triggered meanwhile
runs beside it and ends as up to date; scheduled runs of the three DAGs and
an Airflow backfill (two runs at once) are checked against ground truth; then a worker is killed
(SIGKILL, with its task and its Spark driver) right after a job's Delta commit and before the
checkpoint update; the task is retried on the other worker, and the run converges with each commit
announced exactly once. The phases' timings are printed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psutil
import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source, live_rows
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.azure import CONNECTION_STRING, hadoop_url
from lakefeed.blob.timegrid import HOUR
from lakefeed.spark import apply_storage_credentials
from lakefeed.storage import Store, credentials_scope
from lakefeed.times import format_time
from tests.airflow_env import assert_each_entry_announced_once, progress
from tests.fullstack.services import (
    airflow,
    airflow_services,
    dag_parsed,
    dag_runs,
    free_port,
    metadata_rows,
    postgres,
    service_env,
    spark_standalone,
    stop,
    task_states,
    wait_until,
)
from tests.integration.test_crdb_job import assert_matches_truth as crdb_matches_truth

pytestmark = [pytest.mark.integration, pytest.mark.fullstack]
ROOT = Path(__file__).resolve().parents[2]
BLOB, CDF, CRDB = "blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"
FEED_SPEC = FeedSpec(hours=4, events_per_hour=400, shards=2, records_per_chunk=200, gap_hours=(), seed=53)
SINK_SPEC = SinkSpec(steps=12, changes_per_step=15, seed=7)
FEED_CONTAINER, SINK_CONTAINER = "$blobchangefeed", "changefeeds"
JOB = "blob_changefeed_job.py"
WORKERS = ("worker-a", "worker-b")


def newest_run_id(env, dag_id) -> str | None:
    found = dag_runs(env, dag_id)
    return found[0]["run_id"] if found else None


def finished(env, dag_id, run_id) -> dict | None:
    run = next((r for r in dag_runs(env, dag_id) if r["run_id"] == run_id), None)
    return run if run and run["state"] in ("success", "failed") else None


def task_hosts(env, dag_id) -> dict[str, set[str]]:
    """Which worker ran each task (every try's hostname, from the metadata database)."""
    rows = metadata_rows(
        env,
        "SELECT task_id, hostname FROM task_instance WHERE dag_id = :dag UNION "
        "SELECT task_id, hostname FROM task_instance_history WHERE dag_id = :dag",
        dag=dag_id,
    )
    hosts: dict[str, set[str]] = {}
    for task_id, hostname in rows:
        if hostname:
            hosts.setdefault(task_id, set()).add(hostname)
    return hosts


def variable(env, name) -> dict:
    return json.loads(airflow(env, "variables", "get", name).stdout.strip().splitlines()[-1])


def delta_versions(table: str, credentials: dict[str, str]) -> int:
    """How many commits the table's ``_delta_log`` holds (0: no table yet)."""
    return sum(1 for entry in Store(table, credentials=credentials).list("_delta_log") if entry.name.endswith(".json"))


@contextmanager
def edge_worker(name: str, folder: Path, env: dict) -> Iterator[subprocess.Popen]:
    """An Edge worker with private folders, in its own process group (so it can be killed with its tasks)."""
    home = folder / name
    for sub in ("home", "tmp", "airflow", "spark"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    ivy = Path.home() / ".ivy2.5.2"
    if ivy.exists():  # Delta's jars, as a worker image would carry them (else Spark fetches them again)
        shutil.copytree(ivy, home / "home" / ".ivy2.5.2", dirs_exist_ok=True)
    private = {
        **env,
        "HOME": str(home / "home"),
        "TMPDIR": str(home / "tmp"),
        "AIRFLOW_HOME": str(home / "airflow"),
        "SPARK_LOCAL_DIRS": str(home / "spark"),
        # A worker never touches the metadata database: a URL that leads nowhere proves it.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow' / 'no-such.db'}",
    }
    log = open(folder / f"{name}.log", "w")
    process = subprocess.Popen(
        ["airflow", "edge", "worker", "--concurrency", "3", "--edge-hostname", name],
        env=private,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield process
    finally:
        tree = process_tree(process)
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                pass
        machine_down(tree)  # whatever is left of it
        log.close()


def process_tree(process: subprocess.Popen) -> list[psutil.Process]:
    """The worker and every process it started, whatever process group or session they moved to."""
    try:
        root = psutil.Process(process.pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def command_lines(tree: list[psutil.Process]) -> list[str]:
    lines = []
    for p in tree:
        try:
            lines.append(" ".join(p.cmdline()))
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            pass
    return lines


def machine_down(tree: list[psutil.Process]) -> None:
    """SIGKILL a whole process tree at once, as a machine going down would (the Task SDK puts each task in
    a process group of its own, so killing the worker's group alone would leave the task and its Spark
    driver running)."""
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def test_three_pipelines_on_two_workers_sharing_nothing_local(spark, azurite, tmp_path):
    timings: dict[str, float] = {}
    started = time.monotonic()

    def lap(phase: str) -> None:
        timings[phase] = round(time.monotonic() - started - sum(timings.values()), 1)
        print(f"{phase}: {timings[phase]}s", flush=True)

    # The feeds: the blob feed on Azurite with every segment but lastConsumable before the first (no
    # window ready); the CockroachDB sink at the root of a container on Azurite (as `CREATE CHANGEFEED … INTO
    # 'azure://changefeeds?…'` writes it); a Delta CDF source with a few commits.
    feed = tmp_path / "feed"
    truth = generate_feed(feed, FEED_SPEC)
    segments_json = (feed / "meta" / "Segments.json").read_text()

    def published(last_consumable) -> str:
        return json.dumps({**json.loads(segments_json), "lastConsumable": format_time(last_consumable)})

    (feed / "meta" / "Segments.json").write_text(published(FEED_SPEC.start - HOUR))
    azurite.upload_folder(feed, FEED_CONTAINER)
    partly = FEED_SPEC.last_consumable - 2 * HOUR
    sink = tmp_path / "sink"
    sink_truth = generate_sink(sink, SINK_SPEC)
    azurite.upload_folder(sink, SINK_CONTAINER)
    source = str(tmp_path / "source")
    create_source(spark, source, rows=30)
    simulator = SourceSimulator(spark, source, seed=5, key_space=60)
    for kind in ("update", "delete", "merge"):
        simulator.commit(kind)
    # The tables on Azurite too: under paths of the container "lake", the CockroachDB topics at the root of
    # another container. Read back with Spark through hadoop-azure, with the connection's credential.
    lake, crdb_root = "az://lake", "az://crdbtables"
    for container in ("lake", "crdbtables"):
        client = azurite.container(container)
        for blob in client.list_blobs():
            client.delete_blob(blob.name)
    credentials = {CONNECTION_STRING: azurite.connection_string}
    apply_storage_credentials(spark, credentials)
    lap("feeds generated")

    # Deployments' way of loading Delta: --packages, resolved by each spark-submit (not the suite's jars).
    base = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("AIRFLOW") and k not in ("LAKEFEED_JARS_DIR", "SPARK_CONF_DIR")
    }
    base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    blob_config = {
        "feed_root": f"az://{FEED_CONTAINER}",
        "wasb_conn_id": "wasb_lake",
        "events_table": f"{lake}/blob/events",
        "state_table": f"{lake}/blob/state",
        "windows_per_batch": 1,
        "sensor_poke_seconds": 2,
        # long enough to outlast the manual run beside it and the feed's advance
        "sensor_timeout_seconds": 240,
    }
    cdf_config = {
        "pipelines": [{"name": "orders", "source_table": source, "target_table": f"{lake}/orders", "keys": ["id"]}],
        "wasb_conn_id": "wasb_lake",
        "sensor_poke_seconds": 2,
        "sensor_timeout_seconds": 30,
    }
    crdb_config = {
        "sink_root": f"az://{SINK_CONTAINER}",
        "wasb_conn_id": "wasb_lake",
        "target_root": crdb_root,
        "resolved_per_batch": 50,
        "sensor_poke_seconds": 2,
        "sensor_timeout_seconds": 30,
    }
    with ExitStack() as stack:
        database = stack.enter_context(postgres())
        master = stack.enter_context(spark_standalone(tmp_path, base))
        api_port = free_port()
        env = service_env(
            base,
            tmp_path / "airflow",
            database,
            api_port,
            ROOT,
            AIRFLOW__CORE__EXECUTOR="airflow.providers.edge3.executors.EdgeExecutor",
            AIRFLOW__EDGE__API_ENABLED="True",
            AIRFLOW__EDGE__API_URL=f"http://127.0.0.1:{api_port}/edge_worker/v1/rpcapi",
            AIRFLOW__EDGE__JOB_POLL_INTERVAL="1",
            AIRFLOW__EDGE__HEARTBEAT_INTERVAL="5",
            AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT="30",
            LAKEFEED_RETRY_DELAY_SECONDS="2",
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps(
                {"conn_type": "spark", "host": master.rsplit(":", 1)[0], "port": int(master.rsplit(":", 1)[1])}
            ),
            AIRFLOW_CONN_WASB_LAKE=json.dumps(
                {"conn_type": "wasb", "login": azurite.account, "password": azurite.key, "host": azurite.endpoint}
            ),
            AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG=json.dumps(blob_config),
            AIRFLOW_VAR_LAKEFEED_CDF_CONFIG=json.dumps(cdf_config),
            AIRFLOW_VAR_LAKEFEED_CRDB_CONFIG=json.dumps(crdb_config),
        )
        env.pop("AZURE_STORAGE_CONNECTION_STRING", None)
        airflow(env, "db", "migrate")
        # Set up as an operator would, with the Spark pool only: the plugin makes the checkpoint writers' pool
        # when the scheduler starts (without it, every commit step would wait for ever).
        airflow(env, "pools", "set", "lakefeed_spark", "1", "spark jobs")
        stack.enter_context(airflow_services(tmp_path, env))
        workers = {name: stack.enter_context(edge_worker(name, tmp_path / "workers", env)) for name in WORKERS}
        for dag_id in (BLOB, CDF, CRDB):
            wait_until(
                lambda: dag_parsed(env, dag_id),
                180,
                f"the dag-processor to parse {dag_id}",
            )
        lap("Airflow and two workers up")

        # 1. Scheduled runs of the three DAGs, on whichever worker is free. The blob run's sensor finds no
        #    window ready and defers to the triggerer; then the feed advances (two hours short of its end).
        for dag_id in (BLOB, CDF, CRDB):
            airflow(env, "dags", "unpause", dag_id)
        first = {
            dag_id: wait_until(lambda: newest_run_id(env, dag_id), 120, f"a scheduled run of {dag_id}")
            for dag_id in (BLOB, CDF, CRDB)
        }
        wait_until(
            lambda: task_states(env, BLOB, first[BLOB]).get("wait_for_ready_window") == "deferred",
            240,
            "the blob sensor to defer to the triggerer",
        )
        # Meanwhile a manual run (the Trigger button) is not queued behind the waiting one: it starts at once,
        # finds nothing new, and ends as up to date while the scheduled run goes on waiting.
        triggered = time.monotonic()
        airflow(env, "dags", "trigger", BLOB, "--run-id", "manual__nothing_new")
        wait_until(
            lambda: next(
                (r["state"] != "queued" for r in dag_runs(env, BLOB) if r["run_id"] == "manual__nothing_new"), False
            ),
            120,
            "the manual run to start",
        )
        assert time.monotonic() - triggered < 60, "the manual run queued behind the waiting scheduled run"
        up_to_date = wait_until(lambda: finished(env, BLOB, "manual__nothing_new"), 180, "the manual run to end")
        assert up_to_date["state"] == "success", up_to_date
        assert task_states(env, BLOB, "manual__nothing_new")["wait_for_ready_window"] == "skipped"
        assert task_states(env, BLOB, first[BLOB])["wait_for_ready_window"] == "deferred"
        lap("a manual run beside the waiting one, up to date")
        azurite.container(FEED_CONTAINER).upload_blob("meta/Segments.json", published(partly), overwrite=True)
        for dag_id, run_id in first.items():
            run = wait_until(lambda: finished(env, dag_id, run_id), 900, f"{dag_id} {run_id} to finish")
            assert run["state"] == "success", (dag_id, run)
        lap("three scheduled runs")
        ready = [w for w in truth.ready_windows() if w < partly]
        events = {
            r["id"]
            for r in spark.read.format("delta").load(hadoop_url(blob_config["events_table"], credentials)).collect()
        }
        assert events == {e.id for e in truth.claimed(ready)}

        def rows(df):
            return sorted(tuple(r) for r in df.select("id", "name", "amount", "touched").collect())

        assert rows(live_rows(spark, hadoop_url(f"{lake}/orders", credentials))) == rows(simulator.snapshot())
        crdb_matches_truth(spark, hadoop_url(crdb_root, credentials), sink_truth)
        assert variable(env, "lakefeed_crdb_checkpoint")["sink"] == f"azure://{azurite.account}/{SINK_CONTAINER}"
        assert variable(env, "lakefeed_blob_checkpoint")["watermark"] == format_time(partly)

        # 2. An Airflow backfill of two past hours, both runs at once: each re-applies its window and
        #    commits nothing new, so the checkpoint's progress stays as it was.
        checkpoint = variable(env, "lakefeed_blob_checkpoint")
        # (Airflow's "To" date is the start of the last interval: the hours starting 23:00 and 00:00, whose
        #  windows 23:10 and 00:10 are ready.)
        hour = FEED_SPEC.start.replace(minute=0) - HOUR
        airflow(
            env,
            "backfill",
            "create",
            "--dag-id",
            BLOB,
            "--from-date",
            format_time(hour),
            "--to-date",
            format_time(hour + HOUR),
            "--max-active-runs",
            "2",
        )
        backfills = wait_until(
            lambda: (
                lambda found: (
                    found if len(found) == 2 and all(r["state"] in ("success", "failed") for r in found) else None
                )
            )([r for r in dag_runs(env, BLOB) if r["run_id"].startswith("backfill__")]),
            600,
            "the two backfill runs",
        )
        assert [r["state"] for r in backfills] == ["success", "success"], backfills
        (_, first_end), (second_start, _) = sorted((r["start_date"], r["end_date"]) for r in backfills)
        assert second_start < first_end, backfills  # they ran at once
        assert progress(variable(env, "lakefeed_blob_checkpoint")) == progress(checkpoint)
        lap("two backfill runs at once")

        # 3. The feed advances by two windows (one batch each) and a run is triggered (or the scheduler's
        #    hourly run, if the hour turns, takes the new windows first). Right after the run's first Delta
        #    commit, the worker running a blob job (the first batch's, its other MERGE still to do, or the
        #    second's) goes down with every process it started. That task is retried on the other worker,
        #    and every blob run ends green.
        def commits() -> int:
            return sum(delta_versions(blob_config[t], credentials) for t in ("events_table", "state_table"))

        before = commits()
        azurite.container(FEED_CONTAINER).upload_blob("meta/Segments.json", segments_json, overwrite=True)
        airflow(env, "dags", "trigger", BLOB, "--run-id", "manual__after_kill")
        deadline = time.monotonic() + 600
        while commits() <= before:  # polled tightly: the job goes on at once
            assert time.monotonic() < deadline, "the job made no Delta commit"
            time.sleep(0.05)
        # The worker running a blob job now (this one's other MERGE, or the next batch's job) goes down.
        while True:
            trees = {name: process_tree(p) for name, p in workers.items()}
            victim = next(
                (name for name, tree in trees.items() if any(JOB in line for line in command_lines(tree))), None
            )
            if victim:
                break
            assert time.monotonic() < deadline, "no worker ran a blob job after the first commit"
            time.sleep(0.05)
        machine_down(trees[victim])
        print(f"killed {victim} and its {len(trees[victim])} processes after the run's first Delta commit", flush=True)
        lap("run started, worker killed after a Delta commit")
        settled = wait_until(
            lambda: (
                lambda found: found if found and all(r["state"] in ("success", "failed") for r in found) else None
            )(dag_runs(env, BLOB)),
            900,
            "every blob run to finish",
        )
        assert {r["run_id"]: r["state"] for r in settled if r["state"] != "success"} == {}
        lap("retried on the other worker, converged")

        # Every window ready now is in the targets, the checkpoint is at lastConsumable, and every
        # commit of the pipeline is announced exactly once (the killed try's commit included).
        events = {
            r["id"]
            for r in spark.read.format("delta").load(hadoop_url(blob_config["events_table"], credentials)).collect()
        }
        assert events == {e.id for e in truth.claimed(truth.ready_windows())}
        assert variable(env, "lakefeed_blob_checkpoint")["watermark"] == format_time(FEED_SPEC.last_consumable)
        with credentials_scope(credentials):
            for table in (blob_config["events_table"], blob_config["state_table"]):
                assert_each_entry_announced_once(env, table, "lakefeed_blob_checkpoint")
            assert_each_entry_announced_once(env, f"{lake}/orders", "lakefeed_cdf_checkpoint__orders")
        hosts = {dag_id: task_hosts(env, dag_id) for dag_id in (BLOB, CDF, CRDB)}
        print(json.dumps({d: {t: sorted(h) for t, h in hs.items()} for d, hs in hosts.items()}, indent=1))
        assert {h for hs in hosts.values() for task in hs.values() for h in task} == set(WORKERS)
        retried = metadata_rows(
            env,
            "SELECT run_id FROM task_instance WHERE dag_id = :dag AND task_id = 'ingest_windows' AND try_number > 1",
            dag=BLOB,
        )
        assert retried, "the killed job's task was not retried"
        assert hosts[BLOB]["ingest_windows"] == set(WORKERS)  # the killed try, and its retry elsewhere
        for name, process in workers.items():
            if name != victim:
                stop(process)
    print("timings:", json.dumps(timings), flush=True)
