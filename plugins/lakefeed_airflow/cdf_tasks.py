"""The CDF DAG's feed: :class:`lakefeed.cdf.pipeline.CdfFeed` with its configuration and checkpoints in
Airflow Variables and each pipeline's tables read through its ``wasb`` connection."""

from __future__ import annotations

from lakefeed.cdf.pipeline import JOB_SCRIPT, CdfFeed
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import CdfConfig, CdfPipeline
from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

__all__ = ["COMMIT_TASK_ID", "FEED", "JOB_SCRIPT"]

COMMIT_TASK_ID = "commit_checkpoints"  # the task whose XCom is the run summary (read by the monitor)


def _config() -> CdfConfig:
    from lakefeed_airflow.settings import cdf_config

    return cdf_config()


def _checkpoints(pipeline: CdfPipeline, config: CdfConfig) -> CheckpointStore:
    from lakefeed_airflow.settings import cdf_checkpoint_store

    return cdf_checkpoint_store(pipeline, config)


FEED = CdfFeed(_config, _checkpoints, AIRFLOW_STORAGE)
