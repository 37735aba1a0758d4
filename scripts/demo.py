"""The demo: the four pipelines as they run in production, through their Airflow DAGs.

Generates a blob change feed, a Delta source table with change data feed on, and a CockroachDB cloud
storage sink; starts a CockroachDB stand-in serving the same tables' history over SQL
(lakefeed_testing.crdb_server: CockroachDB cannot be installed here); forgets the demo's checkpoints;
runs each DAG with `airflow dags test` (sensor, plan, spark-submit launched by Airflow, checkpoint
commit, asset events), the SQL-pulled one twice (an initial scan mid-history, then the changes since);
checks every target against the ground truth; and says where to look. Output fits one screen: Airflow's, Ivy's and Spark's output goes
to log files under <data>/logs.

    make demo            # or: python scripts/demo.py --events-per-hour 20000
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

BLOB, CDF, CRDB = "blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"
CRDB_SQL = "cockroach_sql_changefeed_to_delta"
CHECKPOINTS = (
    "lakefeed_blob_checkpoint",
    "lakefeed_cdf_checkpoint__demo",
    "lakefeed_crdb_checkpoint",
    "lakefeed_crdb_sql_checkpoint",
)
TASK = re.compile(r"\[DAG TEST\] starting task_id=(\w+)")


class Step:
    """One numbered line of output; a long step shows its elapsed time (and, for a DAG, the task running)."""

    def __init__(self, number: int, total: int, text: str):
        self.prefix = f"[{number}/{total}] {text}"
        self.started = time.perf_counter()
        self.tty = sys.stdout.isatty()
        print(self.prefix + (" …" if self.tty else ""), end="" if self.tty else "\n", flush=True)
        self.last_note = 0.0

    def progress(self, detail: str = "") -> None:
        elapsed = time.perf_counter() - self.started
        if self.tty:
            print(f"\r{self.prefix} … {elapsed:.0f}s {detail}\033[K", end="", flush=True)
        elif elapsed - self.last_note >= 60:
            self.last_note = elapsed
            print(f"      … {elapsed:.0f}s {detail}", flush=True)

    def done(self, outcome: str) -> float:
        elapsed = time.perf_counter() - self.started
        line = f"{self.prefix}: {outcome} ({elapsed:.0f}s)"
        print(f"\r{line}\033[K" if self.tty else f"      {outcome} ({elapsed:.0f}s)", flush=True)
        return elapsed


def run_logged(command: list[str], log: Path, env: dict, step: Step) -> int:
    """Run ``command`` with its output in ``log``, showing progress; the exit code."""
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        while process.poll() is None:
            time.sleep(1)
            tasks = TASK.findall(log.read_text(errors="replace"))
            step.progress(f"({tasks[-1]})" if tasks else "")
    return process.returncode


def result_of(log: Path) -> dict:
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.startswith("RESULT ")]
    return json.loads(lines[-1][len("RESULT ") :]) if lines else {}


def failed(log: Path) -> int:
    print(f"      failed: see {log.relative_to(ROOT) if log.is_relative_to(ROOT) else log} (last lines below)")
    print("\n".join(log.read_text(errors="replace").splitlines()[-15:]))
    return 1


def forget_checkpoints() -> None:
    """The demo regenerates its feed and tables: the checkpoints of an earlier demo no longer apply."""
    from airflow.models import Variable

    for name in CHECKPOINTS:
        Variable.delete(name)


def last_summary(dag_id: str) -> dict:
    from lakefeed_airflow.monitor import recent_runs

    runs = recent_runs(dag_id, limit=1)
    return (runs[0][1] or {}) if runs else {}


def n(value) -> str:
    return "–" if value is None else f"{value:,}" if isinstance(value, int) else f"{value:g}"


def changed(report: dict) -> str:
    parts = []
    for change in report.get("targetsChanged", []):
        x = change["extra"]
        parts.append(
            f"{Path(change['table']).name} +{n(x['rowsInserted'])} ~{n(x['rowsUpdated'])} "
            f"-{n(x['rowsDeleted'])} (v{x['targetVersion']})"
        )
    return ", ".join(parts) or "nothing changed"


def describe(dag_id: str, report: dict) -> str:
    if dag_id == BLOB:
        return (
            f"{report['windowsPlanned']} windows, {n(report['recordsRead'])} records read, "
            f"{n(report['eventsClaimed'])} events claimed, {n(report['duplicatesRemoved'])} duplicates removed; "
            f"watermark {report['watermark']}, lag {n(report['lagHours'])} h\n      {changed(report)}"
        )
    if dag_id == CDF:
        demo = report["pipelines"]["demo"]
        return (
            f"versions {demo['versions']}, {n(demo['rowsRead'])} change rows read; applied version "
            f"{demo['appliedVersion']}, lag {n(demo['lagVersions'])} versions\n      {changed(report)}"
        )
    return (
        f"{n(report['messagesRead'])} messages read, {n(report['duplicatesDropped'])} duplicates dropped; "
        f"resolved {report['resolved']}\n      {changed(report)}"
    )


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_cockroach(data: Path, log: Path) -> tuple[subprocess.Popen, int]:
    """The CockroachDB stand-in, serving the history of the demo sink's tables (the same generator and seed)."""
    port = free_port()
    command = [sys.executable, "-m", "lakefeed_testing.crdb_server", "--port", str(port)]
    command += ["--scratch", str(data / "crdb_sql_source"), "--steps", "30", "--changes-per-step", "60"]
    with open(log, "w") as out:  # the child keeps its own copy of the file
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while "serving" not in log.read_text(errors="replace"):
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the CockroachDB stand-in did not start: see {log}")
        time.sleep(0.2)
    return process, port


