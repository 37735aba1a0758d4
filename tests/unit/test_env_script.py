"""scripts/env.sh is sourced by every Makefile recipe, and often by hand before `make`: sourcing it twice
must leave the same environment (it once appended a "}" to the spark_default JSON, so Spark jobs ran on
yarn)."""

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_sourcing_env_twice_keeps_the_spark_connection_json_valid():
    once, twice = (subprocess.run(["bash", "-c", f"{'source scripts/env.sh; ' * times}echo \"$AIRFLOW_CONN_SPARK_DEFAULT\""],
                                  cwd=ROOT, capture_output=True, text=True, check=True,
                                  env={"PATH": "/usr/bin:/bin"}).stdout.strip() for times in (1, 2))
    assert once == twice
    assert json.loads(twice) == {"conn_type": "spark", "host": "local[*]"}
