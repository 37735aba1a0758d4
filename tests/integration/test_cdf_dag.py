"""`airflow dags test delta_cdf_to_delta` end to end: first run, no new versions, new commits,
a version-range backfill and a full refresh, each checked against the source and the checkpoint."""

from __future__ import annotations

import json

import pytest

from lakefeed.cdf.simulator import SourceSimulator, create_source, latest_version, live_rows
from tests.airflow_env import dags_test, dags_test_env, variable

pytestmark = pytest.mark.integration
DAG = "delta_cdf_to_delta"


@pytest.fixture(scope="module")
def airflow(tmp_path_factory):
    base = tmp_path_factory.mktemp("cdf_dag")
    config = {
        "pipelines": [{"name": "orders", "source_table": str(base / "source"), "target_table": str(base / "target"),
                       "keys": ["id"], "versions_per_job": 4}],
        "run_dir": str(base / "runs"),
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
    }
    return base, dags_test_env(base / "airflow", AIRFLOW_VAR_LAKEFEED_CDF_CONFIG=json.dumps(config))


def applied(env) -> int | None:
    checkpoint = variable(env, "lakefeed_cdf_checkpoint__orders")
    return checkpoint["appliedVersion"] if checkpoint else None


def rows(df):
    return sorted(tuple(r) for r in df.select("id", "name", "amount", "touched").collect())


def job_summaries(base) -> list[dict]:
    newest = max((base / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return [json.loads(p.read_text()) for p in sorted(newest.glob("*.json"), key=lambda p: int(p.stem))]


def test_runs_growth_backfill_and_full_refresh(spark, airflow):
    base, env = airflow
    source, target = str(base / "source"), str(base / "target")
    create_source(spark, source, rows=25)
    simulator = SourceSimulator(spark, source, seed=5, key_space=60)
    for kind in ("update", "delete", "update", "overwrite", "merge"):
        simulator.commit(kind)
    first_latest = latest_version(spark, source)

    dags_test(env, DAG)  # first run: CDF was on from version 0, so it reads the change feed from 0
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env) == first_latest
    assert [s["startingVersion"] for s in job_summaries(base)] == list(range(0, first_latest + 1, 4))

    target_version = spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"]
    dags_test(env, DAG)  # no new versions: skipped, nothing written
    assert spark.sql(f"DESCRIBE HISTORY delta.`{target}`").collect()[0]["version"] == target_version
    assert applied(env) == first_latest

    for kind in ("reinsert", "update", "delete"):
        simulator.commit(kind)
    dags_test(env, DAG)  # exactly the new versions
    [summary] = job_summaries(base)
    assert (summary["startingVersion"], summary["endingVersion"]) == (first_latest + 1, first_latest + 3)
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env) == first_latest + 3

    before = rows(spark.read.format("delta").load(target))
    dags_test(env, DAG, {"pipeline": "orders", "starting_version": 0, "ending_version": 5})  # a replayed past range
    assert rows(spark.read.format("delta").load(target)) == before
    assert applied(env) == first_latest + 3

    dags_test(env, DAG, {"pipeline": "orders", "full_refresh": True})
    assert rows(live_rows(spark, target)) == rows(simulator.snapshot())
    assert applied(env) == first_latest + 3
