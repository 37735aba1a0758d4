"""Planning and checkpoint commit of the blob DAG, on a real generated feed and real summary files."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "plugins"))

from lakefeed.blob.generator import FeedSpec, generate_feed  # noqa: E402
from lakefeed.checkpoint import BlobCheckpoint  # noqa: E402
from lakefeed.config import BlobPipelineConfig  # noqa: E402
from lakefeed.errors import FeedConfigError, FeedCorruptError  # noqa: E402
from lakefeed_airflow import blob_tasks  # noqa: E402


class DictStore:
    """The checkpoint store's interface over a dict (Airflow Variables are covered by the DAG test)."""

    def __init__(self, checkpoint=BlobCheckpoint()):
        self.saved = [checkpoint]

    def load(self):
        return self.saved[-1]

    def save(self, checkpoint):
        self.saved.append(checkpoint)


@pytest.fixture
def config(tmp_path):
    generate_feed(tmp_path / "feed", FeedSpec(hours=5, events_per_hour=10, gap_hours=()))  # lastConsumable 04:10
    return BlobPipelineConfig(feed_root=str(tmp_path / "feed"), events_table="e", state_table="s",
                              run_dir=str(tmp_path / "runs"), windows_per_batch=2, max_windows_per_run=5)


def test_first_plan_batches_every_ready_window_up_to_the_cap(config):
    planned = blob_tasks.plan(config, BlobCheckpoint(), {}, "scheduled__1")
    assert planned["mode"] == "scheduled" and planned["windows"] == 5
    assert planned["batches"] == [
        {"start": "2025-12-31T23:10:00Z", "end": "2026-01-01T01:10:00Z"},
        {"start": "2026-01-01T01:10:00Z", "end": "2026-01-01T03:10:00Z"},
        {"start": "2026-01-01T03:10:00Z", "end": "2026-01-01T04:10:00Z"},
    ]
    args = blob_tasks.job_arguments(config, planned)
    assert args[1][:6] == ["--feed-root", config.feed_root, "--window-start", "2026-01-01T01:10:00Z",
                           "--window-end", "2026-01-01T03:10:00Z"]
    assert args[1][-4:] == ["--decoder", "auto", "--summary-json", str(Path(planned["runFolder"]) / "1.json")]


def test_plan_resumes_from_the_watermark_and_refuses_a_regressing_feed(config):
    checkpoint = BlobCheckpoint(watermark=blob_tasks.parse_time("2026-01-01T03:10Z"),
                                last_consumable=blob_tasks.parse_time("2026-01-01T04:10Z"))
    assert blob_tasks.plan(config, checkpoint, {}, "r")["batches"] == [
        {"start": "2026-01-01T03:10:00Z", "end": "2026-01-01T04:10:00Z"}]
    ahead = BlobCheckpoint(watermark=checkpoint.watermark, last_consumable=blob_tasks.parse_time("2026-01-02T00:10Z"))
    with pytest.raises(FeedCorruptError, match="moved backwards"):
        blob_tasks.plan(config, ahead, {}, "r")


def test_backfill_plan_is_exactly_the_range(config):
    planned = blob_tasks.plan(config, BlobCheckpoint(), {"window_start": "2026-01-01T00:10Z",
                                                         "window_end": "2026-01-01T01:10:00Z"}, "manual__1")
    assert planned["mode"] == "backfill" and planned["batches"] == [
        {"start": "2026-01-01T00:10:00Z", "end": "2026-01-01T01:10:00Z"}]
    with pytest.raises(FeedConfigError, match="both window_start and window_end"):
        blob_tasks.plan(config, BlobCheckpoint(), {"window_start": "2026-01-01T00:10Z"}, "m")
    with pytest.raises(FeedConfigError, match="not ready"):
        blob_tasks.plan(config, BlobCheckpoint(), {"window_start": "2026-01-01T00:10Z",
                                                   "window_end": "2026-01-01T09:10Z"}, "m")


def test_commit_advances_over_the_finished_prefix_then_fails(config):
    planned = blob_tasks.plan(config, BlobCheckpoint(), {}, "scheduled__2")
    folder = Path(planned["runFolder"])
    for index in (0, 2):  # batch 1 failed: batch 2's success must not move the checkpoint past it
        (folder / f"{index}.json").write_text(json.dumps({"eventsInserted": 7, "seconds": {"merge": 1.5}}))
    store = DictStore()
    with pytest.raises(RuntimeError, match="1 of 3 batch"):
        blob_tasks.commit(store, planned, "scheduled__2")
    assert store.load().watermark == blob_tasks.parse_time("2026-01-01T01:10Z")

    (folder / "1.json").write_text(json.dumps({"eventsInserted": 1}))
    report = blob_tasks.commit(store, planned, "scheduled__2 retry")
    assert report["eventsInserted"] == 15 and report["batchesFailed"] == []
    assert report["watermark"] == "2026-01-01T04:10:00Z" and report["lagHours"] == 0
    assert store.load().updated_by == "scheduled__2 retry"


def test_commit_of_a_backfill_never_moves_the_checkpoint_back(config):
    store = DictStore(BlobCheckpoint(watermark=blob_tasks.parse_time("2026-01-01T04:10Z"),
                                     last_consumable=blob_tasks.parse_time("2026-01-01T04:10Z")))
    planned = blob_tasks.plan(config, store.load(), {"window_start": "2026-01-01T00:10Z",
                                                     "window_end": "2026-01-01T02:10Z"}, "manual__3")
    (Path(planned["runFolder"]) / "0.json").write_text("{}")
    blob_tasks.commit(store, planned, "manual__3")
    assert len(store.saved) == 1  # nothing written
