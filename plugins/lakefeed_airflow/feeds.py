"""The three feeds as the DAGs run them (:class:`lakefeed.pipeline.Feed`): configuration and checkpoints in
Airflow Variables (:mod:`lakefeed_airflow.settings`), Azure through the ``wasb`` connections
(:class:`lakefeed_airflow.wasb_feed.AirflowStorage`); and, per DAG, what the monitor must know of it
(:class:`Wired`): the task whose XCom is the run summary, the params that name a range, the control that
re-initialises it, and its pipelines as their feed describes them (``lakefeed.<feed>.monitoring``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from lakefeed.blob import monitoring as blob_monitoring
from lakefeed.blob import pipeline as blob_pipeline
from lakefeed.blob.checkpoint import BlobCheckpoint
from lakefeed.cdf import monitoring as cdf_monitoring
from lakefeed.cdf import pipeline as cdf_pipeline
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.crdb import monitoring as crdb_monitoring
from lakefeed.crdb import pipeline as crdb_pipeline
from lakefeed.crdb.checkpoint import CrdbCheckpoint
from lakefeed.monitor import Watched
from lakefeed.pipeline import Feed
from lakefeed_airflow.settings import VariableCell, blob_config, cdf_config, checkpoint_store, crdb_config
from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE

BLOB = Feed(blob_pipeline.HOOKS, blob_config, VariableCell, AIRFLOW_STORAGE)
CDF = Feed(cdf_pipeline.HOOKS, cdf_config, VariableCell, AIRFLOW_STORAGE)
CRDB = Feed(crdb_pipeline.HOOKS, crdb_config, VariableCell, AIRFLOW_STORAGE)

BLOB_COMMIT_TASK_ID = "commit_checkpoint"
CDF_COMMIT_TASK_ID = "commit_checkpoints"
CRDB_COMMIT_TASK_ID = "commit_checkpoint"


@dataclass(frozen=True)
class Wired:
    """A lakefeed DAG as the monitor reads it."""

    dag_id: str
    key: str  # its card's id when its configuration cannot be read
    commit_task: str  # the task whose XCom is the run summary
    range_params: tuple[str, ...]  # a run with any of them is a backfill
    reset: str  # the control that re-initialises the pipeline, as the trigger form names it
    watched: Callable[[], list[Watched]]  # its pipelines now (the Variables read through the ORM)


def _blob_watched() -> list[Watched]:
    config = blob_config(orm=True)
    return blob_monitoring.watched(config, checkpoint_store(config, BlobCheckpoint, orm=True), AIRFLOW_STORAGE)


def _cdf_watched() -> list[Watched]:
    config = cdf_config(orm=True)
    return cdf_monitoring.watched(config, lambda p: checkpoint_store(p, CdfCheckpoint, orm=True), AIRFLOW_STORAGE)


def _crdb_watched() -> list[Watched]:
    config = crdb_config(orm=True)
    return crdb_monitoring.watched(config, checkpoint_store(config, CrdbCheckpoint, orm=True), AIRFLOW_STORAGE)


WIRED = (
    Wired(
        "blob_changefeed_to_delta",
        "blob",
        BLOB_COMMIT_TASK_ID,
        ("window_start", "window_end"),
        "Reset the checkpoint",
        _blob_watched,
    ),
    Wired(
        "delta_cdf_to_delta",
        "cdf",
        CDF_COMMIT_TASK_ID,
        ("starting_version", "ending_version"),
        "Full refresh",
        _cdf_watched,
    ),
    Wired(
        "cockroach_changefeed_to_delta",
        "cockroach",
        CRDB_COMMIT_TASK_ID,
        ("after_resolved", "through_resolved"),
        "Reset the checkpoint",
        _crdb_watched,
    ),
)
