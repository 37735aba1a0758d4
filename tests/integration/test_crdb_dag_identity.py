"""`airflow dags test cockroach_changefeed_to_delta` sequences where the configuration no longer describes what
the checkpoint was made on (issue 20): a moved ``target_root``, and topic tables another pipeline filled met by a
first run. Both stop the run naming the old and new values and the way on; checked against the generator's
ground truth and the checkpoint Variable."""

from __future__ import annotations

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from tests.airflow_env import dags_test, dags_test_env, variable, with_config
from tests.integration.test_crdb_job import assert_matches_truth

pytestmark = pytest.mark.integration
DAG = "cockroach_changefeed_to_delta"


def test_a_moved_target_root_and_another_pipelines_tables_are_refused_until_reset_or_adopted(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SinkSpec(steps=12, changes_per_step=15, seed=33))
    lake, moved = tmp_path / "lake", tmp_path / "moved"
    config = {
        "sink_root": str(tmp_path / "sink"),
        "target_root": str(lake),
        "sensor_timeout_seconds": 3,
        "sensor_poke_seconds": 1,
    }
    home = dags_test_env(tmp_path / "airflow")
    env = with_config(home, "lakefeed_crdb_config", config)
    dags_test(env, DAG)
    checkpoint = variable(env, "lakefeed_crdb_checkpoint")
    assert checkpoint["targetRoot"] == str(lake) and checkpoint["resolved"] == truth.resolved[-1]

    # target_root moved to an empty folder: before, the next run went on from the old folder's RESOLVED
    # timestamp, and the new tables never received the earlier rows.
    env = with_config(home, "lakefeed_crdb_config", {**config, "target_root": str(moved)})
    result = dags_test(env, DAG, succeed=False)
    assert f"was made with target_root {lake}, but the configuration now says {moved}" in result.stdout + result.stderr
    assert "reset_checkpoint=true" in result.stdout + result.stderr
    assert variable(env, "lakefeed_crdb_checkpoint") == checkpoint and not moved.exists()
    dags_test(env, DAG, {"reset_checkpoint": True})
    assert_matches_truth(spark, moved, truth)
    assert variable(env, "lakefeed_crdb_checkpoint")["targetRoot"] == str(moved)

    # The same tables under another checkpoint Variable: its first run refuses them until adopted.
    env = with_config(
        home,
        "lakefeed_crdb_config",
        {**config, "target_root": str(moved), "checkpoint_variable": "other_crdb_checkpoint"},
    )
    result = dags_test(env, DAG, succeed=False)
    assert "already holds rows" in result.stdout + result.stderr
    assert "written by pipeline lakefeed_crdb_checkpoint" in result.stdout + result.stderr
    assert variable(env, "other_crdb_checkpoint") is None
