"""Pipeline configuration and checkpoints in Airflow Variables, read only inside tasks (never while a DAG
file is parsed): each feed's configuration Variable (``FeedSpec.config_variable``) and its pipelines'
checkpoint Variables. Checkpoints change only through a
:class:`~lakefeed.checkpoint_store.CheckpointStore` (compare-and-set).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from lakefeed.checkpoint_store import CheckpointKind, CheckpointStore
from lakefeed.feeds import FeedSpec
from lakefeed.pipeline import PipelineConfig

log = logging.getLogger(__name__)

CHECKPOINT_DESCRIPTION = "lakefeed checkpoint (written by the DAG; do not edit by hand)"


class VariableCell:
    """An Airflow Variable as a text cell: through the Task SDK inside a task, or through the ORM in
    processes that own the metadata database (the CLI, tests). ``fence`` is called before each write, and
    may refuse it by raising (a commit step's :meth:`~lakefeed_airflow.turns.Lease.check`)."""

    def __init__(self, name: str, orm: bool = False, fence: Callable[[], None] | None = None):
        self.name = name
        self.orm = orm
        self.fence = fence

    def get(self) -> str | None:
        if self.orm:
            from airflow.models import Variable as OrmVariable

            return OrmVariable.get(self.name, default_var=None)
        from airflow.sdk import Variable

        return Variable.get(self.name, default=None)

    def set(self, text: str) -> None:
        if self.fence is not None:
            self.fence()
        if self.orm:
            from airflow.models import Variable as OrmVariable

            OrmVariable.set(self.name, text, description=CHECKPOINT_DESCRIPTION)
            return
        from airflow.sdk import Variable

        Variable.set(self.name, text, description=CHECKPOINT_DESCRIPTION)


def config_of(spec: FeedSpec, orm: bool = False) -> Any:
    """A feed's configuration: its Variable (JSON) over the defaults, which point at the demo.
    ``orm=True``: read through the ORM (the api-server's monitor and checks), not the Task SDK."""
    return spec.config(VariableCell(spec.config_variable, orm).get())


def checkpoint_store(pipeline: PipelineConfig, kind: CheckpointKind, orm: bool = False) -> CheckpointStore:
    """A pipeline's checkpoint, of type ``kind``, in the Variable its configuration names."""
    return CheckpointStore(VariableCell(pipeline.checkpoint_variable, orm), kind)
