import json
from datetime import datetime, timezone

import pytest

from lakefeed.checkpoint import BlobCheckpoint, CheckpointError
from lakefeed.config import BlobPipelineConfig, ConfigError


def utc(h):
    return datetime(2026, 1, 1, h, 10, tzinfo=timezone.utc)


def test_checkpoint_round_trip_and_empty():
    checkpoint = BlobCheckpoint(watermark=utc(3), last_consumable=utc(4), updated_by="run-1")
    assert BlobCheckpoint.from_json(checkpoint.to_json(), "Variable v") == checkpoint
    assert BlobCheckpoint.from_json(None, "Variable v") == BlobCheckpoint()
    assert json.loads(checkpoint.to_json())["version"] == 1


@pytest.mark.parametrize("text, message", [
    ("{oops", "not JSON"),
    ("[1]", "must be a JSON object"),
    ('{"version": 2, "pipeline": "blob_changefeed"}', "version 2"),
    ('{"version": 1, "pipeline": "delta_cdf"}', "belongs to pipeline"),
    ('{"version": 1, "pipeline": "blob_changefeed", "watermark": "soon"}', "watermark 'soon'"),
])
def test_malformed_checkpoint_names_the_variable(text, message):
    with pytest.raises(CheckpointError, match=f"checkpoint Variable cp.*{message}"):
        BlobCheckpoint.from_json(text, "Variable cp")


def test_checkpoint_never_moves_backwards():
    checkpoint = BlobCheckpoint(watermark=utc(5), last_consumable=utc(6))
    assert checkpoint.advanced(utc(3), utc(4), "backfill") is checkpoint
    moved = checkpoint.advanced(utc(7), utc(8), "run-2")
    assert (moved.watermark, moved.last_consumable, moved.updated_by) == (utc(7), utc(8), "run-2")


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
    with pytest.raises(ConfigError, match="not JSON"):
        BlobPipelineConfig.from_json("{", "Variable c")
