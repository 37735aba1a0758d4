"""The submit operator's contract with the jobs: exit code 2 fails at once with the job's own reason (the
real blob job, refusing an unready window before any JVM starts), other failures stay retryable, and the
templated timeout and Spark settings are applied when the task starts."""

import json
import os
import stat
import sys
from datetime import timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "plugins"))

from lakefeed.blob.generator import FeedSpec, generate_feed  # noqa: E402
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
    return folder


def operator(tmp_path, args):
    return LakefeedSparkSubmitOperator(task_id="ingest", application=str(ROOT / "spark_jobs" / "blob_changefeed_job.py"),
                                       application_args=args)


def test_a_refusal_fails_the_task_at_once_with_the_jobs_reason(tmp_path, launcher):
    from airflow.sdk.exceptions import AirflowFailException

    generate_feed(tmp_path / "feed", FeedSpec(hours=3, events_per_hour=5, gap_hours=()))  # ready up to 01:10
    summary = tmp_path / "runs" / "0.json"
    args = ["--feed-root", str(tmp_path / "feed"), "--window-start", "2026-01-01T05:10Z",
            "--window-end", "2026-01-01T06:10Z", "--events-table", str(tmp_path / "e"),
            "--state-table", str(tmp_path / "s"), "--summary-json", str(summary)]
    with pytest.raises(AirflowFailException, match="exit code 2.*not retried: WindowNotReadyError: 1 window\\(s\\) not "
                                                   "ready: 2026-01-01T05:10:00Z"):
        operator(tmp_path, args).execute({})
    assert not summary.exists() and not (tmp_path / "e").exists()


def test_other_failures_stay_retryable(tmp_path, launcher, monkeypatch):
    from airflow.sdk.exceptions import AirflowException, AirflowFailException

    monkeypatch.setenv("LAKEFEED_TEST_EXIT", "1")
    with pytest.raises(AirflowException) as raised:
        operator(tmp_path, ["--summary-json", str(tmp_path / "0.json")]).execute({})
    assert not isinstance(raised.value, AirflowFailException)


def test_timeout_and_spark_settings_apply_when_the_task_starts(tmp_path):
    task = LakefeedSparkSubmitOperator(task_id="t", application="job.py", conf={"spark.a": "1"},
                                       timeout_minutes="90", extra_conf='{"spark.b": 2}')
    task.pre_execute({})
    assert task.execution_timeout == timedelta(minutes=90) and task.conf == {"spark.a": "1", "spark.b": "2"}
    task = LakefeedSparkSubmitOperator(task_id="t", application="job.py", extra_conf="[1]")
    with pytest.raises(ValueError, match="JSON object"):
        task.pre_execute({})
