"""The feeds as the DAGs run them (:class:`lakefeed.pipeline.Feed`), one per feed spec
(:func:`lakefeed.feeds.specs`): configuration and checkpoints in Airflow Variables
(:mod:`lakefeed_airflow.settings`), Azure through the ``wasb`` connections
(:class:`lakefeed_airflow.wasb_feed.AirflowStorage`). Names no feed."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from lakefeed.feeds import FeedSpec, spec_of
from lakefeed.monitor import Watched
from lakefeed.pipeline import Feed
from lakefeed_airflow.settings import VariableCell, checkpoint_store, config_of
from lakefeed_airflow.wasb_feed import AIRFLOW_STORAGE


def feed(spec: FeedSpec, fence: Callable[[], None] | None = None) -> Feed[Any, Any, Any, Any]:
    """The feed of ``spec`` inside a task: its configuration and checkpoints through the Task SDK, each
    checkpoint write behind ``fence`` when given (the commit step's lease)."""
    return Feed(spec.hooks, partial(config_of, spec), partial(VariableCell, fence=fence), AIRFLOW_STORAGE)


def watched(dag_id: str) -> list[Watched]:
    """The monitor's cards of the DAG's pipelines now (the Variables read through the ORM)."""
    spec = spec_of(dag_id)
    assert spec is not None, f"{dag_id} is not a lakefeed DAG"
    kind = spec.hooks.checkpoint_type
    return spec.watched(
        config_of(spec, orm=True), lambda pipeline: checkpoint_store(pipeline, kind, orm=True), AIRFLOW_STORAGE
    )
