"""The submit operator's contract with the jobs: exit code 2 fails at once with the job's own reason (the
real blob job, refusing an unready window before any JVM starts), pushed to XCom for the commit step;
other failures stay retryable; the job's summary comes back as the task's return value (from a scratch
folder of the task, or from ``summary_root`` for a driver on the cluster), and nothing is left behind;
the templated timeout and Spark settings are applied when the task starts."""

import json
import os
import stat
import sys
import tempfile
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[3]

from lakefeed_testing.blob_generator import FeedSpec, generate_feed  # noqa: E402

from lakefeed_airflow.operators import LakefeedSparkSubmitOperator  # noqa: E402

# Stands in for spark-submit: drops its own options and runs the application with this Python, so the
# job's checks that precede Spark run for real, in milliseconds.
LAUNCHER = f"""#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --master|--name|--conf|--packages) shift 2;; *.py) break;; *) shift;; esac; done
if [ -n "$LAKEFEED_TEST_EXIT" ]; then exit "$LAKEFEED_TEST_EXIT"; fi
exec {sys.executable} "$@"
"""


@pytest.fixture
def launcher(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "spark-submit"
    script.write_text(LAUNCHER)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[1]"}))
    # This test's own temporary folder: DAG tests running beside it make and remove scratch folders too.
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    return folder


# A job that needs no Spark: it leaves the summary lakefeed.jobs writes, or exits 0 leaving none.
SUMMARY_JOB = f"""import sys
sys.path.insert(0, {str(ROOT / "include")!r})
from lakefeed.jobs import write_summary
args = sys.argv[1:]
if "--no-summary" not in args:
    write_summary({{"windows": ["w"], "args": args}}, args[args.index("--summary-json") + 1])
"""


class TaskInstance(SimpleNamespace):
    """The fields of the running task instance the operator reads, and the XComs it pushes."""

    def __init__(self, **fields):
        super().__init__(
            dag_id="blob_changefeed_to_delta",
            run_id="scheduled__2026-01-01T00:00:00+00:00",
            task_id="ingest_windows",
            map_index=3,
            try_number=2,
            pushed={},
            **fields,
        )

    def xcom_push(self, key, value):
        self.pushed[key] = value


def operator(tmp_path, args, application=None, **kwargs):
    return LakefeedSparkSubmitOperator(
        task_id="ingest",
        application=application or str(ROOT / "spark_jobs" / "blob_changefeed_job.py"),
        application_args=args,
        **kwargs,
    )


def scratch_folders() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("lakefeed-job-*")}


def test_a_refusal_fails_the_task_at_once_with_the_jobs_reason(tmp_path, launcher):
    from airflow.sdk.exceptions import AirflowFailException

    generate_feed(tmp_path / "feed", FeedSpec(hours=3, events_per_hour=5, gap_hours=()))  # ready up to 01:10
    args = [
        "--feed-root",
        str(tmp_path / "feed"),
        "--window-start",
        "2026-01-01T05:10Z",
        "--window-end",
        "2026-01-01T06:10Z",
        "--events-table",
        str(tmp_path / "e"),
        "--state-table",
        str(tmp_path / "s"),
    ]
    ti, before = TaskInstance(), scratch_folders()
    with pytest.raises(
        AirflowFailException,
        match="exit code 2.*not retried: WindowNotReadyError: 1 window\\(s\\) not ready: 2026-01-01T05:10:00Z",
    ):
        operator(tmp_path, args).execute({"ti": ti})
    # The reason reaches the commit step through XCom (it may run on another worker).
    assert list(ti.pushed) == ["refusal"]
    assert ti.pushed["refusal"].startswith("WindowNotReadyError: 1 window(s) not ready: 2026-01-01T05:10:00Z")
    assert not (tmp_path / "e").exists() and scratch_folders() == before


def test_the_jobs_summary_is_the_tasks_return_value_and_nothing_is_left_behind(tmp_path, launcher):
    job = tmp_path / "job.py"
    job.write_text(SUMMARY_JOB)
    before = scratch_folders()
    # Client mode: the driver writes into a scratch folder of this task; a stale --summary-json is replaced.
    summary = operator(
        tmp_path, ["--window-start", "w", "--summary-json", "/elsewhere/0.json"], application=str(job)
    ).execute({"ti": TaskInstance()})
    location = summary["args"][-1]
    assert summary["windows"] == ["w"] and summary["args"][:2] == ["--window-start", "w"]
    assert summary["args"].count("--summary-json") == 1 and location.endswith(".json") and "/elsewhere/" not in location
    assert scratch_folders() == before and not Path(location).exists()
    # A driver on the cluster: under summary_root, one fresh object per try, removed once read.
    root = tmp_path / "summaries"
    summary = operator(tmp_path, [], application=str(job), summary_root=str(root)).execute({"ti": TaskInstance()})
    location = summary["args"][-1]
    assert location.startswith(
        f"{root}/blob_changefeed_to_delta/scheduled__2026-01-01T00_00_00_00_00/ingest_windows/3-try2-"
    )
    assert not Path(location).exists()


