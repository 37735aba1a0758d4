"""An isolated Airflow for `airflow dags test` runs: its own home and SQLite metadata, this project's
dags/ and plugins/, Spark through spark_default = local[2], configuration through AIRFLOW_VAR_*."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def dags_test_env(home: Path, **extra: str) -> dict[str, str]:
    """Environment for the `airflow` CLI; ``extra`` adds AIRFLOW_VAR_* / AIRFLOW_CONN_* entries.
    Migrates the metadata database before returning."""
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "LAKEFEED_HOME": str(ROOT),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        **extra,
    }
    subprocess.run(["airflow", "db", "migrate"], env=env, check=True, capture_output=True, timeout=300)
    return env


def dags_test(env: dict[str, str], dag_id: str, conf: dict | None = None) -> subprocess.CompletedProcess:
    """One `airflow dags test` run; it must succeed (unlike `tasks test`, its exit code reflects failures)."""
    args = ["airflow", "dags", "test", dag_id] + (["-c", json.dumps(conf)] if conf else [])
    result = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
    return result


def variable(env: dict[str, str], name: str) -> dict | None:
    """A JSON Variable as the CLI reads it, or None when it is not set."""
    result = subprocess.run(["airflow", "variables", "get", name], env=env, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1]) if result.returncode == 0 else None
