"""An isolated Airflow for `airflow dags test` runs: its own home and SQLite metadata, this project's
dags/ and plugins/, Spark through spark_default = local[2], configuration through AIRFLOW_VAR_*.

Sequences of DAG runs (scheduled, backfill, reset, retry, two at once) are driven through these helpers
and checked against ground truth, the checkpoint Variable and the task instances' tries."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dags_test_env(home: Path, lineage: bool = False, **extra: str) -> dict[str, str]:
    """Environment for the `airflow` CLI; ``extra`` adds AIRFLOW_VAR_* / AIRFLOW_CONN_* entries; ``lineage``:
    OpenLineage events go to a file in the home (:func:`lineage_events`), else OpenLineage stays off (the
    machine's OPENLINEAGE* settings are never inherited). Migrates the metadata database before returning."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith(("OPENLINEAGE", "AIRFLOW__OPENLINEAGE__"))}
    env = {
        **inherited,
        **(lineage_settings(home) if lineage else {}),
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "LAKEFEED_HOME": str(ROOT),
        "LAKEFEED_RETRY_DELAY_SECONDS": "2",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **extra,
    }
    subprocess.run(["airflow", "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


def lineage_settings(home: Path) -> dict[str, str]:
    """Airflow's OpenLineage provider sending every event to ``<home>/openlineage.jsonl`` (one JSON per line)."""
    transport = {"type": "file", "log_file_path": str(home / "openlineage.jsonl"), "append": True}
    return {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(transport),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "lakefeed-tests",
        "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "true",  # no fork of the `airflow dags test` process
        "AIRFLOW__OPENLINEAGE__EXECUTION_TIMEOUT": "60",
    }


def lineage_events(env: dict[str, str], run_id: str) -> list[dict]:
    """The OpenLineage events of the task instances of one DAG run, in the order they were sent."""
    path = Path(env["AIRFLOW_HOME"]) / "openlineage.jsonl"
    events = [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []
    return [e for e in events if (e["run"]["facets"].get("airflow") or {}).get("dagRun", {}).get("run_id") == run_id]


def with_config(env: dict[str, str], variable: str, config: dict) -> dict[str, str]:
    """``env`` with a pipeline config Variable (``lakefeed_blob_config``, ``lakefeed_cdf_config``) set."""
    return {**env, f"AIRFLOW_VAR_{variable.upper()}": json.dumps(config)}


def dags_test_command(dag_id: str, conf: dict | None = None) -> list[str]:
    return ["airflow", "dags", "test", dag_id] + (["-c", json.dumps(conf)] if conf else [])


def dags_test(
    env: dict[str, str], dag_id: str, conf: dict | None = None, succeed: bool = True
) -> subprocess.CompletedProcess:
    """One `airflow dags test` run; by default it must succeed (its exit code reflects failed tasks)."""
    result = subprocess.run(dags_test_command(dag_id, conf), env=env, capture_output=True, text=True, timeout=900)
    if (result.returncode == 0) != succeed:
        full = Path(env["AIRFLOW_HOME"]) / f"dags-test-{dag_id}-{time.time_ns()}.log"  # the whole output, kept
        full.write_text(result.stdout + result.stderr)
        raise AssertionError(f"{(result.stdout + result.stderr)[-8000:]}\n(the whole output: {full})")
    return result


def start_dags_test(env: dict[str, str], dag_id: str, conf: dict | None = None, log: Path | None = None):
    """A `airflow dags test` run in the background (its output in ``log``)."""
    out = open(log, "w") if log else subprocess.DEVNULL
    return subprocess.Popen(dags_test_command(dag_id, conf), env=env, stdout=out, stderr=subprocess.STDOUT, text=True)


def variable(env: dict[str, str], name: str) -> dict | None:
    """A JSON Variable as Airflow reads it (its ``AIRFLOW_VAR_*`` environment variable, else the metadata
    database, decrypted with the home's Fernet key), or None when it is not set. Read directly: an
    ``airflow variables get`` costs seconds of CPU that the suite's other worker needs."""
    if f"AIRFLOW_VAR_{name.upper()}" in env:
        return json.loads(env[f"AIRFLOW_VAR_{name.upper()}"])
    with _metadata(env) as db:
        row = db.execute("SELECT val, is_encrypted FROM variable WHERE key = ?", (name,)).fetchone()
    if row is None:
        return None
    value, encrypted = row
    return json.loads(_fernet(env).decrypt(value.encode()).decode() if encrypted else value)


def _fernet(env: dict[str, str]):
    """The Fernet (keys comma-separated, the newest first) Airflow encrypts this home's Variables with."""
    from configparser import ConfigParser

    from cryptography.fernet import Fernet, MultiFernet

    keys = env.get("AIRFLOW__CORE__FERNET_KEY")
    if not keys:
        config = ConfigParser(interpolation=None)
        config.read(Path(env["AIRFLOW_HOME"]) / "airflow.cfg")
        keys = config.get("core", "fernet_key")
    return MultiFernet([Fernet(key.strip().encode()) for key in keys.split(",") if key.strip()])


def progress(checkpoint: dict) -> dict:
    """A checkpoint's progress: what it says was applied, without its ``announced`` marks (which catch
    up with the asset events the step before recorded) and its write bookkeeping."""
    return {k: v for k, v in checkpoint.items() if k not in ("announced", "generation", "updatedBy")}


def assert_marks_caught_up(checkpoint: dict) -> None:
    """The ``announced`` marks are past every commit the checkpoint recorded (no foreign writer here)."""
    assert checkpoint["announced"] == checkpoint["targets"], checkpoint


def _metadata(env: dict[str, str]) -> sqlite3.Connection:
    return sqlite3.connect(Path(env["AIRFLOW_HOME"]) / "airflow.db", timeout=30)


def last_run_id(env: dict[str, str], dag_id: str) -> str | None:
    """The newest run of ``dag_id`` (None before its first run exists)."""
    with _metadata(env) as db:
        row = db.execute("SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1", (dag_id,)).fetchone()
    return row[0] if row else None


def task_tries(env: dict[str, str], dag_id: str, run_id: str) -> dict[str, tuple[str, int]]:
    """``{task_id or task_id[map_index]: (state, try_number)}`` of one DAG run, from the metadata database."""
    with _metadata(env) as db:
        rows = db.execute(
            "SELECT task_id, map_index, state, try_number FROM task_instance WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        ).fetchall()
    return {(task if index < 0 else f"{task}[{index}]"): (state, tries) for task, index, state, tries in rows}


def xcom(env: dict[str, str], dag_id: str, run_id: str, task_id: str):
    """The return value a task of a run pushed (the commit tasks' run summaries)."""
    with _metadata(env) as db:
        row = db.execute(
            "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = 'return_value'",
            (dag_id, run_id, task_id),
        ).fetchone()
    return json.loads(row[0]) if row else None


def wait_for(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


APPLY_TASKS = {
    "blob_changefeed_to_delta": "ingest_windows",
    "delta_cdf_to_delta": "apply_ranges",
    "cockroach_changefeed_to_delta": "apply_ranges",
}


def job_summaries(env: dict[str, str], dag_id: str) -> list[dict]:
    """The job summaries of the newest run of ``dag_id``, in job order: the XComs its spark-submit tasks
    returned (what the commit step credits)."""
    run_id = last_run_id(env, dag_id)
    with _metadata(env) as db:
        rows = db.execute(
            "SELECT map_index, value FROM xcom WHERE dag_id = ? AND run_id = ? AND task_id = ? AND key = "
            "'return_value' ORDER BY map_index",
            (dag_id, run_id, APPLY_TASKS[dag_id]),
        ).fetchall()
    return [json.loads(value) for _, value in rows]


def asset_events(env: dict[str, str], uri: str) -> list[dict]:
    """The ``extra`` of every asset event Airflow recorded for the asset ``uri``, oldest first (from the
    SQLite database of ``airflow dags test``, or the database ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN`` names)."""
    from airflow.sdk import Asset

    uri = Asset(uri).uri  # as Airflow stores it (``abfss://c@account.dfs.core.windows.net`` gains a ``/``)
    query = (
        "SELECT asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id "
        "WHERE asset.uri = {} ORDER BY asset_event.id"
    )
    if env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"):
        import sqlalchemy

        engine = sqlalchemy.create_engine(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
        try:
            with engine.connect() as connection:
                rows = connection.execute(sqlalchemy.text(query.format(":uri")), {"uri": uri}).fetchall()
        finally:
            engine.dispose()
    else:
        with _metadata(env) as db:
            rows = db.execute(query.format("?"), (uri,)).fetchall()
    return [json.loads(extra) if isinstance(extra, str) else extra for (extra,) in rows]


def assert_each_entry_announced_once(env: dict[str, str], table: str, pipeline_id: str) -> list[dict]:
    """Every ledger entry of ``pipeline_id`` on ``table`` (its commits that changed rows) is in exactly one
    asset event of the table, and no event names anything else. Returns the events."""
    from lakefeed.assets import table_uri
    from lakefeed.ledger import entries_after

    events = asset_events(env, table_uri(table))
    announced = sorted(
        (version, commit_id)
        for extra in events
        for version, commit_id in zip(extra.get("commits", []), extra.get("commitIds", []), strict=False)
    )
    entries = [(entry.version, entry.commit_id) for entry in entries_after(table, pipeline_id, None)[0]]
    assert entries, f"{table} has no ledger entry of {pipeline_id}"
    assert announced == entries, (announced, entries)
    return events


def assert_run_lineage(
    env: dict[str, str], dag_id: str, inputs: list[tuple[str, str]], commit_task: str = "commit_checkpoint"
) -> dict[int, dict]:
    """The newest run of ``dag_id`` sent OpenLineage events as lakefeed promises: each spark-submit task one
    START and then one COMPLETE, reading ``inputs`` (``(namespace, name)``), writing the tables its job
    committed to at the versions its summary (its XCom) names, its ``lakefeed_job`` counts equal to the
    summary's; and its commit step an event naming the targets its report announced, with their newest
    versions. Returns each job's COMPLETE event by map index."""
    from lakefeed.lineage import dataset_ref

    run_id = last_run_id(env, dag_id)
    events = lineage_events(env, run_id)
    apply = f"{dag_id}.{APPLY_TASKS[dag_id]}"
    by_job: dict[int, list[dict]] = {}
    for event in events:
        if event["job"]["name"] == apply:
            by_job.setdefault(event["run"]["facets"]["airflow"]["taskInstance"]["map_index"], []).append(event)
    summaries = job_summaries(env, dag_id)
    assert sorted(by_job) == list(range(len(summaries))), (sorted(by_job), len(summaries))
    completed = {}
    for index, summary in enumerate(summaries):
        kinds = [e["eventType"] for e in by_job[index]]
        assert kinds == ["START", "COMPLETE"], (index, kinds)
        start, complete = by_job[index]
        for event in (start, complete):
            assert [(d["namespace"], d["name"]) for d in event["inputs"]] == inputs
        versions = {}
        for commit in summary["commits"]:
            if commit["table"].rstrip("/").rsplit("/", 1)[-1].startswith("_lakefeed_"):
                continue  # the job's own bookkeeping (the CockroachDB applied-files table) is not lineage
            ref = dataset_ref(commit["table"])
            versions[(ref.namespace, ref.name)] = max(versions.get((ref.namespace, ref.name), -1), commit["version"])
        written = {
            (d["namespace"], d["name"]): int(d["facets"]["version"]["datasetVersion"])
            for d in complete["outputs"]
            if "version" in d["facets"]
        }
        assert written == versions, (written, versions)
        facet = complete["run"]["facets"]["lakefeed_job"]
        assert facet["counts"] and all(summary[key] == count for key, count in facet["counts"].items()), facet
        assert facet["_schemaURL"].startswith("urn:lakefeed:openlineage:")
        completed[index] = complete
    report = xcom(env, dag_id, run_id, commit_task)
    announced = [e for e in events if e["job"]["name"] == f"{dag_id}.{commit_task}" and e["eventType"] == "RUNNING"]
    if report.get("targetsChanged"):
        [event] = announced
        assert event["run"]["facets"]["lakefeed_run"]["kind"] == report["kind"]
        named = {(d["namespace"], d["name"]): d["facets"]["version"]["datasetVersion"] for d in event["outputs"]}
        expected = {}
        for change in report["targetsChanged"]:
            ref = dataset_ref(change["table"])
            expected[(ref.namespace, ref.name)] = str(change["extra"]["targetVersion"])
        assert named == expected, (named, expected)
    return completed