def test_a_job_that_exits_0_without_a_summary_is_retried(tmp_path, launcher):
    from airflow.sdk.exceptions import AirflowFailException

    job = tmp_path / "job.py"
    job.write_text(SUMMARY_JOB)
    with pytest.raises(RuntimeError, match="exited 0 but the job left no summary") as raised:
        operator(tmp_path, ["--no-summary"], application=str(job)).execute({"ti": TaskInstance()})
    assert not isinstance(raised.value, AirflowFailException)


def test_other_failures_stay_retryable(tmp_path, launcher, monkeypatch):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    monkeypatch.setenv("LAKEFEED_TEST_EXIT", "1")
    with pytest.raises(AirflowException) as raised:
        operator(tmp_path, []).execute({"ti": TaskInstance()})
    assert not isinstance(raised.value, AirflowFailException)


FAILING_JOB = f"""import sys
sys.path.insert(0, {str(ROOT / "include")!r})
from lakefeed.jobs import run_spark_job
def prepare():
    raise OSError("connection reset while reading https://acct.blob.core.windows.net/c/x.avro?sig=SECRET")
args = sys.argv[1:]
sys.exit(run_spark_job("failing", args[args.index("--summary-json") + 1], prepare, None))
"""


def test_a_job_that_fails_is_retried_with_its_own_error_in_words(tmp_path, launcher):
    from airflow.sdk.exceptions import AirflowFailException

    job = tmp_path / "job.py"
    job.write_text(FAILING_JOB)
    before = scratch_folders()
    with pytest.raises(
        RuntimeError,
        match=r"the Spark job failed \(exit code 1\), retried as configured: "
        r"OSError: connection reset while reading .*x.avro\?sig=\*\*\*$",
    ) as raised:
        operator(tmp_path, [], application=str(job)).execute({"ti": TaskInstance()})
    assert not isinstance(raised.value, AirflowFailException) and "SECRET" not in str(raised.value)
    assert scratch_folders() == before


def test_timeout_and_spark_settings_apply_when_the_task_starts(tmp_path):
    task = LakefeedSparkSubmitOperator(
        task_id="t", application="job.py", conf={"spark.a": "1"}, timeout_minutes="90", extra_conf='{"spark.b": 2}'
    )
    task.pre_execute({})
    assert task.execution_timeout == timedelta(minutes=90)
    # spark-submit ends its JVM when the job's Python exits (a pipeline's spark_conf may say otherwise).
    assert task.conf == {"spark.submit.callSystemExitOnMainExit": "true", "spark.a": "1", "spark.b": "2"}
    task = LakefeedSparkSubmitOperator(task_id="t", application="job.py", extra_conf="[1]")
    with pytest.raises(ValueError, match="JSON object"):
        task.pre_execute({})


def test_a_folder_of_jars_on_the_worker_replaces_maven_central(tmp_path, monkeypatch):
    """Air-gapped: with LAKEFEED_JARS_DIR the job gets that folder's jars and no --packages to resolve, even
    for Azure (whose hadoop-azure must then be in the folder); without it, the packages as configured."""
    for name in ("delta-spark_2.13-4.4.0.jar", "hadoop-azure-3.5.0.jar"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setenv("LAKEFEED_JARS_DIR", str(tmp_path))
    task = LakefeedSparkSubmitOperator(
        task_id="t", application="job.py", packages="io.delta:delta-spark_4.2_2.13:4.4.0", wasb_conn_id="azure"
    )
    task.pre_execute({})
    assert task.packages is None
    assert task.jars == f"{tmp_path}/delta-spark_2.13-4.4.0.jar,{tmp_path}/hadoop-azure-3.5.0.jar"
    monkeypatch.delenv("LAKEFEED_JARS_DIR")
    task = LakefeedSparkSubmitOperator(
        task_id="t", application="job.py", packages="io.delta:delta-spark_4.2_2.13:4.4.0", wasb_conn_id="azure"
    )
    task.pre_execute({})
    assert task.jars is None and task.packages.split(",")[0] == "io.delta:delta-spark_4.2_2.13:4.4.0"
    assert ":hadoop-azure:" in task.packages
