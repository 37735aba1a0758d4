import json
from datetime import UTC, datetime

import pytest

from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.cdf.config import CdfConfig
from lakefeed.checkpoint import TableMark, verify_feed, verify_table
from lakefeed.deltalog import TableState
from lakefeed.errors import CheckpointError, CheckpointMismatchError, ConfigError


def utc(h):
    return datetime(2026, 1, 1, h, 10, tzinfo=UTC)


def test_checkpoint_round_trip_and_empty():
    checkpoint = BlobCheckpoint(
        watermark=utc(3),
        last_consumable=utc(4),
        feed="file:///feed",
        grid_minute=10,
        targets={"/lake/events": TableMark("id-1", 7)},
        generation=3,
        updated_by="run-1",
    )
    assert BlobCheckpoint.from_json(checkpoint.to_json(), "Variable v") == checkpoint
    assert BlobCheckpoint.from_json(None, "Variable v") == BlobCheckpoint()
    assert json.loads(checkpoint.to_json())["version"] == 2
    cdf = CdfCheckpoint(
        applied_version=9, source="/src", source_id="s-1", targets={"/t": TableMark("t-1", 4)}, generation=2
    )
    assert CdfCheckpoint.from_json(cdf.to_json(), "Variable v") == cdf


def test_version_1_documents_are_still_read_without_identity():
    blob = BlobCheckpoint.from_json(
        '{"version": 1, "pipeline": "blob_changefeed", "watermark": '
        '"2026-01-01T03:10:00Z", "lastConsumable": null, "updatedBy": "r"}',
        "Variable v",
    )
    assert (blob.watermark, blob.feed, blob.targets, blob.generation) == (utc(3), None, {}, 0)
    cdf = CdfCheckpoint.from_json('{"version": 1, "pipeline": "delta_cdf", "appliedVersion": 5}', "Variable v")
    assert (cdf.applied_version, cdf.source_id) == (5, None)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{oops", "malformed JSON"),
        ("[1]", "must be a JSON object"),
        ('{"version": 3, "pipeline": "blob_changefeed"}', "version 3"),
        ('{"version": 1, "pipeline": "delta_cdf"}', "belongs to pipeline"),
        ('{"version": 1, "pipeline": "blob_changefeed", "watermark": "soon"}', "watermark 'soon'"),
        ('{"version": 2, "pipeline": "blob_changefeed", "generation": -1}', "generation must be a count"),
        ('{"version": 2, "pipeline": "blob_changefeed", "targets": {"/t": {"tableId": 5}}}', "a target must be"),
        ('{"version": 2, "pipeline": "blob_changefeed", "gridMinute": 75}', "gridMinute must be 0..59"),
        ('{"version": 2, "pipeline": "blob_changefeed", "feed": 5}', "feed must be a string"),
    ],
)
def test_malformed_checkpoint_names_the_variable(text, message):
    with pytest.raises(CheckpointError, match=f"checkpoint Variable cp.*{message}"):
        BlobCheckpoint.from_json(text, "Variable cp")


def test_a_checkpoint_changes_only_through_moved_which_counts_generations():
    checkpoint = BlobCheckpoint(watermark=utc(5), generation=4)
    assert checkpoint.moved(watermark=utc(5), updated_by="x") is checkpoint  # nothing differs: no write
    moved = checkpoint.moved(watermark=utc(7), updated_by="run-2")
    assert (moved.watermark, moved.generation, moved.updated_by) == (utc(7), 5, "run-2")


def test_a_checkpoint_of_another_feed_is_refused_naming_both():
    verify_feed(None, "file:///b", "Variable cp", "reset it")  # a version-1 checkpoint: nothing to compare
    verify_feed("file:///a", "file:///a", "Variable cp", "reset it")
    with pytest.raises(
        CheckpointMismatchError,
        match="Variable cp belongs to the feed azure://acct1/c.*now reads azure://acct2/c.*reset it",
    ):
        verify_feed("azure://acct1/c", "azure://acct2/c", "Variable cp", "reset it")


@pytest.mark.parametrize(
    "state, message",
    [
        (None, "no Delta table there any more"),
        (TableState("other-id", 9), "dropped and recreated"),
        (TableState("t-1", 3), "version 4, but it is now at version 3: an older copy"),
        (TableState("t-1", 9, restores=((8, 2),)), "version 8 RESTOREd it to version 2"),
        (TableState("t-1", 9, restores=((8, None),)), "RESTOREd it to an earlier timestamp"),
    ],
)
def test_a_target_dropped_recreated_or_restored_behind_the_checkpoint_is_refused(state, message):
    with pytest.raises(CheckpointMismatchError, match=f"target table /lake/t.*{message}.*do this"):
        verify_table("target", "/lake/t", None, TableMark("t-1", 4), state, "Variable cp", "do this")


