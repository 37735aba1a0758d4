"""A chunked backfill across an additive column change, then scheduled runs, through
`airflow dags test delta_cdf_to_delta`: the target equals the source (issue 20). The helpers and the
configuration in the metadata database are those of test_cdf_dag_identity.py."""

from __future__ import annotations

import pytest
from lakefeed_testing.cdf_simulator import live_rows

from tests.airflow_env import dags_test, dags_test_env, last_run_id, variable, xcom
from tests.integration.test_cdf_dag_identity import DAG, rows, set_config, source_with_history

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    return dags_test_env(tmp_path_factory.mktemp("cdf_added_column") / "airflow")


def test_a_chunked_backfill_across_an_added_column_then_scheduled_runs_equal_the_source(spark, airflow_env, tmp_path):
    env = airflow_env
    source, target = tmp_path / "source", tmp_path / "target"
    simulator = source_with_history(spark, source, seed=5, commits=2)  # versions 0..3
    spark.sql(f"ALTER TABLE delta.`{source}` ADD COLUMNS (note STRING)")  # version 4
    spark.sql(f"UPDATE delta.`{source}` SET note = 'n' || CAST(id AS STRING) WHERE id % 3 = 0")  # version 5
    simulator.commit("update")  # version 6
    set_config(
        env,
        tmp_path,
        {"name": "added", "source_table": str(source), "target_table": str(target), "versions_per_job": 4},
    )
    # A chunk across the change, then an older one after it (the target has `note`, the range's source does
    # not): before, that second job refused with "column(s) missing from the source: note". Every chunking
    # and order is covered job by job in test_cdf_schema_ranges.py.
    for start, end in ((3, 6), (0, 2)):
        dags_test(env, DAG, {"starting_version": start, "ending_version": end})
    assert variable(env, "lakefeed_cdf_checkpoint__added")["appliedVersion"] is None  # backfills set no position
    simulator.commit("delete")
    dags_test(env, DAG)  # scheduled: every version again in chunks of 4 (0..3 before, 4..7 across the change)
    assert xcom(env, DAG, last_run_id(env, DAG), "commit_checkpoints")["pipelines"]["added"]["appliedVersion"] == 7
    columns = ("id", "name", "amount", "touched", "note")
    expected = spark.read.format("delta").load(str(source))
    assert rows(live_rows(spark, str(target)), columns) == rows(expected, columns)
