"""The stack users copy (docker-compose.yaml), run in Docker as `make stack` starts it.

Builds the images (cached by Docker's layers; from Debian's packages where no registry is reachable) and
brings the stack up under a project of its own, with free host ports; then, through Airflow's REST API
only: the three DAGs' scheduled runs on the demo data in Azurite, every target against the ground truth
(`scripts/stack.sh check`), every checkpoint at its source's end, the pools the plugin made, and the Spark
applications' executors on the two Spark workers (the workers' own REST status); an Airflow Backfill of
two hours at once for the blob and CockroachDB DAGs and a CDF backfill by its range params, each writing
nothing new; then the CDF source moves on and, while its job runs, a Spark worker and the Edge worker
running the job are killed (`docker kill`: the machine goes down): the task is retried on the other
worker against the remaining Spark worker, and the target holds each change once, each commit announced
once. Tear-down leaves no container, network or volume of the project. Each phase's time is printed.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lakefeed_testing.crdb_generator import generate_sink
from lakefeed_testing.demo_data import FEED, SINK, DemoLayout

from lakefeed.azure import CONNECTION_STRING
from lakefeed.times import format_time
from tests.airflow_env import progress
from tests.egress_guard import outside_guard
from tests.spark_jars import SHORT_LIVED_JVM, SUITE_SPARK_SETTINGS

pytestmark = [pytest.mark.integration, pytest.mark.docker]
ROOT = Path(__file__).resolve().parents[2]
PROJECT = "lakefeedtest"
BLOB, CDF, CRDB = "blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"
APPLY = {BLOB: "ingest_windows", CDF: "apply_ranges", CRDB: "apply_ranges"}
JOB = {CRDB: "cockroach_changefeed_job.py"}
ACCOUNT, KEY = (
    "devstoreaccount1",
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
)
T = TypeVar("T")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(check: Callable[[], T | None], timeout: float, what: str, every: float = 2.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


@dataclass
class Stack:
    env: dict[str, str]
    api_port: int
    azurite_port: int
    timings: dict[str, float] = field(default_factory=dict)
    _token: str | None = None
    _lap: float = field(default_factory=time.monotonic)

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.timings[phase] = round(now - self._lap, 1)
        self._lap = now
        print(f"{phase}: {self.timings[phase]}s", flush=True)

    def script(self, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(ROOT / "scripts" / "stack.sh"), *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def container(self, service: str) -> str:
        found = self.script("compose", "ps", "-q", service).stdout.split()
        assert found, f"no container of {service}"
        return found[0]

    # Airflow's REST API, as a user's script or the UI calls it.
    def request(self, method: str, path: str, body: Any = None) -> Any:
        if self._token is None:
            self._token = self._call("POST", "/auth/token", {"username": "admin", "password": "admin"}, None)[
                "access_token"
            ]
        return self._call(method, path, body, self._token)

    def _call(self, method: str, path: str, body: Any, token: str | None) -> Any:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.api_port}{path}",
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{method} {path}: {error.code} {error.read().decode(errors='replace')}") from None

    def runs(self, dag_id: str) -> list[dict]:
        return self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?limit=100&order_by=-run_after")["dag_runs"]

    def tasks(self, dag_id: str, run_id: str) -> list[dict]:
        return self.request("GET", f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances?limit=100")["task_instances"]

    def finished(self, dag_id: str, run_id: str) -> dict | None:
        run = next((r for r in self.runs(dag_id) if r["dag_run_id"] == run_id), None)
        return run if run and run["state"] in ("success", "failed") else None

    def variable(self, key: str) -> dict:
        return json.loads(self.request("GET", f"/api/v2/variables/{key}")["value"])

    def connection_string(self) -> str:
        return (
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint=http://127.0.0.1:{self.azurite_port}/{ACCOUNT};"
        )

    def commits(self, table: str) -> int:
        """How many commits a Delta table in Azurite holds (its ``_delta_log`` JSON files)."""
        from azure.storage.blob import ContainerClient

        from lakefeed.azure import azure_location

        where = azure_location(table)
        client = ContainerClient.from_connection_string(self.connection_string(), where.container)
        prefix = f"{where.prefix.strip('/')}/_delta_log/"
        return sum(
            1
            for blob in client.list_blobs(name_starts_with=prefix)
            if blob.name.endswith(".json") and blob.name.count("/") == prefix.count("/")
        )

    def upload(self, folder: Path, location: str) -> int:
        """Every file under ``folder`` into an Azurite location, as the service writing it would."""
        from azure.storage.blob import ContainerClient

        from lakefeed.azure import azure_location

        where = azure_location(location)
        client = ContainerClient.from_connection_string(self.connection_string(), where.container)
        files = [path for path in sorted(folder.rglob("*")) if path.is_file()]
        for path in files:
            name = "/".join(p for p in (where.prefix.strip("/"), path.relative_to(folder).as_posix()) if p)
            client.upload_blob(name, path.read_bytes(), overwrite=True)
        return len(files)

    def assert_each_entry_announced_once(self, table: str, pipeline_id: str) -> None:
        """Every ledger entry of ``pipeline_id`` on ``table`` (its commits that changed rows) is in exactly
        one of the table's asset events (Airflow's REST API), and no event names anything else."""
        from lakefeed.ledger import entries_after
        from lakefeed.storage import credentials_scope

        assets = self.request("GET", "/api/v2/assets?limit=100")["assets"]
        asset = next(a for a in assets if a["uri"] == table)
        events = self.request("GET", f"/api/v2/assets/events?asset_id={asset['id']}&limit=100")["asset_events"]
        announced = sorted(
            (version, commit_id)
            for event in events
            for version, commit_id in zip(
                event["extra"].get("commits", []), event["extra"].get("commitIds", []), strict=False
            )
        )
        with credentials_scope({CONNECTION_STRING: self.connection_string()}):
            entries = [(e.version, e.commit_id) for e in entries_after(table, pipeline_id, None)[0]]
        assert entries and announced == entries, (table, announced, entries)

    def worker_executors(self, service: str) -> dict[str, int]:
        """Executors a Spark worker ran, by application id (the worker's own REST status)."""
        out = subprocess.run(
            ["docker", "exec", self.container(service), "curl", "-fsS", "http://127.0.0.1:8082/json/"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        status = json.loads(out)
        counts: dict[str, int] = {}
        for executor in status["executors"] + status["finishedexecutors"]:
            counts[executor["appid"]] = counts.get(executor["appid"], 0) + 1
        return counts

    def spark_apps(self) -> list[dict]:
        out = subprocess.run(
            ["docker", "exec", self.container("spark-master"), "curl", "-fsS", "http://127.0.0.1:8081/json/"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        status = json.loads(out)
        return status["activeapps"] + status["completedapps"]


def project_leftovers() -> list[str]:
    if shutil.which("docker") is None:
        return []  # a fresh machine: `make stack` installs Docker
    label = f"label=com.docker.compose.project={PROJECT}"
    found = []
    for kind in (["ps", "-a"], ["volume", "ls"], ["network", "ls"]):
        out = subprocess.run(["docker", *kind, "-q", "--filter", label], capture_output=True, text=True).stdout
        found += [f"{kind[0]} {line}" for line in out.split()]
    return found


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    ports = {name: free_port() for name in ("LAKEFEED_API_PORT", "LAKEFEED_AZURITE_PORT", "LAKEFEED_SPARK_UI_PORT")}
    env = {
        **outside_guard(dict(os.environ)),  # builds reach PyPI, Debian and npm; the containers only this machine
        **{name: str(port) for name, port in ports.items()},
        "LAKEFEED_STACK_PROJECT": PROJECT,
        "LAKEFEED_RETRY_DELAY_SECONDS": "5",
        "LAKEFEED_TASK_HEARTBEAT_TIMEOUT_SECONDS": "30",
        # Each job here lives for seconds on a few rows, as the suite's local spark-submits do: its driver
        # and executors take the client JIT and the serial collector, and its Delta logs are replayed in one
        # task (docker-compose.yaml's SPARK_SUBMIT_OPTS; tests/conftest.py says why), which on the 2-core
        # CI machine saves much of their CPU.
        "LAKEFEED_SPARK_SUBMIT_OPTS": " ".join(
            [
                SHORT_LIVED_JVM,
                f'"-Dspark.executor.defaultJavaOptions={SHORT_LIVED_JVM}"',
                *(f"-D{key}={value}" for key, value in SUITE_SPARK_SETTINGS.items()),
            ]
        ),
    }
    handle = Stack(env, ports["LAKEFEED_API_PORT"], ports["LAKEFEED_AZURITE_PORT"])
    # What an interrupted session left, the engine started if it is not running: containers that would come
    # back with it (their restart policy) and volumes holding that session's tables and checkpoints.
    handle.script("down", timeout=300)
    assert project_leftovers() == [], "stack.sh down left an earlier session's containers, volumes or networks"
    up = handle.script("up", timeout=3600)
    print(up.stderr[-3000:], flush=True)
    assert up.returncode == 0, f"make stack failed:\n{up.stdout[-3000:]}\n{up.stderr[-6000:]}"
    handle.lap("images built and every service healthy")
    try:
        yield handle
    finally:
        if os.environ.get("LAKEFEED_KEEP_STACK") != "1":
            down = handle.script("down", timeout=600)
            assert down.returncode == 0, down.stderr[-3000:]
            assert project_leftovers() == []
            print("timings:", json.dumps(handle.timings), flush=True)


def test_the_stack_runs_the_three_pipelines_on_a_spark_cluster(stack: Stack, spark, tmp_path):
    # 1. The three DAGs start unpaused: each one's scheduled run takes the whole demo data.
    scheduled = {
        dag_id: wait_until(lambda: [r for r in stack.runs(dag_id) if r["run_type"] == "scheduled"], 300, dag_id)[0]
        for dag_id in (BLOB, CDF, CRDB)
    }
    for dag_id, run in scheduled.items():
        done = wait_until(lambda: stack.finished(dag_id, run["dag_run_id"]), 1200, f"{dag_id}'s scheduled run")
        states = {t["task_id"]: t["state"] for t in stack.tasks(dag_id, run["dag_run_id"])}
        assert done["state"] == "success", (dag_id, states)
    stack.lap("three scheduled runs")

    check = stack.script("check", timeout=600)
    result = json.loads(next(line for line in check.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert result["check"], result
    sink = generate_sink(tmp_path / "sink", SINK)  # the same seed: the same sink, for its last RESOLVED
    assert stack.variable("lakefeed_blob_checkpoint")["watermark"] == format_time(FEED.last_consumable)
    assert stack.variable("lakefeed_crdb_checkpoint")["resolved"] == sink.resolved[-1]
    assert stack.variable("lakefeed_cdf_checkpoint__demo")["appliedVersion"] == 6
    # The pools nobody created by hand: the plugin made them when the scheduler started.
    pools = {p["name"]: p["slots"] for p in stack.request("GET", "/api/v2/pools")["pools"]}
    assert pools["lakefeed_spark"] == 1 and pools["lakefeed_checkpoints"] == 1, pools
    # Every job's executors ran on the Spark workers, both of them (each executor takes one core).
    apps = {app["id"]: app["name"] for app in stack.spark_apps()}
    assert set(apps.values()) == {BLOB, CDF, CRDB}, apps
    executors = {worker: stack.worker_executors(worker) for worker in ("spark-worker-1", "spark-worker-2")}
    print("executors by worker:", json.dumps(executors), flush=True)
    for app_id, name in apps.items():
        assert sum(found.get(app_id, 0) for found in executors.values()) >= 1, (name, executors)
    assert all(executors.values()), executors
    stack.lap("targets, checkpoints, pools and executors checked")

    # 2. Backfills through the REST API: Airflow's Backfill of two hours at once for the blob and CockroachDB
    #    DAGs, the CDF DAG's range params; each re-applies what is applied and commits nothing.
    layout = DemoLayout.azure()
    tables = [
        layout.events_table,
        layout.state_table,
        layout.cdf_target,
        *(f"{layout.crdb_root}/{t}" for t in ("customers", "orders")),
    ]
    commits = {table: stack.commits(table) for table in tables}
    checkpoints = {
        name: stack.variable(name)
        for name in ("lakefeed_blob_checkpoint", "lakefeed_cdf_checkpoint__demo", "lakefeed_crdb_checkpoint")
    }
    hours = {
        BLOB: FEED.start.replace(minute=0),
        CRDB: SINK.start.replace(minute=0, second=0),
    }
    for dag_id, hour in hours.items():
        stack.request(
            "POST",
            "/api/v2/backfills",
            {
                "dag_id": dag_id,
                "from_date": hour.isoformat(),
                "to_date": (hour + timedelta(hours=1)).isoformat(),
                "max_active_runs": 2,
                "run_backwards": False,
                "dag_run_conf": {},
                "reprocess_behavior": "none",
            },
        )
    stack.request(
        "POST",
        f"/api/v2/dags/{CDF}/dagRuns",
        {
            "dag_run_id": "manual__backfill_versions",
            "logical_date": datetime.now(UTC).isoformat(),
            "conf": {"pipeline": "demo", "starting_version": 0, "ending_version": 6},
        },
    )
    backfills = {
        BLOB: [
            r["dag_run_id"]
            for r in wait_until(
                lambda: [r for r in stack.runs(BLOB) if r["run_type"] == "backfill"], 120, "blob backfill runs"
            )
        ],
        CRDB: [
            r["dag_run_id"]
            for r in wait_until(
                lambda: [r for r in stack.runs(CRDB) if r["run_type"] == "backfill"], 120, "crdb backfill runs"
            )
        ],
        CDF: ["manual__backfill_versions"],
    }
    assert len(backfills[BLOB]) == 2 and len(backfills[CRDB]) == 2, backfills
    for dag_id, run_ids in backfills.items():
        for run_id in run_ids:
            done = wait_until(lambda: stack.finished(dag_id, run_id), 900, f"{dag_id} {run_id}")
            states = {t["task_id"]: t["state"] for t in stack.tasks(dag_id, run_id)}
            assert done["state"] == "success", (dag_id, run_id, states)
    blob_runs = sorted((r["start_date"], r["end_date"]) for r in stack.runs(BLOB) if r["run_type"] == "backfill")
    assert blob_runs[1][0] < blob_runs[0][1], blob_runs  # the two ran at once
    assert {table: stack.commits(table) for table in tables} == commits  # replays write nothing
    for name, before in checkpoints.items():  # what they say was applied (their announced marks catch up)
        assert progress(stack.variable(name)) == progress(before), name
    stack.lap("backfills: two runs at once, nothing written")

    # 3. The changefeed goes on writing: a later hour of the sink lands in its container. A run is triggered;
    #    while its job runs, a Spark worker goes down, and right after the job's first Delta commit, the Edge
    #    worker running it (`docker kill`: the machine, with the task and its driver). The task is retried
    #    on the other worker, its executors on the remaining Spark worker.
    later = replace(
        SINK,
        start=SINK.start + timedelta(hours=1),
        steps=12,
        changes_per_step=30,
        seed=13,
        restart_at_flush=None,
        late_file_at_resolved=None,
        schema_change_at_step=1,
    )
    more = generate_sink(tmp_path / "later", later)
    stack.upload(tmp_path / "later", layout.sink)
    topics = {topic: f"{layout.crdb_root}/{topic}" for topic in ("customers", "orders")}
    before = {table: stack.commits(table) for table in topics.values()}
    seen = {app["id"] for app in stack.spark_apps()}
    stack.request(
        "POST",
        f"/api/v2/dags/{CRDB}/dagRuns",
        {"dag_run_id": "manual__machines_down", "logical_date": datetime.now(UTC).isoformat(), "conf": {}},
    )
    wait_until(
        lambda: any(a["name"] == CRDB and a["id"] not in seen and a["state"] == "RUNNING" for a in stack.spark_apps()),
        600,
        "the CockroachDB job's Spark application",
        every=0.5,
    )
    subprocess.run(["docker", "kill", stack.container("spark-worker-1")], check=True, capture_output=True)
    wait_until(
        lambda: any(stack.commits(table) > count for table, count in before.items()),
        600,
        "the job's first Delta commit",
        every=0.1,
    )

    def running_job() -> str | None:
        for worker in ("airflow-worker-1", "airflow-worker-2"):
            found = subprocess.run(
                ["docker", "exec", stack.container(worker), "pgrep", "-f", JOB[CRDB]], capture_output=True
            )
            if found.returncode == 0:
                return worker
        return None

    victim = running_job()
    assert victim, "the job ended before its worker could be killed after its first commit"
    subprocess.run(["docker", "kill", stack.container(victim)], check=True, capture_output=True)
    print(f"killed spark-worker-1 during the job, and {victim} after its first Delta commit", flush=True)
    stack.lap("a later hour of the sink; a Spark worker and an Edge worker killed during the job")
    done = wait_until(lambda: stack.finished(CRDB, "manual__machines_down"), 900, "the run after the kills")
    tries = {
        t["task_id"]: (t["state"], t["try_number"], t["hostname"]) for t in stack.tasks(CRDB, "manual__machines_down")
    }
    assert done["state"] == "success", tries
    _, try_number, host = tries[APPLY[CRDB]]
    assert try_number >= 2 and host != victim, tries
    stack.lap("retried on the other worker, converged")

    # Each change once: the targets hold the newest row of every key of both hours, the checkpoint is at the
    # later hour's last RESOLVED, each topic took one commit (the killed try's, or the retry's), and every
    # ledger entry is announced by exactly one asset event.
    from lakefeed.azure import hadoop_url
    from lakefeed.spark import apply_storage_credentials
    from tests.integration.test_crdb_job import assert_matches_truth

    credentials = {CONNECTION_STRING: stack.connection_string()}
    apply_storage_credentials(spark, credentials)
    merged = replace(more, rows={topic: {**sink.rows[topic], **more.rows[topic]} for topic in sink.rows})
    assert_matches_truth(spark, hadoop_url(layout.crdb_root, credentials), merged)
    assert stack.variable("lakefeed_crdb_checkpoint")["resolved"] == more.resolved[-1]
    assert {table: stack.commits(table) for table in topics.values()} == {t: n + 1 for t, n in before.items()}
    for table in topics.values():
        stack.assert_each_entry_announced_once(table, "lakefeed_crdb_checkpoint")