def test_a_target_that_moved_on_or_was_restored_ahead_of_the_mark_is_fine():
    for state in (TableState("t-1", 4), TableState("t-1", 12), TableState("t-1", 12, restores=((10, 6),))):
        verify_table("target", "/lake/t", None, TableMark("t-1", 4), state, "Variable cp", "do this")
    verify_table("target", "/lake/t", None, None, None, "Variable cp", "do this")  # nothing recorded


def test_a_recreated_source_is_refused_by_its_table_id():
    verify_table("source", "/src", "s-1", None, TableState("s-1", 2), "Variable cp", "refresh")
    with pytest.raises(
        CheckpointMismatchError, match="source table /src is table s-1, but the table there now is s-2.*refresh"
    ):
        verify_table("source", "/src", "s-1", None, TableState("s-2", 40), "Variable cp", "refresh")


def test_a_retired_key_is_ignored_with_a_warning_so_older_configurations_still_load(caplog):
    from lakefeed.cdf.config import CdfConfig
    from lakefeed.crdb.config import CrdbConfig

    for kind in (BlobPipelineConfig, CdfConfig, CrdbConfig):
        caplog.clear()
        assert kind.from_json('{"run_dir": "/shared/runs"}', "Variable c") == kind.from_json(None, "Variable c")
        assert "Variable c: run_dir is no longer used and is ignored" in caplog.text


def test_config_defaults_point_at_the_demo_and_overrides_are_checked():
    config = BlobPipelineConfig.from_json(None, "Variable c")
    assert config.feed_root.endswith("data/demo/feed")
    assert BlobPipelineConfig.from_json('{"windows_per_batch": 3}', "Variable c").windows_per_batch == 3
    with pytest.raises(ConfigError, match="unknown key.*feedroot"):
        BlobPipelineConfig.from_json('{"feedroot": "x"}', "Variable c")
    with pytest.raises(ConfigError, match="windows_per_batch must be int"):
        BlobPipelineConfig.from_json('{"windows_per_batch": "3"}', "Variable c")
    with pytest.raises(ConfigError, match="decoder must be 'auto' or 'python'"):
        BlobPipelineConfig.from_mapping({"decoder": "jvm"})
    with pytest.raises(ConfigError, match="at least 1"):
        BlobPipelineConfig.from_json('{"max_windows_per_run": 0}', "Variable c")
    with pytest.raises(ConfigError, match="malformed JSON"):
        BlobPipelineConfig.from_json("{", "Variable c")


def test_spark_settings_are_checked():
    assert BlobPipelineConfig.from_json('{"spark_conf": {"spark.executor.memory": "2g"}}', "c").spark_conf == {
        "spark.executor.memory": "2g"
    }
    with pytest.raises(ConfigError, match="spark_conf must map"):
        BlobPipelineConfig.from_json('{"spark_conf": {"a": {"b": 1}}}', "c")
    with pytest.raises(ConfigError, match="spark_job_timeout_minutes must be positive"):
        CdfConfig.from_json('{"spark_job_timeout_minutes": 0}', "c")
    config = CdfConfig.from_json(
        '{"spark_job_timeout_minutes": 30, "pipelines": [{"name": "a", "source_table": "/s",'
        ' "target_table": "/t", "keys": ["id"]}]}',
        "c",
    )
    assert (config.spark_job_timeout_minutes, config.pipeline("a").keys) == (30, ["id"])


def test_a_cdf_pipeline_reads_through_its_own_connection_or_the_top_level_one():
    config = CdfConfig.from_json(
        json.dumps(
            {
                "wasb_conn_id": "wasb_lake",
                "pipelines": [
                    {"name": "a", "source_table": "az://lake/a", "target_table": "az://lake/a_mirror", "keys": ["id"]},
                    {
                        "name": "b",
                        "source_table": "az://other/b",
                        "target_table": "/t/b",
                        "keys": ["id"],
                        "wasb_conn_id": "wasb_other",
                    },
                ],
            }
        ),
        "c",
    )
    assert [p.wasb_conn_id for p in config.pipelines] == ["wasb_lake", "wasb_other"]
    assert (
        CdfConfig.from_json(
            json.dumps({"pipelines": [{"name": "a", "source_table": "/s", "target_table": "/t", "keys": ["id"]}]}), "c"
        )
        .pipelines[0]
        .wasb_conn_id
        is None
    )