def set_clock(port: int, stamp: str) -> None:
    import psycopg

    with psycopg.connect(host="127.0.0.1", port=port, user="root", dbname="defaultdb", autocommit=True) as db:
        db.execute(f"SET CLUSTER SETTING lakefeed.test_clock = '{stamp}'")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT / "data" / "demo"))
    parser.add_argument("--hours", type=int, default=4)
    parser.add_argument("--events-per-hour", type=int, default=5_000)
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    started = time.perf_counter()
    data = Path(args.data).resolve()
    logs = data / "logs"
    os.environ["LAKEFEED_DATA"] = str(data)  # the pipelines' embedded defaults point under it
    from lakefeed_testing.blob_generator import FeedSpec, generate_feed
    from lakefeed_testing.crdb_generator import SinkSpec, generate_sink
    from lakefeed_testing.demo_data import expected_targets

    for folder in ("feed", "lake", "cdf", "crdb_sink", "crdb_sql_staging", "runs", "cdf_runs", "crdb_runs", "logs"):
        shutil.rmtree(data / folder, ignore_errors=True)
    logs.mkdir(parents=True)
    # The DAGs run on their embedded defaults (the demo's data), whatever config Variables hold.
    env = {
        **os.environ,
        **{f"AIRFLOW_VAR_LAKEFEED_{name}_CONFIG": "{}" for name in ("BLOB", "CDF", "CRDB", "CRDB_SQL")},
    }
    shown = data.relative_to(ROOT) if data.is_relative_to(ROOT) else data
    print(f"lakefeed demo: four DAGs through `airflow dags test`; data under {shown}, logs in {shown}/logs")

    step = Step(1, 6, "generate the blob change feed, the CockroachDB sink and the Delta CDF source")
    truth = generate_feed(
        data / "feed",
        FeedSpec(hours=args.hours, events_per_hour=args.events_per_hour, shards=args.shards, records_per_chunk=2_000),
    )
    sink = generate_sink(data / "crdb_sink", SinkSpec(steps=30, changes_per_step=60))
    log = logs / "cdf-source.log"
    if run_logged(
        [sys.executable, str(ROOT / "scripts" / "demo_spark.py"), "make-cdf-source", str(data)], log, env, step
    ):
        return failed(log)
    latest = result_of(log)["latestVersion"]
    forget_checkpoints()
    step.done(
        f"{len(truth.events):,} blob events in {args.shards} shards over {args.hours} h; "
        f"{sink.messages:,} sink messages; CDF source versions 0..{latest}"
    )

    for number, dag_id in enumerate((BLOB, CDF, CRDB), start=2):
        step = Step(number, 6, f"airflow dags test {dag_id}")
        log = logs / f"{dag_id}.log"
        code = run_logged(["airflow", "dags", "test", dag_id], log, env, step)
        report = last_summary(dag_id)
        if code != 0 or not report:
            step.done("failed")
            return failed(log)
        step.done("success")
        print(f"      {describe(dag_id, report)}")

    step = Step(5, 6, f"airflow dags test {CRDB_SQL} (an initial scan mid-history, then the changes since)")
    server, port = start_cockroach(data, logs / "cockroach-stand-in.log")
    try:
        sql_env = {
            **env,
            "AIRFLOW_CONN_LAKEFEED_COCKROACH": f"postgres://root@127.0.0.1:{port}/defaultdb?sslmode=disable",
        }
        stamps = sorted({change.stamp for change in sink.history})
        reports = []
        for clock in (stamps[len(stamps) // 2], stamps[-1]):
            set_clock(port, f"{clock.wall + 60 * 10**9}.0000000000")  # the run's range ends 30 s before
            log = logs / f"{CRDB_SQL}-{len(reports) + 1}.log"
            code = run_logged(["airflow", "dags", "test", CRDB_SQL], log, sql_env, step)
            reports.append(last_summary(CRDB_SQL))
            if code != 0 or not reports[-1]:
                step.done("failed")
                return failed(log)
    finally:
        server.terminate()
    step.done("success")
    for report in reports:
        print(f"      {describe(CRDB_SQL, report)}")

    expected = expected_targets(truth, sink)
    (logs / "expected.json").write_text(json.dumps(expected))
    step = Step(6, 6, "check every target against the generated ground truth")
    log = logs / "check.log"
    code = run_logged(
        [sys.executable, str(ROOT / "scripts" / "demo_spark.py"), "check", str(data), str(logs / "expected.json")],
        log,
        env,
        step,
    )
    result = result_of(log)
    if code != 0 or not result:
        return failed(log)
    step.done(", ".join(f"{name} {'✓' if same else '✗'}" for name, same in result["figures"].items()))

    print(f"""
Where to look
  targets      {shown}/lake/blob_events, {shown}/lake/blob_state, {shown}/cdf/target, {shown}/lake/crdb/<topic>,
               {shown}/lake/crdb_sql/<table>
               (Delta with deletion vectors: read them with Spark or another reader that supports them)
  summaries    each run's summary is the XCom of its commit task, each job's the XCom of its spark-submit
               task; the asset events name the commits announced; full DAG logs in {shown}/logs
  the UI       make ui, then http://localhost:8080 (user admin; password in
               .airflow/simple_auth_manager_passwords.json.generated): Browse → Lakefeed pipelines
demo finished in {time.perf_counter() - started:.0f}s""")
    return 0 if result["check"] else 1


if __name__ == "__main__":
    sys.exit(main())
