"""The CockroachDB DAG's feed: :class:`lakefeed.crdb.pipeline.CrdbFeed` with its configuration and
checkpoint in Airflow Variables and the sink read through the ``wasb`` connection."""

from __future__ import annotations

from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import CrdbConfig
from lakefeed.crdb.pipeline import JOB_SCRIPT, CrdbFeed
from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

COMMIT_TASK_ID = "commit_checkpoint"  # the task whose XCom is the run summary (read by the monitor)


def _config() -> CrdbConfig:
    from lakefeed_airflow.settings import crdb_config

    return crdb_config()


def _checkpoints(config: CrdbConfig) -> CheckpointStore:
    from lakefeed_airflow.settings import crdb_checkpoint_store

    return crdb_checkpoint_store(config)


__all__ = ["COMMIT_TASK_ID", "FEED", "JOB_SCRIPT"]

FEED = CrdbFeed(_config, _checkpoints, AIRFLOW_STORAGE)
