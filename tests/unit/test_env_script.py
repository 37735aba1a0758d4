"""scripts/env.sh is sourced by every Makefile recipe, and often by hand before `make`: sourcing it twice
must leave the same environment (it once appended a "}" to the spark_default JSON, so Spark jobs ran on
yarn)."""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sourcing_env_twice_keeps_the_spark_connection_json_valid():
    once, twice = (
        subprocess.run(
            ["bash", "-c", f'{"source scripts/env.sh; " * times}echo "$AIRFLOW_CONN_SPARK_DEFAULT"'],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            env={"PATH": "/usr/bin:/bin"},
        ).stdout.strip()
        for times in (1, 2)
    )
    assert once == twice
    assert json.loads(twice) == {"conn_type": "spark", "host": "local[*]"}


def _sourced(variable: str, **env: str) -> str:
    return subprocess.run(
        ["bash", "-c", f'source scripts/env.sh; echo "${variable}"'],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", **env},
    ).stdout.strip()


def test_executor_parallelism_is_sized_to_the_machine_and_can_be_set():
    import os

    cores = len(os.sched_getaffinity(0))
    assert int(_sourced("AIRFLOW__CORE__PARALLELISM")) == max(4, 2 * cores) < 32 or cores >= 16
    assert _sourced("AIRFLOW__CORE__PARALLELISM", AIRFLOW__CORE__PARALLELISM="9") == "9"
