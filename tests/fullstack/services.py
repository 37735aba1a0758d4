"""Real services on loopback for the full-stack test, started and torn down by the test itself:
PostgreSQL (Debian's server binaries), a Spark standalone master and worker (spark-class), the
Airflow api-server, scheduler, dag-processor and triggerer; and helpers to drive them through the CLI."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen | None = None, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{process.args[:3]} exited with {process.returncode}")
        time.sleep(0.5)
    raise RuntimeError(f"nothing listens on 127.0.0.1:{port} after {seconds}s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        raise RuntimeError("PostgreSQL server binaries are missing: `make setup` installs Debian's postgresql")
    return found[-1]


@contextmanager
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster (run as the `postgres` user: the server refuses root), in its own
    temporary folder (pytest's are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="lakefeed-pg-"))
    os.chmod(folder, 0o755)
    data, sockets = folder / "pgdata", folder / "pgsock"
    for path in (data, sockets):
        path.mkdir()
    for path in (folder, data, sockets):
        shutil.chown(path, "postgres")
    as_postgres = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        as_postgres + [_pg_bin("initdb"), "-D", str(data), "--auth=trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    subprocess.run(
        as_postgres
        + [
            _pg_bin("pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(folder / "pg.log"),
            "-w",
            "-o",
            f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-c", "CREATE DATABASE airflow"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/airflow"
    finally:
        subprocess.run(as_postgres + [_pg_bin("pg_ctl"), "-D", str(data), "-m", "fast", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def spark_standalone(folder: Path, env: dict) -> Iterator[str]:
    """A Spark standalone master and one worker (2 cores) on loopback; yields the master URL."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    logs = open(folder / "spark.log", "w")
    master = subprocess.Popen(
        [
            "spark-class",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(ui),
        ],
        env=env,
        stdout=logs,
        stderr=subprocess.STDOUT,
    )
    worker = None
    try:
        wait_for_port(port, master)
        worker = subprocess.Popen(
            [
                "spark-class",
                "org.apache.spark.deploy.worker.Worker",
                f"spark://127.0.0.1:{port}",
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                "3g",
                "--webui-port",
                str(worker_ui),
                "--work-dir",
                str(folder / "spark-work"),
            ],
            env=env,
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
        wait_for_port(worker_ui, worker)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for process in (worker, master):
            if process is not None:
                stop(process)
        logs.close()


@contextmanager
def airflow_services(
    folder: Path, env: dict, components: tuple[str, ...] = ("scheduler", "dag-processor", "triggerer")
) -> Iterator[dict]:
    """The api-server and ``components`` (by default scheduler, dag-processor and triggerer), each a real
    process."""
    processes = []
    logs = open(folder / "airflow-services.log", "w")
    try:
        api = subprocess.Popen(
            ["airflow", "api-server", "--port", env["LAKEFEED_TEST_API_PORT"]],
            env=env,
            stdout=logs,
            stderr=subprocess.STDOUT,
        )
        processes.append(api)
        wait_for_port(int(env["LAKEFEED_TEST_API_PORT"]), api, seconds=120)
        for component in components:
            processes.append(subprocess.Popen(["airflow", component], env=env, stdout=logs, stderr=subprocess.STDOUT))
        yield {"processes": processes}
    finally:
        for process in reversed(processes):
            stop(process)
        logs.close()


def service_env(base: dict, home: Path, database: str, api_port: int, root: Path, **extra: str) -> dict:
    """The environment of Airflow services on ``database`` with the api-server on ``api_port``: this
    project's DAGs and plugins, quick scheduler and dag-processor loops; ``extra`` adds or overrides."""
    return {
        **base,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": database,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__DAGS_FOLDER": str(root / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(root / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": "full-stack-test-only",
        "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
        "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
        "LAKEFEED_TEST_API_PORT": str(api_port),
        "LAKEFEED_HOME": str(root),
        **extra,
    }


def metadata_rows(env: dict, sql: str, **params) -> list[tuple]:
    """Rows of a query on the metadata database the services use (PostgreSQL)."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    try:
        with engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sqlalchemy.text(sql), params).fetchall()]
    finally:
        engine.dispose()


def airflow(env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run(["airflow", *args], env=env, capture_output=True, text=True, timeout=300)
    if check and result.returncode != 0:
        raise RuntimeError(
            f"airflow {' '.join(args)} exited {result.returncode}:\n{(result.stdout + result.stderr)[-3000:]}"
        )
    return result


def dag_runs(env: dict, dag_id: str) -> list[dict]:
    """The runs of ``dag_id``, newest first, from the metadata database (read directly: polling through the
    CLI would start an Airflow process every two seconds on a machine the services already keep busy)."""
    rows = metadata_rows(
        env,
        "SELECT run_id, state, start_date, end_date FROM dag_run WHERE dag_id = :dag ORDER BY id DESC",
        dag=dag_id,
    )
    return [dict(zip(("run_id", "state", "start_date", "end_date"), row, strict=True)) for row in rows]


def dag_parsed(env: dict, dag_id: str) -> bool:
    """Whether the dag-processor has serialised ``dag_id`` into the metadata database."""
    return bool(metadata_rows(env, "SELECT 1 FROM serialized_dag WHERE dag_id = :dag", dag=dag_id))


def task_states(env: dict, dag_id: str, run_id: str) -> dict[str, str]:
    """``{task_id or task_id[map_index]: state}`` of one DAG run, from the metadata database."""
    rows = metadata_rows(
        env,
        "SELECT task_id, map_index, state FROM task_instance WHERE dag_id = :dag AND run_id = :run",
        dag=dag_id,
        run=run_id,
    )
    return {(task if index < 0 else f"{task}[{index}]"): state for task, index, state in rows}


def wait_until(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        print(f"{time.strftime('%H:%M:%S')} waiting for {what}: {value}", flush=True)
        if value:
            return value
        time.sleep(2)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")
