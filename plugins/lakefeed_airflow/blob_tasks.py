"""The blob DAG's feed: :class:`lakefeed.blob.pipeline.BlobFeed` with its configuration and checkpoint in
Airflow Variables and the feed read through the ``wasb`` connection."""

from __future__ import annotations

from lakefeed.blob.pipeline import JOB_SCRIPT, BlobFeed
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import BlobPipelineConfig
from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

COMMIT_TASK_ID = "commit_checkpoint"  # the task whose XCom is the run summary (read by the monitor)


def _config() -> BlobPipelineConfig:
    from lakefeed_airflow.settings import blob_config

    return blob_config()


def _checkpoints(config: BlobPipelineConfig) -> CheckpointStore:
    from lakefeed_airflow.settings import blob_checkpoint_store

    return blob_checkpoint_store(config)


__all__ = ["COMMIT_TASK_ID", "FEED", "JOB_SCRIPT"]

FEED = BlobFeed(_config, _checkpoints, AIRFLOW_STORAGE)
