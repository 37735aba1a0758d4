"""The three feeds as the DAGs run them (:class:`lakefeed.pipeline.Feed`): configuration and checkpoints in
Airflow Variables (:mod:`lakefeed_airflow.settings`), Azure through the ``wasb`` connections
(:class:`lakefeed_airflow.wasb_feed.AirflowStorage`); and the task whose XCom is each DAG's run summary
(read by the monitor)."""

from __future__ import annotations

from lakefeed.blob import pipeline as blob_pipeline
from lakefeed.cdf.pipeline import CdfFeed
from lakefeed.crdb import pipeline as crdb_pipeline
from lakefeed.pipeline import OneCheckpointFeed
from lakefeed_airflow.settings import (
    blob_checkpoint_store,
    blob_config,
    cdf_checkpoint_store,
    cdf_config,
    crdb_checkpoint_store,
    crdb_config,
)
from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

BLOB = OneCheckpointFeed(blob_config, blob_checkpoint_store, blob_pipeline.STEPS, AIRFLOW_STORAGE)
CDF = CdfFeed(cdf_config, cdf_checkpoint_store, AIRFLOW_STORAGE)
CRDB = OneCheckpointFeed(crdb_config, crdb_checkpoint_store, crdb_pipeline.STEPS, AIRFLOW_STORAGE)

BLOB_COMMIT_TASK_ID = "commit_checkpoint"
CDF_COMMIT_TASK_ID = "commit_checkpoints"
CRDB_COMMIT_TASK_ID = "commit_checkpoint"
